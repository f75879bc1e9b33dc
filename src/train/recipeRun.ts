/**
 * The experiment on any env recipe (`src/env/recipe.ts`): build the recipe → warm start (SFT on its scripted
 * personas' demonstrations, in its real and counterfactual worlds) → RL (GRPO, `trainRlOn`) → the held-out summary:
 * the scripted careful persona ("prompt-driven" baseline, for scale), the warm start and the RL policy, each with
 * task success, grade, tool calls per task, invalid actions and the recipe's own breakdown (e.g. the travel env's
 * decisions (i)–(v) and recovery after a failed call). Same run folder, config, checkpoints, resume and progress
 * hooks as the search experiment; this file names no env.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { Rng } from "../core/rng.ts";
import type { Task, Trajectory } from "../core/types.ts";
import type { EnvRecipe, RecipeContext, RecipeInstance } from "../env/recipe.ts";
import { getProtocol } from "../protocol/index.ts";
import type { Protocol } from "../protocol/types.ts";
import { DetectorMonitor, type DetectorFiring } from "../reward/detectors.ts";
import { PolicyAgent, protocolStops, ScriptedAgent, type TurnGenerator } from "../rollout/agent.ts";
import { rolloutGroups, type RolloutLimits } from "../rollout/rollout.ts";
import { loadTokenizer } from "../policy/hf/index.ts";
import { WordTokenizer, type Tokenizer } from "../policy/tokenizer.ts";
import type { TrainingBackend } from "../policy/types.ts";
import { createBackend } from "./backends.ts";
import { ConfigError, embeddedMemoryProblem, embeddedMemoryShape, estimateEmbeddedMemory, type EmbeddedMemoryEstimate, type ExperimentConfig } from "./config.ts";
import { memoryLine } from "./memoryReport.ts";
import {
  checkReward,
  gptConfigOf,
  memoryWarning,
  openRun,
  silentReporter,
  slug,
  trainRlOn,
  resumeIntent,
  rlPolicyLabel,
  unusedAlgorithmWarning,
  warmStart,
  type PolicySetup,
  type Reporter,
} from "./experiment.ts";
import { mean } from "./metrics.ts";
import { lockHolder } from "./runDir.ts";
import { planRunFolder } from "./runFolder.ts";
import { NonFiniteGuard } from "./sft.ts";

/** Everything built from the config and a recipe before training. */
export interface RecipeSetup extends PolicySetup {
  recipe: EnvRecipe;
  instance: RecipeInstance;
  protocol: Protocol;
  stops: { stop: number[]; stopStrings: string[] };
}

/**
 * The recipe context of a config: seed, protocol (`env.protocol`, else the recipe's first), `env.options`,
 * `env.maxTurns`, `env.tools`, `env.faults` (when `rate > 0`).
 * @throws ConfigError when `env.protocol` is not one the recipe speaks
 */
export function recipeContext(config: ExperimentConfig, recipe: EnvRecipe): RecipeContext {
  if (recipe.protocols.length === 0) throw new ConfigError([`env.name: the ${recipe.name} env declares no protocols (EnvRecipe.protocols must name at least one of search-r1, hermes, react)`]);
  const protocol = config.env.protocol ?? recipe.protocols[0];
  if (!recipe.protocols.includes(protocol)) {
    throw new ConfigError([`env.protocol: the ${recipe.name} env speaks ${recipe.protocols.join(", ")}; got ${protocol}`]);
  }
  const { maxConcurrency, timeoutMs, retries, backoffMs, maxBackoffMs, maxOutputChars, maxResultBytes } = config.env.tools;
  return {
    seed: config.run.seed,
    protocol,
    options: config.env.options,
    maxTurns: config.env.maxTurns,
    call: { maxConcurrency, timeoutMs, retries, backoffMs, maxBackoffMs, maxOutputChars, maxResultBytes },
    ...(config.env.faults.rate > 0 ? { faults: config.env.faults } : {}),
  };
}

