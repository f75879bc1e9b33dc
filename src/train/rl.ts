/**
 * One RL step: rollout → reward → advantage → update. Each stage sits behind its own typed boundary (TurnGenerator
 * + Env, reward terms, advantage estimator, TrainingBackend), so an inference engine, a reward or a training
 * backend can be swapped without touching this file. Source: GRPO (Shao et al. 2024, DeepSeekMath §4.1),
 * Dr.GRPO (Liu et al. 2025 §3.1), PPO clipped surrogate (Schulman et al. 2017), Search-R1 (observation masking).
 */
import type { Datum, Metrics, Task, Trajectory, TrajectoryGroup } from "../core/types.ts";
import type { EnvFactory } from "../env/types.ts";
import { applyOverlongShaping, informativeGroups } from "../algo/dapo.ts";
import { assertTrajectory, trajectoryToDatum } from "../algo/datum.ts";
import { estimateAdvantages, ESTIMATORS, type EstimatorTrajectory } from "../algo/estimators.ts";
import { aggregationPlan, tisWeights } from "../algo/losses.ts";
import { backendLossOf, lossAggModeOf } from "../algo/policyLoss.ts";
import { hasTurnRewards, perTurnAdvantage, tokenRewardsFromTurns, turnAnchors, turnRewards, turnSpans } from "../algo/turns.ts";
import { embeddedCritic, type HiddenStateSource, type ValueHeadState } from "../policy/embedded/value.ts";
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
   * DAPO dynamic sampling (`rl.filterGroups`): `n` more tasks for the next rollout batch of a step whose informative
   * groups are too few. Default: the step's own tasks again (new sampling seed).
   */
  moreTasks?: (n: number) => Task[];
  /**
   * Critic values V(s_t) of each datum's targets `[batch][seq-1]` (reward units) under the current value head, for
   * `rl.advantage: gae`; and the critic's update on the returns. Present only for backends with a value head.
   */
  critic?: CriticHooks;
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

/** What `gae` needs from a backend with a value head. */
export interface CriticHooks {
  /** V(s_t) for every target position `[batch][seq-1]` (reward units), pre-update. */
  values(datums: Datum[]): Promise<number[][]>;
  /**
   * One critic update on `returns` `[batch][seq-1]` with the old values for clipping; returns its metrics
   * (`vf_loss`, `vf_clipfrac`, …).
   */
  update(datums: Datum[], returns: number[][], oldValues: number[][]): Promise<Metrics>;
  /** The critic's state as JSON text for a checkpoint (`value-head.json`); absent when it keeps none. */
  stateText?(): string;
  /** Restores `stateText()`'s output. @throws Error when it does not fit this critic */
  restoreText?(text: string): void;
}

/** The value head of each backend that has one (made at the first `gae` step; lives as long as the backend). */
const critics = new WeakMap<object, CriticHooks>();

/**
 * The critic of a step: the context's, else an embedded value head over the backend's trunk (`value.ts`) when the
 * backend exposes `hiddenStates`, else undefined.
 */
export function criticOf(ctx: Pick<RlContext, "critic" | "backend" | "config">): CriticHooks | undefined {
  if (ctx.critic) return ctx.critic;
  const b = ctx.backend as Partial<HiddenStateSource> & object;
  if (typeof b.hiddenStates !== "function" || !b.config) return undefined;
  let c = critics.get(b);
  if (!c) {
    const rl = ctx.config.rl;
    const e = embeddedCritic(b as HiddenStateSource, { learningRate: rl.criticLearningRate, cliprange: rl.cliprangeValue, updates: rl.criticUpdates });
    c = { ...e, stateText: () => JSON.stringify(e.head.state()), restoreText: (text) => e.head.restore(JSON.parse(text) as ValueHeadState) };
    critics.set(b, c);
  }
  return c;
}

/** File name of a critic's state in a checkpoint folder. */
export const CRITIC_STATE_FILE = "value-head.json";

/**
 * The files a checkpoint adds for the step's critic: `{ "value-head.json": state }` when `backend` has a critic that
 * was made (a `gae` run after its first step) and keeps a state, else `{}` (other runs' checkpoints are unchanged).
 */
export function criticFiles(backend: object): Record<string, string> {
  const c = critics.get(backend);
  const text = c?.stateText?.();
  return text === undefined ? {} : { [CRITIC_STATE_FILE]: text };
}

/**
 * Restores a checkpoint's critic state (`value-head.json`) into the critic of `ctx.backend` (made now if needed), so
 * a resumed `gae` run continues the value head's fit instead of refitting it from zero.
 * @throws Error when the backend has no value head or the state does not fit it (another `policy.dModel`)
 */
