/**
 * Turn-level credit for multi-turn agents: where each turn's tokens sit in a datum, per-turn rewards from what the
 * env reported for the turn, and GiGPO's step-level advantages over shared anchor states (Feng et al. 2025,
 * "Group-in-Group Policy Optimization for LLM Agent Training", arXiv 2505.10978, Eq. 3-8; reference code
 * `gigpo/core_gigpo.py` in the authors' langfengQ/DrMAS @ 3b556f2c0373fe23d6b637cbd3673c076713aebe, the verl-agent
 * GiGPO module: `compute_step_discounted_returns`, `episode_norm_reward`, `build_step_group`, `step_norm_reward`,
 * `compute_gigpo_outcome_advantage` with `step_advantage_w = 1.0`, `mode = "mean_norm"`, `epsilon = 1e-6`).
 */
import type { Trajectory } from "../core/types.ts";
import { normalizedPassageWords, wholeWordMatcher } from "../reward/evidence.ts";

/**
 * The datum positions (`[seq-1]` indices, target = token position − 1) of each turn's policy-sampled tokens, from the
 * rollout's `sampled` spans; a hand-built trajectory without them is split into maximal runs of mask-1 tokens.
 * @returns `[turn][…]` increasing indices (a turn with no sampled token has `[]`)
 */
export function turnSpans(traj: Trajectory): number[][] {
  if (traj.sampled && traj.sampled.length > 0) {
    return traj.sampled.map((s) => {
      const out: number[] = [];
      for (let p = Math.max(1, s.start); p < s.start + s.tokens.length; p++) if (traj.lossMask[p] === 1) out.push(p - 1);
      return out;
    });
  }
  const spans: number[][] = [];
  let cur: number[] | undefined;
  for (let p = 1; p < traj.lossMask.length; p++) {
    if (traj.lossMask[p] === 1) {
      if (!cur) spans.push((cur = []));
      cur.push(p - 1);
    } else cur = undefined;
  }
  return spans;
}

/** Per-turn reward weights (`rl.turnRewards`); 0 turns a signal off. */
export interface TurnRewardWeights {
  /** Added to a turn whose tool call failed (`Turn.toolError`: threw, timed out, invalid or oversize output). */
  toolError: number;
  /** Added to a turn whose action was invalid (malformed). */
  invalidAction: number;
  /**
   * Added to the first turn whose retrieved passages contain a gold answer (whole words, normalised): the turn that
   * brought the answer into the context, an information-gain step reward.
   */
  evidence: number;
}

/** True when any turn reward weight is non-zero. */
export function hasTurnRewards(w: TurnRewardWeights): boolean {
  return w.toolError !== 0 || w.invalidAction !== 0 || w.evidence !== 0;
}

/**
 * Each turn's step reward from what the env recorded for it (the outcome reward is not included).
 * @returns `[turn]` (reward units)
 */
export function turnRewards(traj: Trajectory, w: TurnRewardWeights): number[] {
  const out = traj.turns.map((t) => (t.toolError !== undefined ? w.toolError : 0) + (t.action.type === "invalid" ? w.invalidAction : 0));
  if (w.evidence !== 0 && traj.task.answers.length > 0) {
    const m = wholeWordMatcher(traj.task.answers);
    const k = m.empty ? -1 : traj.turns.findIndex((t) => (t.passages ?? []).some((p) => m.first(normalizedPassageWords(p)) >= 0));
    if (k >= 0) out[k] += w.evidence;
  }
  return out;
}

/**
 * Token rewards `[seq-1]` of a trajectory: each turn's reward at its last policy token, the outcome at the last
 * policy token of the whole trajectory (where outcome estimators put it). A turn without policy tokens passes its
 * reward to the previous turn that has some (or the next one for the first turns).
 * @param spans `turnSpans(traj)`; rewards `[turn]`; outcome the trajectory's total reward; length `seq-1`
 */
export function tokenRewardsFromTurns(spans: readonly (readonly number[])[], rewards: readonly number[], outcome: number, length: number): number[] {
  const out = new Array<number>(length).fill(0);
  const ends = spans.map((s) => (s.length > 0 ? s[s.length - 1] : -1));
  const lastEnd = Math.max(-1, ...ends);
  rewards.forEach((r, k) => {
    if (r === 0) return;
    let e = ends[k];
    for (let j = k - 1; e < 0 && j >= 0; j--) e = ends[j];
    for (let j = k + 1; e < 0 && j < ends.length; j++) e = ends[j];
    if (e >= 0) out[e] += r;
  });
  if (lastEnd >= 0) out[lastEnd] += outcome;
  return out;
}

