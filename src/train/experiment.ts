/**
 * The default experiment end to end: build the world → warm start (SFT on scripted demonstrations) → RL → the
 * summary table on the held-out split (Direct, RAG, warm-start policy, RL policy; EM, searches per question and
 * guess rate, split by known vs unknown facts). Every artefact goes to the run folder.
 */
import { join } from "node:path";
import { Rng } from "../core/rng.ts";
import type { Metrics, Passage, Task, Trajectory } from "../core/types.ts";
import { DetectorMonitor, defaultDetectors, type DetectorFiring } from "../reward/detectors.ts";
import { OpenAIJudge } from "../reward/judge.ts";
import type { EnvFactory } from "../env/types.ts";
import { SearchEnv } from "../envs/search/env.ts";
import { RELIABLE_SOURCE, UNRELIABLE_SOURCE, buildWorld, counterfactualWorld, valuesOf, worldTexts, type CountryAttribute, type World } from "../envs/search/world.ts";
import { BM25Index } from "../retrieval/bm25.ts";
import { validateRewardConfig } from "../reward/compose.ts";
import type { RolloutLimits } from "../rollout/rollout.ts";
import type { TrainingBackend } from "../policy/types.ts";
import { createBackend } from "./backends.ts";
import type { GPTConfig } from "../policy/embedded/gpt.ts";
import { WordTokenizer, type Tokenizer } from "../policy/tokenizer.ts";
import { loadTokenizer } from "../policy/hf/index.ts";
import { savePolicy } from "./checkpoint.ts";
import { ConfigError, rewardConfigOf, type ExperimentConfig } from "./config.ts";
import { evaluate, type EvalMode, type EvalResult } from "./eval.ts";
import { rlStep } from "./rl.ts";
import { trajectoryToDatum } from "../algo/datum.ts";
import { RunDir } from "./runDir.ts";
import { makeDemonstrations, trainSft } from "./sft.ts";

/** A progress bar handle. */
export interface ProgressBar {
  update(value: number, info?: Record<string, string | number>): void;
  stop(): void;
}

/** How the experiment reports progress (the CLI draws bars; tests pass `silentReporter`). */
export interface Reporter {
  bar(label: string, total: number): ProgressBar;
  log(message: string): void;
}

/** A reporter that prints nothing. */
export const silentReporter: Reporter = {
  bar: () => ({ update: () => {}, stop: () => {} }),
  log: () => {},
};

/** Everything built from the config before training: world, retrieval, tokenizer, env factory, limits. */
export interface Setup {
  world: World;
  index: BM25Index;
  /** The world's word tokenizer, or a real model's (`policy.tinker.tokenizer`). */
  tokenizer: Tokenizer;
  makeEnv: EnvFactory;
  limits: RolloutLimits;
  gpt: GPTConfig;
}

/** A BM25 index over passages and a factory of search environments over it, as the config sets them. */
export function searchEnvFor(passages: readonly Passage[], config: ExperimentConfig): { index: BM25Index; makeEnv: EnvFactory } {
  const index = new BM25Index([...passages]);
  return { index, makeEnv: () => new SearchEnv({ retriever: index, topK: config.env.topK, maxTurns: config.env.maxTurns }) };
}

/**
 * Checks what the schema cannot: the reward's terms exist, and a weighted `judge` term has an endpoint.
 * @throws ConfigError naming the field
 */
export function checkReward(config: ExperimentConfig): void {
  const reward = rewardConfigOf(config);
  validateRewardConfig(reward);
  if (Object.hasOwn(reward.weights, "judge") && reward.options?.judge === undefined) {
    throw new ConfigError(["reward.options.judge: required when the `judge` term is weighted (an OpenAI-compatible baseUrl and model)"]);
  }
}

/**
 * Builds the world, its BM25 index, the tokenizer (the world's word-level one, or `policy.tinker.tokenizer`'s) and
 * the env factory from a config. @throws ConfigError on a bad reward; Error naming the file on a bad tokenizer folder
 */
