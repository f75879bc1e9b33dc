/**
 * The RL loop of an experiment: `rl.steps` steps of `rlStep` (rollout → reward → advantage → update) over batches drawn
 * from the recipe's worlds, with PPO-ptx replay, the reference policy (KL term and monitor), the reward-hacking
 * detectors, checkpoints with the trainer's state (resume reproduces an uninterrupted run's steps exactly), and the
 * non-finite guard. Source: tinker-cookbook `tinker_cookbook/rl/train.py` (the loop), InstructGPT §3.5 (PPO-ptx).
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { Rng } from "../core/rng.ts";
import type { Datum, Metrics, Task } from "../core/types.ts";
import type { EnvFactory } from "../env/types.ts";
import { moreTasksFrom } from "../algo/dapo.ts";
import { DetectorMonitor, defaultDetectors } from "../reward/detectors.ts";
import { OpenAIJudge } from "../reward/judge.ts";
import type { RolloutLimits } from "../env/episode.ts";
import type { GPTConfig } from "../policy/embedded/gpt.ts";
import type { Tokenizer } from "../core/tokenizer.ts";
import type { TrainingBackend } from "../core/training.ts";
import { createBackend } from "./backends.ts";
import { savePolicy, TRAINER_STATE_FORMAT, trainerStateText, type ResumePoint, type TrainerState } from "./checkpoint.ts";
import type { ExperimentConfig } from "./config.ts";
import { rewardConfigOf } from "../reward/config.ts";
import { collectGarbage } from "./memory.ts";
import type { Reporter } from "./reporter.ts";
import { rlStep } from "./rl.ts";
import { CRITIC_STATE_FILE, criticFiles, restoreCritic } from "./rl/critic.ts";
import type { RunDir } from "./runDir.ts";
import { NonFiniteGuard } from "./sft.ts";

/** What `trainRl` returns: per-step metrics and the detector monitor's state at the end. */
export interface RlRunResult {
  steps: Metrics[];
  detectors: DetectorMonitor;
}

/** One world RL samples its batches from: its training tasks and its env factory. */
export interface RlWorld {
  train: readonly Task[];
  makeEnv: EnvFactory;
}

/**
 * What RL needs of the policy side, whatever the env: the tokenizer, the token budgets, the model shape, and the
 * turn's stop conditions (default the Search-R1 tags, `protocolStops(tokenizer)`).
 */
export interface PolicySetup {
  tokenizer: Tokenizer;
  limits: RolloutLimits;
  gpt: GPTConfig;
  stops?: { stop: number[]; stopStrings: string[] };
}

/** What `trainRl` is given. */
export interface RlRunOptions {
  /** The policy after its warm start; trained in place. */
  backend: TrainingBackend;
  /** The worlds batches are drawn from (world 0 the real one; `rl.counterfactualWorlds` copies after it). */
  worlds: readonly RlWorld[];
  /** Cross-entropy datums replayed with `rl.ptxCoef` (may be empty). */
  replayDatums: Datum[];
  setup: PolicySetup;
  config: ExperimentConfig;
  /** The run folder: metrics, timings, samples, detectors and checkpoints go there. */
  run: RunDir;
  reporter: Reporter;
  /** The warm start's checkpoint: the reference policy (KL term, `hack/kl_ref`) is loaded from it. */
  referenceDir: string;
  /** The progress bar's label (default `RL (GRPO)`). */
  label?: string;
  /** Builds the reference policy instead of loading `referenceDir`. */
  makeReference?: () => Promise<TrainingBackend>;
  /** Continue from this checkpoint (weights, Adam state, RNG states, step, detector history). */
  resume?: ResumePoint;
}

/**
 * RL on any env: each step draws one of `worlds` and `rl.tasksPerStep` of its training tasks, then runs `rlStep`.
 * Writes metrics, timings, samples and checkpoints (`step-<n>`, `final`, each with a `trainer-state.json`) to `run`.
 * An update whose loss or gradient norm is NaN/Inf is skipped (`train/skipped_nonfinite`, a reporter warning);
 * `rl.maxNonFiniteSteps` such steps in a row stop training with a `NonFiniteError`.
 * @throws NonFiniteError (see above); Error on a broken trajectory invariant or a checkpoint that cannot be loaded
 */
