/**
 * `arl` — the command line. One subcommand per job: `train`, `lab`, `eval`, `rollout`, `search`, `serve`, `export`. Config fields can be
 * overridden by flags named by their path (`--rl.groupSize 8`, `--policy.dModel=64`).
 */
import { dirname, join } from "node:path";
import { existsSync } from "node:fs";
import { Command, CommanderError } from "commander";
import { loadCorpus, loadQA } from "../retrieval/corpus.ts";
import { BM25Index } from "../retrieval/bm25.ts";
import { ScriptedAgent, PolicyAgent, protocolStops, type TurnGenerator } from "../rollout/agent.ts";
import { rolloutGroups } from "../rollout/rollout.ts";
import { computeReward } from "../reward/compose.ts";
import { personaTurn, PERSONAS, type Persona } from "../envs/search/scripted.ts";
import { valuesOf, type CountryAttribute } from "../envs/search/world.ts";
import type { Task } from "../core/types.ts";
import {
  ConfigError,
  SMOKE_OVERRIDES,
  applyOverrides,
  readConfigFile,
  resolveConfig,
  rewardConfigOf,
  type ExperimentConfig,
} from "../train/config.ts";
import { dryRun, evalTasks, runExperiment, searchEnvFor, setup, type SummaryRow } from "../train/experiment.ts";
import { evaluate, type EvalMode } from "../train/eval.ts";
import { loadPolicy } from "../train/checkpoint.ts";
import { consoleReporter, formatTrajectory, labTable, recipeTable, summaryTable } from "./format.ts";
import { ALGORITHM_DESIGNS, BUILTIN_DESIGNS, designConfigs, resolveDesigns } from "../lab/designs.ts";
import { QUICK_LAB_OVERRIDES, runEnvLab, runLab } from "../lab/lab.ts";
import { envLabConfig, envLabText } from "../lab/cli.ts";
import { REWARD_PRESETS } from "../reward/presets.ts";
import { TERM_LIST } from "../reward/terms.ts";
import { registerServe } from "./serve.ts";
import type { EnvRecipe } from "../env/recipe.ts";
import { ENV_RECIPES, getRecipe, isRecipe, registerRecipe } from "../envs/index.ts";
import { pathToFileURL } from "node:url";
import { resolve as resolvePath } from "node:path";
import { envNameOf, withDefaults, withRecipeDefaults } from "../run/train.ts";
import { AGENT_DEFAULTS } from "../train/agentDefaults.ts";
import { dryRunRecipe, evalRecipeRow, policyAgent, recipeContext, recipeEvalTasks, recipeSetup, runRecipeExperiment, type RecipeRow } from "../train/recipeRun.ts";
import { registerExport } from "./export.ts";
import type { AgentFunction } from "../train/agentRollouts.ts";
import { registerView } from "./view.ts";
import { installInterruptHandler } from "./interrupt.ts";

/** Splits `--a.b value` / `--a.b=value` pairs (dotted names = config paths) out of argv. */
export function extractOverrides(args: readonly string[]): { overrides: Record<string, string>; rest: string[] } {
  const overrides: Record<string, string> = {};
  const rest: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const m = /^--([A-Za-z]+(?:\.[A-Za-z0-9_-]+)+)(?:=(.*))?$/.exec(args[i]);
    if (!m) {
      rest.push(args[i]);
      continue;
    }
    if (m[2] !== undefined) overrides[m[1]] = m[2];
    else if (i + 1 < args.length) overrides[m[1]] = args[++i];
    else throw new ConfigError([`--${m[1]}: missing value`]);
  }
  return { overrides, rest };
}

/**
 * Loads the config file (if any), picks the env (`--env`, else `--env.name`, else the file's `env.name`, else
 * search), applies that env's defaults under the file, the smoke preset (the search one, or the env's own) over it,
 * and the flag overrides last; validates.
 * @throws ConfigError naming the field (an unknown env: `env.name`, with the allowed names)
 */