/**
 * Builds a recipe for a config: its instance, the tokenizer (the env's words plus the protocol's tags, or a real
 * model's `policy.tinker.tokenizer`), the protocol's stop conditions, budgets and the model shape.
 * @throws ConfigError on a bad reward or protocol; what `recipe.build` throws on bad `env.options`
 */
export function recipeSetup(config: ExperimentConfig, recipe: EnvRecipe): RecipeSetup {
  checkReward(config);
  const ctx = recipeContext(config, recipe);
  let instance: RecipeInstance;
  try {
    instance = recipe.build(ctx);
  } catch (e) {
    // A recipe names its bad option (`env.options.<field>: …`): a config error like any other (exit 2).
    const message = e instanceof Error ? e.message : String(e);
    if (/^env\.options\b/.test(message)) throw new ConfigError(message.split("; "));
    throw e;
  }
  for (const k of ["texts", "makeEnv", "scriptedTurn", "breakdown", "describe"] as const) {
    if (typeof instance?.[k] !== "function") throw new ConfigError([`env.name: the ${recipe.name} env's build() returned no ${k}() (see RecipeInstance in src/env/recipe.ts)`]);
  }
  if (!Object.hasOwn(instance.personas ?? {}, instance.baselinePersona)) {
    throw new ConfigError([`env.name: the ${recipe.name} env's baselinePersona "${instance.baselinePersona}" is not one of its personas (${Object.keys(instance.personas ?? {}).join(", ")})`]);
  }
  const protocol = getProtocol(ctx.protocol);
  const tokenizer: Tokenizer =
    config.policy.backend === "tinker" && config.policy.tinker.tokenizer
      ? loadTokenizer(config.policy.tinker.tokenizer)
      : WordTokenizer.fromTexts(instance.texts(), [...protocol.specialTokens, ...(instance.fixedPrompts?.() ?? [])]);
  const limits: RolloutLimits = { contextLength: config.policy.contextLength, maxObservationTokens: config.env.maxObservationTokens };
  const gpt = gptConfigOf(config, tokenizer.vocabSize);
  return { recipe, instance, protocol, tokenizer, limits, gpt, stops: protocolStops(tokenizer, protocol.stops) };
}

/** The held-out tasks evaluated: all of the recipe's test split, or the first `eval.maxTasks` of a seeded shuffle. */
export function recipeEvalTasks(s: RecipeSetup, config: ExperimentConfig): Task[] {
  const tasks = s.instance.test;
  if (config.eval.maxTasks === 0 || config.eval.maxTasks >= tasks.length) return tasks;
  return new Rng(config.run.seed + 11).shuffle(tasks).slice(0, config.eval.maxTasks);
}

/**
 * Checks that the embedded model fits jax-js's 4 GiB wasm heap. @returns the estimate, or undefined for tinker
 * @throws ConfigError naming the field that drives the estimate
 */
export function checkRecipeMemory(config: ExperimentConfig, s: RecipeSetup): EmbeddedMemoryEstimate | undefined {
  if (config.policy.backend !== "embedded") return undefined;
  const rows = recipeEvalTasks(s, config).length;
  const problem = embeddedMemoryProblem(config, s.tokenizer.vocabSize, rows);
  if (problem !== undefined) throw new ConfigError([problem]);
  return estimateEmbeddedMemory(embeddedMemoryShape(config, s.tokenizer.vocabSize, rows));
}

/**
 * Warm-start demonstrations: `sft.demosPerTask` episodes per training task by the recipe's persona mixture (a
 * persona drawn per episode by weight), in the real world and `sft.counterfactualWorlds` counterfactual copies
 * (config fault injection off; the env's own failures stay, so recovery is demonstrated).
 * @returns trajectories with loss mask 1 on the personas' tokens
 */
