/**
 * The search environment: Search-R1's multi-turn protocol (`<search>` → `<information>` → … → `<answer>`) over any
 * retriever. Source: Search-R1 `search_r1/llm_agent/generation.py` (`run_llm_loop`, `execute_predictions`).
 */
import { z } from "zod";
import { searchQuery, type Passage, type StepResult, type Task } from "../../core/types.ts";
import { INFORMATION_CLOSE, INVALID_ACTION_OBSERVATION, formatPassages, informationObservation, parseSearchR1Action } from "../../protocol/searchR1.ts";
import { validateFaultOptions, withFaults, type FaultOptions } from "../../env/faults.ts";
import { callTool, tool, ToolLimiter, type Tool } from "../../env/tool.ts";
import type { Env, EnvFactory, EpisodeInfo } from "../../env/types.ts";
import type { ToolCallSettings } from "../../env/toolEnv.ts";
import { BM25Index } from "../../retrieval/bm25.ts";
import { loadCorpus } from "../../retrieval/corpus.ts";
import type { Retriever } from "../../retrieval/retriever.ts";


/**
 * Config of `SearchEnv`.
 * - `retriever`: the search backend;
 * - `topK`: passages per search (positive integer; default 3, Search-R1 `GenerationConfig.topk`);
 * - `maxTurns`: policy turns per episode (positive integer; default 4); the episode ends truncated when the
 *   `maxTurns`-th turn is not an answer;
 * - `timeoutMs`: limit of one retrieval call in milliseconds (default 10 000);
 * - `latencyMs`: the simulated latency of one search (ms), `base + perPassage × passages returned`
 *   (default `{ base: 200, perPassage: 50 }`), recorded on the step for cost rewards; deterministic, never slept;
 * - `retries`, `backoffMs`, `maxBackoffMs`, `maxOutputChars`, `maxResultBytes`, `limiter`: the search call's retries,
 *   back-off (ms), output cap (characters), hard output limit (bytes) and shared per-tool concurrency limit — see
 *   `CallToolOptions` (defaults 0, 100, 5 000, 100 000, 16 MiB, none);
 * - `wrapTool`: wraps the search tool before use (e.g. `(t) => withFaults(t, …)` to harden an env, or a cache);
 * - `faults`: shorthand for `wrapTool: (t) => withFaults(t, faults)`, applied inside `wrapTool` when both are set.
 */
export interface SearchEnvConfig {
  retriever: Retriever;
  topK?: number;
  maxTurns?: number;
  timeoutMs?: number;
  latencyMs?: { base: number; perPassage: number };
  retries?: number;
  backoffMs?: number;
  maxBackoffMs?: number;
  maxOutputChars?: number;
  maxResultBytes?: number;
  limiter?: ToolLimiter;
  wrapTool?: (t: SearchTool) => SearchTool;
  faults?: FaultOptions;
}

/** Arguments of the search tool the env calls (validated, so a bad query is an error string, not a crash). */
/**
 * Most characters of one search query. BM25 runs synchronously, so the tool timeout cannot cut a huge query short;
 * the cap bounds one search's work (a longer query is a tool error observation; Search-R1 queries are a few words).
 */
export const MAX_SEARCH_QUERY_CHARS = 2048;
const SEARCH_INPUT = z.object({
  query: z.string().min(1).max(MAX_SEARCH_QUERY_CHARS, `a query is at most ${MAX_SEARCH_QUERY_CHARS} characters`),
  topK: z.number().int().positive(),
});

/** What the search tool must return: passages with string id, title and text (other fields pass unchecked). */
const SEARCH_OUTPUT = z.array(z.object({ id: z.string(), title: z.string(), text: z.string() }));

/** The search tool `SearchEnv` calls: `{query, topK}` → passages. */
export type SearchTool = Tool<typeof SEARCH_INPUT, Passage[]>;

/** Counters of the current episode. */
export interface SearchEnvStats {
  turns: number;
  searches: number;
  invalidActions: number;
}

/** The prompt `reset` returns: `question : {question}\n` (short, for a tiny word-level policy). */
export function searchPrompt(question: string): string {
  return `question : ${question}\n`;
}

