/**
 * Composes weighted reward terms (`REWARD_TERMS`) into a `RewardBreakdown` that keeps every term, so a total is
 * never a mystery.
 */
import type { RewardBreakdown, RewardTerm, Trajectory } from "../core/types.ts";
import { REWARD_TERMS } from "./terms.ts";

/**
 * Which terms to compute and their weights. Exactly the terms named in `weights` are computed, in insertion order;
 * a weight of 0 still computes and reports the term (contribution 0).
 */
export interface RewardConfig {
  weights: Record<string, number>;
}

/** Reward v1 defaults: EM, a small format bonus, 0.05 per search, 0.1 per invalid action. */
export const DEFAULT_REWARD_CONFIG: RewardConfig = {
  weights: { em: 1, format: 0.1, search_cost: 0.05, invalid: 0.1 },
};

/**
 * Checks a config against the registry.
 * @throws Error naming the term when a term is unknown (listing the allowed names) or a weight is not finite
 */
export function validateRewardConfig(config: RewardConfig): void {
  const allowed = Object.keys(REWARD_TERMS);
  for (const [name, weight] of Object.entries(config.weights)) {
    if (!Object.hasOwn(REWARD_TERMS, name)) {
      throw new Error(`unknown reward term "${name}"; allowed terms: ${allowed.join(", ")}`);
    }
    if (!Number.isFinite(weight)) throw new Error(`reward term "${name}": weight must be a finite number, got ${weight}`);
  }
}

/**
 * The reward of a finished trajectory: `total = Σ_term value × weight`, with every term kept.
 * @param traj a finished trajectory
 * @param config term weights (default `DEFAULT_REWARD_CONFIG`)
 * @throws Error from `validateRewardConfig` for unknown terms or non-finite weights
 */
export function computeReward(traj: Trajectory, config: RewardConfig = DEFAULT_REWARD_CONFIG): RewardBreakdown {
  validateRewardConfig(config);
  const terms: RewardTerm[] = [];
  let total = 0;
  for (const [name, weight] of Object.entries(config.weights)) {
    const { value, explanation } = REWARD_TERMS[name](traj);
    terms.push({ name, value, weight, explanation });
    total += value * weight;
  }
  return { total, terms };
}
