/**
 * A `SamplingClient` over any OpenAI-compatible server's `POST /v1/completions`, through the official `openai`
 * client. The prompt is sent as token ids (vLLM, llama.cpp and this project's `arl serve openai` accept
 * `prompt: number[]`), with vLLM's extras `return_token_ids: true` (the sampled ids come back as
 * `choices[i].token_ids`), `stop_token_ids`, `include_stop_str_in_output: true` and `skip_special_tokens: false`,
 * and `logprobs` (the sampled token's logprob, `choices[i].logprobs.token_logprobs`).
 *
 * Trainable only when the server returns token ids and logprobs: RL trains on the exact tokens sampled, and the
 * PPO ratio needs the sampler's logprobs. A server that returns text only (the OpenAI API, Ollama, vLLM < 0.10.2)
 * makes `sample` throw `UntrainableServerError`; `probe()` says up front what a server returns. Such servers are
 * still usable for evaluation through the prompt-driven agents (src/baselines/).
 *
 * Caveat: vLLM reports logprobs of the raw model distribution by default; to get the logprobs of the distribution
 * actually sampled from at temperature ≠ 1 (what PPO's ratio needs, and what the embedded sampler returns), start
 * vLLM with `--logprobs-mode processed_logprobs`.
 *
 * Sources: vLLM `vllm/entrypoints/openai/protocol.py` (`CompletionRequest.return_token_ids`, `stop_token_ids`,
 * `include_stop_str_in_output`; `CompletionResponseChoice.token_ids`, `prompt_token_ids`) and
 * `tests/entrypoints/openai/test_return_token_ids.py`; OpenAI API reference (Completions: `logprobs`,
 * `finish_reason`, `seed`).
 */
import OpenAI from "openai";
import type { StopReason } from "../../core/types.ts";
import type { SampledSequence, SampleOptions, SamplingClient } from "../../core/sampling.ts";

/** Options of `OpenAISamplingClient`. */
export interface OpenAISamplingOptions {
  /** Base URL of the server's OpenAI API, e.g. `http://127.0.0.1:8000/v1`. */
  baseURL: string;
  /** Model id as the server names it (`GET /v1/models`). */
  model: string;
  /** API key sent as `Authorization: Bearer …` (default `EMPTY`, what vLLM's docs use for an open server). */
  apiKey?: string;
  /** Limit of one request (ms; default 600 000). */
  timeoutMs?: number;
  /** Retries of a failed request (connection errors, 408/409/429/5xx; default 2, the client's default). */
  maxRetries?: number;
  /** Further body fields for every request (e.g. `{top_k: -1}`); they override nothing this client sets. */
  extraBody?: Record<string, unknown>;
}

/** What a server returns, from `probe()`. */
export interface ServerCapabilities {
  /** The sampled token ids (`choices[0].token_ids`): required for training. */
  tokenIds: boolean;
  /** The sampled tokens' logprobs (`choices[0].logprobs.token_logprobs`): required for training. */
  logprobs: boolean;
  /** The prompt's token ids (`choices[0].prompt_token_ids`): informative only. */
  promptTokenIds: boolean;
  /** `tokenIds && logprobs`. */
  trainable: boolean;
}

/** Thrown when a server's reply lacks what training needs (token ids or logprobs). */
export class UntrainableServerError extends Error {}

/** The fields of a completions choice this client reads (vLLM's extras are not in the openai types). */
interface RawChoice {
  index?: number;
  text?: string;
  finish_reason?: string | null;
  token_ids?: unknown;
  prompt_token_ids?: unknown;
  logprobs?: { token_logprobs?: unknown } | null;
}

function isIntArray(x: unknown): x is number[] {
  return Array.isArray(x) && x.every((v) => Number.isInteger(v));
}

function isNumberArray(x: unknown): x is number[] {
  return Array.isArray(x) && x.every((v) => typeof v === "number" && Number.isFinite(v));
}

/**
 * OpenAI `finish_reason` → our `StopReason`: `stop` (a stop token or string, or end of sequence) → `stop`; `length`
 * and anything else (`content_filter`, `abort`, null) → `length`. The server cannot tell the context window from
 * `max_tokens`; `PolicyAgent` infers `context` from its own budget.
 */
export function stopReasonOf(finishReason: string | null | undefined): StopReason {
  return finishReason === "stop" ? "stop" : "length";
}

/**
 * `SamplingClient` over an OpenAI-compatible completions endpoint (see the module doc). Concurrent `sample` calls
 * are concurrent HTTP requests (the server batches them).
 */
export class OpenAISamplingClient implements SamplingClient {
  private readonly client: OpenAI;
  private readonly options: OpenAISamplingOptions;

