/**
 * The worlds an `arl train --agent` run serves and the tokenizer its policy speaks. Each world's passages are served
 * as a Search-R1 `/retrieve` server (`createWorldsRetrievalApp`: world `k` at `/worlds/<k>/…`), and each rollout
 * searches at a URL of its own (`ARL_RETRIEVAL_URL`), so the reward terms see exactly the passages its search tool was
 * served (`RetrievalLog`).
 */
import type { Tokenizer } from "../core/tokenizer.ts";
import type { RetrievalWorld } from "../env/recipe.ts";
import { listen } from "../http/server.ts";
import { EmbeddedBackend } from "../policy/embedded/backend.ts";
import type { GPTConfig } from "../policy/embedded/gpt.ts";
import { loadTokenizer } from "../policy/hf/index.ts";
import { WordTokenizer } from "../policy/tokenizer.ts";
import { hermesProtocol } from "../protocol/hermes.ts";
import { BM25Index } from "../retrieval/bm25.ts";
import { createWorldsRetrievalApp } from "../serve/retrieval.ts";
import { loadPolicy } from "../train/checkpoint.ts";
import { policyBaseOf } from "../train/base.ts";
import { ConfigError, type ExperimentConfig } from "../train/config.ts";
import type { AgentEnv } from "./config.ts";
import { MIN_AGENT_CONTEXT } from "./defaults.ts";
import { RetrievalLog } from "./reward.ts";
import { DEFAULT_TEACHER_TOOL, type TeacherTool } from "./teacher.ts";

/** One world an `--agent` run uses: its tasks, its BM25 index and where its retrieval is served. */
export interface ServedWorld {
  world: RetrievalWorld;
  index: BM25Index;
  /** `ARL_RETRIEVAL_URL` of a rollout: this world's retrieval, at the rollout's own path (`RetrievalLog`). */
  env: (rolloutId: string) => Record<string, string>;
}

/** The served worlds of a run, what each rollout's search tool was served, and the server's close. */
export interface ServedWorlds {
  /** In the order given (world `k` at `/worlds/<k>/`). */
  worlds: ServedWorld[];
  retrievals: RetrievalLog;
  close(): Promise<void>;
}

/**
 * The worlds of an `--agent` run, in the order they are served: the real world (0), the warm start's
 * `sft.counterfactualWorlds` counterfactual copies, then RL's `rl.counterfactualWorlds`.
 */
export function runWorlds(config: ExperimentConfig, env: AgentEnv): RetrievalWorld[] {
  return [
    env.world("rl", 0),
    ...Array.from({ length: config.sft.counterfactualWorlds }, (_, k) => env.world("demo", k + 1)),
    ...Array.from({ length: config.rl.counterfactualWorlds }, (_, k) => env.world("rl", k + 1)),
  ];
}

/**
 * Serves `worlds`' passages (BM25) on a local port, each rollout at its own path.
 * @returns the served worlds; `close()` stops the server
 */
export async function serveWorlds(worlds: readonly RetrievalWorld[]): Promise<ServedWorlds> {
  const indexes = worlds.map((w) => new BM25Index([...w.passages]));
  const retrievals = new RetrievalLog();
  const retrieval = await listen(createWorldsRetrievalApp(indexes, { onRetrieve: (id, _k, queries, hits) => retrievals.record(id, queries, hits) }));
  return {
    worlds: worlds.map((world, k) => ({ world, index: indexes[k], env: (id: string) => ({ ARL_RETRIEVAL_URL: `${retrieval.url}/worlds/${k}/rollouts/${encodeURIComponent(id)}` }) })),
    retrievals,
    close: () => retrieval.close(),
  };
}

/** What `agentTokenizer` reads of the run's options. */
export interface AgentTokenizerOptions {
  /** Extra texts for the word tokenizer's vocabulary (the agent's system prompt and tool descriptions). */
  agentTexts?: string[];
  /** A checkpoint whose tokenizer and shape the run takes. */
  warmStart?: string;
  /** The teacher's tool, whose call markup the word tokenizer covers. */
  teacherTool?: TeacherTool;
}