/**
 * One Search-R1 episode at a time.
 * `step(text)`: a search retrieves `topK` passages and observes `\n\n<information>Doc 1(Title: …) …</information>\n\n`
 * (`info.passages` set); an answer ends the episode (observation ''); an invalid turn observes Search-R1's
 * corrective text and is counted; a failing/timing-out retriever observes `\n\n<information>error: …</information>\n\n`
 * with `info.error` and `info.toolError` (its kind) — whether the tool threw, hung past its timeout, or returned
 * something that is not a passage list or more than `maxOutputChars` characters — and the episode goes on. When the
 * `maxTurns`-th turn is not an answer the episode ends with `info.truncated` and
 * observation '' (that last search is not run, like Search-R1's final `do_search=False` round).
 * `<information>` observations declare `observationClose: INFORMATION_CLOSE`, so a rollout that caps them keeps the
 * whole `</information>\n\n`.
 */
export class SearchEnv implements Env {
  private readonly topK: number;
  private readonly maxTurns: number;
  private readonly timeoutMs: number;
  private readonly latency: { base: number; perPassage: number };
  private readonly searchTool: SearchTool;
  private readonly callOptions: { retries?: number; backoffMs?: number; maxBackoffMs?: number; maxOutputChars?: number; maxResultBytes?: number; limiter?: ToolLimiter };
  private task: Task | null = null;
  private episode: EpisodeInfo = {};
  private done = false;
  private counts: SearchEnvStats = { turns: 0, searches: 0, invalidActions: 0 };

  /** @throws Error when topK, maxTurns or timeoutMs is not a positive integer (naming the field) */
  constructor(config: SearchEnvConfig) {
    this.topK = config.topK ?? 3;
    this.maxTurns = config.maxTurns ?? 4;
    this.timeoutMs = config.timeoutMs ?? 10_000;
    for (const [k, v] of Object.entries({ topK: this.topK, maxTurns: this.maxTurns, timeoutMs: this.timeoutMs })) {
      if (!Number.isInteger(v) || v <= 0) throw new Error(`SearchEnvConfig.${k} must be a positive integer, got ${v}`);
    }
    this.latency = config.latencyMs ?? { base: 200, perPassage: 50 };
    if (!(this.latency.base >= 0 && this.latency.perPassage >= 0)) {
      throw new Error(`SearchEnvConfig.latencyMs: base and perPassage must be ≥ 0 ms, got ${JSON.stringify(this.latency)}`);
    }
    const retriever = config.retriever;
    let search: SearchTool = tool({
      name: "search",
      description: "Retrieve the top-k passages for a query (BM25).",
      inputSchema: SEARCH_INPUT,
      outputSchema: SEARCH_OUTPUT,
      execute: async ({ query, topK }) => retriever.search(query, topK),
    });
    if (config.faults !== undefined) search = withFaults(search, config.faults);
    if (config.wrapTool !== undefined) search = config.wrapTool(search);
    this.searchTool = search;
    const { retries, backoffMs, maxBackoffMs, maxOutputChars, maxResultBytes, limiter } = config;
    this.callOptions = { retries, backoffMs, maxBackoffMs, maxOutputChars, maxResultBytes, limiter };
  }

  /** Counters of the current episode (a copy). */
  get stats(): SearchEnvStats {
    return { ...this.counts };
  }

  /** The current task, or null before the first reset. */
  get currentTask(): Task | null {
    return this.task;
  }

  /**
   * Starts an episode on `task`; returns `searchPrompt(task.question)`. `episode` (from the rollout) names the
   * episode's tool calls (`<task id>#<seed>:<turn>`, the key fault injection draws on) and bounds them by its
   * deadline.
   * @throws Error when task.question is missing or blank
   */
  async reset(task: Task, episode: EpisodeInfo = {}): Promise<string> {
    if (typeof task?.question !== "string" || task.question.trim() === "") {
      throw new Error(`SearchEnv.reset: task.question must be a non-empty string (task id ${task?.id})`);
    }
    this.task = task;
    this.episode = episode;
    this.done = false;
    this.counts = { turns: 0, searches: 0, invalidActions: 0 };
    return searchPrompt(task.question);
  }