function loadConfig(file: string | undefined, smoke: boolean, overrides: Record<string, string>, envName?: string, agent = false): ExperimentConfig {
  let raw: Record<string, unknown> = file ? readConfigFile(file) : {};
  if (agent) {
    // `--agent`: its measured defaults under the file; `--smoke` keeps the context an agent's calls need.
    raw = withDefaults(raw, AGENT_DEFAULTS);
    if (envName !== undefined) raw = applyOverrides(raw, { "env.name": envName });
    if (smoke) raw = applyOverrides(raw, { ...SMOKE_OVERRIDES, "run.name": "smoke-agent", "policy.contextLength": AGENT_DEFAULTS["policy.contextLength"]!, "policy.lengthBucket": "64" });
    return resolveConfig(applyOverrides(raw, overrides));
  }
  const name = envName ?? overrides["env.name"] ?? envNameOf(raw);
  let recipe: EnvRecipe;
  try {
    recipe = getRecipe(name);
  } catch (e) {
    throw new ConfigError([`${envName !== undefined ? "--env" : "env.name"}: ${(e as Error).message.replace(/^env\.name: /, "")}`]);
  }
  if (recipe.name === "search") {
    if (smoke) raw = applyOverrides(raw, { "run.name": "smoke", ...SMOKE_OVERRIDES });
    if (envName !== undefined) raw = applyOverrides(raw, { "env.name": envName });
  } else {
    raw = withRecipeDefaults(raw, recipe, false);
    if (smoke) raw = applyOverrides(raw, { "run.name": `smoke-${recipe.name}`, ...recipe.smoke });
    else if (file === undefined && overrides["run.name"] === undefined) raw = applyOverrides(raw, { "run.name": recipe.name });
  }
  return resolveConfig(applyOverrides(raw, overrides));
}

const program = new Command()
  .name("arl")
  .description("agentic-rl: train tool-using LLM agents with reinforcement learning (Search-R1 setting)")
  .showHelpAfterError()
  .exitOverride();

/** Parses a positive integer flag. @throws ConfigError naming the flag */
function positiveInt(flag: string, value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value.trim()) || !Number.isInteger(n) || n <= 0) {
    throw new ConfigError([`${flag}: expected a positive integer, got ${JSON.stringify(value)}`]);
  }
  return n;
}

let overrides: Record<string, string> = {};

/**
 * `--agent-module <file>`: imports a file (TypeScript through tsx) whose default export — else its export named
 * `agent` — is an agent function `(ctx: AgentContext) => Promise<{answer?} | void>`, run in this process per rollout.
 * @throws ConfigError naming `--agent-module` when the file is missing or exports no function
 */
async function agentModuleArg(arg: string): Promise<AgentFunction> {
  const file = resolvePath(arg);
  if (!existsSync(file)) throw new ConfigError([`--agent-module: no such file ${file} (expected a .ts/.js file whose default export is an agent function)`]);
  if (/\.[cm]?ts$/.test(file)) (await import("tsx/esm/api")).register();
  const mod = (await import(pathToFileURL(file).href)) as Record<string, unknown>;
  const fn = typeof mod.default === "function" ? mod.default : mod.agent;
  if (typeof fn !== "function") throw new ConfigError([`--agent-module: ${file} exports no agent function (a default export, or an export named agent, taking the rollout's context: see examples/agents/README.md)`]);
  return fn as AgentFunction;
}

/** How `--env` takes an env, for every command's help (the loader is `envArg` below). */
const ENV_ARG_HELP =
  "a built-in name (`arl envs` lists them) or a .ts/.js file whose default export — else its first exported " +
  "EnvRecipe ({ name, protocols, build, … }) — is the recipe (examples/own-env/weather.ts; .ts runs through tsx)";

/**
 * `--env` given as a file (`./my-env.ts`, `envs/x.js`): imports it (TypeScript through tsx, which agentic-rl depends
 * on), registers its recipe (the default export, else the first exported recipe) and returns the recipe's name; an
 * env name is returned as it is.
 * @throws ConfigError naming `--env` when the file is missing or exports no recipe
 */
async function envArg(arg: string | undefined): Promise<string | undefined> {
  if (arg === undefined || !/[\/\\]|\.[cm]?[jt]s$/.test(arg)) return arg;
  const file = resolvePath(arg);
  if (!existsSync(file)) throw new ConfigError([`--env: no such file ${file} (expected an env name from \`arl envs\` or a file exporting an EnvRecipe)`]);
  if (/\.[cm]?ts$/.test(file)) (await import("tsx/esm/api")).register();
  const mod = (await import(pathToFileURL(file).href)) as Record<string, unknown>;
  const recipe = isRecipe(mod.default) ? mod.default : Object.values(mod).find(isRecipe);
  if (recipe === undefined) throw new ConfigError([`--env: ${file} exports no env recipe (an object with name, protocols and build; see examples/own-env)`]);
  try {
    registerRecipe(recipe);
  } catch (e) {
    throw new ConfigError([`--env: ${(e as Error).message}`]);
  }
  return recipe.name;
}