export function setup(config: ExperimentConfig): Setup {
  checkReward(config);
  const world = buildWorld({ seed: config.run.seed, ...config.env.world });
  const { index, makeEnv } = searchEnvFor(world.passages, config);
  const tokenizer: Tokenizer = config.policy.backend === "tinker" && config.policy.tinker.tokenizer
    ? loadTokenizer(config.policy.tinker.tokenizer) // a real model's: its chat template renders the first prompt
    : WordTokenizer.fromTexts([
    ...worldTexts(world),
    "question : Doc ( Title : ) error tool search : My previous action is invalid . If I want to search , I should put the query between and . If I want to give the final answer , I should put the answer between and . Let me try again . country facts area unknown",
    // Source names appear only in noisy worlds (kept out otherwise so the default vocabulary is unchanged).
    ...(config.env.world.noiseFraction > 0 ? [`source ${RELIABLE_SOURCE} ${UNRELIABLE_SOURCE}`] : []),
      ]);
  const limits: RolloutLimits = {
    contextLength: config.policy.contextLength,
    maxObservationTokens: config.env.maxObservationTokens,
  };
  const gpt: GPTConfig = {
    vocabSize: tokenizer.vocabSize,
    contextLength: config.policy.contextLength,
    dModel: config.policy.dModel,
    nLayers: config.policy.nLayers,
    nHeads: config.policy.nHeads,
    mlpRatio: config.policy.mlpRatio,
  };
  return { world, index, tokenizer, makeEnv, limits, gpt };
}

/** One row of the summary table. */
export interface SummaryRow {
  policy: string;
  result: Omit<EvalResult, "trajectories">;
}

/** The experiment's final summary (also written to `summary.json`). */
export interface ExperimentSummary {
  run: string;
  split: string;
  rows: SummaryRow[];
  /** Reward-hacking detectors firing at the end of RL (empty = quiet). */
  detectors: DetectorFiring[];
}

/** Runs one evaluation and reports it on a bar. */
export async function evalRow(
  label: string,
  backend: TrainingBackend,
  tasks: Task[],
  mode: EvalMode,
  s: Setup,
  config: ExperimentConfig,
  reporter: Reporter,
): Promise<SummaryRow & { trajectories: Trajectory[] }> {
  const bar = reporter.bar(`eval ${label}`, tasks.length);
  let done = 0;
  const r = await evaluate(tasks, backend.samplingClient(), s.tokenizer, s.makeEnv, s.limits, {
    mode,
    temperature: config.eval.temperature,
    maxTokensPerTurn: config.rl.maxTokensPerTurn,
    seed: config.run.seed + 7,
    onEpisode: () => bar.update(++done),
  });
  bar.stop();
  const { trajectories, ...result } = r;
  return { policy: label, result, trajectories };
}

/** The held-out tasks evaluated (all, or the first `eval.maxTasks` of a seeded shuffle). */
export function evalTasks(world: World, config: ExperimentConfig): Task[] {
  const tasks = world.test;
  if (config.eval.maxTasks === 0 || config.eval.maxTasks >= tasks.length) return tasks;
  return new Rng(config.run.seed + 11).shuffle(tasks).slice(0, config.eval.maxTasks);
}

/**
 * The warm-start demonstrations: scripted personas in the real world plus reading demonstrations in
 * `sft.counterfactualWorlds` copies whose unknown facts are permuted (see `counterfactualWorld`).
 */
export async function warmStartDemos(s: Setup, config: ExperimentConfig): Promise<Trajectory[]> {
  const known = [...s.world.train, ...s.world.test].filter((t) => t.known === true);
  const demos: Trajectory[] = [];
  for (let k = 0; k <= config.sft.counterfactualWorlds; k++) {
    // World 0 is the real one; the others permute the unknown facts (see counterfactualWorld).
    const world = k === 0 ? s.world : counterfactualWorld(s.world, config.run.seed * 1000 + k);
    const makeEnv = k === 0 ? s.makeEnv : searchEnvFor(world.passages, config).makeEnv;
    demos.push(
      ...(await makeDemonstrations(
        world.train,
        known, // popular countries are untouched by counterfactualWorld, so known tasks are the same in every world
        makeEnv,
        s.tokenizer,
        s.limits,
        (a) => valuesOf(world, a as CountryAttribute),
        {
          // Habits (personas) come from the real world only; counterfactual worlds teach reading the evidence.
          demosPerTask: k === 0 ? config.sft.demosPerTask : 0,
          personas: config.sft.personas,
          reading: k > 0, // real-world answers are left to search, not memorised from reading demonstrations
          seed: config.run.seed + 100 * k,
        },
      )),
    );
  }
  return demos;
}

