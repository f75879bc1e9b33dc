/**
 * The advantage-estimator registry: `rl.advantage` names → pure functions of a step's groups. Names follow veRL's
 * `algorithm.adv_estimator` (verl `verl/trainer/ppo/core_algos.py` `AdvantageEstimator`, core_algos.py:88-108 @
 * volcengine/verl b178a3cd56f58b2d502255daba591e92833930a7), plus `drgrpo` (veRL: `grpo` with
 * `norm_adv_by_std_in_grpo: false` and `loss_agg_mode: seq-mean-token-sum-norm`).
 */
import {
  gaeAdvantages,
  grpoAdvantages,
  maskedWhiten,
  opoAdvantages,
  passkAdvantages,
  reinforcePlusPlusAdvantages,
  reinforcePlusPlusBaselineAdvantages,
  rlooAdvantages,
} from "./advantages.ts";
import type { LossAggMode } from "./losses.ts";
import { gigpoAdvantages } from "./turns.ts";

/** Every estimator `rl.advantage` accepts. */
export const ADVANTAGE_ESTIMATORS = [
  "grpo",
  "drgrpo",
  "rloo",
  "opo",
  "grpo_passk",
  "reinforce_plus_plus",
  "reinforce_plus_plus_baseline",
  "gae",
  "gigpo",
] as const;
/** A name in `ADVANTAGE_ESTIMATORS`. */
export type AdvantageEstimatorName = (typeof ADVANTAGE_ESTIMATORS)[number];

/** One trajectory as an estimator sees it; arrays are `[seq-1]`, aligned with the datum's targets. */
export interface EstimatorTrajectory {
  /** The trajectory's total reward. */
  reward: number;
  /** 0/1: the tokens the loss trains on (the datum's weights). */
  mask: readonly number[];
  /**
   * Per-token rewards (token-level estimators): defaults to `reward` at the last masked token. A turn reward sits at
   * the last token of its turn.
   */
  tokenRewards?: readonly number[];
  /** Critic values V(s_t) (reward units), for `gae`. */
  values?: readonly number[];
  /** The trajectory's turns (for `gigpo`): datum indices of each turn's tokens, step rewards, anchor states. */
  turns?: { spans: readonly (readonly number[])[]; rewards: readonly number[]; anchors: readonly string[] };
}

/** Options of `estimateAdvantages` (veRL `algorithm.*` defaults in brackets). */
export interface EstimatorOptions {
  /** Discount per policy token [1.0] (`reinforce_plus_plus`, `gae`). */
  gamma: number;
  /** GAE λ [1.0]. */
  lam: number;
  /** Added to the group std (verl `epsilon`) [1e-6]. */
  eps?: number;
  /** GiGPO ω [1.0]. */
  gigpoStepWeight?: number;
  /** GiGPO `mean_std_norm` (true) or `mean_norm` (false) [false]. */
  gigpoNormStd?: boolean;
}

/** Advantages of a step: per group, per member. */
export interface EstimatedAdvantages {
  /** `[group][member]`: one scalar per trajectory, for outcome estimators (token arrays are then its broadcast). */
  scalars?: number[][];
  /** `[group][member][seq-1]` token advantages, 0 where the mask is 0. */
  tokens: number[][][];
  /** `[group][member][seq-1]` returns (`gae`: the critic's target; `reinforce_plus_plus`: discounted returns). */
  returns?: number[][][];
}

/** What the registry knows of an estimator. */
export interface EstimatorInfo {
  name: AdvantageEstimatorName;
  /** `outcome`: one advantage per trajectory, broadcast on its tokens; `token`: per-token advantages. */
  kind: "outcome" | "token";
  /** The loss aggregation `rl.lossAggMode: auto` picks for it. */
  defaultLossAgg: LossAggMode;
  /** Needs critic values (`gae`). */
  needsValues: boolean;
  /** Paper and veRL function (file:line @ commit). */
  source: string;
}

const V = "verl/trainer/ppo/core_algos.py @ b178a3c";

/** The registry. */
export const ESTIMATORS: Record<AdvantageEstimatorName, EstimatorInfo> = {
  grpo: { name: "grpo", kind: "outcome", defaultLossAgg: "token-mean", needsValues: false, source: `Shao et al. 2024 §4.1; ${V}:266-330 compute_grpo_outcome_advantage` },
  drgrpo: { name: "drgrpo", kind: "outcome", defaultLossAgg: "seq-mean-token-sum-norm", needsValues: false, source: `Liu et al. 2025 §3.1; ${V}:266-330 (norm_adv_by_std_in_grpo: false)` },
  rloo: { name: "rloo", kind: "outcome", defaultLossAgg: "token-mean", needsValues: false, source: `Ahmadian et al. 2024 (arXiv 2402.14740); ${V}:476-525 compute_rloo_outcome_advantage` },
  opo: { name: "opo", kind: "outcome", defaultLossAgg: "token-mean", needsValues: false, source: `Hao et al. 2025 (arXiv 2505.23585); ${V}:528-579 compute_opo_outcome_advantage` },
  grpo_passk: { name: "grpo_passk", kind: "outcome", defaultLossAgg: "token-mean", needsValues: false, source: `Chen et al. 2025 (arXiv 2503.19595); ${V}:360-419 compute_grpo_passk_outcome_advantage` },
  reinforce_plus_plus: { name: "reinforce_plus_plus", kind: "token", defaultLossAgg: "token-mean", needsValues: false, source: `Hu 2025 (arXiv 2501.03262); ${V}:582-618 compute_reinforce_plus_plus_outcome_advantage` },
  reinforce_plus_plus_baseline: { name: "reinforce_plus_plus_baseline", kind: "token", defaultLossAgg: "token-mean", needsValues: false, source: `Hu 2025 (arXiv 2501.03262); ${V}:422-473 compute_reinforce_plus_plus_baseline_outcome_advantage` },
  gae: { name: "gae", kind: "token", defaultLossAgg: "token-mean", needsValues: true, source: `Schulman et al. 2016 (arXiv 1506.02438); ${V}:214-263 compute_gae_advantage_return` },
  gigpo: { name: "gigpo", kind: "token", defaultLossAgg: "token-mean", needsValues: false, source: "Feng et al. 2025 (arXiv 2505.10978) Eq. 3-8; langfengQ/DrMAS @ 3b556f2 gigpo/core_gigpo.py compute_gigpo_outcome_advantage (verl-agent's adv_estimator gigpo)" },
};