export async function recipeDemos(s: RecipeSetup, config: ExperimentConfig): Promise<Trajectory[]> {
  const { instance } = s;
  const names = Object.keys(instance.personas).sort();
  const weights = names.map((n) => instance.personas[n]);
  const total = weights.reduce((a, b) => a + b, 0);
  if (!(total > 0)) throw new ConfigError([`the ${s.recipe.name} env's persona weights sum to ${total}; expected > 0`]);
  const pick = (episodeSeed: number): string => {
    let u = new Rng(episodeSeed ^ 0x2545f491).next() * total;
    for (let i = 0; i < names.length; i++) if ((u -= weights[i]) < 0) return names[i];
    return names[names.length - 1];
  };
  // One persona per episode: the rollout gives turn t the seed (episode seed + t).
  const mixture = new ScriptedAgent(s.tokenizer, (ctx) => instance.scriptedTurn(pick(ctx.seed - ctx.turnIndex), ctx));
  const demos: Trajectory[] = [];
  for (let k = 0; k <= config.sft.counterfactualWorlds; k++) {
    const groups = await rolloutGroups(instance.train, instance.makeEnv(k, { faults: false }), mixture, s.tokenizer, s.limits, {
      groupSize: config.sft.demosPerTask,
      seed: config.run.seed + 100 * k,
    });
    demos.push(...groups.flatMap((g) => g.trajectories));
  }
  return demos;
}

/**
 * A warning when the word vocabulary misses words the demonstrations use (their tokens became `[UNK]`: the
 * recipe's `texts()` does not cover everything its env shows or its personas write), or undefined.
 */
export function unknownTokenWarning(s: RecipeSetup, demos: readonly Trajectory[]): string | undefined {
  if (!(s.tokenizer instanceof WordTokenizer)) return undefined;
  const unk = s.tokenizer.id("[UNK]");
  let n = 0;
  let total = 0;
  let example: string | undefined;
  for (const d of demos) {
    total += d.tokens.length;
    const at = d.tokens.indexOf(unk);
    if (at < 0) continue;
    n += d.tokens.filter((t) => t === unk).length;
    example ??= s.tokenizer.decode(d.tokens.slice(Math.max(0, at - 6), at + 6));
  }
  if (n === 0) return undefined;
  return `${n} of ${total} demonstration tokens are [UNK]: the ${s.recipe.name} env's texts() misses words it shows or its personas write (e.g. "${example}")`;
}

/** A rate over the episodes where a breakdown key arose: `rate` (mean value) and `n` (episodes with the key). */
export interface BreakdownCell {
  rate: number;
  n: number;
}

/** One row of a recipe summary: a policy's held-out results. */
export interface RecipeRow {
  policy: string;
  /** Tasks evaluated. */
  n: number;
  /** Share of tasks whose grade score is 1 (the env's task success). */
  success: number;
  /** Mean grade score in [0, 1]. */
  score: number;
  /** Tool calls per task (mean). */
  calls: number;
  /** Invalid actions per turn. */
  invalidRate: number;
  /** Share of tasks that ended without a final answer. */
  noAnswer: number;
  /** The recipe's breakdown (`RecipeInstance.breakdown`) per key. */
  breakdown: Record<string, BreakdownCell>;
}

/** The recipe experiment's summary (also `summary.json`). */
export interface RecipeSummary {
  run: string;
  env: string;
  protocol: string;
  split: string;
  rows: RecipeRow[];
  /** Labels of the breakdown keys, in table order. */
  breakdownLabels: Record<string, string>;
  detectors: DetectorFiring[];
}

/** Summarises finished episodes into a row (see `RecipeRow`). */
export function summarizeRecipe(policy: string, trajs: readonly Trajectory[], instance: RecipeInstance): RecipeRow {
  const turns = trajs.reduce((a, t) => a + t.turns.length, 0);
  const cells: Record<string, number[]> = {};
  for (const t of trajs) for (const [k, v] of Object.entries(instance.breakdown(t))) (cells[k] ??= []).push(v);
  const breakdown: Record<string, BreakdownCell> = {};
  for (const k of Object.keys(cells).sort()) breakdown[k] = { rate: mean(cells[k]), n: cells[k].length };
  return {
    policy,
    n: trajs.length,
    success: mean(trajs.map((t) => (t.grade !== undefined && t.grade.score >= 1 ? 1 : 0))),
    score: mean(trajs.map((t) => t.grade?.score ?? 0)),
    calls: mean(trajs.map((t) => Object.values(t.toolCalls ?? {}).reduce((a, b) => a + b, 0))),
    invalidRate: turns === 0 ? 0 : trajs.reduce((a, t) => a + t.invalidActions, 0) / turns,
    noAnswer: mean(trajs.map((t) => (t.answer === null ? 1 : 0))),
    breakdown,
  };
}