/**
 * Warm start: a fresh policy trained with SFT on `demos`; metrics go to `run`, the policy to
 * `run.checkpoint("sft")`.
 */
export async function warmStart(s: Setup, config: ExperimentConfig, demos: readonly Trajectory[], run: RunDir, reporter: Reporter): Promise<TrainingBackend> {
  const backend = await createBackend(config, s.gpt);
  const sftBar = reporter.bar("warm start (SFT)", config.sft.steps);
  await trainSft(backend, demos, {
    steps: config.sft.steps,
    batchSize: config.sft.batchSize,
    learningRate: config.sft.learningRate,
    gradClip: config.rl.gradClip,
    seed: config.run.seed,
    onStep: (step, metrics, ms) => {
      run.logMetrics("sft", step, metrics);
      run.logTimings("sft", step, { step_ms: ms });
      sftBar.update(step + 1, { loss: metrics.loss.toFixed(3) });
    },
  });
  sftBar.stop();
  await savePolicy(run.checkpoint("sft"), backend, s.tokenizer, s.gpt);
  return backend;
}

/** What `trainRl` returns: per-step metrics and the detector monitor's state at the end. */
export interface RlRunResult {
  steps: Metrics[];
  detectors: DetectorMonitor;
}

/**
 * RL from the warm start: `rl.steps` steps of rollout → reward → advantage → update (`rlStep`), with PPO-ptx replay
 * of the known-fact demonstrations, the reference policy loaded from `referenceDir` (for the KL term and the KL
 * monitor), and the hacking detectors (firings logged to `detectors.jsonl` and warned through the reporter).
 * Writes metrics, timings, samples and checkpoints (`step-<n>`, `final`) to `run`.
 * @param label the progress bar's label
 * @param options `makeReference`: builds the reference policy instead of loading `referenceDir` with `createBackend`
 */
