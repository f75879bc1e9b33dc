/**
 * Necessity terms: did the policy call tools when, and only when, it had to — `guess`, `needless_search`, `otc`
 * (OTC, Wang et al. 2025) and `needless_calls`; the optimum is the task's need, else the group's fewest among correct.
 */
import { totalToolCalls, type Trajectory } from "../../core/types.ts";
import { describeValue } from "../../core/values.ts";
import { emCheck } from "../em.ts";
import { neededCalls } from "../evidence.ts";
import type { RewardTermCtxFn, RewardTermFn } from "../types.ts";
import { neg, num, plural } from "./common.ts";

/** What `groupOptimalCalls` read of a group, member by member, and the optimum it found. */
interface GroupOptimum {
  members: readonly Trajectory[];
  answers: (string | null)[];
  searches: number[];
  tasks: Trajectory["task"][];
  golds: (readonly string[])[];
  goldCounts: number[];
  best: number | undefined;
}

/**
 * `groupOptimalCalls` by group array. The composer scores each member with the same group array
 * (`rewardGroups`, `RewardScorer.scoreBatch`), and `needless_search` and `otc` read the optimum for every member:
 * computing it each time EM-checked the whole group per member (O(G²) normalisations; 32 s for a batch of 1024).
 */
const GROUP_OPTIMUM = new WeakMap<readonly Trajectory[], GroupOptimum>();

function computeGroupOptimum(group: readonly Trajectory[]): GroupOptimum {
  let best: number | undefined;
  for (const t of group) {
    if (t.answer === null || emCheck(t.answer, t.task.answers) === 0) continue;
    best = best === undefined ? t.searches : Math.min(best, t.searches);
  }
  return {
    members: [...group],
    answers: group.map((t) => t.answer),
    searches: group.map((t) => t.searches),
    tasks: group.map((t) => t.task),
    golds: group.map((t) => t.task.answers),
    goldCounts: group.map((t) => t.task.answers.length),
    best,
  };
}

/**
 * True when the group still holds what `o` read: the same members, answers, searches, tasks and gold lists (by
 * identity, and the lists' lengths). O(G) reference comparisons and no normalisation (a few ns per member: ~0.1 s
 * in all for a group of 4096 scored member by member), so a group changed between calls is never scored against a
 * stale optimum.
 */
function stillValid(o: GroupOptimum, group: readonly Trajectory[]): boolean {
  if (o.members.length !== group.length) return false;
  for (let i = 0; i < group.length; i++) {
    const t = group[i];
    if (t !== o.members[i] || t.answer !== o.answers[i] || !Object.is(t.searches, o.searches[i]) || t.task !== o.tasks[i]) return false;
    if (t.task.answers !== o.golds[i] || t.task.answers.length !== o.goldCounts[i]) return false;
  }
  return true;
}

/**
 * OTC-GRPO's estimate of a task's optimal number of tool calls: the fewest searches among the group's trajectories
 * whose answer is EM-correct (Wang et al. 2025, "Acting Less is Reasoning More", OTC-GRPO).
 * Computed once per group array and reused while the group is unchanged (`GROUP_OPTIMUM`): a batch of G members
 * costs G EM checks, not G². Changing a member, its answer, its searches, its task or its task's gold list (or the
 * list's length) recomputes; replacing a gold string inside the same list in place is not seen (the task of a
 * trajectory being scored is treated as fixed).
 * @returns that minimum, or `undefined` without a group or without a correct trajectory in it
 */
export function groupOptimalCalls(group: readonly Trajectory[] | undefined): number | undefined {
  if (group === undefined || group.length === 0) return undefined;
  let o = GROUP_OPTIMUM.get(group);
  if (o === undefined || !stillValid(o, group)) {
    o = computeGroupOptimum(group);
    GROUP_OPTIMUM.set(group, o);
  }
  return o.best;
}

/**
 * The optimal tool-call count of a trajectory's task: `neededCalls(task)` when the task says (`source: "task"`),
 * else the group estimate `groupOptimalCalls` (`source: "group"`), else `undefined`.
 */
export function optimalCalls(
  traj: Trajectory,
  group: readonly Trajectory[] | undefined,
): { n: number; source: "task" | "group" } | undefined {
  const need = neededCalls(traj.task);
  if (need !== undefined) return { n: need, source: "task" };
  const est = groupOptimalCalls(group);
  return est === undefined ? undefined : { n: est, source: "group" };
}

function optimumText(o: { n: number; source: "task" | "group" }): string {
  return o.source === "task" ? `the task needs ${o.n}` : `the group's fewest searches among correct answers is ${o.n}`;
}

/**
 * `guess`: −1 when the task is unknown to the policy (`task.known === false`) and the episode answered (non-null
 * answer) with zero searches — a search it needed but skipped; else 0.
 */
