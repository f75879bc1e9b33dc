/**
 * Reward v1 terms. Each term maps a finished trajectory to a raw value and a one-line explanation; the composer
 * (`compose.ts`) weights and sums them. New terms (outcome, necessity, evidence, cost, safety…) are added by putting
 * an entry in `REWARD_TERMS`; the composer needs no change.
 */
import type { Trajectory } from "../core/types.ts";
import { emCheck, normalizeAnswer } from "./em.ts";

/** What a term returns: its raw (unweighted) value and why. */
export interface TermResult {
  value: number;
  explanation: string;
}

/** A reward term: a pure function of a finished trajectory. */
export type RewardTermFn = (traj: Trajectory) => TermResult;

function plural(n: number, word: string, many = `${word}s`): string {
  return `${n} ${n === 1 ? word : many}`;
}

/**
 * `em`: 1 when `traj.answer` exactly matches a gold of `traj.task.answers` after Search-R1 normalisation
 * (`emCheck`, Search-R1 `qa_em.py`), else 0; a null answer scores 0 ("no answer").
 */
export const emTerm: RewardTermFn = (traj) => {
  if (traj.answer === null) return { value: 0, explanation: "no answer" };
  const norm = normalizeAnswer(traj.answer);
  const golds = traj.task.answers;
  if (emCheck(traj.answer, golds) === 1) {
    const hit = golds.find((g) => normalizeAnswer(g) === norm);
    return { value: 1, explanation: `"${traj.answer}" matches gold "${hit}"` };
  }
  return {
    value: 0,
    explanation: `"${traj.answer}" (normalised "${norm}") matches none of ${plural(golds.length, "gold answer")}`,
  };
};

/**
 * `format`: 1 when the episode ended with a non-empty answer, was not truncated by the turn budget and had no
 * invalid actions, else 0. A simplified take on the format reward of Search-R1 (`qa_em_format.py`).
 */
export const formatTerm: RewardTermFn = (traj) => {
  const problems: string[] = [];
  if (traj.answer === null) problems.push("no answer");
  else if (traj.answer.trim() === "") problems.push("empty answer");
  if (traj.truncated) problems.push("truncated by the turn budget");
  if (traj.invalidActions > 0) problems.push(plural(traj.invalidActions, "invalid action"));
  return problems.length === 0
    ? { value: 1, explanation: "answered with no invalid actions" }
    : { value: 0, explanation: problems.join("; ") };
};

/** `search_cost`: −(number of searches); the weight is the price per search. */
export const searchCostTerm: RewardTermFn = (traj) => ({
  value: 0 - traj.searches,
  explanation: plural(traj.searches, "search", "searches"),
});

/** `invalid`: −(number of invalid actions); the weight is the price per invalid action. */
export const invalidTerm: RewardTermFn = (traj) => ({
  value: 0 - traj.invalidActions,
  explanation: plural(traj.invalidActions, "invalid action"),
});

/** The registry of reward terms by name (the names a `RewardConfig` may weight). */
export const REWARD_TERMS: Readonly<Record<string, RewardTermFn>> = {
  em: emTerm,
  format: formatTerm,
  search_cost: searchCostTerm,
  invalid: invalidTerm,
};