/** The token rewards of a trajectory: its own, or its total reward at the last masked token. */
export function tokenRewardsOf(t: EstimatorTrajectory): number[] {
  if (t.tokenRewards) {
    if (t.tokenRewards.length !== t.mask.length) throw new Error(`tokenRewards has ${t.tokenRewards.length} entries, mask ${t.mask.length}`);
    return [...t.tokenRewards];
  }
  const out = t.mask.map(() => 0);
  const last = t.mask.lastIndexOf(1);
  if (last >= 0) out[last] = t.reward;
  return out;
}

/**
 * Advantages of one step's groups with the named estimator.
 * @param name an `ADVANTAGE_ESTIMATORS` name
 * @param groups `[group][member]` trajectories (masks `[seq-1]`)
 * @returns token advantages `[group][member][seq-1]` (and scalars for outcome estimators)
 * @throws Error for an unknown name (listing the allowed ones), `gae` without values, or an estimator's own errors
 */
export function estimateAdvantages(name: AdvantageEstimatorName, groups: readonly (readonly EstimatorTrajectory[])[], options: EstimatorOptions): EstimatedAdvantages {
  const info = ESTIMATORS[name];
  if (!info) throw new Error(`rl.advantage: unknown estimator "${name}"; allowed: ${ADVANTAGE_ESTIMATORS.join(", ")}`);
  const broadcast = (scalars: number[][]): EstimatedAdvantages => ({
    scalars,
    tokens: scalars.map((g, gi) => g.map((a, i) => groups[gi][i].mask.map((m) => (m === 1 ? a : 0)))),
  });
  const rewards = (g: readonly EstimatorTrajectory[]): number[] => g.map((t) => t.reward);
  switch (name) {
    case "grpo":
    case "drgrpo":
      return broadcast(groups.map((g) => grpoAdvantages(rewards(g), { normalizeStd: name === "grpo", eps: options.eps })));
    case "rloo":
      return broadcast(groups.map((g) => rlooAdvantages(rewards(g))));
    case "opo":
      return broadcast(groups.map((g) => opoAdvantages(rewards(g), g.map((t) => t.mask.reduce((a, m) => a + m, 0)))));
    case "grpo_passk":
      return broadcast(groups.map((g) => passkAdvantages(rewards(g), { normalizeStd: true, eps: options.eps })));
    case "reinforce_plus_plus_baseline":
      return { tokens: reinforcePlusPlusBaselineAdvantages(groups.map(rewards), groups.map((g) => g.map((t) => t.mask))) };
    case "reinforce_plus_plus": {
      const flat = groups.flat();
      const r = reinforcePlusPlusAdvantages(flat.map(tokenRewardsOf), flat.map((t) => t.mask), options.gamma);
      return { tokens: regroup(groups, r.advantages), returns: regroup(groups, r.returns) };
    }
    case "gigpo":
      return {
        tokens: groups.map((g, gi) => {
          const adv = gigpoAdvantages(
            g.map((t, i) => {
              if (!t.turns) throw new Error(`rl.advantage "gigpo": group ${gi} member ${i} has no turns`);
              const rewards = [...t.turns.rewards];
              if (rewards.length > 0) rewards[rewards.length - 1] += t.reward;
              return { episodeReward: t.reward, stepRewards: rewards, anchors: t.turns.anchors };
            }),
            { gamma: options.gamma, stepWeight: options.gigpoStepWeight ?? 1, normStd: options.gigpoNormStd ?? false, eps: options.eps },
          );
          return g.map((t, i) => {
            // Each turn's tokens get its advantage; other trained tokens (observations, when trained) the preceding turn's.
            const out = t.mask.map(() => 0);
            const owner = t.mask.map(() => -1);
            t.turns!.spans.forEach((s, k) => s.forEach((pos) => (owner[pos] = k)));
            let k = 0;
            for (let pos = 0; pos < out.length; pos++) {
              if (owner[pos] >= 0) k = owner[pos];
              if (t.mask[pos] === 1) out[pos] = adv[i][k] ?? 0;
            }
            return out;
          });
        }),
      };
    case "gae": {
      const flat = groups.flat();
      const per = flat.map((t, i) => {
        if (!t.values) throw new Error(`rl.advantage "gae": trajectory ${i} has no critic values (the backend needs a value head)`);
        return gaeAdvantages(tokenRewardsOf(t), t.values, t.mask, options.gamma, options.lam);
      });
      const white = maskedWhiten(per.map((p) => p.advantages), flat.map((t) => t.mask));
      return { tokens: regroup(groups, white), returns: regroup(groups, per.map((p) => p.returns)) };
    }
  }
}

function regroup<T>(groups: readonly (readonly unknown[])[], flat: T[]): T[][] {
  let k = 0;
  return groups.map((g) => g.map(() => flat[k++]));
}