/**
 * Evaluates a turn generator on `tasks` (one episode each, in world 0, seed `run.seed + 7`) and summarises it.
 * @throws Error naming the episodes that failed (a broken env or sampler)
 */
export async function evalRecipeRow(
  label: string,
  agent: TurnGenerator,
  tasks: readonly Task[],
  s: RecipeSetup,
  config: ExperimentConfig,
  reporter: Reporter,
): Promise<{ row: RecipeRow; trajectories: Trajectory[] }> {
  const bar = reporter.bar(`eval ${label}`, tasks.length);
  let done = 0;
  const groups = await rolloutGroups(tasks, s.instance.makeEnv(0), agent, s.tokenizer, s.limits, {
    groupSize: 1,
    seed: config.run.seed + 7,
    onEpisode: () => bar.update(++done),
  });
  bar.stop();
  const trajectories = groups.map((g) => g.trajectories[0]);
  return { row: summarizeRecipe(label, trajectories, s.instance), trajectories };
}

/** The model as a turn generator at evaluation temperature. */
export function policyAgent(backend: TrainingBackend, s: RecipeSetup, config: ExperimentConfig): PolicyAgent {
  return new PolicyAgent(backend.samplingClient(), s.tokenizer, {
    temperature: config.eval.temperature,
    maxTokensPerTurn: config.rl.maxTokensPerTurn,
    ...s.stops,
  });
}

/**
 * Runs the whole experiment on a recipe: SFT on persona demonstrations, the careful-persona and warm-start rows,
 * RL, the RL row; writes the run folder (config, metrics, timings, samples, checkpoints, summary). `resume` as
 * `runExperiment`: continues from the last good checkpoint, and `metrics.jsonl` ends byte-identical to an
 * uninterrupted run's.
 * @throws ConfigError on a bad config (before the run folder is touched), a different config under `resume`, or a
 *   checkpoint of another shape; Error on a broken trajectory invariant
 */
export async function runRecipeExperiment(
  config: ExperimentConfig,
  recipe: EnvRecipe,
  reporter: Reporter = silentReporter,
  options: { overwrite: boolean; resume?: boolean } = { overwrite: false },
): Promise<RecipeSummary> {
  checkReward(config);
  const resuming = resumeIntent(config, reporter, options);
  const s = recipeSetup(config, recipe);
  const warning = memoryWarning(checkRecipeMemory(config, s));
  if (warning !== undefined) reporter.log(`warning: ${warning}`);
  const unusedWarning = unusedAlgorithmWarning(config);
  if (unusedWarning !== undefined) reporter.log(`warning: ${unusedWarning}`);
  const { run, plan } = openRun(config, s, resuming, reporter, options);
  run.writeConfig(config);
  reporter.log(`env ${recipe.name} (${s.protocol.name}): ${s.instance.describe()}; ${s.instance.train.length} train / ${s.instance.test.length} test tasks; vocabulary ${s.tokenizer.vocabSize} tokens`);
  const demos = await recipeDemos(s, config);
  reporter.log(`warm start: ${demos.length} demonstrations`);
  const unknown = unknownTokenWarning(s, demos);
  if (unknown !== undefined) reporter.log(`warning: ${unknown}`);
  const backend = plan.sft ? await createBackend(config, s.gpt, run.checkpoint("sft")) : await warmStart(s, config, demos, run, reporter);
  const tasks = recipeEvalTasks(s, config);
  const rows: Array<{ row: RecipeRow; trajectories: Trajectory[] }> = [];
  const careful = s.instance.baselinePersona;
  rows.push(await evalRecipeRow(`Prompt-driven (${careful}, scripted)`, new ScriptedAgent(s.tokenizer, (ctx) => s.instance.scriptedTurn(careful, ctx)), tasks, s, config, reporter));
  rows.push(await evalRecipeRow("Warm start (SFT)", policyAgent(backend, s, config), tasks, s, config, reporter));
  const worlds = Array.from({ length: config.rl.counterfactualWorlds + 1 }, (_, k) => ({ train: s.instance.train, makeEnv: s.instance.makeEnv(k) }));
  const rl = await trainRlOn(backend, worlds, [], s, config, run, reporter, run.checkpoint("sft"), rlPolicyLabel(config.rl), { resume: plan.rl });
  rows.push(await evalRecipeRow(rlPolicyLabel(config.rl), policyAgent(backend, s, config), tasks, s, config, reporter));
  const summary: RecipeSummary = {
    run: run.path,
    env: recipe.name,
    protocol: s.protocol.name,
    split: "test",
    rows: rows.map((r) => r.row),
    breakdownLabels: s.instance.breakdownLabels,
    detectors: rl.detectors.firing(),
  };
  run.writeSummary(summary);
  for (const r of rows) run.writeSamples(`eval-${slug(r.row.policy)}`, r.trajectories);
  return summary;
}

