/**
 * The collect and reward stages of an RL step: G episodes per task with the current policy (the one place a step
 * calls `rolloutBatch`), each scored by the reward terms; DAPO's dynamic sampling wraps the two to collect more
 * batches until enough groups are informative (src/algo/dapo.ts).
 */
import type { Metrics, Task, TrajectoryGroup } from "../../core/types.ts";
import { applyOverlongShaping, dynamicSampling } from "../../algo/dapo.ts";
import { rewardGroups } from "../../reward/compose.ts";
import { PolicyAgent, protocolStops } from "../../rollout/agent.ts";
import { rolloutBatch, type RolloutBatch } from "../../rollout/rollout.ts";
import type { ExperimentConfig } from "../config.ts";
import { rewardConfigOf } from "../../reward/config.ts";
import type { RlContext } from "./context.ts";

/** The response budget of an episode (tokens): `rl.maxTokensPerTurn × env.maxTurns`. */
export function responseBudget(config: ExperimentConfig): number {
  return config.rl.maxTokensPerTurn * config.env.maxTurns;
}

/** The step's turn generator: the backend's current sampling client at `rl.temperature`, with the env's stops. */
export function policyAgent(ctx: RlContext): PolicyAgent {
  const rl = ctx.config.rl;
  return new PolicyAgent(ctx.backend.samplingClient(), ctx.tokenizer, {
    temperature: rl.temperature,
    maxTokensPerTurn: rl.maxTokensPerTurn,
    ...(ctx.stops ?? protocolStops(ctx.tokenizer)),
  });
}

/**
 * Collect: `rl.groupSize` episodes of each task with `agent` (episode seeds from `seed`), then the reward stage on
 * the groups that remain. Every episode reaches the groups or is counted as dropped with its reason (metrics
 * `dropped`, `dropped/<reason>`); a group left with fewer than 2 members cannot be group-relative and is dropped whole
 * (AReaL PR #892).
 * @returns the batch, its groups rewarded @throws what the rollout or a reward term throws
 */
export async function collect(ctx: RlContext, agent: PolicyAgent, tasks: readonly Task[], seed: number): Promise<RolloutBatch> {
  const rollout = await rolloutBatch(tasks, { makeEnv: ctx.makeEnv, agent, tokenizer: ctx.tokenizer, limits: ctx.limits }, {
    groupSize: ctx.config.rl.groupSize,
    seed,
    onEpisode: ctx.onEpisode,
    episodeDeadlineMs: ctx.config.env.episodeDeadlineMs,
    lanes: ctx.config.env.lanes,
    minGroupSize: 2,
  });
  if (rollout.groups.length > 0) await reward(ctx, rollout.groups);
  return rollout;
}

/**
 * Reward: every term kept on each trajectory, each group the context of its members (OTC's estimate); then DAPO's
 * overlong shaping when `rl.overlongBuffer` > 0. Mutates the trajectories' `reward`.
 */
export async function reward(ctx: RlContext, groups: readonly TrajectoryGroup[]): Promise<void> {
  const { config, judge } = ctx;
  const rl = config.rl;
  await rewardGroups(groups, rewardConfigOf(config), judge);
  if (rl.overlongBuffer > 0) applyOverlongShaping(groups, responseBudget(config), rl.overlongBuffer, rl.overlongPenalty);
}

/**
 * The groups a step trains on: the first batch's, or with `rl.filterGroups` DAPO's dynamic sampling around
 * {@link collect} — its informative groups plus those of extra batches (`ctx.moreTasks`, else the step's tasks
 * again; batch b's seed `seed + b·0x9e3779b1`) until `tasks.length` groups or `rl.maxGenBatches` batches.
 * @returns the groups and the DAPO metrics (`train/gen_batches`, `train/kept_groups`; none without the filter)
 */
export async function trainingGroups(
  ctx: RlContext,
  agent: PolicyAgent,
  step: { tasks: readonly Task[]; seed: number; first: readonly TrajectoryGroup[] },
): Promise<{ groups: TrajectoryGroup[]; metrics: Metrics }> {
  const rl = ctx.config.rl;
  if (!rl.filterGroups) return { groups: [...step.first], metrics: {} };
  const { groups, batches } = await dynamicSampling(step.first, {
    want: step.tasks.length,
    maxBatches: rl.maxGenBatches,
    collect: async (need, batch) => {
      const more = ctx.moreTasks?.(need) ?? step.tasks;
      return (await collect(ctx, agent, more, (step.seed + batch * 0x9e3779b1) >>> 0)).groups;
    },
  });
  return { groups, metrics: { "train/gen_batches": batches, "train/kept_groups": groups.length } };
}