/**
 * Anchor state of each turn (GiGPO §3.2): the environment observation the policy acted on — the task prompt
 * (`""`, shared by the whole group) for the first turn, the previous turn's observation text after that. Two turns
 * of the same group with equal anchors acted from the same state.
 */
export function turnAnchors(traj: Trajectory): string[] {
  return traj.turns.map((_, k) => (k === 0 ? "" : `obs:${traj.turns[k - 1].observation}`));
}

/** One trajectory as GiGPO sees it. */
export interface GigpoTrajectory {
  /** The episode's total reward (episode-level group, Eq. 3). */
  episodeReward: number;
  /** Per-turn step rewards `[turn]`, the outcome included at the last turn (Eq. 5's r). */
  stepRewards: readonly number[];
  /** Per-turn anchor states `[turn]` (`turnAnchors`). */
  anchors: readonly string[];
}

/** Options of `gigpoAdvantages` (authors' defaults in brackets). */
export interface GigpoOptions {
  /** Discount per turn [the trainer's γ; their search recipe uses 0.95]. */
  gamma: number;
  /** ω, the step advantage's weight [1.0]. */
  stepWeight: number;
  /** `mean_std_norm` (true) or `mean_norm` (false) [false]. */
  normStd: boolean;
  /** [1e-6] */
  eps?: number;
}

/**
 * GiGPO advantages of one group (trajectories of the same task): per trajectory, per turn,
 * `A = A^E + ω·A^S` (Eq. 8) with
 * - `A^E_i = R_i − mean_j R_j` (÷ (std + ε) with `normStd`; std unbiased; a group of one: mean 0, std 1) — Eq. 3
 * - `R_{i,k} = Σ_{k'≥k} γ^{k'−k} r_{i,k'}` the discounted step return (Eq. 5)
 * - step groups: the (i, k) of the group whose anchors are equal (Eq. 6); `A^S_{i,k} = R_{i,k} − mean over its step
 *   group` (÷ (std + ε) with `normStd`; a singleton step group gets 0) — Eq. 7.
 * @returns `[member][turn]`
 * @throws Error when a trajectory's stepRewards and anchors differ in length, or a reward is not finite
 */
export function gigpoAdvantages(group: readonly GigpoTrajectory[], options: GigpoOptions): number[][] {
  const eps = options.eps ?? 1e-6;
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
  const std = (xs: number[]) => {
    const m = mean(xs);
    return Math.sqrt(xs.reduce((a, x) => a + (x - m) ** 2, 0) / (xs.length - 1));
  };
  group.forEach((t, i) => {
    if (t.stepRewards.length !== t.anchors.length) throw new Error(`gigpoAdvantages: member ${i} has ${t.stepRewards.length} step rewards but ${t.anchors.length} anchors`);
    for (const r of [t.episodeReward, ...t.stepRewards]) if (!Number.isFinite(r)) throw new Error(`gigpoAdvantages: member ${i} has a non-finite reward (${r})`);
  });
  const R = group.map((t) => t.episodeReward);
  const allEqual = R.every((x) => x === R[0]);
  const episode = group.length === 1 ? [options.normStd ? R[0] / (1 + eps) : R[0]] : R.map((r) => (allEqual ? 0 : options.normStd ? (r - mean(R)) / (std(R) + eps) : r - mean(R)));
  const returns = group.map((t) => {
    const out = new Array<number>(t.stepRewards.length).fill(0);
    let run = 0;
    for (let k = t.stepRewards.length - 1; k >= 0; k--) {
      run = t.stepRewards[k] + options.gamma * run;
      out[k] = run;
    }
    return out;
  });
  const clusters = new Map<string, Array<[number, number]>>();
  group.forEach((t, i) => t.anchors.forEach((a, k) => {
    const c = clusters.get(a);
    if (c) c.push([i, k]);
    else clusters.set(a, [[i, k]]);
  }));
  const step = group.map((t) => t.anchors.map(() => 0));
  for (const members of clusters.values()) {
    if (members.length < 2) continue;
    const xs = members.map(([i, k]) => returns[i][k]);
    if (xs.every((x) => x === xs[0])) continue;
    const m = mean(xs);
    const s = options.normStd ? std(xs) + eps : 1;
    members.forEach(([i, k], j) => (step[i][k] = (xs[j] - m) / s));
  }
  return group.map((_, i) => step[i].map((a, k) => episode[i] + options.stepWeight * a));
}

/**
 * Mean token advantage of each turn's policy tokens (what a turn was credited; 0 for a turn without tokens).
 * @param tokens `[seq-1]` advantages; spans `turnSpans`
 */
export function perTurnAdvantage(tokens: readonly number[], spans: readonly (readonly number[])[]): number[] {
  return spans.map((s) => (s.length === 0 ? 0 : s.reduce((a, t) => a + tokens[t], 0) / s.length));
}
