/**
 * The `--policy openai:MODEL` part of `arl eval`: the prompt-driven baseline agents (src/baselines/) against an
 * OpenAI-compatible server, evaluated on the same tasks, env and metrics as the checkpoint's rows, so they land in
 * the same summary table.
 */
import { makeChatAgent, parseAgentKinds } from "../baselines/index.ts";
import type { Task } from "../core/types.ts";
import type { EnvFactory } from "../env/types.ts";
import type { Tokenizer } from "../core/tokenizer.ts";
import { ConfigError } from "../train/config.ts";
import { evaluateEpisodes } from "../train/eval.ts";
import type { EvalRow } from "../train/eval.ts";
import type { Reporter } from "../train/reporter.ts";

/** Flags of `arl eval` read here. */
export interface OpenAIEvalFlags {
  /** `--policy` specs, e.g. `["openai:Qwen/Qwen2.5-7B-Instruct"]`. */
  policy: string[];
  baseUrl?: string;
  apiKey?: string;
  /** `--agent`: `prompt`, `function-calling`, `react`, a comma-separated list, or `all`. */
  agent: string;
  /** `--max-tokens`: `max_tokens` of each reply (the server's tokens). */
  maxTokens: string;
  /** `--concurrency`: episodes in flight per agent. */
  concurrency: string;
}

/** A parsed `--policy` spec. */
export interface PolicySpec {
  kind: "openai";
  model: string;
}

/**
 * Parses `--policy` specs.
 * @throws ConfigError naming the flag, the bad value and the allowed form
 */
export function parsePolicySpecs(specs: readonly string[]): PolicySpec[] {
  return specs.map((spec) => {
    const m = /^openai:(.+)$/.exec(spec.trim());
    if (!m) throw new ConfigError([`--policy: expected openai:MODEL (a model on an OpenAI-compatible server, with --base-url), got ${JSON.stringify(spec)}`]);
    return { kind: "openai", model: m[1] };
  });
}

function positive(flag: string, value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value.trim()) || n <= 0) throw new ConfigError([`${flag}: expected a positive integer, got ${JSON.stringify(value)}`]);
  return n;
}

/**
 * Checks the flags of `--policy` before anything runs.
 * @returns the specs, the agent kinds, the base URL, the API key and the numbers
 * @throws ConfigError naming the flag (missing `--base-url`, bad `--agent`, `--max-tokens`, `--concurrency`)
 */
export function checkOpenAIEvalFlags(flags: OpenAIEvalFlags) {
  const specs = parsePolicySpecs(flags.policy);
  const baseURL = flags.baseUrl || process.env.OPENAI_BASE_URL;
  if (!baseURL) throw new ConfigError(["--base-url: required with --policy openai:MODEL (e.g. http://127.0.0.1:8300/v1; or env OPENAI_BASE_URL)"]);
  if (!/^https?:\/\//.test(baseURL)) throw new ConfigError([`--base-url: expected an http(s) URL such as http://127.0.0.1:8300/v1, got ${JSON.stringify(baseURL)}`]);
  let kinds;
  try {
    kinds = parseAgentKinds(flags.agent);
  } catch (e) {
    throw new ConfigError([(e as Error).message]);
  }
  return {
    specs,
    kinds,
    baseURL,
    apiKey: flags.apiKey || process.env.OPENAI_API_KEY || undefined,
    maxTokens: positive("--max-tokens", flags.maxTokens),
    concurrency: positive("--concurrency", flags.concurrency),
  };
}

/**
 * One summary row per (policy spec × agent kind), labelled `openai:MODEL (agent)`.
 * @throws Error naming the server and model when a request fails (see `ChatAgent.runEpisode`)
 */
export async function openAIEvalRows(
  flags: ReturnType<typeof checkOpenAIEvalFlags>,
  tasks: readonly Task[],
  env: { makeEnv: EnvFactory; tokenizer: Tokenizer },
  run: { temperature: number; seed: number },
  reporter: Reporter,
): Promise<EvalRow[]> {
  const { makeEnv, tokenizer } = env;
  const rows: EvalRow[] = [];
  for (const spec of flags.specs) {
    for (const kind of flags.kinds) {
      const label = `openai:${spec.model} (${kind})`;
      const agent = makeChatAgent(kind, {
        baseURL: flags.baseURL,
        apiKey: flags.apiKey,
        model: spec.model,
        makeEnv,
        tokenizer,
        temperature: run.temperature,
        maxTokens: flags.maxTokens,
      });
      const bar = reporter.bar(`eval ${label}`, tasks.length);
      let n = 0;
      const { trajectories: _t, ...result } = await evaluateEpisodes(tasks, agent.runner, {
        seed: run.seed,
        concurrency: flags.concurrency,
        onEpisode: () => bar.update(++n),
      });
      bar.stop();
      rows.push({ policy: label, result });
    }
  }
  return rows;
}