program
  .command("train")
  .description("Warm start (SFT) + RL (GRPO by default; rl.advantage, rl.lossFn) on the built-in world, then the held-out summary table")
  .option("-c, --config <file>", "YAML or JSON config (sections: run, env, policy, sft, rl, reward, eval, detectors, lab)")
  .option("--env <name>", `env recipe to train on (default search; its defaults apply under --config): ${ENV_ARG_HELP}`)
  .option("--smoke", "tiny model and budgets (seconds; for tests); its presets apply over --config, dotted flags last")
  .option("--print-config", "print the resolved config and exit")
  .option("--overwrite", "replace an existing run folder of the same name")
  .option("--resume", "continue the run in the folder (same --config and flags) from its last good checkpoint; metrics end identical to an uninterrupted run (with --agent: the same rollouts, tokens and rewards; float metrics to ~1e-6)")
  .option("--dry-run", "validate config, reward, tokenizer, world, Tinker server and (with --resume) checkpoints; train nothing, write nothing")
  .option("--agent-warm-start <checkpoint>", "with --agent: start from this checkpoint (e.g. an earlier --agent run's checkpoints/sft) instead of a new warm start")
  .option("--agent-deadline <ms>", "with --agent: a rollout's deadline; past it the agent is killed and the rollout dropped (default 120000)")
  .option("--agent-tool <name:arg>", "with --agent: your agent's search tool and its query argument, which the warm start's teacher calls (default search:query, the example agents')")
  .option("--agent-module <file>", "train your own agent given as a function in this process: a .ts/.js file whose default export takes the rollout's context ({baseURL, apiKey, task, env, rewardURL, signal}) and returns {answer}")
  .option("--agent <command>", "train your own agent (a shell command using the openai client or the AI SDK; env OPENAI_BASE_URL, ARL_RETRIEVAL_URL; task JSON on stdin; see examples/agents/README.md) on the search env's tasks")
  .addHelpText("after", "\nAny config field can be set with its path, e.g. --rl.groupSize 8 --policy.dModel=64")
  .action(async (opts: { config?: string; env?: string; smoke?: boolean; printConfig?: boolean; overwrite?: boolean; resume?: boolean; dryRun?: boolean; agent?: string; agentModule?: string; agentDeadline?: string; agentWarmStart?: string; agentTool?: string }) => {
    if (!opts.printConfig && !opts.dryRun) installInterruptHandler("train"); // Ctrl-C: what stopped, --resume, lock released
    const agentRun = opts.agent !== undefined || opts.agentModule !== undefined;
    const config = loadConfig(opts.config, opts.smoke === true, overrides, await envArg(opts.env), agentRun);
    if (opts.printConfig) {
      console.log(JSON.stringify(config, null, 2));
      return;
    }
    if (opts.agent !== undefined && opts.agentModule !== undefined) throw new ConfigError(["--agent and --agent-module: choose one (a shell command, or a file exporting an agent function)"]);
    if (opts.agent !== undefined && opts.agent.trim() === "") throw new ConfigError(["--agent: an empty command (expected e.g. \"node examples/agents/openai-search.mjs\")"]);
    if (opts.agent === undefined && opts.agentModule === undefined) {
      const orphan = (["agentDeadline", "agentWarmStart", "agentTool"] as const).filter((k) => opts[k] !== undefined).map((k) => ({ agentDeadline: "--agent-deadline", agentWarmStart: "--agent-warm-start", agentTool: "--agent-tool" })[k]);
      if (orphan.length > 0) throw new ConfigError([`${orphan.join(", ")}: only with --agent or --agent-module`]);
    }
    if (opts.agent !== undefined || opts.agentModule !== undefined) {
      const { dryRunAgent, runAgentExperiment } = await import("../train/agentExperiment.ts");
      const { parseTeacherTool } = await import("../train/agentTeacher.ts");
      let teacherTool: ReturnType<typeof parseTeacherTool> | undefined;
      try {
        teacherTool = opts.agentTool === undefined ? undefined : parseTeacherTool(opts.agentTool);
      } catch (e) {
        throw new ConfigError([(e as Error).message]);
      }
      const t0 = performance.now();
      const deadline = opts.agentDeadline === undefined ? undefined : Number(opts.agentDeadline);
      if (deadline !== undefined && !(Number.isInteger(deadline) && deadline >= 1 && deadline <= 2 ** 31 - 1)) {
        throw new ConfigError([`--agent-deadline: expected an integer number of ms in 1..2147483647, got ${JSON.stringify(opts.agentDeadline)}`]);
      }
      if (opts.dryRun) {
        const lines = await dryRunAgent(config, { agent: opts.agentModule !== undefined ? await agentModuleArg(opts.agentModule) : opts.agent!, agentId: opts.agentModule !== undefined ? `module: ${resolvePath(opts.agentModule)}` : undefined, overwrite: opts.overwrite === true, resume: opts.resume === true, rolloutDeadlineMs: deadline, warmStart: opts.agentWarmStart, teacherTool });
        console.log(`dry run: OK — nothing trained, nothing written\n  ${lines.join("\n  ")}`);
        return;
      }
      const summary = await runAgentExperiment(config, { agent: opts.agentModule !== undefined ? await agentModuleArg(opts.agentModule) : opts.agent!, agentId: opts.agentModule !== undefined ? `module: ${resolvePath(opts.agentModule)}` : undefined, reporter: consoleReporter(), overwrite: opts.overwrite === true, resume: opts.resume === true, rolloutDeadlineMs: deadline, warmStart: opts.agentWarmStart, teacherTool });
      console.log(`\nHeld-out success of your agent (EM %, ${summary.before.n} questions): ${config.sft.steps > 0 || opts.agentWarmStart ? "warm start" : "before"} ${summary.before.success.toFixed(1)} (dropped ${summary.before.dropped}) → after RL ${summary.after.success.toFixed(1)} (dropped ${summary.after.dropped})`);
      console.log(`run folder: ${summary.run}   wall time: ${((performance.now() - t0) / 60000).toFixed(1)} min`);
      return;
    }
    if (opts.resume && opts.overwrite) throw new ConfigError(["--resume and --overwrite: choose one (resume continues the run in the folder; overwrite replaces it)"]);
    if (config.env.name !== "search") {
      const recipe = getRecipe(config.env.name);
      if (opts.dryRun) {
        const lines = await dryRunRecipe(config, recipe, { resume: opts.resume === true, overwrite: opts.overwrite === true });
        console.log(`dry run: OK — nothing trained, nothing written\n  ${lines.join("\n  ")}`);
        return;
      }
      const t0 = performance.now();
      const summary = await runRecipeExperiment(config, recipe, consoleReporter(), { overwrite: opts.overwrite === true, resume: opts.resume === true });
      console.log(`\nHeld-out summary: env ${summary.env} (${summary.protocol}), ${summary.rows[0]?.n ?? 0} requests, split ${summary.split}:`);
      console.log(recipeTable(summary));
      console.log(summary.detectors.length === 0 ? "reward-hacking detectors: quiet" : `reward-hacking detectors firing:\n  ${summary.detectors.map((f) => f.message).join("\n  ")}`);
      console.log(`run folder: ${summary.run}   wall time: ${((performance.now() - t0) / 60000).toFixed(1)} min`);
      return;
    }
    if (opts.dryRun) {
      const lines = await dryRun(config, { resume: opts.resume === true, overwrite: opts.overwrite === true });
      console.log(`dry run: OK — nothing trained, nothing written\n  ${lines.join("\n  ")}`);
      return;
    }
    const t0 = performance.now();
    const summary = await runExperiment(config, consoleReporter(), { overwrite: opts.overwrite === true, resume: opts.resume === true });
    console.log(`\nHeld-out summary (${summary.rows[0]?.result.all.n ?? 0} questions, split ${summary.split}):`);
    console.log(summaryTable(summary.rows));
    const d = config.detectors;
    const needed = d.baselineSteps + d.window;
    console.log(
      !d.enabled
        ? "reward-hacking detectors: off (detectors.enabled false)"
        : config.rl.steps < needed
          ? `reward-hacking detectors: not evaluated (they need ≥ ${needed} RL steps: detectors.baselineSteps + detectors.window; this run had ${config.rl.steps})`
          : summary.detectors.length === 0
            ? "reward-hacking detectors: quiet"
            : `reward-hacking detectors firing:\n  ${summary.detectors.map((f) => f.message).join("\n  ")}`,
    );
    console.log(`run folder: ${summary.run}   wall time: ${((performance.now() - t0) / 60000).toFixed(1)} min`);
  });