export async function trainRl(o: RlRunOptions): Promise<RlRunResult> {
  const { backend, worlds, replayDatums, setup: s, config, run, reporter, referenceDir } = o;
  const label = o.label ?? "RL (GRPO)";
  const options = { makeReference: o.makeReference, resume: o.resume };
  let reference: TrainingBackend | undefined;
  if (config.rl.klCoef > 0 || (config.detectors.enabled && config.detectors.referenceKl)) {
    reference = options.makeReference ? await options.makeReference() : await createBackend(config, s.gpt, referenceDir);
  }
  const rewardSpec = rewardConfigOf(config);
  const judgeOptions = rewardSpec.options?.judge;
  const judge = Object.hasOwn(rewardSpec.weights, "judge") && judgeOptions ? new OpenAIJudge(judgeOptions, join(run.path, "judge-cache.json")) : undefined;
  const replayRng = new Rng(config.run.seed + 2);
  const replay = replayDatums.length > 0 ? { datums: replayDatums, next: () => replayRng.int(replayDatums.length) } : undefined;
  const rlWorlds = worlds;
  const d = config.detectors;
  const monitor = new DetectorMonitor(d.enabled ? defaultDetectors(d) : [], d);
  const steps: Metrics[] = [];
  const rng = new Rng(config.run.seed + 1);
  const rlBar = reporter.bar(label, config.rl.steps);
  let warnedRewardErrors = false;
  const guard = new NonFiniteGuard(config.rl.maxNonFiniteSteps, "rl");
  let first = 0;
  if (options.resume) {
    const st = options.resume.state;
    await backend.load(options.resume.dir);
    // A gae run's value head continues from the checkpoint (value-head.json), not from zero.
    const critic = join(options.resume.dir, CRITIC_STATE_FILE);
    if (existsSync(critic)) restoreCritic({ backend, config }, readFileSync(critic, "utf8"));
    rng.setState(st.rngState);
    replayRng.setState(st.replayRngState);
    // The monitor's state is a pure function of the metrics it has seen: replay them (firings were logged already).
    st.steps.forEach((m, i) => {
      const metrics = Object.fromEntries(Object.entries(m).map(([k, v]) => [k, v ?? NaN])) as Metrics;
      steps.push(metrics);
      monitor.observe(i, metrics);
    });
    guard.run = st.nonFiniteRun;
    warnedRewardErrors = st.warnedRewardErrors;
    first = st.step;
    rlBar.update(first);
  }
  const trainerState = (step: number): string =>
    trainerStateText({
      format: TRAINER_STATE_FORMAT,
      step,
      rngState: rng.getState(),
      replayRngState: replayRng.getState(),
      steps,
      nonFiniteRun: guard.run,
      warnedRewardErrors,
    } satisfies TrainerState);
  for (let step = first; step < config.rl.steps; step++) {
    const { train, makeEnv } = rlWorlds[rng.int(rlWorlds.length)];
    const batch = rng.shuffle(train).slice(0, config.rl.tasksPerStep);
    const skipped: string[] = [];
    const stepSeed = rng.seed();
    // DAPO dynamic sampling draws its extra batches from this world's other training tasks (src/algo/dapo.ts).
    const moreTasks = config.rl.filterGroups ? moreTasksFrom(train, batch, stepSeed) : undefined;
    const res = await rlStep(
      { backend, reference, replay, judge, tokenizer: s.tokenizer, makeEnv, limits: s.limits, config, stops: s.stops, moreTasks, onSkippedUpdate: (r) => skipped.push(r) },
      batch,
      stepSeed,
    );
    if (skipped.length > 0) {
      res.metrics["train/skipped_nonfinite"] = skipped.length;
      reporter.log(`warning: rl step ${step}: ${skipped.length} update(s) skipped: ${skipped[0]} (train/skipped_nonfinite in metrics.jsonl)`);
    }
    steps.push(res.metrics);
    run.logMetrics("rl", step, res.metrics);
    run.logTimings("rl", step, res.timingsMs);
    const failed = res.groups.flatMap((g) => g.trajectories).flatMap((t) => t.reward?.terms.filter((x) => x.error !== undefined) ?? []);
    if (failed.length > 0 && (step === 0 || step % 10 === 0 || !warnedRewardErrors)) {
      warnedRewardErrors = true;
      reporter.log(`warning: step ${step}: ${failed.length} reward term(s) failed and scored 0 (e.g. ${failed[0].name}: ${failed[0].error}); see reward/errors in metrics.jsonl`);
    }
    for (const firing of monitor.observe(step, res.metrics)) {
      run.appendJsonl("detectors.jsonl", firing);
      reporter.log(`warning: reward-hacking detector fired: ${firing.message}`);
    }
    if (config.run.samplesPerStep > 0) {
      run.writeSamples(`step-${step}`, res.groups.flatMap((g) => g.trajectories).slice(0, config.run.samplesPerStep));
    }
    guard.record(step, skipped[0]); // throws after rl.maxNonFiniteSteps bad steps in a row
    if (config.run.checkpointEvery > 0 && (step + 1) % config.run.checkpointEvery === 0) {
      await savePolicy(run.checkpoint(`step-${step + 1}`), backend, s.tokenizer, s.gpt, { "trainer-state.json": trainerState(step + 1), ...criticFiles(backend) });
    }
    if (config.run.gcEvery > 0 && (step + 1) % config.run.gcEvery === 0) collectGarbage();
    rlBar.update(step + 1, {
      reward: res.metrics["reward/mean"]?.toFixed(3) ?? "-",
      em: res.metrics.em?.toFixed(3) ?? "-",
      searches: res.metrics.searches?.toFixed(2) ?? "-",
      calls: res.metrics.tool_calls?.toFixed(2) ?? "-",
    });
  }
  rlBar.stop();
  await savePolicy(run.checkpoint("final"), backend, s.tokenizer, s.gpt, { "trainer-state.json": trainerState(config.rl.steps), ...criticFiles(backend) });
  return { steps, detectors: monitor };
}

/**
 * The summary-row label of the RL policy: `RL (GRPO)` with the default `grpo` estimator and `ppo` loss (unchanged
 * since the first runs), else the estimator and loss as configured, e.g. `RL (gae · ppo)`, `RL (GRPO · cispo)`
 * (sample files follow: `eval-rl-gae-ppo`).
 */
export function rlPolicyLabel(rl: Pick<ExperimentConfig["rl"], "advantage" | "lossFn">): string {
  const adv = rl.advantage === "grpo" ? "GRPO" : rl.advantage;
  return rl.lossFn === "ppo" && rl.advantage === "grpo" ? "RL (GRPO)" : `RL (${adv} · ${rl.lossFn})`;
}

/** A file-name slug of a label: `RL (GRPO)` → `rl-grpo`. */
export function slug(label: string): string {
  return label.replace(/[^A-Za-z0-9]+/g, "-").replace(/^-|-$/g, "").toLowerCase();
}
