/**
 * What every sampling engine with a KV cache shares (`BatchedSampler`): argument checks, requests and rows, batching,
 * seeding, token draws (`TokenSampler`) and stopping; a `LogitsEngine` computes the logits — `EmbeddedSampler` on
 * jax-js (`./sampler.ts`), `OnnxSampler` on onnxruntime-node (`../onnx/sampler.ts`).
 *
 * - Dynamic batching: every `sample()` call made before the next `setImmediate` turn (e.g. all episodes of a
 *   rollout step, a GRPO group with n = G) joins one batch; calls arriving while a batch runs form the next one.
 *   Batches are formed by event order only, never by wall-clock windows.
 * - Randomness is drawn in JS from each row's own PRNG (seeded from the call's seed and the sample index), so the
 *   same seed gives the same tokens whatever else is in the batch (up to float noise in the logits).
 */
import { Rng } from "../../core/rng.ts";
import type { StopReason } from "../../core/types.ts";
import type { SampledSequence, SampleOptions, SamplingClient } from "../../core/sampling.ts";
import type { GPTConfig, GPTParams } from "./gpt.ts";
import { TokenSampler } from "./tokenSampler.ts";

/** The weights a sampling batch uses: a reference to the device params and host copies of the embeddings. */
export interface WeightsSnapshot {
  /** A new reference; the sampler disposes it after the batch. */
  params: GPTParams;
  /**
   * Changes whenever the weights change (after an applied update or a load); engines that keep derived copies of
   * the weights (the ONNX session) rebuild them when it differs. When absent, the identity of `wte` is used (the
   * backend replaces its host tables on every change).
   */
  version?: number;
  /** Token embedding `[V*D]` (row-major). */
  wte: Float32Array;
  /** Position embedding `[C*D]`. */
  wpe: Float32Array;
  /** Every weight by name on the host, when the backend keeps them there (the onnx trainer): read instead of `params`. */
  host?: Map<string, Float32Array>;
}

/** A `sample()` call waiting for its batch. */
interface Request {
  prompt: number[];
  opts: SampleOptions;
  resolve: (r: SampledSequence[]) => void;
  reject: (e: unknown) => void;
}

/** One sequence being decoded: a request has `n` rows, each with its own PRNG. */
interface Row {
  req: Request;
  prompt: number[];
  rng: Rng;
  /** New tokens allowed: min(maxTokens, contextLength − prompt length). */
  maxNew: number;
  tokens: number[];
  logprobs: number[];
  done: boolean;
  stopReason: StopReason;
}

/**
 * One batch's decoding on a logits engine: prefill once, then one decode step per new token. Rows are indexed
 * 0..n−1 in the order given to `LogitsEngine.open`; logits buffers hold row i at `[i*V, (i+1)*V)` (an engine may
 * return a longer buffer, e.g. with padding rows after row n−1).
 */
export interface DecodeRun {
  /** Logits at each row's last prompt token, `[≥n, V]` row-major. @throws Error when the engine fails */
  prefill(): Promise<Float32Array>;
  /**
   * Decode step j (0-based): every row feeds its j-th new token `next[i]` (position prompt length + j) and gets the
   * logits predicting the next one.
   * @param next `[n]` token ids; rows already finished repeat their last token (their logits are ignored)
   * @param j the step index (the j-th new token of every row is fed)
   * @param done `[n]` 1 for rows that have finished (the engine may skip them), else 0
   * @returns logits `[≥n, V]`; the buffer may be reused by the next call
   */
  step(next: Int32Array, j: number, done: Uint8Array): Promise<Float32Array>;
  /** Rows the engine actually computed (≥ n: padding), for `lastBatch`. */
  readonly paddedRows: number;
  /** Prompt slots per row in the cache (tokens, padded), for `lastBatch`. */
  readonly promptLen: number;
  /** Cache slots per row after `decodeSteps` steps (tokens), for `lastBatch`. */
  slots(decodeSteps: number): number;
  /** Frees what the run holds (called once, also after an error). */
  close(): void;
}

