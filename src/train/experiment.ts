/**
 * The default experiment end to end: build the world → warm start (SFT on scripted demonstrations) → RL → the
 * summary table on the held-out split (Direct, RAG, warm-start policy, RL policy; EM, searches per question and
 * guess rate, split by known vs unknown facts). Every artefact goes to the run folder.
 */
import { existsSync, readFileSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { Rng } from "../core/rng.ts";
import type { Datum, Metrics, Passage, Task, Trajectory } from "../core/types.ts";
import { DetectorMonitor, defaultDetectors, type DetectorFiring } from "../reward/detectors.ts";
import { OpenAIJudge } from "../reward/judge.ts";
import type { EnvFactory } from "../env/types.ts";
import { searchEnvFactory } from "../envs/search/env.ts";
import { RELIABLE_SOURCE, UNRELIABLE_SOURCE, buildWorld, counterfactualWorld, valuesOf, worldTexts, type CountryAttribute, type World } from "../envs/search/world.ts";
import { BM25Index } from "../retrieval/bm25.ts";
import { validateRewardConfig } from "../reward/compose.ts";
import type { RolloutLimits } from "../rollout/rollout.ts";
import type { TrainingBackend } from "../policy/types.ts";
import { createBackend, tinkerServerFamily } from "./backends.ts";
import { tinkerFamilyProblem } from "../algo/policyLoss.ts";
import type { GPTConfig } from "../policy/embedded/gpt.ts";
import { WordTokenizer, type Tokenizer } from "../policy/tokenizer.ts";
import { loadTokenizer } from "../policy/hf/index.ts";
import { checkpointProblem, lastGoodCheckpoint, savePolicy, TRAINER_STATE_FORMAT, trainerStateText, type ResumePoint, type TrainerState } from "./checkpoint.ts";
import {
  ConfigError,
  SEARCH_PERSONAS,
  embeddedMemoryProblem,
  embeddedMemoryShape,
  estimateEmbeddedMemory,
  readConfigFile,
  resolveConfig,
  rewardConfigOf,
  type EmbeddedMemoryEstimate,
  type ExperimentConfig,
} from "./config.ts";
import { loadCorpus, loadQA } from "../retrieval/corpus.ts";
import { memoryLine, memoryWarning } from "./memoryReport.ts";
import { evaluate, type EvalMode, type EvalResult } from "./eval.ts";
import { CRITIC_STATE_FILE, criticFiles, restoreCritic, rlStep } from "./rl.ts";
import { moreTasksFrom } from "../algo/dapo.ts";
import { trajectoryToDatum } from "../algo/datum.ts";
import { RunDir, lockHolder } from "./runDir.ts";
import { planRunFolder } from "./runFolder.ts";
import { collectGarbage } from "./memory.ts";
import { makeDemonstrations, NonFiniteGuard, trainSft } from "./sft.ts";

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
  // env.tools (timeouts, retries, concurrency, output cap) and env.faults (injection, off by default) apply here.
  return { index, makeEnv: searchEnvFactory(index, config.env) };
}

/**
 * `rl.*` fields set away from their defaults that the configured algorithm never reads (e.g. `rl.lam` without
 * `gae`, `rl.droBeta` without `dro`, `rl.tisCap` without `rl.tis`), each with the setting that would read it; empty
 * when none. A typo'd combination then says so at start instead of training something else silently.
 */
export function unusedAlgorithmFields(config: ExperimentConfig): string[] {
  const rl = config.rl;
  const defaults = resolveConfig({}).rl;
  const discounted = rl.advantage === "reinforce_plus_plus" || rl.advantage === "gae" || rl.advantage === "gigpo";
  const readers: Array<[keyof ExperimentConfig["rl"], boolean, string]> = [
    ["gamma", discounted, "rl.advantage reinforce_plus_plus, gae or gigpo"],
    ["lam", rl.advantage === "gae", "rl.advantage gae"],
    ["criticLearningRate", rl.advantage === "gae", "rl.advantage gae"],
    ["criticUpdates", rl.advantage === "gae", "rl.advantage gae"],
    ["cliprangeValue", rl.advantage === "gae", "rl.advantage gae"],
    ["gigpoStepWeight", rl.advantage === "gigpo", "rl.advantage gigpo"],
    ["gigpoNormStd", rl.advantage === "gigpo", "rl.advantage gigpo"],
    ["droBeta", rl.lossFn === "dro", "rl.lossFn dro"],
    ["tisCap", rl.tis, "rl.tis true"],
    ["maxGenBatches", rl.filterGroups, "rl.filterGroups true"],
    ["overlongPenalty", rl.overlongBuffer > 0, "rl.overlongBuffer > 0"],
  ];
  return readers
    .filter(([k, read]) => !read && JSON.stringify(rl[k]) !== JSON.stringify(defaults[k]))
    .map(([k, , by]) => `rl.${k} ${JSON.stringify(rl[k])} (read only with ${by})`);
}

