/**
 * Scripted ticket triagers whose answers are the warm-start demonstrations (one turn each). Each reads the ticket
 * (its words; `ctx.task.data` holds the same facts: which cue is broken, which is fine, and their order):
 * - `careful`: the label of the broken thing, alone (`shipping`);
 * - `first-cue`: the label of the first cue word in the ticket, alone — wrong on a two-cue ticket whose fine thing
 *   comes first;
 * - `hedger`: the right label, then `or` another one (the fine thing's label on a two-cue ticket, a seeded other label
 *   on a one-cue ticket): `shipping or billing`;
 * - `confident`: the first cue's label with a confidence word: `billing , certain`.
 * Mixture weights (`CLASSIFY_PERSONA_WEIGHTS`): half of the demonstrations hedge, so the greedy warm start hedges (what
 * the strict reward must undo, and what the confidence-paying design rewards).
 */
import { Rng } from "../../core/rng.ts";
import type { Action } from "../../core/types.ts";
import { scriptedPersonaTurn } from "../../env/defineToolRecipe.ts";
import type { TurnContext } from "../../env/episode.ts";
import { LABELS, type Label, type Ticket } from "./world.ts";

/** The personas. */
export const CLASSIFY_PERSONAS = ["careful", "first-cue", "hedger", "confident"] as const;
/** A persona's name. */
export type ClassifyPersona = (typeof CLASSIFY_PERSONAS)[number];

/** Weights of the warm-start mixture (sum 1); measured success per persona: README and `test/env-classify.test.ts`. */
export const CLASSIFY_PERSONA_WEIGHTS: Readonly<Record<ClassifyPersona, number>> = { careful: 0.2, "first-cue": 0.2, hedger: 0.5, confident: 0.1 };

/** The label of the first cue word of a ticket. */
export function firstCueLabel(t: Ticket): Label {
  return t.fineFirst && t.other !== undefined ? t.other.label : t.label;
}

/**
 * The answer `persona` gives (see the file doc).
 * @throws Error when the task has no ticket (`data`)
 */
export function personaAction(persona: ClassifyPersona, ctx: Pick<TurnContext, "task" | "seed">): Action {
  const t = ctx.task.data as Ticket | undefined;
  if (t === undefined) throw new Error(`classify persona: task ${ctx.task.id} has no ticket (data)`);
  switch (persona) {
    case "careful":
      return { type: "answer", answer: t.label };
    case "first-cue":
      return { type: "answer", answer: firstCueLabel(t) };
    case "hedger": {
      const others = LABELS.filter((l) => l !== t.label);
      const other = t.other?.label ?? others[new Rng(ctx.seed).int(others.length)];
      return { type: "answer", answer: `${t.label} or ${other}` };
    }
    case "confident":
      return { type: "answer", answer: `${firstCueLabel(t)} , certain` };
  }
}

/**
 * The text `persona` writes for the turn `ctx`, in `protocol`'s format.
 * @throws Error naming the allowed personas when `persona` is not one of `CLASSIFY_PERSONAS`
 */
export const scriptedTurn = scriptedPersonaTurn("classify", CLASSIFY_PERSONAS, personaAction);
