/**
 * Cost terms (value = −quantity, the weight is the unit price) — `tool_calls`, `search_cost`, `gen_tokens`,
 * `obs_tokens`, `latency`, `tool_error` — and the deliberately hackable `call_bonus`.
 */
import { toolCallCounts, totalToolCalls } from "../../core/types.ts";
import type { RewardTermFn } from "../types.ts";
import { neg, num, plural } from "./common.ts";

/** `tool_calls`: −(tool calls of every tool); the weight is the price per call (`search_cost` counts searches only). */
export const toolCallsTerm: RewardTermFn = (traj) => {
  const counts = toolCallCounts(traj);
  const n = totalToolCalls(traj);
  return { value: neg(n), explanation: n === 0 ? "no tool calls" : Object.entries(counts).map(([k, c]) => `${c} ${k}`).join(", ") };
};

/** `search_cost`: −(number of searches); the weight is the price per search. */
export const searchCostTerm: RewardTermFn = (traj) => ({
  value: neg(traj.searches),
  explanation: plural(traj.searches, "search", "searches"),
});

/** `gen_tokens`: −Σ turn.sampledTokens (tokens the policy generated); the weight is the price per token. */
export const genTokensTerm: RewardTermFn = (traj) => {
  const n = traj.turns.reduce((s, t) => s + t.sampledTokens, 0);
  return { value: neg(n), explanation: `${plural(n, "generated token")} over ${plural(traj.turns.length, "turn")}` };
};

/** `obs_tokens`: −Σ turn.observationTokens (tokens of tool output fed back); the weight is the price per token. */
export const obsTokensTerm: RewardTermFn = (traj) => {
  const n = traj.turns.reduce((s, t) => s + t.observationTokens, 0);
  return { value: neg(n), explanation: `${plural(n, "observation token")} over ${plural(traj.turns.length, "turn")}` };
};

/** `latency`: −Σ turn.toolLatencyMs / 1000 (seconds of simulated tool latency); the weight is the price per second. */
export const latencyTerm: RewardTermFn = (traj) => {
  const ms = traj.turns.reduce((s, t) => s + (t.toolLatencyMs ?? 0), 0);
  const calls = traj.turns.filter((t) => t.toolLatencyMs !== undefined).length;
  return { value: neg(ms / 1000), explanation: `${num(ms / 1000)} s of tool latency over ${plural(calls, "call")}` };
};

/**
 * `tool_error`: −(tool calls that failed: threw, timed out, returned invalid or oversize output, hit the episode
 * deadline — `Turn.toolError`); the weight is the penalty per failed call. The failure was an error observation
 * and the episode went on (verl #3070, verl PR #1948); this term lets a reward price it. It is in no preset:
 * enable it with `reward.weights.tool_error`. The explanation counts the failures by kind.
 */
export const toolErrorTerm: RewardTermFn = (traj) => {
  // A turn with several calls (tool envs) counts each failed call; a single-call turn its `toolError`.
  const kinds = traj.turns.flatMap((t): string[] =>
    t.toolResults !== undefined ? t.toolResults.filter((r) => !r.ok).map((r) => r.errorKind ?? "error") : t.toolError === undefined ? [] : [t.toolError],
  );
  if (kinds.length === 0) return { value: 0, explanation: "no tool errors" };
  const counts = new Map<string, number>();
  for (const k of kinds) counts.set(k, (counts.get(k) ?? 0) + 1);
  return { value: neg(kinds.length), explanation: `${plural(kinds.length, "tool error")}: ${[...counts].map(([k, n]) => `${n} ${k}`).join(", ")}` };
};

/** `call_bonus`: +(number of tool calls = searches). Deliberately hackable: pays tool spam (for the reward lab). */
export const callBonusTerm: RewardTermFn = (traj) => ({
  value: totalToolCalls(traj),
  explanation: `${plural(totalToolCalls(traj), "tool call")} paid`,
});
