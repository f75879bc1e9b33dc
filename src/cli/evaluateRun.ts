/**
 * What `arl eval` and `arl rollout` do (their flags are registered in `evaluate.ts`, which loads this file only when
 * one of them runs): a checkpoint (or a scripted persona, or prompt-driven agents on an OpenAI-compatible
 * server) on an env's held-out or training split — for the default QA env also on a real QA file with a corpus —
 * summarised in a table, or printed episode by episode.
 */
import { dirname, join } from "node:path";
import { existsSync } from "node:fs";
import type { Task } from "../core/types.ts";
import { DEFAULT_ENV, getRecipe, searchEnvFactory, searchOptions } from "../envs/index.ts";
import { BM25Index } from "../retrieval/bm25.ts";
import { loadCorpus, loadQA } from "../retrieval/corpus.ts";
import { computeReward } from "../reward/compose.ts";
import { rewardConfigOf } from "../reward/config.ts";
import { PolicyAgent, ScriptedAgent, protocolStops, type TurnGenerator } from "../rollout/agent.ts";
import { rolloutGroups } from "../rollout/rollout.ts";
import { loadPolicy } from "../train/checkpoint.ts";
import { ConfigError, resolveConfig, type ExperimentConfig } from "../train/config.ts";
import { applyOverrides, readConfigFile } from "../train/configFile.ts";
import { evaluate, type EvalMode, type EvalRow } from "../train/eval.ts";
import { evalTasks, recipeContext, setupExperiment, type Setup } from "../train/setup.ts";
import { evalRow, policyAgent, type SummaryRow } from "../train/summary.ts";
import { envArg, loadConfig, positiveInt } from "./args.ts";
import { consoleReporter, formatTrajectory, recipeTable, summaryTable } from "./format.ts";

/** The tasks and env of `eval`/`rollout` for a recipe with a corpus (QA): its world, or a real QA file with a corpus. */
function evalInputs(
  opts: { data?: string; corpus?: string; split?: string; limit?: string },
  config: ExperimentConfig,
  s: Setup,
) {
  if (opts.corpus && !opts.data) throw new ConfigError(["--corpus: only used with --data (a QA file to evaluate on)"]);
  if (opts.data) {
    if (!opts.corpus) throw new ConfigError(["--corpus: required with --data (a wiki-18 JSONL file)"]);
    return (async () => {
      const passages = await loadCorpus(opts.corpus!);
      const tasks = await loadQA(opts.data!, { limit: opts.limit ? positiveInt("--limit", opts.limit) : undefined });
      const ctx = recipeContext(config, s.recipe);
      const settings = { topK: searchOptions(config.env.options).topK, maxTurns: ctx.maxTurns, tools: ctx.call };
      return { tasks, makeEnv: searchEnvFactory(new BM25Index([...passages]), ctx.faults !== undefined ? { ...settings, faults: ctx.faults } : settings) };
    })();
  }
  const split = opts.split ?? "test";
  if (split !== "test" && split !== "train") throw new ConfigError([`--split: expected one of "train", "test", got ${JSON.stringify(split)}`]);
  let tasks: Task[] = split === "test" ? evalTasks(s, config) : s.instance.train;
  if (opts.limit) tasks = tasks.slice(0, positiveInt("--limit", opts.limit));
  return Promise.resolve({ tasks, makeEnv: s.instance.makeEnv(0) });
}

/**
 * A checkpoint's policy as a turn generator at `temperature`, with its tokenizer and context window; `stops` are
 * the env protocol's (default Search-R1's tags).
 * @throws Error from `loadPolicy` (a missing or corrupt checkpoint)
 */
async function checkpointAgent(checkpoint: string, config: ExperimentConfig, temperature: number, stops?: readonly string[]) {
  const policy = await loadPolicy(checkpoint, { sampler: config.policy.sampler });
  const tokenizer = policy.tokenizer;
  const agent: TurnGenerator = new PolicyAgent(policy.backend.samplingClient(), tokenizer, {
    temperature,
    maxTokensPerTurn: config.rl.maxTokensPerTurn,
    ...(stops === undefined ? protocolStops(tokenizer) : protocolStops(tokenizer, stops)),
  });
  return { agent, tokenizer, contextLength: policy.gpt.contextLength };
}

/** The run config next to a checkpoint (`runs/<name>/config.yaml`), else defaults. */
function configForCheckpoint(checkpoint: string, overrides: Record<string, string>): ExperimentConfig {
  const file = join(dirname(dirname(checkpoint)), "config.yaml");
  return resolveConfig(applyOverrides(existsSync(file) ? readConfigFile(file) : {}, overrides));
}

