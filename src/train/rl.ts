/**
 * One RL step, as stages over one typed batch (`RlBatch`, ./rl/batch.ts):
 * collect → reward → estimate → correct → update. Each stage sits behind its own typed boundary (TurnGenerator + Env,
 * reward terms, advantage estimator, TrainingBackend), so an inference engine, a reward or a training backend can be
 * swapped without touching this file; DAPO's dynamic sampling wraps collect, and the critic of `gae` is the backend's
 * optional value head. Read top to bottom as CleanRL's ppo.py or tinker-cookbook's rl/train.py. Source: GRPO (Shao et
 * al. 2024, DeepSeekMath §4.1), Dr.GRPO (Liu et al. 2025 §3.1), PPO clipped surrogate (Schulman et al. 2017),
 * Search-R1 (observation masking).
 */
import type { Metrics, Task, TrajectoryGroup } from "../core/types.ts";
import { toBatch } from "./rl/batch.ts";
import { collect, policyAgent, trainingGroups } from "./rl/collect.ts";
import type { RlContext } from "./rl/context.ts";
import { correct } from "./rl/correct.ts";
import { estimate } from "./rl/estimate.ts";
import { emptyStepMetrics, stepMetrics } from "./rl/metrics.ts";
import { update } from "./rl/update.ts";

export type { RlContext } from "./rl/context.ts";

/** Result of one RL step: per-step metrics (deterministic), the step's groups (for samples) and stage timings (ms). */
export interface RlStepResult {
  metrics: Metrics;
  /** The first collected batch's groups (DAPO's extra batches are trained on but not logged). */
  groups: TrajectoryGroup[];
  /** Wall-clock ms of `rollout` (collect and reward, DAPO's batches included), `reward_advantage` (estimate and
   * correct) and `update`. */
  timingsMs: Record<string, number>;
}

/** Runs one RL step on `tasks` with sampling seed `seed`. @throws Error on broken trajectory invariants */
export async function rlStep(ctx: RlContext, tasks: readonly Task[], seed: number): Promise<RlStepResult> {
  const t0 = performance.now();

  // 1-2. Collect and reward: G episodes per task with the current policy, each scored by the reward terms.
  const agent = policyAgent(ctx);
  const rollout = await collect(ctx, agent, tasks, seed);
  if (rollout.groups.length === 0) {
    // Nothing reached the update (e.g. weights broken by a huge learning rate make every sample fail): a skipped
    // step, counted by the caller's streak guard like a NaN loss, so training stops with a reason instead of crashing.
    const first = rollout.dropped[0];
    ctx.onSkippedUpdate?.(`no trajectory reached the update (${rollout.dropped.length} dropped; first: ${first ? `${first.reason}: ${first.error}` : "none"})`);
    return { metrics: emptyStepMetrics(rollout), groups: rollout.groups, timingsMs: { rollout: performance.now() - t0, reward_advantage: 0, update: 0 } };
  }
  // DAPO dynamic sampling (rl.filterGroups): only informative groups, topped up from more collected batches.
  const train = await trainingGroups(ctx, agent, { tasks, seed, first: rollout.groups });
  const t1 = performance.now();

  // 3. Estimate: one datum per trajectory, its advantages from the rl.advantage estimator (critic values for gae).
  const batch = toBatch(ctx.config.rl, train.groups);
  await estimate(ctx, batch);

  // 4. Correct: old logprobs (observation tokens, TIS) and the reference policy's (KL term, hack/kl_ref).
  const correction = await correct(ctx, batch);
  const t2 = performance.now();

  // 5. Update: minibatches of the informative datums (the first on-policy, later ones clipped by PPO), then the critic.
  const updated = await update(ctx, batch);
  const t3 = performance.now();

  const metrics = stepMetrics({ rollout, correction, dapo: train.metrics, datums: batch.datums.length, update: updated });
  return { metrics, groups: rollout.groups, timingsMs: { rollout: t1 - t0, reward_advantage: t2 - t1, update: t3 - t2 } };
}