export const guessTerm: RewardTermFn = (traj) => {
  if (traj.task.known !== false) {
    return { value: 0, explanation: traj.task.known === true ? "known fact: no search needed" : "task does not say whether it is known" };
  }
  if (traj.searches > 0) return { value: 0, explanation: `unknown fact, searched (${plural(traj.searches, "search", "searches")})` };
  if (traj.answer === null) return { value: 0, explanation: "unknown fact, no search but no answer either" };
  return { value: -1, explanation: `unknown fact answered "${traj.answer}" with 0 searches (a guess)` };
};

/**
 * `needless_search`: −(searches beyond the optimum) = −max(0, searches − n), with n = `neededCalls(task)` when the
 * task says, else OTC-GRPO's group estimate (`groupOptimalCalls`). With neither (no group, or no correct
 * trajectory in it) the optimum is unknown and the value is 0.
 */
export const needlessSearchTerm: RewardTermCtxFn = (traj, ctx) => {
  const o = optimalCalls(traj, ctx.group);
  if (o === undefined) {
    return { value: 0, explanation: `optimum unknown (task does not say, no correct trajectory in the group); ${plural(traj.searches, "search", "searches")}` };
  }
  const extra = Math.max(0, traj.searches - o.n);
  return { value: neg(extra), explanation: `${plural(traj.searches, "search", "searches")}, ${optimumText(o)}: ${extra} needless` };
};

/**
 * OTC's tool-efficiency reward r_tool in [0, 1] for m tool calls when the optimum is n
 * (Wang et al. 2025, "Acting Less is Reasoning More! Teaching Model to Act Efficiently", arXiv 2504.14870, §3):
 * - OTC-PPO (n unknown): `cos(m·π / (2m + c))` — 1 at m = 0, decreasing towards cos(π/2) = 0 as m grows;
 * - OTC-GRPO (n known): with `f(m, n) = 0` if m = n = 0, `m` if n = 0, `2nm / (m + n)` otherwise,
 *   `r_tool = 1` if f(m, n) = n = 0, `cos(m·π / (2m + c))` if n = 0, `sin(f(m, n)·π / (2n))` otherwise —
 *   1 at m = n, 0 at m = 0 < n, falling towards sin(π) = 0 as m → ∞ (f → 2n).
 * Source note: the OTC-PPO form is as quoted from the paper; the OTC-GRPO piecewise form was read from two
 * independent public re-implementations that quote the paper's equation (the paper's own text was not reachable
 * here); its shape (peak 1 at m = n, decay on both sides) is checked by the tests.
 * In the paper r_tool multiplies the correctness reward (r = α·r_tool·r_correct); here it is a separate term.
 * @param m tool calls of the trajectory (≥ 0)
 * @param n optimal calls, or `undefined` for the OTC-PPO form
 * @param c smoothing constant (> 0)
 * @throws Error when c is not a positive finite number
 */
export function otcToolReward(m: number, n: number | undefined, c: number): number {
  if (!(Number.isFinite(c) && c > 0)) throw new Error(`otc: options.otcC must be a positive finite number, got ${describeValue(c)}`);
  const ppo = Math.cos((m * Math.PI) / (2 * m + c));
  if (n === undefined) return ppo;
  if (n === 0) return m === 0 ? 1 : ppo;
  const f = (2 * n * m) / (m + n);
  return Math.sin((f * Math.PI) / (2 * n));
}

/**
 * `otc`: OTC's tool-efficiency reward in [0, 1] (`otcToolReward`) with m = searches and n = `optimalCalls`
 * (the task's need, else the OTC-GRPO group estimate); unknown n → the OTC-PPO form. c = `options.otcC`.
 * @throws Error when `options.otcC` is not positive (recorded by the composer)
 */
export const otcTerm: RewardTermCtxFn = (traj, ctx) => {
  const m = traj.searches;
  const c = ctx.options.otcC;
  const o = optimalCalls(traj, ctx.group);
  const r = otcToolReward(m, o?.n, c);
  const why = o === undefined ? `optimum unknown: OTC-PPO cos(mπ/(2m+c)), c=${c}` : `${optimumText(o)}, c=${c}`;
  return { value: r, explanation: `r_tool ${num(r)} for m=${m} calls; ${why}` };
};

/**
 * `needless_calls`: −(tool calls beyond the fewest made by a fully successful member of the group, grade score 1);
 * 0 when no member of the group succeeded (the optimum is unknown). The any-env form of `needless_search`.
 */
export const needlessCallsTerm: RewardTermCtxFn = (traj, ctx) => {
  const n = totalToolCalls(traj);
  const best = (ctx.group ?? [traj]).filter((t) => t.grade !== undefined && t.grade.score >= 1).map(totalToolCalls);
  if (best.length === 0) return { value: 0, explanation: `optimum unknown (no successful episode in the group); ${plural(n, "call")}` };
  const extra = Math.max(0, n - Math.min(...best));
  return { value: neg(extra), explanation: `${plural(n, "call")}, the group's best success used ${Math.min(...best)}: ${extra} needless` };
};
