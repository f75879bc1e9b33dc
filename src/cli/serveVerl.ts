/**
 * `arl serve retrieval | reward | mcp`: the services a veRL run (or any other trainer) calls — Search-R1's
 * `POST /retrieve` (src/serve/retrieval.ts), veRL's `compute_score` as `POST /reward` (src/serve/reward.ts) and the
 * search environment's tools over MCP (src/serve/mcp.ts; `--result-format text|json`). Each serves the built-in world's passages, or a wiki-18
 * JSONL corpus with `--corpus`; `--config` (and dotted flags such as `--reward.preset composite`) pick the world,
 * `env.options.topK` and the reward.
 */
import type { Command } from "commander";
import type { Passage } from "../core/types.ts";
import { MCP_RESULT_FORMATS, type McpResultFormat } from "../serve/mcpFormats.ts";
import { ConfigError, resolveConfig, type ExperimentConfig } from "../train/config.ts";
import { applyOverrides, readConfigFile } from "../train/configFile.ts";
import { rewardConfigOf } from "../reward/config.ts";
import { DEFAULT_ENV, getRecipe, searchOptions } from "../envs/index.ts";
import { intFlag, serveFlags, serveOptions, type ServeFlags } from "./serveFlags.ts";

/** Flags shared by the three servers: a config file and a corpus. */
interface CorpusFlags extends ServeFlags {
  config?: string;
  corpus?: string;
}

/** The config from `--config` with `overrides` (dotted flags, and `--preset` as `reward.preset`) applied, validated. @throws ConfigError naming bad fields */
function configOf(file: string | undefined, overrides: Record<string, string>): ExperimentConfig {
  return resolveConfig(applyOverrides(file ? readConfigFile(file) : {}, overrides));
}

/** The passages served: `--corpus` (wiki-18 JSONL) or the config's built-in world. */
async function passagesOf(config: ExperimentConfig, corpus: string | undefined): Promise<Passage[]> {
  if (corpus) return (await import("../retrieval/corpus.ts")).loadCorpus(corpus);
  const { buildInstance } = await import("../train/setup.ts");
  return [...(buildInstance(config, getRecipe(DEFAULT_ENV)).corpus?.() ?? [])];
}

/** Adds `--config` and `--corpus`. */
function corpusFlags(cmd: Command): Command {
  return cmd
    .option("-c, --config <file>", "YAML/JSON experiment config (env.options: the search world and topK; reward); dotted flags override it")
    .option("--corpus <file>", "wiki-18 JSONL corpus ({id, contents}) instead of the built-in world's passages");
}

/** Registers `serve retrieval` (default port 8000, Search-R1's). */
export function registerServeRetrieval(serve: Command, overrides: () => Record<string, string>): void {
  serveFlags(
    corpusFlags(serve.command("retrieval").description("BM25 over HTTP: POST /retrieve as Search-R1's retrieval server and veRL's search tool call it"))
      .option("--topk <n>", "passages per query when a request gives no topk (default env.options.topK, 3)"),
    8000,
  ).action(async (opts: CorpusFlags & { topk?: string }) => {
    const [{ makeJudge }, { BM25Index }, { listen, untilSignal }, { createMcpApp, searchEnvTools }, { createRetrievalApp }, { createRewardApp }] = await Promise.all([import("../reward/judge.ts"), import("../retrieval/bm25.ts"), import("../http/server.ts"), import("../serve/mcp.ts"), import("../serve/retrieval.ts"), import("../serve/reward.ts")]);
    const config = configOf(opts.config, overrides());
    const passages = await passagesOf(config, opts.corpus);
    const defaultTopk = opts.topk === undefined ? searchOptions(config.env.options).topK : intFlag("--topk", opts.topk, 1, 100);
    const options = serveOptions(opts);
    const server = await listen(createRetrievalApp(new BM25Index(passages), { ...options, defaultTopk }), options);
    console.log(`retrieval (BM25, ${passages.length} passages, topk ${defaultTopk}) at ${server.url}/retrieve`);
    await untilSignal(server);
  });
}

/** Registers `serve reward` (default port 8100). */
export function registerServeReward(serve: Command, overrides: () => Record<string, string>): void {
  serveFlags(
    corpusFlags(serve.command("reward").description("Our reward terms behind veRL's compute_score: POST /reward (and /reward/batch)"))
      .option("--preset <name>", "reward preset (default: the config's reward.preset, else `default`)"),
    8100,
  ).action(async (opts: CorpusFlags & { preset?: string }) => {
    const [{ makeJudge }, { BM25Index }, { listen, untilSignal }, { createMcpApp, searchEnvTools }, { createRetrievalApp }, { createRewardApp }] = await Promise.all([import("../reward/judge.ts"), import("../retrieval/bm25.ts"), import("../http/server.ts"), import("../serve/mcp.ts"), import("../serve/retrieval.ts"), import("../serve/reward.ts")]);
    const extra: Record<string, string> = opts.preset === undefined ? {} : { "reward.preset": opts.preset };
    const config = configOf(opts.config, { ...overrides(), ...extra });
    (await import("../train/setup.ts")).checkReward(config);
    const reward = rewardConfigOf(config);
    const passages = await passagesOf(config, opts.corpus);
    const options = serveOptions(opts);
    const server = await listen(createRewardApp({ ...options, reward, passages, judge: makeJudge(reward.options) }), options);
    const terms = Object.entries(reward.weights).map(([k, w]) => `${k}×${w}`).join(", ");
    console.log(`reward (preset ${config.reward.preset}: ${terms}) at ${server.url}/reward`);
    await untilSignal(server);
  });
}

/** Parses `--result-format`. @throws ConfigError naming the flag and the allowed values */
function resultFormatFlag(value: string): McpResultFormat {
  const f = MCP_RESULT_FORMATS.find((x) => x === value);
  if (f === undefined) throw new ConfigError([`--result-format: expected one of ${MCP_RESULT_FORMATS.map((x) => JSON.stringify(x)).join(", ")}, got ${JSON.stringify(value)}`]);
  return f;
}

/** Registers `serve mcp` (default port 8200). */
export function registerServeMcp(serve: Command, overrides: () => Record<string, string>): void {
  serveFlags(
    corpusFlags(serve.command("mcp").description("The search environment's tools as an MCP server (Streamable HTTP, stateless) at /mcp"))
      .option(
        "--result-format <f>",
        "what search returns: text (the env's <information> observation; veRL's MCPBaseTool) or json ({\"results\": [...]}; veRL's MCPSearchTool)",
        "text",
      ),
    8200,
  ).action(async (opts: CorpusFlags & { resultFormat: string }) => {
    const [{ makeJudge }, { BM25Index }, { listen, untilSignal }, { createMcpApp, searchEnvTools }, { createRetrievalApp }, { createRewardApp }] = await Promise.all([import("../reward/judge.ts"), import("../retrieval/bm25.ts"), import("../http/server.ts"), import("../serve/mcp.ts"), import("../serve/retrieval.ts"), import("../serve/reward.ts")]);
    const config = configOf(opts.config, overrides());
    const resultFormat = resultFormatFlag(opts.resultFormat);
    const passages = await passagesOf(config, opts.corpus);
    const options = serveOptions(opts);
    const tools = searchEnvTools(new BM25Index(passages), searchOptions(config.env.options).topK, { resultFormat });
    const server = await listen(createMcpApp(tools, options), options);
    console.log(`MCP (tools: ${tools.map((t) => t.name).join(", ")}; ${passages.length} passages; results as ${resultFormat}) at ${server.url}/mcp`);
    await untilSignal(server);
  });
}