/**
 * `arl train --env NAME --dry-run` for a recipe: builds it, checks the protocol, memory, demonstrations and the run
 * folder; trains and writes nothing. @returns summary lines @throws ConfigError naming the field
 */
export async function dryRunRecipe(config: ExperimentConfig, recipe: EnvRecipe, options: { resume?: boolean; overwrite?: boolean } = {}): Promise<string[]> {
  const s = recipeSetup(config, recipe);
  const lines = [`env ${recipe.name} (${s.protocol.name}): ${s.instance.describe()}; ${s.instance.train.length} train / ${s.instance.test.length} test tasks (${recipeEvalTasks(s, config).length} evaluated)`];
  if (s.instance.train.length === 0 || s.instance.test.length === 0) throw new ConfigError([`env.options: the ${recipe.name} env built ${s.instance.train.length} train / ${s.instance.test.length} test tasks; both must be ≥ 1`]);
  lines.push(`tokenizer: ${s.tokenizer.vocabSize} tokens; model ${config.policy.nLayers}×${config.policy.dModel}, context ${config.policy.contextLength}`);
  const mem = checkRecipeMemory(config, s);
  if (mem !== undefined) {
    // The figure the run warns with (./memoryReport.ts), and the warning itself when it is past the limit.
    lines.push(memoryLine(mem));
    const warning = memoryWarning(mem);
    if (warning !== undefined) lines.push(`warning: ${warning}`);
  }
  if (config.sft.steps > 0) {
    const demos = await recipeDemos(s, config);
    lines.push(`warm start: ${demos.length} demonstrations, ${config.sft.steps} SFT steps`);
    const unknown = unknownTokenWarning(s, demos);
    if (unknown !== undefined) lines.push(`warning: ${unknown}`);
  }
  lines.push(`RL: ${config.rl.steps} steps × ${config.rl.tasksPerStep} tasks × ${config.rl.groupSize} episodes`);
  const unusedWarning = unusedAlgorithmWarning(config);
  if (unusedWarning !== undefined) lines.push(`warning: ${unusedWarning}`);
  const folder = join(config.run.dir, config.run.name);
  const holder = existsSync(join(folder, "config.yaml")) ? lockHolder(folder) : undefined;
  if (holder !== undefined) throw new ConfigError([`run.name: run folder ${folder} is in use by process ${holder}`]);
  const resuming = options.resume === true && existsSync(join(folder, "config.yaml"));
  lines.push(`run folder: ${planRunFolder(config.run.dir, config.run.name, { overwrite: options.overwrite, resume: resuming, resumable: true }).describe}`); // RunDir's decision
  return lines;
}

export { DetectorMonitor, NonFiniteGuard };
