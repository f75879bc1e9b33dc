/**
 * One RL step: rollout → reward → advantage → update. Each stage sits behind its own typed boundary (TurnGenerator
 * + Env, reward terms, advantage estimator, TrainingBackend), so an inference engine, a reward or a training
 * backend can be swapped without touching this file. Source: GRPO (Shao et al. 2024, DeepSeekMath §4.1),
 * Dr.GRPO (Liu et al. 2025 §3.1), PPO clipped surrogate (Schulman et al. 2017), Search-R1 (observation masking).
 */
import type { Datum, Metrics, Task, Trajectory, TrajectoryGroup } from "../core/types.ts";
import type { EnvFactory } from "../env/types.ts";
import { grpoAdvantages } from "../algo/advantages.ts";
import { assertTrajectory, trajectoryToDatum } from "../algo/datum.ts";
import { rewardGroups } from "../reward/compose.ts";
import { hackingMetrics, referenceKl } from "../reward/detectors.ts";
import type { Judge } from "../reward/types.ts";
import { PolicyAgent, protocolStops } from "../rollout/agent.ts";
import { rolloutBatch, rolloutMetrics, type RolloutLimits } from "../rollout/rollout.ts";
import type { Tokenizer } from "../policy/tokenizer.ts";
import type { LossConfig, TrainingBackend } from "../policy/types.ts";
import { rewardConfigOf, type ExperimentConfig } from "./config.ts";
import { episodeMetrics, mean } from "./metrics.ts";

/** What an RL step needs besides its tasks. */
export interface RlContext {
  backend: TrainingBackend;
  /**
   * Frozen reference policy (the warm start): the k3 KL term when `rl.klCoef > 0`, and the `hack/kl_ref` monitor
   * (k1 KL of the sampled tokens) whenever present.
   */
  reference?: TrainingBackend;
  /** LLM judge for the `judge` reward term. */
  judge?: Judge;
  tokenizer: Tokenizer;
  makeEnv: EnvFactory;
  limits: RolloutLimits;
  config: ExperimentConfig;
  /**
   * Warm-start demonstrations replayed with cross entropy in every update (`rl.ptxCoef`; InstructGPT's PPO-ptx,
   * Ouyang et al. 2022 §3.5), so RL on the training questions does not erase what warm start taught.
   */
  replay?: { datums: Datum[]; next: () => number };
  onEpisode?: (traj: Trajectory) => void;
  /** Stop conditions of a turn (the env protocol's, `protocolStops(tokenizer, protocol.stops)`); default Search-R1's. */
  stops?: { stop: number[]; stopStrings: string[] };
  /**
   * Called for each optimizer step of the update that was skipped because its loss or gradient norm was NaN/Inf
   * (its gradients discarded, weights and Adam state untouched), with what was not finite (e.g. `loss NaN`).
   */
  onSkippedUpdate?: (reason: string) => void;
}

/**
 * Scales a replay batch's weights so that, under `normalization: "constant"` with `constantLength = 1`, its loss is
 * `coef × (mean cross entropy over its weighted tokens)` whatever the batch's length.
 */
export function ptxDatums(batch: readonly Datum[], coef: number): Datum[] {
  const total = batch.reduce((a, d) => a + d.weights.reduce((x, y) => x + y, 0), 0);
  const scale = total > 0 ? (coef * batch.length) / total : 0;
  return batch.map((d) => ({ ...d, weights: d.weights.map((w) => w * scale) }));
}

/** Result of one RL step: per-step metrics (deterministic) and the step's groups (for samples). */
export interface RlStepResult {
  metrics: Metrics;
  groups: TrajectoryGroup[];
  timingsMs: Record<string, number>;
}

