/**
 * Format terms: does the episode follow the protocol — `format`, `format_sm` (Search-R1 `is_valid_sequence`),
 * `invalid`.
 */
import { isValidSequence, trajectoryText } from "../format.ts";
import type { RewardTermCtxFn, RewardTermFn } from "../types.ts";
import { neg, oneLine, plural } from "./common.ts";

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

/**
 * `format_sm`: 1 when the turn sequence (`trajectoryText`: action texts + observations) is valid under the
 * protocol's state machine (`isValidSequence`, a port of Search-R1 `is_valid_sequence`, with
 * `options.requireThink`), else 0 with the first violation.
 */
export const formatSmTerm: RewardTermCtxFn = (traj, ctx) => {
  const v = isValidSequence(trajectoryText(traj), { requireThink: ctx.options.requireThink });
  return v.valid
    ? { value: 1, explanation: `valid sequence of ${plural(traj.turns.length, "turn")}` }
    : { value: 0, explanation: `invalid sequence: ${oneLine(v.reason, 160)}` };
};

/** `invalid`: −(number of invalid actions); the weight is the price per invalid action. */
export const invalidTerm: RewardTermFn = (traj) => ({
  value: neg(traj.invalidActions),
  explanation: plural(traj.invalidActions, "invalid action"),
});