program
  .command("lab")
  .description("Train several reward designs from one warm start on the same seed, data and budget; write report.html")
  .option("--designs <list>", `comma-separated designs (built-in: ${Object.keys(BUILTIN_DESIGNS).join(", ")}; algorithms: ${Object.keys(ALGORITHM_DESIGNS).join(", ")}, or "algorithms" for all of them; or defined under lab.define)`)
  .option("-c, --config <file>", "YAML or JSON config (adds the lab section: designs, define, examples)")
  .option("--quick", "CI-sized lab: tiny model, 4 RL steps per design (~20 s); its presets apply over --config, dotted flags last")
  .option("--name <name>", "lab folder name under runs/ (default: lab, or lab-quick with --quick)")
  .option("--list", "list the designs, reward presets and terms, then exit")
  .option("--overwrite", "replace an existing lab folder of the same name")
  .option("--print-config", "print the resolved config and exit")
  .option("--env <name>", `env whose designs to train (default search): its own designs (EnvRecipe.labDesigns), or --designs algorithms; ${ENV_ARG_HELP}`)
  .option("--warm-start <checkpoint>", "start every design from this SFT checkpoint instead of training a warm start (e.g. runs/lab-algorithms/checkpoints/sft: same model shape and vocabulary)")
  .addHelpText("after", "\nAny config field can be set with its path, e.g. --rl.steps 50 --lab.examples 3")
  .action(async (opts: { designs?: string; config?: string; quick?: boolean; name?: string; list?: boolean; overwrite?: boolean; printConfig?: boolean; env?: string; warmStart?: string }) => {
    if (opts.list) {
      console.log("designs:");
      for (const [name, d] of Object.entries(BUILTIN_DESIGNS)) console.log(`  ${name.padEnd(20)} ${d.description}`);
      console.log("algorithm designs (the default reward, one RL algorithm each; `--designs algorithms` runs them all):");
      for (const [name, d] of Object.entries(ALGORITHM_DESIGNS)) console.log(`  ${name.padEnd(28)} ${d.description}`);
      for (const recipe of Object.values(ENV_RECIPES)) {
        const own = Object.entries(recipe.labDesigns ?? {});
        if (own.length === 0) continue;
        console.log(`${recipe.name} env designs (arl lab --env ${recipe.name}):`);
        for (const [name, d] of own) console.log(`  ${name.padEnd(20)} ${d.description}${d.expectedDetectors?.length ? ` [expects ${d.expectedDetectors.join(", ")}]` : ""}`);
      }
      console.log("presets:");
      for (const [name, p] of Object.entries(REWARD_PRESETS)) {
        console.log(`  ${name.padEnd(20)} ${Object.entries(p.weights).map(([t, w]) => `${t} ${w}`).join(", ")}`);
      }
      console.log("terms:");
      for (const t of TERM_LIST) console.log(`  ${t.name.padEnd(20)} [${t.family}] ${t.description}`);
      return;
    }
    if (!opts.printConfig) installInterruptHandler("lab"); // Ctrl-C: what stopped, lock released
    let raw: Record<string, unknown> = opts.config ? readConfigFile(opts.config) : {};
    const labEnv = (await envArg(opts.env)) ?? overrides["env.name"] ?? envNameOf(raw);
    if (labEnv !== "search") {
      let recipe: EnvRecipe;
      try {
        recipe = getRecipe(labEnv);
      } catch (e) {
        throw new ConfigError([`${opts.env !== undefined ? "--env" : "env.name"}: ${(e as Error).message.replace(/^env\.name: /, "")}`]);
      }
      const config = envLabConfig(recipe, raw, opts, overrides);
      if (opts.printConfig) {
        console.log(JSON.stringify(config, null, 2));
        return;
      }
      const lab = await runEnvLab(config, recipe, consoleReporter(), { overwrite: opts.overwrite === true, quick: opts.quick === true, warmStart: opts.warmStart });
      console.log(`\nReward lab ${lab.name} on env ${lab.env}: ${lab.designs.length} designs × ${lab.rlSteps} RL steps, ${lab.evalQuestions} held-out tasks`);
      console.log(envLabText(lab));
      console.log(`report: ${join(config.run.dir, config.run.name, "report.html")}   wall time: ${(lab.wallMs / 60000).toFixed(1)} min   fingerprint: ${lab.fingerprint} (a rerun with the same seed and config on this machine prints the same)`);
      return;
    }
    if (opts.quick) raw = applyOverrides(raw, QUICK_LAB_OVERRIDES);
    const labOverrides: Record<string, string> = { "run.name": opts.name ?? (opts.quick ? "lab-quick" : "lab") };
    if (opts.designs !== undefined) {
      const list = opts.designs.split(",").map((x) => x.trim()).filter(Boolean);
      if (list.length === 0) throw new ConfigError([`--designs: expected a comma-separated list of designs, got ${JSON.stringify(opts.designs)}`]);
      labOverrides["lab.designs"] = JSON.stringify(list);
    }
    const config = resolveConfig(applyOverrides(applyOverrides(raw, labOverrides), overrides));
    designConfigs(config, resolveDesigns(config)); // every design checked before anything runs, all problems at once
    if (opts.printConfig) {
      console.log(JSON.stringify(config, null, 2));
      return;
    }
    const lab = await runLab(config, consoleReporter(), { overwrite: opts.overwrite === true, quick: opts.quick === true, warmStart: opts.warmStart });
    console.log(`\nReward lab ${lab.name}: ${lab.designs.length} designs × ${lab.rlSteps} RL steps, ${lab.evalQuestions} held-out questions`);
    console.log(labTable(lab));
    for (const c of lab.claims) console.log(`${c.title}\n  ${c.text}`);
    const folder = join(config.run.dir, config.run.name);
    console.log(`report: ${join(folder, "report.html")}   wall time: ${(lab.wallMs / 60000).toFixed(1)} min   fingerprint: ${lab.fingerprint} (a rerun with the same seed and config on this machine prints the same)`);
  });

