/**
 * Scripted clerks whose answers are the warm-start demonstrations (one turn each). Each reads the note (its words;
 * `ctx.task.data` holds the same facts: the fields it states and their values):
 * - `careful`: the gold record (`recordJson`): every stated field, nothing else, `items` a number;
 * - `padder`: the gold record with every field the note does not state filled with a guess (a seeded value of that
 *   field) — hallucinated fields;
 * - `skipper`: the gold record less one stated field (seeded);
 * - `stringly`: `items` as a string (`"7"`: the wrong type); careful when the note states no `items`;
 * - `broken-json`: the gold record without its closing `}` (invalid JSON).
 * Mixture weights (`EXTRACT_PERSONA_WEIGHTS`): padding is the plurality (0.55), so the greedy warm start pads — what the
 * hallucination price must undo, and what the no-penalty design rewards.
 */
import { Rng } from "../../core/rng.ts";
import type { Action } from "../../core/types.ts";
import { scriptedPersonaTurn } from "../../env/defineToolRecipe.ts";
import type { TurnContext } from "../../env/episode.ts";
import { fieldValues, FIELDS, recordJson, type OrderNote, type OrderRecord } from "./world.ts";

/** The personas. */
export const EXTRACT_PERSONAS = ["careful", "padder", "skipper", "stringly", "broken-json"] as const;
/** A persona's name. */
export type ExtractPersona = (typeof EXTRACT_PERSONAS)[number];

/** Weights of the warm-start mixture (sum 1); measured success per persona: README and `test/env-extract.test.ts`. */
export const EXTRACT_PERSONA_WEIGHTS: Readonly<Record<ExtractPersona, number>> = { careful: 0.2, padder: 0.55, skipper: 0.1, stringly: 0.1, "broken-json": 0.05 };

/**
 * The answer text `persona` writes (see the file doc).
 * @throws Error when the task has no note (`data`)
 */
export function personaAnswer(persona: ExtractPersona, ctx: Pick<TurnContext, "task" | "seed">): string {
  const note = ctx.task.data as OrderNote | undefined;
  if (note === undefined) throw new Error(`extract persona: task ${ctx.task.id} has no note (data)`);
  const rng = new Rng(ctx.seed);
  const gold = note.record;
  switch (persona) {
    case "careful":
      return recordJson(gold);
    case "padder": {
      const r: OrderRecord = { ...gold };
      for (const f of FIELDS) {
        if (r[f] !== undefined) continue;
        if (f === "items") r.items = 1 + rng.int(9);
        else r[f] = fieldValues(f)[rng.int(fieldValues(f).length)];
      }
      return recordJson(r);
    }
    case "skipper": {
      const r: OrderRecord = { ...gold };
      delete r[note.order[rng.int(note.order.length)]];
      return recordJson(r);
    }
    case "stringly":
      return gold.items === undefined ? recordJson(gold) : recordJson(gold).replace(`"items":${gold.items}`, `"items":"${gold.items}"`);
    case "broken-json":
      return recordJson(gold).slice(0, -1);
  }
}

/** The action of `personaAnswer`. */
export function personaAction(persona: ExtractPersona, ctx: Pick<TurnContext, "task" | "seed">): Action {
  return { type: "answer", answer: personaAnswer(persona, ctx) };
}

/**
 * The text `persona` writes for the turn `ctx`, in `protocol`'s format.
 * @throws Error naming the allowed personas when `persona` is not one of `EXTRACT_PERSONAS`
 */
export const scriptedTurn = scriptedPersonaTurn("extract", EXTRACT_PERSONAS, personaAction);