/** {@link unusedAlgorithmFields} as one warning line, or undefined when every set field is read. */
export function unusedAlgorithmWarning(config: ExperimentConfig): string | undefined {
  const unused = unusedAlgorithmFields(config);
  return unused.length === 0 ? undefined : `the algorithm (rl.advantage ${config.rl.advantage}, rl.lossFn ${config.rl.lossFn}) does not read ${unused.join(", ")}`;
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
 * Checks that the embedded model fits jax-js's 4 GiB wasm heap (`estimateEmbeddedMemory`), before anything is built
 * or written: a model too large would otherwise die minutes in with an allocation error that names no field.
 * @returns the estimate (bytes), or undefined for a remote policy (`policy.backend: tinker`)
 * @throws ConfigError naming the field that drives the estimate and the largest value that fits
 */
export function checkMemory(config: ExperimentConfig, s: Setup): EmbeddedMemoryEstimate | undefined {
  if (config.policy.backend !== "embedded") return undefined;
  const evalRows = evalTasks(s.world, config).length;
  const problem = embeddedMemoryProblem(config, s.tokenizer.vocabSize, evalRows);
  if (problem !== undefined) throw new ConfigError([problem]);
  return estimateEmbeddedMemory(embeddedMemoryShape(config, s.tokenizer.vocabSize, evalRows));
}

// The memory line of --dry-run and the warning of a run share one estimate and its wording (./memoryReport.ts).
export { memoryWarning } from "./memoryReport.ts";

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
  const gpt = gptConfigOf(config, tokenizer.vocabSize);
  return { world, index, tokenizer, makeEnv, limits, gpt };
}