/** `arl eval`'s flags (commander's parsed options). */
export type EvalOptions = { checkpoint?: string; split?: string; modes: string; data?: string; corpus?: string; limit?: string; policy: string[]; baseUrl?: string; apiKey?: string; agent: string; maxTokens: string; concurrency: string; env?: string };

/** `arl rollout`'s flags (commander's parsed options). */
export type RolloutOptions = { checkpoint?: string; persona?: string; n: string; split: string; temperature: string; data?: string; corpus?: string; env?: string };

/**
 * `arl eval`: a checkpoint, scripted baselines and/or prompt-driven agents on an env's split or a real QA file.
 * @param overrides the dotted config flags
 * @throws ConfigError naming the flag on a bad combination or value
 */
export async function runEval(opts: EvalOptions, overrides: Record<string, string>): Promise<void> {
  if (!opts.checkpoint && opts.policy.length === 0 && opts.env === undefined) {
    throw new ConfigError(["--checkpoint or --policy: at least one is required (e.g. --checkpoint runs/default/checkpoints/final, --policy openai:MODEL --base-url URL)"]);
  }
  const envName = await envArg(opts.env);
  const recipeConfig = opts.checkpoint ? configForCheckpoint(opts.checkpoint, overrides) : loadConfig(undefined, false, overrides, envName);
  const recipe = getRecipe(recipeConfig.env.name);
  if (recipe.name !== DEFAULT_ENV) {
    if (opts.policy.length > 0 || opts.data !== undefined) throw new ConfigError([`--policy/--data: only for the search env (this is ${recipeConfig.env.name})`]);
    const config = recipeConfig;
    const s = setupExperiment(config, recipe);
    const split = opts.split ?? "test";
    if (split !== "test" && split !== "train") throw new ConfigError([`--split: expected one of "train", "test", got ${JSON.stringify(split)}`]);
    let tasks = split === "test" ? evalTasks(s, config) : s.instance.train;
    if (opts.limit) tasks = tasks.slice(0, positiveInt("--limit", opts.limit));
    const reporter = consoleReporter();
    const careful = s.instance.baselinePersona;
    const evaluated = [await evalRow(`Prompt-driven (${careful}, scripted)`, new ScriptedAgent(s.tokenizer, (ctx) => s.instance.scriptedTurn(careful, ctx)), tasks, { setup: s, config, reporter })];
    if (opts.checkpoint) {
      const policy = await loadPolicy(opts.checkpoint, { sampler: config.policy.sampler });
      const ps = { ...s, tokenizer: policy.tokenizer, stops: protocolStops(policy.tokenizer, s.protocol.stops) };
      evaluated.push(await evalRow("agent (checkpoint)", policyAgent(policy.backend, ps, config), tasks, { setup: ps, config, reporter }));
    }
    const rows: SummaryRow[] = evaluated.map((e) => e.row);
    const graded = evaluated.some((e) => e.trajectories.some((t) => t.grade !== undefined));
    console.log(`\n${tasks.length} requests of env ${config.env.name} (${s.protocol.name}, split ${split}):`);
    console.log(recipeTable({ rows, breakdownLabels: s.instance.breakdownLabels, graded }));
    return;
  }
  const { checkOpenAIEvalFlags, openAIEvalRows } = await import("./evalOpenai.ts");
  const openai = opts.policy.length > 0 ? checkOpenAIEvalFlags(opts) : null;
  const config = recipeConfig;
  const qa = setupExperiment(config, recipe);
  const policy = opts.checkpoint ? await loadPolicy(opts.checkpoint, { sampler: config.policy.sampler }) : null;
  const { tasks, makeEnv } = await evalInputs(opts, config, qa);
  const rows: EvalRow[] = [];
  const reporter = consoleReporter();
  if (policy) {
    const limits = { contextLength: policy.gpt.contextLength, maxObservationTokens: config.env.maxObservationTokens };
    for (const mode of opts.modes.split(",").map((m) => m.trim())) {
      if (!["agent", "direct", "rag"].includes(mode)) throw new ConfigError([`--modes: expected agent, direct or rag, got ${JSON.stringify(mode)}`]);
      const bar = reporter.bar(`eval ${mode}`, tasks.length);
      let n = 0;
      const { trajectories: _t, ...result } = await evaluate(tasks, { sampler: policy.backend.samplingClient(), tokenizer: policy.tokenizer, makeEnv, limits }, {
        mode: mode as EvalMode,
        temperature: config.eval.temperature,
        maxTokensPerTurn: config.rl.maxTokensPerTurn,
        seed: config.run.seed + 7,
        onEpisode: () => bar.update(++n),
      });
      bar.stop();
      rows.push({ policy: mode === "agent" ? "agent (checkpoint)" : mode === "direct" ? "Direct" : "RAG", result });
    }
  }
  if (openai) {
    // Token accounting of text-level agents uses the checkpoint's tokenizer, else the run world's.
    const tokenizer = policy?.tokenizer ?? qa.tokenizer;
    rows.push(...(await openAIEvalRows(openai, tasks, { makeEnv, tokenizer }, { temperature: config.eval.temperature, seed: config.run.seed + 7 }, reporter)));
  }
  console.log(`\n${tasks.length} questions from ${opts.data ?? `the built-in world (${opts.split})`}:`);
  console.log(summaryTable(rows));
}