export function restoreCritic(ctx: Pick<RlContext, "backend" | "config">, text: string): void {
  const c = criticOf(ctx);
  if (!c?.restoreText) throw new Error(`${CRITIC_STATE_FILE}: this backend has no value head to restore it into`);
  c.restoreText(text);
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
  const budget = rl.maxTokensPerTurn * config.env.maxTurns;
  if (rl.overlongBuffer > 0) applyOverlongShaping(groups, budget, rl.overlongBuffer, rl.overlongPenalty);
  const dapo: Metrics = {};
  let trainGroups = groups;
  if (rl.filterGroups) {
    // DAPO dynamic sampling: keep groups whose rewards differ; roll out more tasks until tasksPerStep groups remain
    // or rl.maxGenBatches batches were sampled. Metrics stay those of the first batch (what a plain step sees).
    trainGroups = informativeGroups(groups);
    let batches = 1;
    while (trainGroups.length < tasks.length && batches < rl.maxGenBatches) {
      const need = tasks.length - trainGroups.length;
      const more = ctx.moreTasks?.(need) ?? tasks;
      const extra = await rolloutBatch(more, ctx.makeEnv, agent, tokenizer, ctx.limits, {
        groupSize: rl.groupSize,
        seed: (seed + batches * 0x9e3779b1) >>> 0,
        onEpisode: ctx.onEpisode,
        episodeDeadlineMs: config.env.episodeDeadlineMs,
        lanes: config.env.lanes,
        minGroupSize: 2,
      });
      await rewardGroups(extra.groups, rewardConfigOf(config), ctx.judge);
      if (rl.overlongBuffer > 0) applyOverlongShaping(extra.groups, budget, rl.overlongBuffer, rl.overlongPenalty);
      trainGroups = [...trainGroups, ...informativeGroups(extra.groups)];
      batches++;
    }
    trainGroups = trainGroups.slice(0, tasks.length);
    dapo["train/gen_batches"] = batches;
    dapo["train/kept_groups"] = trainGroups.length;
  }

  // 3. Advantage: the `rl.advantage` estimator (src/algo/estimators.ts) over the step's groups.
  const est = ESTIMATORS[rl.advantage];
  const datums: Datum[] = [];
  const advantages: number[] = []; // per datum: its scalar advantage, or (token estimators) its largest |A_t|
  const sampledMasks: number[][] = [];
  const estGroups: EstimatorTrajectory[][] = [];
  const spans: number[][][] = [];
  const withTurnRewards = hasTurnRewards(rl.turnRewards);
  for (const g of trainGroups) {
    estGroups.push(
      g.trajectories.map((traj) => {
        assertTrajectory(traj);
        const d = trajectoryToDatum(traj, 0, { trainObservations: !rl.maskObservations });
        sampledMasks.push(traj.lossMask.slice(1));
        datums.push(d);
        const t: EstimatorTrajectory = { reward: traj.reward!.total, mask: d.weights };
        const s = turnSpans(traj);
        spans.push(s);
        if (withTurnRewards || rl.advantage === "gigpo") {
          // Turn-level credit (src/algo/turns.ts): step rewards at each turn's end, GiGPO's anchors.
          const tr = withTurnRewards ? turnRewards(traj, rl.turnRewards) : traj.turns.map(() => 0);
          if (withTurnRewards) {
            traj.reward!.turnRewards = tr;
            t.tokenRewards = tokenRewardsFromTurns(s, tr, traj.reward!.total, d.weights.length);
          }
          t.turns = { spans: s, rewards: tr, anchors: turnAnchors(traj) };
        }
        return t;
      }),
    );
  }
  // DAPO's filter can leave nothing to train on (every group all-equal after rl.maxGenBatches batches).
  const needCurrent = (!rl.maskObservations || rl.tis) && datums.length > 0;
  let oldValues: number[][] | undefined;
  const critic = est.needsValues ? criticOf(ctx) : undefined;
  if (est.needsValues && datums.length > 0) {
    if (!critic) throw new Error('rl.advantage "gae": this backend has no value head (policy.backend embedded has one)');
    oldValues = await critic.values(datums);
    let k = 0;
    estGroups.forEach((g) => g.forEach((t) => (t.values = oldValues![k++])));
  }
  const estimated = estimateAdvantages(rl.advantage, estGroups, { gamma: rl.gamma, lam: rl.lam, gigpoStepWeight: rl.gigpoStepWeight, gigpoNormStd: rl.gigpoNormStd });
  {
    let k = 0;
    estimated.tokens.forEach((g, gi) =>
      g.forEach((tok, i) => {
        // What each turn was credited, kept on the trajectory's reward (and so in the run's samples).
        trainGroups[gi].trajectories[i].reward!.turnAdvantages = perTurnAdvantage(tok, spans[k]);
        const d = datums[k++];
        d.advantages = tok;
        advantages.push(estimated.scalars ? estimated.scalars[gi][i] : tok.reduce((a, x) => Math.max(a, Math.abs(x)), 0));
      }),
    );
  }
  const tis: Metrics = {};
  if (needCurrent) {
    // Observation tokens were never sampled, so they have no sampler logprob: use the current (pre-update) policy's,
    // as veRL recomputes old_log_prob with the actor. Sampled tokens keep the sampler's — unless TIS, where the
    // trainer's logprob is the PPO "old" policy and min(π_trainer/π_sampler, tisCap) weights the token's loss.
    const current = await backend.computeLogprobs(datums);
    let wSum = 0;
    let truncated = 0;
    let diff = 0;
    let n = 0;
    datums.forEach((d, b) => {
      const q = d.logprobs!;
      if (rl.tis) {
        const w = tisWeights(current[b], q, sampledMasks[b], rl.tisCap);
        w.forEach((x, i) => {
          if (sampledMasks[b][i] !== 1) return;
          const raw = Math.exp(current[b][i] - q[i]);
          wSum += x;
          truncated += raw > rl.tisCap ? 1 : 0;
          diff += Math.abs(current[b][i] - q[i]);
          n++;
        });
        d.advantages = d.advantages!.map((a, i) => (sampledMasks[b][i] === 1 ? a * w[i] : a));
      }
      d.logprobs = q.map((lp, i) => (sampledMasks[b][i] === 1 && !rl.tis ? lp : d.weights[i] === 1 ? current[b][i] : 0));
    });
    if (rl.tis && n > 0) {
      tis["tis/weight_mean"] = wSum / n;
      tis["tis/truncated_fraction"] = truncated / n;
      tis["tis/abs_logprob_diff"] = diff / n;
    }
  }
  const monitor: Metrics = {};
  if (ctx.reference && datums.length > 0) {
    // The KL term needs every datum; the monitor alone reads the first two episodes of each group (a quarter of
    // the default batch), since a forward over the whole batch costs as much as half an update.
    const picked = rl.klCoef > 0 ? datums.map((_, i) => i) : datums.map((_, i) => i).filter((i) => i % rl.groupSize < 2);
    const ref = await ctx.reference.computeLogprobs(picked.map((i) => datums[i]));
    if (rl.klCoef > 0) datums.forEach((d, i) => (d.refLogprobs = ref[i]));
    monitor["hack/kl_ref"] = referenceKl(picked.map((i) => datums[i].logprobs!), ref, picked.map((i) => sampledMasks[i]));
  }
  const t2 = performance.now();

  // 4. Update: split the batch into minibatches; the first is on-policy, later ones are clipped by PPO.
  const loss = backendLossOf(rl);
  const aggMode = lossAggModeOf(rl);
  const lossConfig: LossConfig = {
    ...loss.config,
    klCoef: rl.klCoef,
    normalization: aggMode === "seq-mean-token-sum-norm" ? "constant" : "tokens",
    constantLength: budget,
  };
  const update: Metrics[] = [];
  const informativeIdx = datums.map((_, i) => i).filter((i) => advantages[i] !== 0); // zero-advantage datums carry no gradient
  const informative = informativeIdx.map((i) => datums[i]);
  const mbSize = Math.ceil(informative.length / rl.minibatches);
  for (let start = 0; start < informative.length; start += mbSize) {
    let mb = informative.slice(start, start + mbSize);
    let mbConfig = lossConfig;
    if (aggMode === "seq-mean-token-sum" || aggMode === "seq-mean-token-mean") {
      // Per-sequence means as per-token weights over a constant divisor (aggregationPlan), per minibatch as veRL.
      const plan = aggregationPlan(mb.map((d) => d.weights), aggMode);
      mb = mb.map((d, i) => ({ ...d, weights: plan.weights[i] }));
      mbConfig = { ...lossConfig, normalization: plan.normalization, constantLength: plan.constantLength };
    }
    const fb = await backend.forwardBackward(mb, loss.lossFn, mbConfig);
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
  if (critic && datums.length > 0) {
    // The critic regresses the GAE returns of the whole batch (veRL update_critic), clipped around the old values.
    const vf = await critic.update(datums, estimated.returns!.flat(), oldValues!);
    for (const [k, v] of Object.entries(vf)) update.push({ [k]: v });
  }
  const t3 = performance.now();

  const trajectories = groups.flatMap((g) => g.trajectories);
  const metrics: Metrics = {
    ...episodeMetrics(trajectories),
    ...hackingMetrics(trajectories),
    ...monitor,
    ...tis,
    ...dapo,
    ...termMeans(trajectories),
    "reward/std_within_group": mean(groups.map((g) => std(g.trajectories.map((t) => t.reward!.total)))),
    "train/informative_fraction": datums.length === 0 ? 0 : informative.length / datums.length,
    ...rolloutMetrics(rollout),
  };
  for (const key of ["loss", "kl", "entropy", "clip_fraction", "clip_fraction_lower", "grad_norm", "ratio_mean", "ptx_loss", "vf_loss", "vf_clipfrac", "vf_explained_var"]) {
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