/** What `agentTokenizer` gives: the tokenizer, and the model shape when something other than the config fixes it. */
export interface AgentTokenizer {
  tokenizer: Tokenizer;
  /** The model shape of a `warmStart` checkpoint or a base (`policy.init: base`); else `gptConfigOf(config, …)`'s. */
  gpt?: GPTConfig;
  /** The pretrained base the policy starts from (`policy.init: base`, embedded backend, no `warmStart`). */
  base?: { dir: string; fingerprint: string };
}

/**
 * The tokenizer an `--agent` run's policy speaks: a real model's (`policy.tinker.tokenizer`) on a Tinker server; the
 * warm-start checkpoint's with `warmStart`; the base's with `policy.init: base` (embedded; its shape from base.json,
 * its weights loaded by `createBackend`); else the world's words (`worldTexts`: the real world's
 * `RetrievalWorld.texts()`), the Hermes template's and the teacher's tool-call markup (the agent's own prompt words that
 * the world lacks are [UNK]: a fixed prefix).
 * @throws ConfigError for a Tinker backend without either of the first two (the server's model fixes the vocabulary),
 *   a `warmStart` checkpoint whose context is shorter than `MIN_AGENT_CONTEXT`, or a base that is missing, malformed or
 *   does not fit the config (naming `policy.base`, `policy.contextLength`, `policy.sampler` or `policy.trainer`:
 *   `policyBaseOf`)
 */
export async function agentTokenizer(config: ExperimentConfig, worldTexts: readonly string[], options: AgentTokenizerOptions): Promise<AgentTokenizer> {
  if (config.policy.backend === "tinker" && config.policy.tinker.tokenizer !== undefined) return { tokenizer: loadTokenizer(config.policy.tinker.tokenizer) };
  if (options.warmStart !== undefined) {
    const p = await loadPolicy(options.warmStart);
    const out = { tokenizer: p.tokenizer, gpt: p.gpt };
    if (p.backend instanceof EmbeddedBackend) p.backend.dispose();
    if (p.gpt.contextLength < MIN_AGENT_CONTEXT) {
      throw new ConfigError([`--agent-warm-start: ${options.warmStart} has a ${p.gpt.contextLength}-token context; an agent's calls need at least ${MIN_AGENT_CONTEXT} (use a checkpoint of an --agent run, e.g. runs/<name>/checkpoints/sft)`]);
    }
    return out;
  }
  if (config.policy.backend === "tinker") {
    throw new ConfigError([`policy.tinker.tokenizer: with policy.backend tinker, --agent needs the served model's tokenizer — policy.tinker.tokenizer <folder with tokenizer.json> for a real model, or --agent-warm-start <checkpoint> for a model the server serves from that checkpoint (arl serve trainer --checkpoint <checkpoint>, policy.tinker.baseModel arl/<run>-<checkpoint>)`]);
  }
  const base = policyBaseOf(config);
  if (base !== undefined) return { tokenizer: base.tokenizer, gpt: base.gpt, base: { dir: base.dir, fingerprint: base.fingerprint } };
  const tool = options.teacherTool ?? DEFAULT_TEACHER_TOOL;
  const markup = [
    hermesProtocol.system([{ name: tool.name, description: "Search the knowledge base.", parameters: { type: "object", properties: { [tool.queryArg]: { type: "string" } }, required: [tool.queryArg] } }], "Answer the question."),
    `<tool_call>\n${JSON.stringify({ name: tool.name, arguments: { [tool.queryArg]: "capital of france" } })}\n</tool_call><|im_end|>`,
    "Doc 1(Title: ) unknown search failed",
    // "search" stays in the vocabulary whatever the tool is called (the default's texts, so its ids, are unchanged)
    ...(tool.name === DEFAULT_TEACHER_TOOL.name && tool.queryArg === DEFAULT_TEACHER_TOOL.queryArg ? [] : [`{"name": ${JSON.stringify(tool.name)}, "arguments": {${JSON.stringify(tool.queryArg)}: "search"}}`]),
  ];
  return { tokenizer: WordTokenizer.fromTexts([...worldTexts, ...markup, ...(options.agentTexts ?? [])], hermesProtocol.specialTokens) };
}