  /** @throws Error when `baseURL` is not an http(s) URL or `model` is empty */
  constructor(options: OpenAISamplingOptions) {
    if (!/^https?:\/\//.test(options.baseURL)) {
      throw new Error(`OpenAISamplingClient: baseURL must be an http(s) URL such as http://127.0.0.1:8000/v1, got ${JSON.stringify(options.baseURL)}`);
    }
    if (options.model.trim() === "") throw new Error("OpenAISamplingClient: model must be a non-empty model id (see GET /v1/models)");
    this.options = options;
    this.client = new OpenAI({
      baseURL: options.baseURL,
      apiKey: options.apiKey || "EMPTY",
      timeout: options.timeoutMs ?? 600_000,
      maxRetries: options.maxRetries ?? 2,
    });
  }

  private describe(): string {
    return `${this.options.baseURL} (model ${JSON.stringify(this.options.model)})`;
  }

  private untrainable(what: string): UntrainableServerError {
    return new UntrainableServerError(
      `${this.describe()} returned no ${what}: this server cannot be trained from (RL needs the sampled token ids and ` +
        "their logprobs). Use vLLM ≥ 0.10.2 (returns them for return_token_ids: true and logprobs) or `arl serve openai`; " +
        "text-only servers (the OpenAI API, Ollama, llama.cpp server, SGLang's OpenAI endpoints) are evaluation-only: " +
        "arl eval --policy openai:MODEL --base-url URL",
    );
  }

  /** One completions request; errors name the server and model. */
  private async request(body: Record<string, unknown>): Promise<RawChoice[]> {
    let res: OpenAI.Completions.Completion;
    try {
      // vLLM's extras are not in CompletionCreateParams; the client sends the body object as given.
      res = await this.client.completions.create({ ...this.options.extraBody, ...body } as unknown as OpenAI.Completions.CompletionCreateParamsNonStreaming);
    } catch (e) {
      throw new Error(`${this.describe()}: completions request failed: ${(e as Error).message}`, { cause: e });
    }
    if (!Array.isArray(res?.choices)) throw new Error(`${this.describe()}: completions reply has no choices array`);
    return [...(res.choices as unknown as RawChoice[])].sort((a, b) => (a.index ?? 0) - (b.index ?? 0));
  }

  /**
   * Samples `n` continuations of a token prompt.
   * @param promptTokens `[prompt]` token ids in the server model's vocabulary
   * @returns `n` sequences: `tokens` `[new]` as sampled (stop token included, as vLLM returns it), `logprobs`
   *   `[new]` (nats, as the server reports them), `stopReason` from `finish_reason`
   * @throws UntrainableServerError when the reply lacks token ids or logprobs (naming the server, the model and
   *   the servers that work); Error when the request fails (naming the server) or the reply is malformed
   */
  async sample(promptTokens: number[], options: SampleOptions): Promise<SampledSequence[]> {
    const choices = await this.request({
      model: this.options.model,
      prompt: promptTokens,
      n: options.n,
      max_tokens: options.maxTokens,
      temperature: options.temperature,
      seed: options.seed,
      logprobs: 1,
      return_token_ids: true,
      ...(options.stop && options.stop.length > 0 ? { stop_token_ids: options.stop, include_stop_str_in_output: true } : {}),
      skip_special_tokens: false,
    });
    if (choices.length !== options.n) throw new Error(`${this.describe()}: asked for n = ${options.n} samples, got ${choices.length}`);
    return choices.map((c, i) => {
      if (!isIntArray(c.token_ids)) throw this.untrainable(`token ids (choices[${i}].token_ids)`);
      const lps = c.logprobs?.token_logprobs;
      if (!isNumberArray(lps)) throw this.untrainable(`logprobs (choices[${i}].logprobs.token_logprobs)`);
      if (lps.length !== c.token_ids.length) {
        throw new Error(`${this.describe()}: choices[${i}] has ${c.token_ids.length} token ids but ${lps.length} logprobs`);
      }
      return { tokens: c.token_ids, logprobs: lps, stopReason: stopReasonOf(c.finish_reason) };
    });
  }

  /**
   * Asks the server for a one-token completion of a short text prompt and reports what the reply holds.
   * @throws Error when the request fails (naming the server and model)
   */
  async probe(): Promise<ServerCapabilities> {
    const [c] = await this.request({
      model: this.options.model,
      prompt: "question : what is the capital of france ?",
      max_tokens: 1,
      temperature: 0,
      logprobs: 1,
      return_token_ids: true,
    });
    const tokenIds = c !== undefined && isIntArray(c.token_ids) && c.token_ids.length > 0;
    const logprobs = c !== undefined && isNumberArray(c.logprobs?.token_logprobs) && (c.logprobs?.token_logprobs as number[]).length > 0;
    const promptTokenIds = c !== undefined && isIntArray(c.prompt_token_ids) && c.prompt_token_ids.length > 0;
    return { tokenIds, logprobs, promptTokenIds, trainable: tokenIds && logprobs };
  }
}
