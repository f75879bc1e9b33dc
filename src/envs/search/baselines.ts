/**
 * The Search-R1 paper's inference baselines, run with the policy under evaluation: Direct (answer without search: the
 * first turn is forced to start with `<answer>`) and RAG (one search with the question as the query, then an answer).
 * Source: Search-R1 §4 (baselines "Direct Inference" and "RAG").
 */
import type { RecipeBaseline } from "../../env/recipe.ts";
import type { ForcedText, TurnContext } from "../../env/episode.ts";

/** The forced text of Direct: the first turn starts with `<answer>` and the policy completes it. */
export function directForced(ctx: TurnContext): ForcedText | undefined {
  return ctx.turnIndex === 0 ? { text: "<answer>", complete: false } : undefined;
}

/** The forced text of RAG: turn 0 searches the whole question, turn 1 starts with `<answer>`. */
export function ragForced(ctx: TurnContext): ForcedText | undefined {
  if (ctx.turnIndex === 0) return { text: `<search> ${ctx.task.question} </search>`, complete: true };
  if (ctx.turnIndex === 1) return { text: "<answer>", complete: false };
  return undefined;
}

/** The search recipe's baseline rows, in summary order. */
export const SEARCH_BASELINES: readonly RecipeBaseline[] = [
  { label: "Direct", forced: directForced },
  { label: "RAG", forced: ragForced },
];