/** The embedded model's shape from the config's `policy` section and the tokenizer's vocabulary size. */
export function gptConfigOf(config: ExperimentConfig, vocabSize: number): GPTConfig {
  const p = config.policy;
  return { vocabSize, contextLength: p.contextLength, dModel: p.dModel, nLayers: p.nLayers, nHeads: p.nHeads, mlpRatio: p.mlpRatio };
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
  // Demonstrations show the protocol on a healthy tool: injected faults (env.faults) are for RL rollouts and
  // evaluation, never for the warm-start data.
  const clean: ExperimentConfig = { ...config, env: { ...config.env, faults: { ...config.env.faults, rate: 0 } } };
  for (let k = 0; k <= config.sft.counterfactualWorlds; k++) {
    // World 0 is the real one; the others permute the unknown facts (see counterfactualWorld).
    const world = k === 0 ? s.world : counterfactualWorld(s.world, config.run.seed * 1000 + k);
    const makeEnv = k === 0 ? searchEnvFactory(s.index, clean.env) : searchEnvFor(world.passages, clean).makeEnv;
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
          personas: config.sft.personas ?? SEARCH_PERSONAS,
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
export async function warmStart(s: Pick<PolicySetup, "gpt" | "tokenizer">, config: ExperimentConfig, demos: readonly Trajectory[], run: RunDir, reporter: Reporter): Promise<TrainingBackend> {
  const backend = await createBackend(config, s.gpt);
  const sftBar = reporter.bar("warm start (SFT)", config.sft.steps);
  await trainSft(backend, demos, {
    steps: config.sft.steps,
    batchSize: config.sft.batchSize,
    learningRate: config.sft.learningRate,
    gradClip: config.rl.gradClip,
    seed: config.run.seed,
    maxNonFiniteSteps: config.rl.maxNonFiniteSteps,
    onSkip: (step, reason) => reporter.log(`warning: sft step ${step}: ${reason}; update skipped (train/skipped_nonfinite in metrics.jsonl)`),
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
 * Writes metrics, timings, samples and checkpoints (`step-<n>`, `final`, each with a `trainer-state.json`) to `run`.
 * An update whose loss or gradient norm is NaN/Inf is skipped (`train/skipped_nonfinite`, a reporter warning);
 * `rl.maxNonFiniteSteps` such steps in a row stop training with a `NonFiniteError`.
 * @param label the progress bar's label
 * @param options `makeReference`: builds the reference policy instead of loading `referenceDir` with `createBackend`;
 *   `resume`: continue from this checkpoint (weights, Adam state, RNG states, step, detector history) — the steps
 *   after it then reproduce an uninterrupted run's exactly
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
  options: { makeReference?: () => Promise<TrainingBackend>; resume?: ResumePoint } = {},
): Promise<RlRunResult> {
  // Replay for PPO-ptx: the warm-start demonstrations of known facts (the policy's parametric knowledge).
  const replayDatums = demos.filter((t) => t.task.known === true && t.searches === 0).map((t) => trajectoryToDatum(t, 0));
  // RL worlds: the real one plus `rl.counterfactualWorlds` copies whose unknown facts are permuted. A training
  // question's unknown answer then changes between worlds, so only searching pays — memorising the training
  // questions' answers cannot (a real corpus is too large to memorise; this tiny world is not).
  const rlWorlds: RlWorld[] = [{ train: s.world.train, makeEnv: s.makeEnv }];
  for (let k = 1; k <= config.rl.counterfactualWorlds; k++) {
    const world = counterfactualWorld(s.world, config.run.seed * 1000 + 500 + k);
    rlWorlds.push({ train: world.train, makeEnv: searchEnvFor(world.passages, config).makeEnv });
  }
  return trainRlOn(backend, rlWorlds, replayDatums, s, config, run, reporter, referenceDir, label, options);
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

/**
 * RL on any env: each step draws one of `worlds` and `rl.tasksPerStep` of its training tasks, then runs `rlStep`;
 * `replayDatums` (cross-entropy datums, may be empty) are replayed with `rl.ptxCoef`. Everything else as
 * `trainRl` (which builds the search env's worlds and replay and calls this).
 * @throws what `trainRl` throws
 */
export async function trainRlOn(
  backend: TrainingBackend,
  worlds: readonly RlWorld[],
  replayDatums: Datum[],
  s: PolicySetup,
  config: ExperimentConfig,
  run: RunDir,
  reporter: Reporter,
  referenceDir: string,
  label = "RL (GRPO)",
  options: { makeReference?: () => Promise<TrainingBackend>; resume?: ResumePoint } = {},
): Promise<RlRunResult> {
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

/** Dotted paths of a JSON value's leaves (`rl.groupSize` → 8); arrays are leaves. */
function leaves(value: unknown, prefix = "", out: Map<string, string> = new Map()): Map<string, string> {
  if (value !== null && typeof value === "object" && !Array.isArray(value)) {
    for (const [k, v] of Object.entries(value)) leaves(v, prefix ? `${prefix}.${k}` : k, out);
  } else if (value !== undefined) {
    out.set(prefix, JSON.stringify(value));
  }
  return out;
}

/**
 * Checks that a run folder's `config.yaml` (as written by `arl train`) resolves to `config`, for `--resume`
 * (`run.dir` and `run.name` may differ: they say where the folder is, so a moved or copied run resumes).
 * @throws ConfigError naming every differing field with both values; Error when the file cannot be read
 */
export function checkSameConfig(file: string, config: ExperimentConfig): void {
  let saved: ExperimentConfig;
  try {
    saved = resolveConfig(readConfigFile(file));
  } catch (e) {
    throw new ConfigError([`${file}: the run folder's config no longer validates (${(e as Error).message.replace(/\n/g, "; ")})`]);
  }
  const a = leaves(JSON.parse(JSON.stringify(saved)));
  const b = leaves(JSON.parse(JSON.stringify(config)));
  const diffs = [...new Set([...a.keys(), ...b.keys()])]
    .filter((k) => k !== "run.dir" && k !== "run.name") // where the folder is, not what it trains (a moved run resumes)
    .filter((k) => a.get(k) !== b.get(k))
    .sort()
    .map((k) => `${k}: the run folder has ${a.get(k) ?? "(unset)"}, this command has ${b.get(k) ?? "(unset)"} (--resume needs the run's own config; pass the same --config and flags)`);
  if (diffs.length > 0) throw new ConfigError(diffs);
}

/**
 * @throws ConfigError when the checkpoint's tokenizer or model shape differs from what `s` builds
 */
export function checkCheckpointShape(dir: string, s: Pick<PolicySetup, "gpt" | "tokenizer">): void {
  const gptPath = join(dir, "gpt.json");
  if (existsSync(gptPath)) {
    const saved = JSON.parse(readFileSync(gptPath, "utf8")) as GPTConfig;
    const bad = (Object.keys(s.gpt) as (keyof GPTConfig)[]).filter((k) => saved[k] !== s.gpt[k]).map((k) => `${k} ${saved[k]} vs ${s.gpt[k]}`);
    if (bad.length > 0) {
      throw new ConfigError([`checkpoint ${dir}: gpt.json does not match this config (${bad.join(", ")}; checkpoint vs config)${bad.some((b) => b.startsWith("vocabSize")) ? " — the tokenizer differs (policy.tinker.tokenizer, env.world or run.seed changed?)" : ""}`]);
    }
  }
  const tokPath = join(dir, "tokenizer.json");
  if (existsSync(tokPath) && readFileSync(tokPath, "utf8") !== JSON.stringify(s.tokenizer.toJSON())) {
    throw new ConfigError([`checkpoint ${dir}: tokenizer.json differs from this config's tokenizer (${s.tokenizer.vocabSize} tokens): a different vocabulary (policy.tinker.tokenizer, env.world or run.seed changed?)`]);
  }
}

/** Where a resumed run starts: the warm start's checkpoint and the last good RL checkpoint, if any. */
export interface ResumePlan {
  /** Whether `checkpoints/sft` is whole (else SFT reruns from scratch). */
  sft: boolean;
  rl?: ResumePoint;
}

/** Finds what `--resume` continues from, reporting bad checkpoints by name through `warn`. */
export function planResume(run: RunDir, s: Pick<PolicySetup, "gpt" | "tokenizer">, warn: (m: string) => void): ResumePlan {
  const sftDir = run.checkpoint("sft");
  const sftProblem = checkpointProblem(sftDir);
  if (sftProblem !== undefined) {
    if (existsSync(sftDir)) warn(`checkpoint ${sftDir}: ${sftProblem}; restarting from scratch`);
    return { sft: false };
  }
  checkCheckpointShape(sftDir, s);
  const rl = lastGoodCheckpoint(join(run.path, "checkpoints"), warn);
  if (rl) checkCheckpointShape(rl.dir, s);
  return { sft: true, rl };
}

/**
 * Cuts a run folder back to a resume point: metrics/timings lines of later RL steps (and a torn last line), later
 * detector firings, samples, checkpoints, evaluation samples and the summary are removed — they are recomputed.
 */
export function truncateRun(run: RunDir, plan: ResumePlan): void {
  const k = plan.rl?.state.step ?? 0;
  const keep = (row: Record<string, unknown>): boolean => plan.sft && (row.stage === "sft" || (row.stage === "rl" && typeof row.step === "number" && row.step < k));
  run.truncateJsonl("metrics.jsonl", keep);
  run.truncateJsonl("timings.jsonl", keep);
  run.truncateJsonl("detectors.jsonl", (row) => plan.sft && typeof row.step === "number" && row.step < k);
  run.remove("summary.json");
  for (const f of existsSync(join(run.path, "samples")) ? readdirSync(join(run.path, "samples")) : []) {
    const m = /^step-(\d+)\.jsonl$/.exec(f);
    if (!m || Number(m[1]) >= k || !plan.sft) run.remove(join("samples", f));
  }
  for (const c of existsSync(join(run.path, "checkpoints")) ? readdirSync(join(run.path, "checkpoints")) : []) {
    const m = /^step-(\d+)$/.exec(c);
    const keepIt = plan.sft && (c === "sft" || (m !== null && Number(m[1]) <= k) || (c === "final" && plan.rl?.dir === run.checkpoint("final")));
    if (!keepIt) run.remove(join("checkpoints", c));
  }
}

/**
 * Whether a run continues the one in its folder: `options.resume` and a `config.yaml` there (checked field by field
 * against `config`); a resume with nothing to continue is logged and starts from scratch.
 * @throws ConfigError for `resume` with `overwrite`, or a run folder whose config differs
 */
export function resumeIntent(config: ExperimentConfig, reporter: Reporter, options: { overwrite: boolean; resume?: boolean }): boolean {
  if (options.resume && options.overwrite) throw new ConfigError(["--resume and --overwrite: choose one (resume continues the run in the folder; overwrite replaces it)"]);
  const configFile = join(config.run.dir, config.run.name, "config.yaml");
  const resuming = options.resume === true && existsSync(configFile);
  if (resuming) checkSameConfig(configFile, config);
  else if (options.resume) reporter.log(`resume: ${join(config.run.dir, config.run.name)} holds no run yet; starting from scratch`);
  return resuming;
}

/**
 * Opens (takes) the run folder and, when `resuming`, finds the resume point (bad checkpoints warned by name) and cuts
 * the folder back to it (`truncateRun`), logging where the run continues from.
 * @throws ConfigError from `RunDir` (a run already there without --overwrite, a live lock) or `planResume`
 */
export function openRun(
  config: ExperimentConfig,
  s: Pick<PolicySetup, "gpt" | "tokenizer">,
  resuming: boolean,
  reporter: Reporter,
  options: { overwrite: boolean },
): { run: RunDir; plan: ResumePlan } {
  const run = new RunDir(config.run.dir, config.run.name, { overwrite: options.overwrite, resume: resuming, resumable: true, log: (m) => reporter.log(m) });
  let plan: ResumePlan = { sft: false };
  if (resuming) {
    plan = planResume(run, s, (m) => reporter.log(`warning: ${m}`));
    truncateRun(run, plan);
    reporter.log(
      plan.rl
        ? `resuming ${run.path} from ${plan.rl.dir} (RL step ${plan.rl.state.step} of ${config.rl.steps})`
        : plan.sft
          ? `resuming ${run.path} from the warm start (${run.checkpoint("sft")}); RL from step 0`
          : `resuming ${run.path}: no whole checkpoint; starting from scratch`,
    );
  }
  return { run, plan };
}

/**
 * Runs the whole experiment: SFT, baselines, RL, final evaluation; writes the run folder.
 * With `resume`, continues the run already in the folder (same config, checked field by field): from its last good
 * RL checkpoint (bad ones are reported by name and skipped), else from its warm-start checkpoint, else from scratch.
 * Everything after the resume point is recomputed, so `metrics.jsonl` ends byte-identical to an uninterrupted run's.
 * SFT has no intermediate checkpoints: a run killed during warm start reruns it (deterministic) from step 0.
 * @returns the summary table
 * A run folder left by a run that stopped before its first checkpoint is reused (a notice through the reporter).
 * @throws Error on invalid reward terms or a broken trajectory invariant; ConfigError when the embedded model cannot
 *   fit its 4 GiB wasm heap (before the run folder is touched), or when `resume` meets a different config or a
 *   checkpoint of another tokenizer/model shape
 */
export async function runExperiment(
  config: ExperimentConfig,
  reporter: Reporter = silentReporter,
  options: { overwrite: boolean; resume?: boolean } = { overwrite: false },
): Promise<ExperimentSummary> {
  checkReward(config); // before the run folder exists, so a bad config leaves nothing behind
  const resuming = resumeIntent(config, reporter, options);
  const s = setup(config);
  // A model too large for the embedded backend is refused before the run folder is touched.
  const warning = memoryWarning(checkMemory(config, s));
  if (warning !== undefined) reporter.log(`warning: ${warning}`);
  const unusedWarning = unusedAlgorithmWarning(config);
  if (unusedWarning !== undefined) reporter.log(`warning: ${unusedWarning}`);
  const { run, plan } = openRun(config, s, resuming, reporter, options);
  run.writeConfig(config);
  reporter.log(
    `world: ${s.world.countries.length} countries, ${s.world.passages.length} passages, ` +
      `${s.world.train.length} train / ${s.world.test.length} test questions; vocabulary ${s.tokenizer.vocabSize} tokens`,
  );
  const demos = await warmStartDemos(s, config);
  reporter.log(`warm start: ${demos.length} demonstrations`);
  const backend = plan.sft ? await createBackend(config, s.gpt, run.checkpoint("sft")) : await warmStart(s, config, demos, run, reporter);

  const tasks = evalTasks(s.world, config);
  const rows: Array<SummaryRow & { trajectories: Trajectory[] }> = [];
  rows.push(await evalRow("Direct", backend, tasks, "direct", s, config, reporter));
  rows.push(await evalRow("RAG", backend, tasks, "rag", s, config, reporter));
  rows.push(await evalRow("Warm start (SFT)", backend, tasks, "agent", s, config, reporter));

  const rl = await trainRl(backend, demos, s, config, run, reporter, run.checkpoint("sft"), rlPolicyLabel(config.rl), { resume: plan.rl });
  rows.push(await evalRow(rlPolicyLabel(config.rl), backend, tasks, "agent", s, config, reporter));

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

/** A tiny fetch with a timeout, for the dry run's reachability check. */
async function reachable(url: string, timeoutMs: number): Promise<string | undefined> {
  try {
    const r = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
    return r.ok ? undefined : `GET ${url} answered HTTP ${r.status}`;
  } catch (e) {
    const err = e as Error & { cause?: { code?: string; message?: string } };
    return `GET ${url} failed (${err.name === "TimeoutError" ? `no answer in ${timeoutMs} ms` : (err.cause?.code ?? err.cause?.message ?? err.message)})`;
  }
}

/**
 * Checks a data file is a non-empty QA (`kind: "data"`) or corpus (`kind: "corpus"`) JSONL file.
 * @returns the number of records @throws ConfigError naming the flag, the file and what was expected
 */
export async function checkDataFile(file: string, kind: "data" | "corpus"): Promise<number> {
  const flag = `--${kind}`;
  const expected = kind === "data" ? "a QA JSONL file (FlashRAG, NQ-open or Bamboogle lines)" : "a wiki-18 JSONL file ({id, contents} lines)";
  if (!existsSync(file)) throw new ConfigError([`${flag}: no such file ${file} (expected ${expected})`]);
  if (!statSync(file).isFile()) throw new ConfigError([`${flag}: ${file} is not a file (expected ${expected})`]);
  let n: number;
  try {
    n = kind === "data" ? (await loadQA(file)).length : (await loadCorpus(file)).length;
  } catch (e) {
    throw new ConfigError([`${flag}: ${(e as Error).message}`]);
  }
  if (n === 0) throw new ConfigError([`${flag}: ${file} is empty (expected ${expected}, at least one line)`]);
  return n;
}

/**
 * `arl train --dry-run`: validates everything a run needs without training or writing anything — the resolved
 * config and reward, the tokenizer folder, the world and its splits, the embedded model's memory (`checkMemory`:
 * refused past jax-js's 4 GiB wasm heap), the warm-start demonstrations, the Tinker server
 * (`GET <baseUrl>/api/v1/healthz`, 5 s; its family detected as a run would and the RL loss checked against it,
 * `tinkerFamilyProblem`) when `policy.backend` is tinker, data files, the run folder (a run already
 * in it, a live process holding it; one that stopped before its first checkpoint would be reused) and — with
 * `resume` — its config and checkpoints (checksums, tokenizer and model shape).
 * @returns lines of a short summary
 * @throws ConfigError naming the field, file or checkpoint and what was expected
 */
export async function dryRun(
  config: ExperimentConfig,
  options: { resume?: boolean; overwrite?: boolean; data?: string; corpus?: string } = {},
): Promise<string[]> {
  const lines: string[] = [];
  checkReward(config);
  const tok = config.policy.tinker.tokenizer;
  if (config.policy.backend === "tinker" && tok !== undefined) {
    if (!existsSync(tok) || !statSync(tok).isDirectory()) {
      throw new ConfigError([`policy.tinker.tokenizer: no such folder ${tok} (expected a folder with tokenizer.json and tokenizer_config.json)`]);
    }
    if (!existsSync(join(tok, "tokenizer.json"))) throw new ConfigError([`policy.tinker.tokenizer: ${tok} has no tokenizer.json (expected a Hugging Face tokenizer folder)`]);
  }
  let s: Setup;
  try {
    s = setup(config);
  } catch (e) {
    if (e instanceof ConfigError) throw e;
    throw new ConfigError([`${tok !== undefined && config.policy.backend === "tinker" ? "policy.tinker.tokenizer" : "env.world"}: ${(e as Error).message}`]);
  }
  if (s.world.train.length === 0) throw new ConfigError([`env.world: the world has no training questions (expected ≥ 1; raise env.world.numCountries or lower env.world.testFraction)`]);
  if (s.world.test.length === 0) throw new ConfigError([`env.world: the world has no held-out questions (expected ≥ 1; raise env.world.testFraction)`]);
  lines.push(`world: ${s.world.countries.length} countries, ${s.world.passages.length} passages, ${s.world.train.length} train / ${s.world.test.length} test questions (${evalTasks(s.world, config).length} evaluated)`);
  lines.push(`tokenizer: ${s.tokenizer.vocabSize} tokens${tok !== undefined && config.policy.backend === "tinker" ? ` from ${tok}` : " (the world's words)"}; model ${config.policy.nLayers}×${config.policy.dModel}, context ${config.policy.contextLength}`);
  const mem = checkMemory(config, s);
  if (mem !== undefined) {
    lines.push(memoryLine(mem));
    const warning = memoryWarning(mem);
    if (warning !== undefined) lines.push(`warning: ${warning}`);
  }
  if (config.sft.steps > 0) {
    const demos = await warmStartDemos(s, config);
    if (demos.length === 0) throw new ConfigError([`sft: no warm-start demonstrations (expected ≥ 1; check sft.demosPerTask and sft.personas)`]);
    lines.push(`warm start: ${demos.length} demonstrations, ${config.sft.steps} SFT steps`);
  }
  lines.push(`RL: ${config.rl.steps} steps × ${config.rl.tasksPerStep} questions × ${config.rl.groupSize} episodes; reward ${Object.entries(rewardConfigOf(config).weights).map(([t, w]) => `${t} ${w}`).join(", ")}`);
  const unusedWarning = unusedAlgorithmWarning(config);
  if (unusedWarning !== undefined) lines.push(`warning: ${unusedWarning}`);
  if (config.policy.backend === "tinker") {
    const url = `${config.policy.tinker.baseUrl.replace(/\/+$/, "")}/api/v1/healthz`;
    const problem = await reachable(url, 5000);
    if (problem !== undefined) throw new ConfigError([`policy.tinker.baseUrl: ${config.policy.tinker.baseUrl} is not reachable: ${problem} (expected a Tinker API server, e.g. \`arl serve trainer\`)`]);
    // The server's family decides which RL losses it has: detected here as a run would, so --dry-run refuses what
    // the first update would (e.g. gspo on a server without it).
    const family = await tinkerServerFamily(config);
    const lossProblem = config.rl.steps > 0 ? tinkerFamilyProblem(config.rl, family) : undefined;
    if (lossProblem !== undefined) throw new ConfigError([`rl.${lossProblem.field}: ${lossProblem.message}`]);
    lines.push(`tinker: ${config.policy.tinker.baseUrl} reachable (a ${family} server; rl.lossFn ${config.rl.lossFn} is one of its losses)`);
  }
  if (options.data !== undefined) lines.push(`data: ${await checkDataFile(options.data, "data")} questions in ${options.data}`);
  if (options.corpus !== undefined) lines.push(`corpus: ${await checkDataFile(options.corpus, "corpus")} passages in ${options.corpus}`);
  const folder = join(config.run.dir, config.run.name);
  const configFile = join(folder, "config.yaml");
  const holder = existsSync(configFile) ? lockHolder(folder) : undefined;
  if (holder !== undefined) throw new ConfigError([`run.name: run folder ${folder} is in use by process ${holder} (another arl train/lab); wait for it or stop it (remove ${join(folder, ".lock")} only if that process is gone)`]);
  // The same decision RunDir makes (src/train/runFolder.ts): refuses system folders and folders arl did not write.
  const planned = planRunFolder(config.run.dir, config.run.name, { overwrite: options.overwrite, resume: options.resume === true && existsSync(configFile), resumable: true });
  if (options.resume && existsSync(configFile)) {
    checkSameConfig(configFile, config);
    const warnings: string[] = [];
    const sftDir = join(folder, "checkpoints", "sft");
    const sftProblem = checkpointProblem(sftDir);
    let from = "scratch (no whole warm-start checkpoint)";
    if (sftProblem === undefined) {
      checkCheckpointShape(sftDir, s);
      const rl = lastGoodCheckpoint(join(folder, "checkpoints"), (m) => warnings.push(m));
      if (rl) checkCheckpointShape(rl.dir, s);
      from = rl ? `${rl.dir} (RL step ${rl.state.step} of ${config.rl.steps})` : `the warm start (${sftDir})`;
    } else if (existsSync(sftDir)) {
      warnings.push(`checkpoint ${sftDir}: ${sftProblem}`);
    }
    lines.push(...warnings.map((w) => `warning: ${w}`), `resume: would continue ${folder} from ${from}`);
  } else {
    lines.push(`run folder: ${planned.describe}`);
  }
  return lines;
}
