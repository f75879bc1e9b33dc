/**
 * `arl` — the command line. One subcommand per job: `train`, `lab`, `eval`, `rollout`, `search`, `serve`, `export`, `view`, `pretrain`. Config fields can be
 * overridden by flags named by their path (`--rl.groupSize 8`, `--policy.dModel=64`).
 */
import { join, resolve as resolvePath } from "node:path";
import { Command, CommanderError } from "commander";
import { ConfigError, resolveConfig } from "../train/config.ts";
import { applyOverrides, readConfigFile } from "../train/configFile.ts";
import { ALGORITHM_DESIGNS } from "../lab/designs.ts";
import { REWARD_PRESETS } from "../reward/presets.ts";
import { TERM_LIST } from "../reward/terms.ts";
import type { EnvRecipe } from "../env/recipe.ts";
import { DEFAULT_ENV, ENV_RECIPES, getRecipe } from "../envs/index.ts";
import { envNameOf } from "../train/recipeDefaults.ts";
import { agentModuleArg, ENV_ARG_HELP, envArg, extractOverrides, loadConfig, positiveInt } from "./args.ts";
import { registerEvaluate } from "./evaluate.ts";
import { consoleReporter, detectorLine, recipeTable } from "./format.ts";
import { registerServe } from "./serve.ts";
import { registerExport } from "./export.ts";
import { registerView } from "./view.ts";
import { registerPretrain } from "./pretrain.ts";
import { installInterruptHandler } from "./interrupt.ts";

const program = new Command()
  .name("arl")
  .description("agentic-rl: train tool-using LLM agents with reinforcement learning (any env: search, travel, …, or your own)")
  .showHelpAfterError()
  .exitOverride();

let overrides: Record<string, string> = {};

program
  .command("train")
  .description("Warm start (SFT) + RL (GRPO by default; rl.advantage, rl.lossFn) on an env (default search), then the held-out summary table")
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
      const [{ runAgentExperiment }, { dryRunAgent }] = await Promise.all([import("../external/experiment.ts"), import("../external/dryRun.ts")]);
      const { parseTeacherTool } = await import("../external/teacher.ts");
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
    const recipe = getRecipe(config.env.name);
    if (opts.dryRun) {
      const { dryRun } = await import("../train/dryRun.ts");
      const lines = await dryRun(config, recipe, { resume: opts.resume === true, overwrite: opts.overwrite === true });
      console.log(`dry run: OK — nothing trained, nothing written\n  ${lines.join("\n  ")}`);
      return;
    }
    const t0 = performance.now();
    const { runExperiment } = await import("../train/runner.ts");
    const summary = await runExperiment(config, recipe, consoleReporter(), { overwrite: opts.overwrite === true, resume: opts.resume === true });
    console.log(`\nHeld-out summary: env ${summary.env} (${summary.protocol}), ${summary.rows[0]?.n ?? 0} tasks, split ${summary.split}:`);
    console.log(recipeTable(summary));
    console.log(detectorLine(config, summary.detectors));
    console.log(`run folder: ${summary.run}   wall time: ${((performance.now() - t0) / 60000).toFixed(1)} min`);
  });

program
  .command("lab")
  .description("Train several reward designs from one warm start on the same seed, data and budget; write report.html")
  .option("--designs <list>", `comma-separated designs: the env's own (--list; default all of them), algorithms (${Object.keys(ALGORITHM_DESIGNS).join(", ")}, or "algorithms" for all of them), or defined under lab.define`)
  .option("-c, --config <file>", "YAML or JSON config (adds the lab section: designs, define, examples)")
  .option("--quick", "CI-sized lab: tiny model, 4 RL steps per design (~20 s); its presets apply over --config, dotted flags last")
  .option("--name <name>", "lab folder name under runs/ (default: lab-<env>, lab-<env>-quick with --quick; the default env's lab, lab-quick)")
  .option("--list", "list the designs, reward presets and terms, then exit")
  .option("--overwrite", "replace an existing lab folder of the same name")
  .option("--print-config", "print the resolved config and exit")
  .option("--env <name>", `env whose designs to train (default search): its own designs (EnvRecipe.labDesigns), or --designs algorithms; ${ENV_ARG_HELP}`)
  .option("--warm-start <checkpoint>", "start every design from this SFT checkpoint instead of training a warm start (e.g. runs/lab-algorithms/checkpoints/sft: same model shape and vocabulary)")
  .addHelpText("after", "\nAny config field can be set with its path, e.g. --rl.steps 50 --lab.examples 3")
  .action(async (opts: { designs?: string; config?: string; quick?: boolean; name?: string; list?: boolean; overwrite?: boolean; printConfig?: boolean; env?: string; warmStart?: string }) => {
    if (opts.list) {
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
    const raw: Record<string, unknown> = opts.config ? readConfigFile(opts.config) : {};
    const labEnv = (await envArg(opts.env)) ?? overrides["env.name"] ?? envNameOf(raw);
    let recipe: EnvRecipe;
    try {
      recipe = getRecipe(labEnv);
    } catch (e) {
      throw new ConfigError([`${opts.env !== undefined ? "--env" : "env.name"}: ${(e as Error).message.replace(/^env\.name: /, "")}`]);
    }
    const { labConfig, labText } = await import("../lab/cli.ts");
    const config = labConfig(recipe, raw, { ...opts, defaultEnv: DEFAULT_ENV }, overrides);
    if (opts.printConfig) {
      console.log(JSON.stringify(config, null, 2));
      return;
    }
    const { runLab } = await import("../lab/lab.ts");
    const lab = await runLab(config, recipe, consoleReporter(), { overwrite: opts.overwrite === true, quick: opts.quick === true, warmStart: opts.warmStart });
    console.log(`\nReward lab ${lab.name} on env ${recipe.name}: ${lab.designs.length} designs × ${lab.rlSteps} RL steps, ${lab.evalQuestions} held-out tasks`);
    console.log(labText(lab));
    console.log(`report: ${join(config.run.dir, config.run.name, "report.html")}   wall time: ${(lab.wallMs / 60000).toFixed(1)} min   fingerprint: ${lab.fingerprint} (a rerun with the same seed and config on this machine prints the same)`);
  });

program
  .command("envs")
  .description("List the env recipes: tools, protocols, task counts (what `arl train --env NAME` takes)")
  .action(async () => {
    const { buildInstance } = await import("../train/setup.ts");
    const table: string[] = [];
    for (const recipe of Object.values(ENV_RECIPES)) {
      const config = loadConfig(undefined, false, {}, recipe.name);
      const instance = buildInstance(config, recipe);
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
    const [{ BM25Index }, { loadCorpus }, { buildInstance }] = await Promise.all([import("../retrieval/bm25.ts"), import("../retrieval/corpus.ts"), import("../train/setup.ts")]);
    const passages = opts.corpus ? await loadCorpus(opts.corpus) : [...(buildInstance(resolveConfig(applyOverrides({}, overrides)), getRecipe(DEFAULT_ENV)).corpus?.() ?? [])];
    const hits = new BM25Index(passages).search(queryWords.join(" "), k);
    if (hits.length === 0) console.log("(no passage matches)");
    hits.forEach((p, i) => console.log(`${i + 1}. [${p.score?.toFixed(3)}] ${p.id}  (Title: ${p.title})\n   ${p.text.slice(0, 300)}`));
  });

registerEvaluate(program, () => overrides);
registerServe(program, () => overrides);
registerExport(program, () => overrides);
registerView(program);
registerPretrain(program, () => overrides);

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