  /**
   * Applies one policy turn (see the class doc). Never throws on model output or retriever failure.
   * @throws Error when called before `reset` or after the episode ended (a caller bug)
   */
  async step(actionText: string): Promise<StepResult> {
    if (this.task === null) throw new Error("SearchEnv.step: call reset(task) first");
    if (this.done) throw new Error("SearchEnv.step: the episode is done; call reset(task) to start another");
    const action = parseSearchR1Action(actionText);
    this.counts.turns++;
    if (action.type === "invalid") this.counts.invalidActions++;
    const query = searchQuery(action);
    if (query !== undefined) this.counts.searches++;

    if (action.type === "answer") {
      this.done = true;
      return { observation: "", done: true, info: { action } };
    }
    if (this.counts.turns >= this.maxTurns) {
      this.done = true;
      return { observation: "", done: true, info: { action, truncated: true } };
    }
    if (action.type === "invalid") {
      return { observation: INVALID_ACTION_OBSERVATION, done: false, info: { action } };
    }
    const callKey = this.episode.seed === undefined ? undefined : `${this.task.id}#${this.episode.seed}:${this.counts.turns - 1}`;
    const res = await callTool(this.searchTool, { query: query!, topK: this.topK }, {
      timeoutMs: this.timeoutMs,
      ...this.callOptions,
      deadlineAt: this.episode.deadlineAt,
      callKey,
    });
    if (!res.ok) {
      const latencyMs = this.latency.base;
      return {
        observation: informationObservation(`error: ${res.error}`),
        observationClose: INFORMATION_CLOSE,
        done: false,
        info: { action, error: res.error, tool: "search", latencyMs, toolError: res.kind },
      };
    }
    const passages = res.value.slice(0, this.topK);
    const latencyMs = this.latency.base + this.latency.perPassage * passages.length;
    return {
      observation: informationObservation(formatPassages(passages)),
      observationClose: INFORMATION_CLOSE,
      done: false,
      info: { action, passages, tool: "search", latencyMs },
    };
  }
}

/**
 * Loads a wiki-18 JSONL corpus, indexes it with BM25 and returns the `topK` best passages for `query` (for the
 * `arl search` command). The index is rebuilt on each call.
 * @throws Error from `loadCorpus` (file, line, field) or when topK is not a positive integer
 */
export async function searchCorpus(file: string, query: string, topK: number): Promise<Passage[]> {
  return new BM25Index(await loadCorpus(file)).search(query, topK);
}

/**
 * Tool-call settings of search environments, as the config's `env.tools` section holds them: per-attempt
 * `timeoutMs` (ms), `retries`, `backoffMs` / `maxBackoffMs` (ms), `maxConcurrency` (calls of one tool at once
 * across all episodes of the factory; 0 = unlimited), `maxOutputChars` (characters), `maxResultBytes` (bytes).
 */
export type SearchToolSettings = ToolCallSettings;

/**
 * A factory of search environments over one retriever that share one concurrency limiter (so `maxConcurrency`
 * bounds the calls of all concurrent episodes), with the config's `env.tools` and `env.faults` applied (faults only
 * when `rate > 0`). `settings` is shaped like the config's `env` section, e.g.
 * `searchEnvFactory(index, config.env)`.
 * @throws Error when maxConcurrency is not an integer ≥ 0, or from `validateFaultOptions`
 */
export function searchEnvFactory(
  retriever: Retriever,
  settings: { topK?: number; maxTurns?: number; tools?: SearchToolSettings; faults?: FaultOptions; latencyMs?: { base: number; perPassage: number } } = {},
): EnvFactory {
  const { maxConcurrency = 0, ...call } = settings.tools ?? {};
  const limiter = new ToolLimiter(maxConcurrency); // throws on a bad value, naming the field
  const faults = settings.faults !== undefined && settings.faults.rate > 0 ? settings.faults : undefined;
  if (faults) validateFaultOptions(faults);
  return () =>
    new SearchEnv({
      retriever,
      topK: settings.topK,
      maxTurns: settings.maxTurns,
      latencyMs: settings.latencyMs,
      ...call,
      limiter: maxConcurrency > 0 ? limiter : undefined,
      faults,
    });
}
