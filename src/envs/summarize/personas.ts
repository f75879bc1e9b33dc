/**
 * Scripted editors whose summaries are the warm-start demonstrations (one turn each). Each reads the source (its
 * words; `ctx.task.data` holds the same facts and which are key):
 * - `careful`: the key facts, `category sector`, in the canonical category order (`summaryOf(keyFacts(doc))`);
 * - `copier`: every fact, the key ones first and then the minor ones (too long: the gold summary plus padding);
 * - `terse`: the first key fact of the canonical order only (too short when there are more);
 * - `confabulator`: the key facts with one sector swapped for a sector no fact of the source has (unsupported).
 * Mixture weights (`SUMMARIZE_PERSONA_WEIGHTS`): copying is the plurality, so the greedy warm start copies minor facts.
 */
import { Rng } from "../../core/rng.ts";
import type { Action } from "../../core/types.ts";
import { scriptedPersonaTurn } from "../../env/defineToolRecipe.ts";
import type { TurnContext } from "../../env/episode.ts";
import { canonicalOrder, CATEGORY_OF, clauseOf, keyFacts, SECTOR_OF, SECTORS, summaryOf, type SourceDoc } from "./world.ts";

/** The personas. */
export const SUMMARIZE_PERSONAS = ["careful", "copier", "terse", "confabulator"] as const;
/** A persona's name. */
export type SummarizePersona = (typeof SUMMARIZE_PERSONAS)[number];

/** Weights of the warm-start mixture (sum 1). */
export const SUMMARIZE_PERSONA_WEIGHTS: Readonly<Record<SummarizePersona, number>> = { careful: 0.25, copier: 0.4, terse: 0.15, confabulator: 0.2 };

/**
 * The summary `persona` writes (see the file doc).
 * @throws Error when the task has no source document (`data`)
 */
export function personaSummary(persona: SummarizePersona, ctx: Pick<TurnContext, "task" | "seed">): string {
  const doc = ctx.task.data as SourceDoc | undefined;
  if (doc === undefined) throw new Error(`summarize persona: task ${ctx.task.id} has no source document (data)`);
  const keys = canonicalOrder(keyFacts(doc));
  const rng = new Rng(ctx.seed);
  switch (persona) {
    case "careful":
      return summaryOf(keys);
    case "copier":
      return summaryOf(doc.facts);
    case "terse":
      return summaryOf(keys.slice(0, 1));
    case "confabulator": {
      const absent = SECTORS.filter((s) => !doc.facts.some((f) => SECTOR_OF[f.subject] === s));
      const i = rng.int(keys.length);
      return keys.map((f, j) => (j === i ? `${CATEGORY_OF[f.event]} ${absent[rng.int(absent.length)]}` : clauseOf(f))).join(" ; ");
    }
  }
}

/** The action of `personaSummary`. */
export function personaAction(persona: SummarizePersona, ctx: Pick<TurnContext, "task" | "seed">): Action {
  return { type: "answer", answer: personaSummary(persona, ctx) };
}

/**
 * The text `persona` writes for the turn `ctx`, in `protocol`'s format.
 * @throws Error naming the allowed personas when `persona` is not one of `SUMMARIZE_PERSONAS`
 */
export const scriptedTurn = scriptedPersonaTurn("summarize", SUMMARIZE_PERSONAS, personaAction);