/** Computes logits for `BatchedSampler`: a KV-cache forward of the policy over a batch of prompts. */
export interface LogitsEngine {
  /**
   * Starts a batch.
   * @param prompts `[n][len]` token ids (1 ≤ len ≤ contextLength, already validated)
   * @param maxSteps the most decode steps the batch will run (= most new tokens of a row − 1; tokens)
   */
  open(prompts: number[][], maxSteps: number): Promise<DecodeRun>;
}

/** Statistics of the last batch of a `BatchedSampler` (for benchmarks). */
export interface BatchStats {
  /** Rows (sequences) in the batch. */
  rows: number;
  /** Rows the engine computed, padding included. */
  paddedRows: number;
  /** Prompt slots per row (tokens, padded). */
  promptLen: number;
  /** Cache slots per row at the end (tokens). */
  slots: number;
  /** Decode steps run (each feeds one token per row). */
  decodeSteps: number;
  /** Wall time of the prefill (ms), weight refresh included. */
  prefillMs: number;
  /** Wall time of sampling + decode steps (ms). */
  decodeMs: number;
}

/**
 * The engine-independent part of a `SamplingClient` with a KV cache: argument checks, dynamic batching (every
 * `sample()` call made before the next `setImmediate` turn joins one batch; calls arriving while a batch runs form
 * the next one — by event order only, never by wall clock), per-row PRNGs (seeded from the call's seed and the
 * sample index, so the same seed gives the same tokens whatever else is in the batch, up to float noise in the
 * logits), token draws (`TokenSampler`), stop tokens, `maxTokens` and the context-length cap. Subclasses supply the
 * `LogitsEngine`.
 */
export class BatchedSampler implements SamplingClient {
  /** Model shape (defaults filled). */
  protected readonly config: Required<GPTConfig>;
  private readonly engine: LogitsEngine;
  private readonly maxBatchRows: number;
  private queue: Request[] = [];
  private scheduled = false;
  private running = false;
  /** Statistics of the last batch (a new object per batch), for benchmarks. */
  lastBatch: BatchStats = { rows: 0, paddedRows: 0, promptLen: 0, slots: 0, decodeSteps: 0, prefillMs: 0, decodeMs: 0 };

  /**
   * @param config model shape (defaults filled)
   * @param engine computes the logits of each batch
   * @param maxBatchRows most rows decoded together; larger batches run as several in sequence (default 256)
   */
  constructor(config: Required<GPTConfig>, engine: LogitsEngine, maxBatchRows = 256) {
    this.config = config;
    this.engine = engine;
    this.maxBatchRows = maxBatchRows;
  }

  /**
   * Samples `n` continuations of a prompt. Stop tokens are included in the output; a row also ends after
   * `maxTokens` new tokens ("length") or when prompt + output fills the context window ("context").
   * @param promptTokens `[prompt]` token ids, 1 ≤ length ≤ contextLength
   * @returns `n` sequences, each `tokens`/`logprobs` `[new]` (nats, of the temperature-scaled distribution)
   * @throws Error (rejects) when the prompt is empty or longer than the context window, a token id is outside the
   *   vocabulary, or n/maxTokens/temperature are invalid; rejects with the engine's error when a batch fails
   */
  sample(promptTokens: number[], options: SampleOptions): Promise<SampledSequence[]> {
    const { contextLength: C, vocabSize: V } = this.config;
    try {
      if (promptTokens.length > C) {
        throw new Error(`prompt has ${promptTokens.length} tokens but the context window is ${C} tokens`);
      }
      if (promptTokens.length === 0) throw new Error("empty prompt");
      for (const t of promptTokens) {
        if (!Number.isInteger(t) || t < 0 || t >= V) throw new Error(`prompt token id ${t} outside [0, ${V})`);
      }
      if (!Number.isInteger(options.n) || options.n < 1) throw new Error(`n must be a positive integer, got ${options.n}`);
      if (!Number.isInteger(options.maxTokens) || options.maxTokens < 0) {
        throw new Error(`maxTokens must be a non-negative integer, got ${options.maxTokens}`);
      }
      if (!(options.temperature >= 0)) throw new Error(`temperature must be ≥ 0, got ${options.temperature}`);
    } catch (e) {
      return Promise.reject(e);
    }
    return new Promise((resolve, reject) => {
      this.queue.push({ prompt: promptTokens.slice(), opts: options, resolve, reject });
      if (!this.scheduled && !this.running) {
        this.scheduled = true;
        setImmediate(() => void this.flush());
      }
    });
  }