/** The tasks and env of `eval`/`rollout`: the run's world, or a real QA file with a corpus. */
function evalInputs(
  opts: { data?: string; corpus?: string; split?: string; limit?: string },
  config: ExperimentConfig,
) {
  if (opts.corpus && !opts.data) throw new ConfigError(["--corpus: only used with --data (a QA file to evaluate on)"]);
  if (opts.data) {
    if (!opts.corpus) throw new ConfigError(["--corpus: required with --data (a wiki-18 JSONL file)"]);
    return (async () => {
      const passages = await loadCorpus(opts.corpus!);
      const tasks = await loadQA(opts.data!, { limit: opts.limit ? positiveInt("--limit", opts.limit) : undefined });
      return { tasks, makeEnv: searchEnvFor(passages, config).makeEnv };
    })();
  }
  const s = setup(config);
  const split = opts.split ?? "test";
  if (split !== "test" && split !== "train") throw new ConfigError([`--split: expected one of "train", "test", got ${JSON.stringify(split)}`]);
  let tasks: Task[] = split === "test" ? evalTasks(s.world, config) : s.world.train;
  if (opts.limit) tasks = tasks.slice(0, positiveInt("--limit", opts.limit));
  return Promise.resolve({ tasks, makeEnv: s.makeEnv });
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
function configForCheckpoint(checkpoint: string): ExperimentConfig {
  const file = join(dirname(dirname(checkpoint)), "config.yaml");
  return resolveConfig(applyOverrides(existsSync(file) ? readConfigFile(file) : {}, overrides));
}

program
  .command("eval")
  .description("Evaluate a checkpoint (agent, Direct and RAG modes) and/or prompt-driven agents on an OpenAI-compatible server, on the world's held-out split or a real QA file")
  .option("--checkpoint <dir>", "checkpoint folder, e.g. runs/default/checkpoints/final (optional with --policy)")
  .option("--split <split>", "train | test (built-in world)", "test")
  .option("--modes <list>", "comma-separated: agent, direct, rag (checkpoint rows)", "agent,direct,rag")
  .option("--data <file>", "real QA file (FlashRAG, NQ-open or Bamboogle JSONL, detected per line) instead of the built-in world")
  .option("--corpus <file>", "wiki-18 JSONL passages to search (with --data)")
  .option("--limit <n>", "evaluate at most n questions")
  .option("--policy <spec>", "openai:MODEL — a model on an OpenAI-compatible server, driven by --agent (repeatable)", (v: string, acc: string[]) => [...acc, v], [] as string[])
  .option("--base-url <url>", "OpenAI-compatible API of --policy, e.g. http://127.0.0.1:8300/v1 (default: env OPENAI_BASE_URL)")
  .option("--api-key <key>", "API key of --base-url (default: env OPENAI_API_KEY, else none)")
  .option("--agent <list>", "prompt-driven agents for --policy: prompt, function-calling, react (comma-separated) or all", "all")
  .option("--max-tokens <n>", "max_tokens of each --policy reply (the server's tokens)", "512")
  .option("--concurrency <n>", "--policy episodes in flight per agent", "4")
  .option("--env <name>", `env recipe (default search, or the checkpoint's run's env): ${ENV_ARG_HELP}`)
  .action(async (opts: { checkpoint?: string; split?: string; modes: string; data?: string; corpus?: string; limit?: string; policy: string[]; baseUrl?: string; apiKey?: string; agent: string; maxTokens: string; concurrency: string; env?: string }) => {
    if (!opts.checkpoint && opts.policy.length === 0 && opts.env === undefined) {
      throw new ConfigError(["--checkpoint or --policy: at least one is required (e.g. --checkpoint runs/default/checkpoints/final, --policy openai:MODEL --base-url URL)"]);
    }
    const envName = await envArg(opts.env);
    const recipeConfig = opts.checkpoint ? configForCheckpoint(opts.checkpoint) : loadConfig(undefined, false, overrides, envName);
    if (recipeConfig.env.name !== "search") {
      if (opts.policy.length > 0 || opts.data !== undefined) throw new ConfigError([`--policy/--data: only for the search env (this is ${recipeConfig.env.name})`]);
      const config = recipeConfig;
      const s = recipeSetup(config, getRecipe(config.env.name));
      const split = opts.split ?? "test";
      if (split !== "test" && split !== "train") throw new ConfigError([`--split: expected one of "train", "test", got ${JSON.stringify(split)}`]);
      let tasks = split === "test" ? recipeEvalTasks(s, config) : s.instance.train;
      if (opts.limit) tasks = tasks.slice(0, positiveInt("--limit", opts.limit));
      const reporter = consoleReporter();
      const careful = s.instance.baselinePersona;
      const rows: RecipeRow[] = [(await evalRecipeRow(`Prompt-driven (${careful}, scripted)`, new ScriptedAgent(s.tokenizer, (ctx) => s.instance.scriptedTurn(careful, ctx)), tasks, s, config, reporter)).row];
      if (opts.checkpoint) {
        const policy = await loadPolicy(opts.checkpoint, { sampler: config.policy.sampler });
        const ps = { ...s, tokenizer: policy.tokenizer, stops: protocolStops(policy.tokenizer, s.protocol.stops) };
        rows.push((await evalRecipeRow("agent (checkpoint)", policyAgent(policy.backend, ps, config), tasks, ps, config, reporter)).row);
      }
      console.log(`\n${tasks.length} requests of env ${config.env.name} (${s.protocol.name}, split ${split}):`);
      console.log(recipeTable({ rows, breakdownLabels: s.instance.breakdownLabels }));
      return;
    }
    const { checkOpenAIEvalFlags, openAIEvalRows } = await import("./evalOpenai.ts");
    const openai = opts.policy.length > 0 ? checkOpenAIEvalFlags(opts) : null;
    const config = opts.checkpoint ? configForCheckpoint(opts.checkpoint) : resolveConfig(applyOverrides({}, overrides));
    const policy = opts.checkpoint ? await loadPolicy(opts.checkpoint, { sampler: config.policy.sampler }) : null;
    const { tasks, makeEnv } = await evalInputs(opts, config);
    const rows: SummaryRow[] = [];
    const reporter = consoleReporter();
    if (policy) {
      const limits = { contextLength: policy.gpt.contextLength, maxObservationTokens: config.env.maxObservationTokens };
      for (const mode of opts.modes.split(",").map((m) => m.trim())) {
        if (!["agent", "direct", "rag"].includes(mode)) throw new ConfigError([`--modes: expected agent, direct or rag, got ${JSON.stringify(mode)}`]);
        const bar = reporter.bar(`eval ${mode}`, tasks.length);
        let n = 0;
        const { trajectories: _t, ...result } = await evaluate(tasks, policy.backend.samplingClient(), policy.tokenizer, makeEnv, limits, {
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
      const tokenizer = policy?.tokenizer ?? setup(config).tokenizer;
      rows.push(...(await openAIEvalRows(openai, tasks, makeEnv, tokenizer, { temperature: config.eval.temperature, seed: config.run.seed + 7 }, reporter)));
    }
    console.log(`\n${tasks.length} questions from ${opts.data ?? `the built-in world (${opts.split})`}:`);
    console.log(summaryTable(rows));
  });

program
  .command("rollout")
  .description("Run a few episodes and print them readably (a checkpoint's policy, or a scripted persona)")
  .option("--checkpoint <dir>", "checkpoint folder; without it a scripted persona acts")
  .option("--persona <name>", `scripted persona: ${PERSONAS.join(", ")} (default careful)`)
  .option("-n, --n <n>", "episodes", "3")
  .option("--split <split>", "train | test", "test")
  .option("--temperature <t>", "sampling temperature", "1")
  .option("--data <file>", "real QA file instead of the built-in world")
  .option("--corpus <file>", "wiki-18 JSONL passages (with --data)")
  .option("--env <name>", `env recipe (default search, or the checkpoint's run's env): ${ENV_ARG_HELP}`)
  .action(async (opts: { checkpoint?: string; persona?: string; n: string; split: string; temperature: string; data?: string; corpus?: string; env?: string }) => {
    const envName = await envArg(opts.env); // registers a file's recipe before a checkpoint's config names it
    const config = opts.checkpoint ? configForCheckpoint(opts.checkpoint) : loadConfig(undefined, false, overrides, envName);
    const n = positiveInt("-n", opts.n);
    const temperature = Number(opts.temperature);
    if (!(temperature >= 0)) throw new ConfigError([`--temperature: expected a number ≥ 0, got ${JSON.stringify(opts.temperature)}`]);
    if (config.env.name !== "search") {
      if (opts.data !== undefined || opts.corpus !== undefined) throw new ConfigError([`--data/--corpus: only for the search env (this is ${config.env.name})`]);
      const s = recipeSetup(config, getRecipe(config.env.name));
      const split = opts.split;
      if (split !== "test" && split !== "train") throw new ConfigError([`--split: expected one of "train", "test", got ${JSON.stringify(split)}`]);
      const tasks = (split === "test" ? recipeEvalTasks(s, config) : s.instance.train).slice(0, n);
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
      const groups = await rolloutGroups(tasks, s.instance.makeEnv(0), agent, tokenizer, { contextLength, maxObservationTokens: config.env.maxObservationTokens }, { groupSize: 1, seed: config.run.seed });
      for (const g of groups) {
        const t = g.trajectories[0];
        t.reward = await computeReward(t, rewardConfigOf(config));
        console.log(formatTrajectory(t, { toolCalls: true }) + (t.grade ? `\ngrade: ${t.grade.score} ${JSON.stringify(t.grade.parts)}${t.grade.explanation ? ` — ${t.grade.explanation}` : ""}` : "") + "\n");
      }
      return;
    }
    const { tasks, makeEnv } = await evalInputs({ ...opts, limit: opts.n }, config);
    let agent: TurnGenerator;
    let tokenizer;
    let contextLength = config.policy.contextLength;
    if (opts.checkpoint) {
      if (opts.persona !== undefined) throw new ConfigError(["--persona: a scripted persona acts only without --checkpoint"]);
      ({ agent, tokenizer, contextLength } = await checkpointAgent(opts.checkpoint, config, temperature));
    } else {
      const persona = opts.persona ?? "careful";
      if (!(PERSONAS as readonly string[]).includes(persona)) {
        throw new ConfigError([`--persona: expected one of ${PERSONAS.join(", ")}, got ${JSON.stringify(persona)}`]);
      }
      const s = setup(config);
      tokenizer = s.tokenizer;
      agent = new ScriptedAgent(tokenizer, (ctx) => personaTurn(persona as Persona, ctx, (a) => valuesOf(s.world, a as CountryAttribute)));
    }
    const groups = await rolloutGroups(tasks, makeEnv, agent, tokenizer, { contextLength, maxObservationTokens: config.env.maxObservationTokens }, {
      groupSize: 1,
      seed: config.run.seed,
    });
    for (const g of groups) {
      const t = g.trajectories[0];
      t.reward = await computeReward(t, rewardConfigOf(config));
      console.log(formatTrajectory(t) + "\n");
    }
  });

program
  .command("envs")
  .description("List the env recipes: tools, protocols, task counts (what `arl train --env NAME` takes)")
  .action(() => {
    const table: string[] = [];
    for (const recipe of Object.values(ENV_RECIPES)) {
      const config = loadConfig(undefined, false, {}, recipe.name);
      const instance = recipe.build(recipeContext(config, recipe));
      table.push(
        `${recipe.name}\n  ${recipe.description}\n  tools: ${recipe.tools.length === 0 ? "none (one turn)" : recipe.tools.join(", ")}\n  protocols: ${recipe.protocols.join(", ")} (default ${recipe.protocols[0]})\n` +
          `  tasks: ${instance.train.length} train / ${instance.test.length} test; ${instance.describe()}\n  personas: ${Object.keys(instance.personas).join(", ")}`,
      );
    }
    console.log(table.join("\n\n"));
  });

program
  .command("search")
  .description("Rank passages for a query with BM25 (a wiki-18 JSONL corpus, or the built-in world)")
  .argument("<query...>", "query words")
  .option("--corpus <file>", "wiki-18 JSONL passages ({id, contents})")
  .option("-k, --k <n>", "passages to show", "3")
  .action(async (queryWords: string[], opts: { corpus?: string; k: string }) => {
    const k = positiveInt("--k", opts.k);
    const passages = opts.corpus ? await loadCorpus(opts.corpus) : setup(resolveConfig(applyOverrides({}, overrides))).world.passages;
    const hits = new BM25Index(passages).search(queryWords.join(" "), k);
    if (hits.length === 0) console.log("(no passage matches)");
    hits.forEach((p, i) => console.log(`${i + 1}. [${p.score?.toFixed(3)}] ${p.id}  (Title: ${p.title})\n   ${p.text.slice(0, 300)}`));
  });

registerServe(program, () => overrides);
registerExport(program, () => overrides);
registerView(program);

/**
 * Exits with `code` once stdout and stderr have taken everything written to them. `process.exit` drops what a pipe has
 * not accepted yet: `arl train --print-config | wc -c` stopped at 65 536 bytes (issue 29's outside probe). A write's
 * callback runs after every earlier write on that stream has been handed to the OS.
 */
async function exitAfterFlush(code: number): Promise<never> {
  await Promise.all([process.stdout, process.stderr].map((s) => new Promise<void>((done) => (s.writable ? s.write("", () => done()) : done()))));
  process.exit(code);
}

try {
  const parsed = extractOverrides(process.argv.slice(2));
  overrides = parsed.overrides;
  await program.parseAsync(parsed.rest, { from: "user" });
  // jax-js's worker threads (src/policy/embedded/threads.ts) can keep the event loop alive after the work is done.
  await exitAfterFlush(0);
} catch (e) {
  if (e instanceof CommanderError) await exitAfterFlush(e.exitCode);
  console.error(e instanceof ConfigError ? e.message : `error: ${(e as Error).message}`);
  await exitAfterFlush(e instanceof ConfigError ? 2 : 1);
}