/** Runs one RL step on `tasks` with sampling seed `seed`. @throws Error on broken trajectory invariants */
export async function rlStep(ctx: RlContext, tasks: readonly Task[], seed: number): Promise<RlStepResult> {
  const { backend, tokenizer, config } = ctx;
  const rl = config.rl;
  const t0 = performance.now();

  // 1. Rollout: G episodes per task with the current policy.
  const agent = new PolicyAgent(backend.samplingClient(), tokenizer, {
    temperature: rl.temperature,
    maxTokensPerTurn: rl.maxTokensPerTurn,
    ...(ctx.stops ?? protocolStops(tokenizer)),
  });
  // Every episode reaches the update or is counted as dropped with its reason (metrics `dropped`, `dropped/<reason>`);
  // a group left with fewer than 2 members cannot be group-relative and is dropped whole (AReaL PR #892).
  const rollout = await rolloutBatch(tasks, ctx.makeEnv, agent, tokenizer, ctx.limits, {
    groupSize: rl.groupSize,
    seed,
    onEpisode: ctx.onEpisode,
    episodeDeadlineMs: config.env.episodeDeadlineMs,
    lanes: config.env.lanes,
    minGroupSize: 2,
  });
  const groups = rollout.groups;
  const t1 = performance.now();
  if (groups.length === 0) {
    // Nothing reached the update (e.g. weights broken by a huge learning rate make every sample fail): a skipped
    // step, counted by the caller's streak guard like a NaN loss, so training stops with a reason instead of crashing.
    const first = rollout.dropped[0];
    ctx.onSkippedUpdate?.(`no trajectory reached the update (${rollout.dropped.length} dropped; first: ${first ? `${first.reason}: ${first.error}` : "none"})`);
    return { metrics: { ...rolloutMetrics(rollout), "train/informative_fraction": 0 }, groups, timingsMs: { rollout: t1 - t0, reward_advantage: 0, update: 0 } };
  }

  // 2. Reward: every term kept on the trajectory; each group is the context of its members (OTC's estimate).
  await rewardGroups(groups, rewardConfigOf(config), ctx.judge);

  // 3. Advantage: group-relative (GRPO), or mean-centred only (Dr.GRPO).
  const datums: Datum[] = [];
  const advantages: number[] = [];
  const sampledMasks: number[][] = [];
  for (const g of groups) {
    const adv = grpoAdvantages(
      g.trajectories.map((t) => t.reward!.total),
      { normalizeStd: rl.advantage === "grpo" },
    );
    g.trajectories.forEach((traj, i) => {
      assertTrajectory(traj);
      advantages.push(adv[i]);
      sampledMasks.push(traj.lossMask.slice(1));
      datums.push(trajectoryToDatum(traj, adv[i], { trainObservations: !rl.maskObservations }));
    });
  }
  if (!rl.maskObservations) {
    // Observation tokens were never sampled, so they have no sampler logprob: use the current (pre-update) policy's,
    // as veRL recomputes old_log_prob with the actor. Sampled tokens keep the sampler's.
    const current = await backend.computeLogprobs(datums);
    datums.forEach((d, b) => {
      d.logprobs = d.logprobs!.map((lp, i) => (sampledMasks[b][i] === 1 ? lp : d.weights[i] === 1 ? current[b][i] : 0));
    });
  }
  const monitor: Metrics = {};
  if (ctx.reference) {
    // The KL term needs every datum; the monitor alone reads the first two episodes of each group (a quarter of
    // the default batch), since a forward over the whole batch costs as much as half an update.
    const picked = rl.klCoef > 0 ? datums.map((_, i) => i) : datums.map((_, i) => i).filter((i) => i % rl.groupSize < 2);
    const ref = await ctx.reference.computeLogprobs(picked.map((i) => datums[i]));
    if (rl.klCoef > 0) datums.forEach((d, i) => (d.refLogprobs = ref[i]));
    monitor["hack/kl_ref"] = referenceKl(picked.map((i) => datums[i].logprobs!), ref, picked.map((i) => sampledMasks[i]));
  }
  const t2 = performance.now();

  // 4. Update: split the batch into minibatches; the first is on-policy, later ones are clipped by PPO.
  const lossConfig: LossConfig = {
    clipLow: rl.clipLow,
    clipHigh: rl.clipHigh,
    klCoef: rl.klCoef,
    normalization: rl.advantage === "drgrpo" ? "constant" : "tokens",
    constantLength: rl.maxTokensPerTurn * config.env.maxTurns,
  };
  const update: Metrics[] = [];
  const informative = datums.filter((_, i) => advantages[i] !== 0); // zero-advantage datums carry no gradient
  const mbSize = Math.ceil(informative.length / rl.minibatches);
  for (let start = 0; start < informative.length; start += mbSize) {
    const fb = await backend.forwardBackward(informative.slice(start, start + mbSize), rl.lossFn, lossConfig);
    const ptx: Metrics = {};
    if (ctx.replay && rl.ptxCoef > 0) {
      const batch = Array.from({ length: rl.ptxBatchSize }, () => ctx.replay!.datums[ctx.replay!.next()]);
      const r = await backend.forwardBackward(ptxDatums(batch, rl.ptxCoef), "cross_entropy", { normalization: "constant", constantLength: 1 });
      ptx.ptx_loss = r.loss / rl.ptxCoef;
    }
    // A NaN/Inf loss: drop this minibatch's gradients instead of letting them poison the weights and Adam moments.
    const badLoss = !Number.isFinite(fb.loss) ? `loss ${fb.loss}` : ptx.ptx_loss !== undefined && !Number.isFinite(ptx.ptx_loss) ? `ptx_loss ${ptx.ptx_loss}` : undefined;
    if (badLoss !== undefined) {
      if (!backend.discardGradients) throw new Error(`${badLoss}: this backend cannot discard gradients, so the update cannot be skipped`);
      await backend.discardGradients();
      ctx.onSkippedUpdate?.(badLoss);
      continue;
    }
    const opt = await backend.optimStep({ learningRate: rl.learningRate, gradClip: rl.gradClip });
    if (opt.skipped === 1 || (opt.grad_norm !== undefined && !Number.isFinite(opt.grad_norm))) {
      ctx.onSkippedUpdate?.(`grad_norm ${opt.grad_norm}`); // the embedded backend refused it (weights unchanged)
      continue;
    }
    update.push({ loss: fb.loss, ...fb.metrics, ...ptx, ...opt });
  }
  const t3 = performance.now();

  const trajectories = groups.flatMap((g) => g.trajectories);
  const metrics: Metrics = {
    ...episodeMetrics(trajectories),
    ...hackingMetrics(trajectories),
    ...monitor,
    ...termMeans(trajectories),
    "reward/std_within_group": mean(groups.map((g) => std(g.trajectories.map((t) => t.reward!.total)))),
    "train/informative_fraction": informative.length / datums.length,
    ...rolloutMetrics(rollout),
  };
  for (const key of ["loss", "kl", "entropy", "clip_fraction", "grad_norm", "ratio_mean", "ptx_loss"]) {
    const vals = update.map((m) => m[key]).filter((v) => v !== undefined);
    if (vals.length > 0) metrics[`train/${key}`] = mean(vals);
  }
  return { metrics, groups, timingsMs: { rollout: t1 - t0, reward_advantage: t2 - t1, update: t3 - t2 } };
}

/** Mean raw value of every reward term (`reward/term/<name>`) and the reward's outside cost (`reward/cost`). */
function termMeans(trajs: readonly Trajectory[]): Metrics {
  const out: Metrics = {};
  for (const name of trajs[0]?.reward?.terms.map((t) => t.name) ?? []) {
    out[`reward/term/${name}`] = mean(trajs.map((t) => t.reward!.terms.find((x) => x.name === name)!.value));
  }
  const cost = trajs.reduce((a, t) => a + (t.reward?.cost ?? 0), 0);
  if (cost > 0) out["reward/cost"] = cost;
  const errors = trajs.filter((t) => t.reward?.terms.some((x) => x.error !== undefined)).length;
  if (errors > 0) out["reward/errors"] = errors;
  return out;
}

function std(xs: number[]): number {
  const m = mean(xs);
  return Math.sqrt(mean(xs.map((x) => (x - m) ** 2)));
}