  /** Runs queued requests, batch after batch, until the queue is empty. */
  private async flush(): Promise<void> {
    this.scheduled = false;
    if (this.running) return;
    this.running = true;
    try {
      while (this.queue.length > 0) {
        const reqs = this.queue;
        this.queue = [];
        const rows: Row[] = [];
        for (const req of reqs) rows.push(...this.makeRows(req));
        const failed = new Set<Request>();
        for (let i = 0; i < rows.length; i += this.maxBatchRows) {
          const batch = rows.slice(i, i + this.maxBatchRows).filter((r) => !failed.has(r.req));
          try {
            await this.runBatch(batch);
          } catch (e) {
            for (const r of batch) {
              if (!failed.has(r.req)) r.req.reject(e);
              failed.add(r.req);
            }
          }
        }
        for (const req of reqs) {
          if (failed.has(req)) continue;
          const mine = rows.filter((r) => r.req === req);
          req.resolve(mine.map((r) => ({ tokens: r.tokens, logprobs: r.logprobs, stopReason: r.stopReason })));
        }
      }
    } finally {
      this.running = false;
    }
  }

  private makeRows(req: Request): Row[] {
    const base = new Rng(req.opts.seed);
    const room = this.config.contextLength - req.prompt.length;
    const maxNew = Math.min(req.opts.maxTokens, room);
    const rows: Row[] = [];
    for (let j = 0; j < req.opts.n; j++) {
      rows.push({
        req,
        prompt: req.prompt,
        rng: new Rng(base.seed()),
        maxNew,
        tokens: [],
        logprobs: [],
        done: maxNew === 0,
        stopReason: req.opts.maxTokens <= room ? "length" : "context",
      });
    }
    return rows;
  }

  /** Decodes one batch of rows to completion (mutates the rows). */
  private async runBatch(rows: Row[]): Promise<void> {
    if (rows.every((r) => r.done)) return;
    const V = this.config.vocabSize;
    const n = rows.length;
    // Decode step j feeds every row's j-th new token; the last sampled token is never fed back.
    const steps = Math.max(...rows.map((r) => r.maxNew)) - 1;
    const draw = new TokenSampler(V);
    const next = new Int32Array(n);
    const done = new Uint8Array(n);
    const t0 = performance.now();
    const run = await this.engine.open(
      rows.map((r) => r.prompt),
      steps,
    );
    let tDecode = t0;
    let decodeSteps = 0;
    try {
      let logits = await run.prefill();
      tDecode = performance.now();
      for (let j = 0; ; j++) {
        let active = 0;
        rows.forEach((r, i) => {
          if (r.done) return;
          const { token, logprob } = draw.draw(logits, i * V, r.req.opts.temperature, r.rng);
          r.tokens.push(token);
          r.logprobs.push(logprob);
          if (r.req.opts.stop?.includes(token)) {
            r.done = true;
            r.stopReason = "stop";
          } else if (r.tokens.length >= r.maxNew) {
            r.done = true; // stopReason preset: "length", or "context" when the window was the limit
          } else {
            active++;
          }
          next[i] = token;
        });
        if (active === 0) break;
        rows.forEach((r, i) => (done[i] = r.done ? 1 : 0));
        logits = await run.step(next, j, done);
        decodeSteps++;
      }
    } finally {
      run.close();
    }
    const t1 = performance.now();
    this.lastBatch = {
      rows: n,
      paddedRows: run.paddedRows,
      promptLen: run.promptLen,
      slots: run.slots(decodeSteps),
      decodeSteps,
      prefillMs: tDecode - t0,
      decodeMs: t1 - tDecode,
    };
  }
}
