/**
 * Composes weighted reward terms (`REWARD_TERMS`) into a `RewardBreakdown` that keeps every term, so a total is
 * never a mystery. A term that fails (the LLM judge after its retries) contributes 0 and its error is kept on the
 * breakdown: the trajectory is never dropped.
 */
import type { RewardBreakdown, RewardTerm, Trajectory, TrajectoryGroup } from "../core/types.ts";
import { describeValue } from "../core/values.ts";
import { REWARD_TERMS } from "./terms.ts";
import type { Judge, RewardContext, RewardOptions } from "./types.ts";

/**
 * Which terms to compute, their weights and their parameters. Exactly the terms named in `weights` are computed,
 * in insertion order; a weight of 0 still computes and reports the term (contribution 0).
 */
export interface RewardConfig {
  weights: Record<string, number>;
  options?: Partial<RewardOptions>;
}

/** Defaults of the term parameters. */
export const DEFAULT_REWARD_OPTIONS: RewardOptions = {
  requireThink: false,
  otcC: 1,
  abstentions: ["unknown", "i dont know", "i don’t know", "i do not know", "cannot answer", "not sure"],
};

/** Reward v1 defaults: EM, a small format bonus, 0.05 per search, 0.1 per invalid action. */
export const DEFAULT_REWARD_CONFIG: RewardConfig = {
  weights: { em: 1, format: 0.1, search_cost: 0.05, invalid: 0.1 },
};

/**
 * Largest |weight| a reward term may have. Term values are bounded (0/1 outcomes, counts of turns, prices), so with
 * weights bounded a total stays far inside the float range and group statistics on it cannot overflow (issue 12:
 * rewards of 1e308 made NaN advantages). No sensible design needs a weight near this.
 */
export const MAX_REWARD_WEIGHT = 1e6;

/**
 * Checks a config against the registry.
 * @throws Error naming the term when a term is unknown (listing the allowed names) or a weight is not finite or
 *   exceeds `MAX_REWARD_WEIGHT` in magnitude
 */
export function validateRewardConfig(config: RewardConfig): void {
  const allowed = Object.keys(REWARD_TERMS);
  for (const [name, weight] of Object.entries(config.weights)) {
    if (!Object.hasOwn(REWARD_TERMS, name)) {
      throw new Error(`unknown reward term "${name}"; allowed terms: ${allowed.join(", ")}`);
    }
    if (!Number.isFinite(weight)) throw new Error(`reward term "${name}": weight must be a finite number, got ${describeValue(weight)}`);
    if (Math.abs(weight) > MAX_REWARD_WEIGHT) {
      throw new Error(`reward term "${name}": weight must be within ±${MAX_REWARD_WEIGHT}, got ${weight}`);
    }
  }
}

/**
 * The reward of a finished trajectory: `total = Σ_term value × weight`, with every term kept.
 * @param traj a finished trajectory
 * @param config term weights and parameters (default `DEFAULT_REWARD_CONFIG`)
 * @param ctx the trajectory's group and the judge, when terms need them
 * @throws Error from `validateRewardConfig` for unknown terms or non-finite weights (never for a failing term)
 */
export async function computeReward(
  traj: Trajectory,
  config: RewardConfig = DEFAULT_REWARD_CONFIG,
  ctx: { group?: readonly Trajectory[]; judge?: Judge } = {},
): Promise<RewardBreakdown> {
  validateRewardConfig(config);
  const context: RewardContext = { ...ctx, options: { ...DEFAULT_REWARD_OPTIONS, ...config.options } };
  const terms: RewardTerm[] = [];
  let total = 0;
  let cost = 0;
  for (const [name, weight] of Object.entries(config.weights)) {
    let r;
    try {
      r = await REWARD_TERMS[name].compute(traj, context);
    } catch (e) {
      r = { value: 0, explanation: `not computed: ${(e as Error).message}`, error: (e as Error).message };
    }
    const term: RewardTerm = { name, value: r.value, weight, explanation: r.explanation };
    if (r.error !== undefined) term.error = r.error;
    terms.push(term);
    total += r.value * weight;
    cost += r.cost ?? 0;
  }
  return cost > 0 ? { total, terms, cost } : { total, terms };
}

/**
 * Rewards every trajectory of every group in place (`traj.reward`), each with its group as context.
 * @throws Error from `validateRewardConfig`
 */
export async function rewardGroups(groups: readonly TrajectoryGroup[], config: RewardConfig, judge?: Judge): Promise<void> {
  for (const g of groups) {
    // A group's members are scored concurrently (a remote judge then sees up to G requests at once).
    const rewards = await Promise.all(g.trajectories.map((traj) => computeReward(traj, config, { group: g.trajectories, judge })));
    g.trajectories.forEach((traj, i) => (traj.reward = rewards[i]));
  }
}