/**
 * `arl rollout`: a few episodes of a checkpoint or a scripted persona, printed readably.
 * @param overrides the dotted config flags
 * @throws ConfigError naming the flag on a bad value
 */
export async function runRollout(opts: RolloutOptions, overrides: Record<string, string>): Promise<void> {
  const envName = await envArg(opts.env); // registers a file's recipe before a checkpoint's config names it
  const config = opts.checkpoint ? configForCheckpoint(opts.checkpoint, overrides) : loadConfig(undefined, false, overrides, envName);
  const n = positiveInt("-n", opts.n);
  const temperature = Number(opts.temperature);
  if (!(temperature >= 0)) throw new ConfigError([`--temperature: expected a number ≥ 0, got ${JSON.stringify(opts.temperature)}`]);
  const s = setupExperiment(config, getRecipe(config.env.name));
  if (s.recipe.name !== DEFAULT_ENV) {
    if (opts.data !== undefined || opts.corpus !== undefined) throw new ConfigError([`--data/--corpus: only for the search env (this is ${config.env.name})`]);
    const split = opts.split;
    if (split !== "test" && split !== "train") throw new ConfigError([`--split: expected one of "train", "test", got ${JSON.stringify(split)}`]);
    const tasks = (split === "test" ? evalTasks(s, config) : s.instance.train).slice(0, n);
    let agent: TurnGenerator;
    let tokenizer = s.tokenizer;
    let contextLength = config.policy.contextLength;
    if (opts.checkpoint) {
      if (opts.persona !== undefined) throw new ConfigError(["--persona: a scripted persona acts only without --checkpoint"]);
      ({ agent, tokenizer, contextLength } = await checkpointAgent(opts.checkpoint, config, temperature, s.protocol.stops));
    } else {
      const persona = opts.persona ?? s.instance.baselinePersona;
      if (!Object.hasOwn(s.instance.personas, persona)) throw new ConfigError([`--persona: expected one of ${Object.keys(s.instance.personas).join(", ")}, got ${JSON.stringify(persona)}`]);
      agent = new ScriptedAgent(tokenizer, (ctx) => s.instance.scriptedTurn(persona, ctx));
    }
    const groups = await rolloutGroups(tasks, { makeEnv: s.instance.makeEnv(0), agent, tokenizer, limits: { contextLength, maxObservationTokens: config.env.maxObservationTokens } }, { groupSize: 1, seed: config.run.seed });
    for (const g of groups) {
      const t = g.trajectories[0];
      t.reward = await computeReward(t, rewardConfigOf(config));
      console.log(formatTrajectory(t, { toolCalls: true }) + (t.grade ? `\ngrade: ${t.grade.score} ${JSON.stringify(t.grade.parts)}${t.grade.explanation ? ` — ${t.grade.explanation}` : ""}` : "") + "\n");
    }
    return;
  }
  const { tasks, makeEnv } = await evalInputs({ ...opts, limit: opts.n }, config, s);
  let agent: TurnGenerator;
  let tokenizer;
  let contextLength = config.policy.contextLength;
  if (opts.checkpoint) {
    if (opts.persona !== undefined) throw new ConfigError(["--persona: a scripted persona acts only without --checkpoint"]);
    ({ agent, tokenizer, contextLength } = await checkpointAgent(opts.checkpoint, config, temperature));
  } else {
    const persona = opts.persona ?? s.instance.baselinePersona;
    if (!Object.hasOwn(s.instance.personas, persona)) throw new ConfigError([`--persona: expected one of ${Object.keys(s.instance.personas).join(", ")}, got ${JSON.stringify(persona)}`]);
    tokenizer = s.tokenizer;
    agent = new ScriptedAgent(tokenizer, (ctx) => s.instance.scriptedTurn(persona, ctx));
  }
  const groups = await rolloutGroups(tasks, { makeEnv, agent, tokenizer, limits: { contextLength, maxObservationTokens: config.env.maxObservationTokens } }, {
    groupSize: 1,
    seed: config.run.seed,
  });
  for (const g of groups) {
    const t = g.trajectories[0];
    t.reward = await computeReward(t, rewardConfigOf(config));
    console.log(formatTrajectory(t) + "\n");
  }
}