export async function trainRl(
  backend: TrainingBackend,
  demos: readonly Trajectory[],
  s: Setup,
  config: ExperimentConfig,
  run: RunDir,
  reporter: Reporter,
  referenceDir: string,
  label = "RL (GRPO)",
  options: { makeReference?: () => Promise<TrainingBackend> } = {},
): Promise<RlRunResult> {
  let reference: TrainingBackend | undefined;
  if (config.rl.klCoef > 0 || (config.detectors.enabled && config.detectors.referenceKl)) {
    reference = options.makeReference ? await options.makeReference() : await createBackend(config, s.gpt, referenceDir);
  }
  const rewardSpec = rewardConfigOf(config);
  const judgeOptions = rewardSpec.options?.judge;
  const judge = Object.hasOwn(rewardSpec.weights, "judge") && judgeOptions ? new OpenAIJudge(judgeOptions, join(run.path, "judge-cache.json")) : undefined;
  // Replay for PPO-ptx: the warm-start demonstrations of known facts (the policy's parametric knowledge).
  const replayDatums = demos.filter((t) => t.task.known === true && t.searches === 0).map((t) => trajectoryToDatum(t, 0));
  const replayRng = new Rng(config.run.seed + 2);
  const replay = replayDatums.length > 0 ? { datums: replayDatums, next: () => replayRng.int(replayDatums.length) } : undefined;
  // RL worlds: the real one plus `rl.counterfactualWorlds` copies whose unknown facts are permuted. A training
  // question's unknown answer then changes between worlds, so only searching pays — memorising the training
  // questions' answers cannot (a real corpus is too large to memorise; this tiny world is not).
  const rlWorlds = [{ world: s.world, makeEnv: s.makeEnv }];
  for (let k = 1; k <= config.rl.counterfactualWorlds; k++) {
    const world = counterfactualWorld(s.world, config.run.seed * 1000 + 500 + k);
    rlWorlds.push({ world, makeEnv: searchEnvFor(world.passages, config).makeEnv });
  }
  const d = config.detectors;
  const monitor = new DetectorMonitor(d.enabled ? defaultDetectors(d) : [], d);
  const steps: Metrics[] = [];
  const rng = new Rng(config.run.seed + 1);
  const rlBar = reporter.bar(label, config.rl.steps);
  let warnedRewardErrors = false;
  for (let step = 0; step < config.rl.steps; step++) {
    const { world, makeEnv } = rlWorlds[rng.int(rlWorlds.length)];
    const batch = rng.shuffle(world.train).slice(0, config.rl.tasksPerStep);
    const res = await rlStep(
      { backend, reference, replay, judge, tokenizer: s.tokenizer, makeEnv, limits: s.limits, config },
      batch,
      rng.seed(),
    );
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
    if (config.run.checkpointEvery > 0 && (step + 1) % config.run.checkpointEvery === 0) {
      await savePolicy(run.checkpoint(`step-${step + 1}`), backend, s.tokenizer, s.gpt);
    }
    rlBar.update(step + 1, {
      reward: res.metrics["reward/mean"].toFixed(3),
      em: res.metrics.em.toFixed(3),
      searches: res.metrics.searches.toFixed(2),
    });
  }
  rlBar.stop();
  await savePolicy(run.checkpoint("final"), backend, s.tokenizer, s.gpt);
  return { steps, detectors: monitor };
}

/** A file-name slug of a label: `RL (GRPO)` → `rl-grpo`. */
export function slug(label: string): string {
  return label.replace(/[^A-Za-z0-9]+/g, "-").replace(/^-|-$/g, "").toLowerCase();
}

/**
 * Runs the whole experiment: SFT, baselines, RL, final evaluation; writes the run folder.
 * @returns the summary table
 * @throws Error on invalid reward terms or a broken trajectory invariant
 */
export async function runExperiment(
  config: ExperimentConfig,
  reporter: Reporter = silentReporter,
  options: { overwrite: boolean } = { overwrite: false },
): Promise<ExperimentSummary> {
  checkReward(config); // before the run folder exists, so a bad config leaves nothing behind
  const run = new RunDir(config.run.dir, config.run.name, options);
  run.writeConfig(config);
  const s = setup(config);
  reporter.log(
    `world: ${s.world.countries.length} countries, ${s.world.passages.length} passages, ` +
      `${s.world.train.length} train / ${s.world.test.length} test questions; vocabulary ${s.tokenizer.vocabSize} tokens`,
  );
  const demos = await warmStartDemos(s, config);
  reporter.log(`warm start: ${demos.length} demonstrations`);
  const backend = await warmStart(s, config, demos, run, reporter);

  const tasks = evalTasks(s.world, config);
  const rows: Array<SummaryRow & { trajectories: Trajectory[] }> = [];
  rows.push(await evalRow("Direct", backend, tasks, "direct", s, config, reporter));
  rows.push(await evalRow("RAG", backend, tasks, "rag", s, config, reporter));
  rows.push(await evalRow("Warm start (SFT)", backend, tasks, "agent", s, config, reporter));

  const rl = await trainRl(backend, demos, s, config, run, reporter, run.checkpoint("sft"));
  rows.push(await evalRow("RL (GRPO)", backend, tasks, "agent", s, config, reporter));

  const summary: ExperimentSummary = {
    run: run.path,
    split: "test",
    rows: rows.map(({ policy, result }) => ({ policy, result })),
    detectors: rl.detectors.firing(),
  };
  run.writeSummary(summary);
  for (const r of rows) run.writeSamples(`eval-${slug(r.policy)}`, r.trajectories);
  return summary;
}
