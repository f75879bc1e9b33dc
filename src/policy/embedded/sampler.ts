/**
 * The embedded sampling engine: batched autoregressive decoding with a KV cache, over the backend's current
 * weights. `BatchedSampler` holds what every engine shares (requests, rows, batching, seeding, draws, stopping);
 * a `LogitsEngine` computes the logits: `EmbeddedSampler` on jax-js (below), `OnnxSampler` on onnxruntime-node
 * (`../onnx/sampler.ts`).
 *
 * - Dynamic batching: every `sample()` call made before the next `setImmediate` turn (e.g. all episodes of a
 *   rollout step, a GRPO group with n = G) joins one batch; calls arriving while a batch runs form the next one.
 *   Batches are formed by event order only, never by wall-clock windows.
 * - KV cache in two parts per layer: the prompt cache `[B, P, H, hd]` written once by the prefill, and a small
 *   recent cache `[B, R, H, hd]` (R ≥ new tokens) where decode step j writes every row's j-th new token with a
 *   one-hot blend. jax-js has no in-place update, so each step rewrites the cache it writes to; keeping that part
 *   small (R, not the context) makes the write cheap. Shapes stay static, so each (rows, P, R) compiles once.
 * - Rows of different prompt lengths share a batch: prompts are right-padded to P, pad slots are masked per row,
 *   and each row has its own positions (prompt length + j). Rows are padded to a power of two, P to a multiple of
 *   `promptBucket`, R to a power of two, so few programs are compiled.
 * - Randomness is drawn in JS from each row's own PRNG (seeded from the call's seed and the sample index), so the
 *   same seed gives the same tokens whatever else is in the batch (up to float noise in the logits).
 */
import { Rng } from "../../core/rng.ts";
import type { StopReason } from "../../core/types.ts";
import type { SampledSequence, SampleOptions, SamplingClient } from "../types.ts";
import {
  causalBias,
  decodeMasks,
  decodeStep,
  embedRows,
  prefill,
  type GPTConfig,
  type GPTParams,
  type KVCache,
} from "./gpt.ts";
import { jit, numpy as np, tree, type OwnedFunction } from "./jax.ts";

type Arr = np.Array;

/** Options of the sampling engine. */
export interface SamplerOptions {
  /** Most rows decoded together (default 256, a power of two); larger batches run as several in sequence. */
  maxBatchRows?: number;
  /** Prompt lengths are padded to a multiple of this (tokens, default 32). */
  promptBucket?: number;
  /** Prompt tokens per prefill program call (default 4096); prompts are prefilled in row chunks of this size. */
  prefillTokens?: number;
  /**
   * Run each decode step synchronously on the main thread (default true). A decode step is many small kernels;
   * dispatching each to worker threads costs more in messaging than it gains, while prefill (large kernels) still
   * uses the threads. Between steps the event loop is yielded to (setImmediate), so other work can interleave.
   */
  syncDecode?: boolean;
}

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
}

interface Request {
  prompt: number[];
  opts: SampleOptions;
  resolve: (r: SampledSequence[]) => void;
  reject: (e: unknown) => void;
}

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

type PrefillProgram = OwnedFunction<(p: GPTParams, x0: Arr, lastIdx: Arr, bias: Arr) => { logits: Arr; cache: KVCache }>;
type DecodeProgram = OwnedFunction<
  (
    p: GPTParams,
    prompt: KVCache,
    recent: KVCache,
    x0: Arr,
    write: Arr,
    promptBias: Arr,
    recentBias: Arr,
  ) => { logits: Arr; cache: KVCache }
>;

/** The next power of two ≥ n (n ≥ 1): decode batches are padded to it, so few programs are compiled. */
function nextPow2(n: number): number {
  return 1 << Math.ceil(Math.log2(Math.max(1, n)));
}

/** The largest power of two ≤ n (n ≥ 1). */
function prevPow2(n: number): number {
  return 1 << Math.floor(Math.log2(Math.max(1, n)));
}

/**
 * Draws one token from the logits row `logits[offset .. offset+V)` at `temperature` (0 = greedy: the first
 * maximum) by inverse-CDF sampling with one `rng.next()`; computed in float64. `scratch` is a `[V]` workspace.
 * @returns the token and its logprob (nats) under softmax(logits / temperature), the distribution sampled from;
 *   for greedy, under softmax(logits)
 */
export function sampleToken(
  logits: Float32Array,
  offset: number,
  V: number,
  temperature: number,
  rng: Rng,
  scratch: Float64Array,
): { token: number; logprob: number } {
  const inv = temperature > 0 ? 1 / temperature : 1;
  let m = -Infinity;
  let arg = 0;
  for (let i = 0; i < V; i++) {
    const x = logits[offset + i];
    if (x > m) {
      m = x;
      arg = i;
    }
  }
  let z = 0;
  for (let i = 0; i < V; i++) {
    const e = Math.exp((logits[offset + i] - m) * inv);
    scratch[i] = e;
    z += e;
  }
  let token = arg;
  if (temperature > 0) {
    const u = rng.next() * z;
    let acc = 0;
    token = -1;
    for (let i = 0; i < V; i++) {
      acc += scratch[i];
      if (acc > u) {
        token = i;
        break;
      }
    }
    // Float rounding can leave u ≥ acc; fall back to the last token with mass.
    if (token < 0) for (let i = V - 1; i >= 0 && token < 0; i--) if (scratch[i] > 0) token = i;
  }
  return { token, logprob: (logits[offset + token] - m) * inv - Math.log(z) };
}

const programCache = new Map<number, { prefill: PrefillProgram; decode: DecodeProgram }>();

/** The jit'd prefill and decode programs, shared by all samplers with the same head count (pure functions). */
function samplerPrograms(H: number): { prefill: PrefillProgram; decode: DecodeProgram } {
  let p = programCache.get(H);
  if (!p) {
    p = {
      decode: jit(
        (params: GPTParams, prompt: KVCache, recent: KVCache, x0: Arr, write: Arr, promptBias: Arr, recentBias: Arr) =>
          decodeStep(params, prompt, recent, x0, write, promptBias, recentBias, H),
      ) as unknown as DecodeProgram,
      prefill: jit((params: GPTParams, x0: Arr, lastIdx: Arr, bias: Arr) =>
        prefill(params, x0, lastIdx, bias, H),
      ) as unknown as PrefillProgram,
    };
    programCache.set(H, p);
  }
  return p;
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
 * logits), token draws (`sampleToken`), stop tokens, `maxTokens` and the context-length cap. Subclasses supply the
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
    const scratch = new Float64Array(V);
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
          const { token, logprob } = sampleToken(logits, i * V, V, r.req.opts.temperature, r.rng, scratch);
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

/**
 * The jax-js logits engine (see the module comment): two-part KV cache, rows padded to a power of two, prompts to
 * a multiple of `promptBucket`, prefill in row chunks of ≈ `prefillTokens` tokens, decode steps on the main thread
 * when `syncDecode`.
 */
class JaxEngine implements LogitsEngine {
  private readonly prefillProgram: PrefillProgram;
  private readonly decodeProgram: DecodeProgram;

  constructor(
    private readonly config: Required<GPTConfig>,
    private readonly borrowParams: () => WeightsSnapshot,
    private readonly promptBucket: number,
    private readonly prefillTokens: number,
    private readonly syncDecode: boolean,
  ) {
    const programs = samplerPrograms(config.nHeads);
    this.decodeProgram = programs.decode;
    this.prefillProgram = programs.prefill;
  }

  async open(prompts: number[][], maxSteps: number): Promise<DecodeRun> {
    const { contextLength: C, vocabSize: V, dModel: D, nLayers: L, nHeads: H } = this.config;
    const hd = D / H;
    const n = prompts.length;
    const B = nextPow2(n);
    const maxLen = Math.max(...prompts.map((p) => p.length));
    const P = Math.min(C, Math.ceil(maxLen / this.promptBucket) * this.promptBucket);
    const R = Math.max(8, nextPow2(maxSteps));
    const lens = new Int32Array(B).fill(1);
    prompts.forEach((p, i) => (lens[i] = p.length));
    // Prefill in row chunks of ≈ prefillTokens tokens (a power of two rows, so chunks tile B): bounds the memory of
    // the prefill program, which jax-js allocates all at once.
    const chunkRows = Math.min(B, prevPow2(Math.max(1, Math.floor(this.prefillTokens / P))));
    const { params, wte, wpe } = this.borrowParams();
    const nextB = new Int32Array(B);
    const pos = new Int32Array(B);
    const ks: Arr[][] = Array.from({ length: L }, () => []);
    const vs: Arr[][] = Array.from({ length: L }, () => []);
    let prompt: KVCache | null = null;
    let recent: KVCache | null = null;
    const { prefillProgram, decodeProgram, syncDecode } = this;
    return {
      paddedRows: B,
      promptLen: P,
      slots: (decodeSteps: number) => P + (decodeSteps > 0 ? Math.max(8, nextPow2(decodeSteps)) : 0),
      async prefill(): Promise<Float32Array> {
        const pBias = causalBias(P);
        const logits = new Float32Array(B * V);
        for (let c = 0; c < B; c += chunkRows) {
          if (c >= n) {
            // Chunks of padding rows only: an empty cache is enough.
            for (let l = 0; l < L; l++) {
              ks[l].push(np.zeros([chunkRows, P, H, hd]));
              vs[l].push(np.zeros([chunkRows, P, H, hd]));
            }
            continue;
          }
          const tokens = new Int32Array(chunkRows * P);
          const lastIdx = new Int32Array(chunkRows);
          prompts.slice(c, c + chunkRows).forEach((p, i) => {
            tokens.set(p, i * P);
            lastIdx[i] = p.length - 1;
          });
          const out = prefillProgram(
            tree.ref(params),
            np.array(embedRows(wte, D, tokens), { shape: [chunkRows, P, D] }),
            np.array(lastIdx, { shape: [chunkRows], dtype: np.int32 }),
            np.array(pBias, { shape: [P, P] }),
          );
          for (let l = 0; l < L; l++) {
            ks[l].push(out.cache.k[l]);
            vs[l].push(out.cache.v[l]);
          }
          logits.set((await out.logits.data()) as Float32Array, c * V);
        }
        const cat = (xs: Arr[]): Arr => (xs.length === 1 ? xs[0] : np.concatenate(xs, 0));
        prompt = { k: ks.map(cat), v: vs.map(cat) };
        ks.length = 0;
        vs.length = 0;
        recent = {
          k: Array.from({ length: L }, () => np.zeros([B, R, H, hd])),
          v: Array.from({ length: L }, () => np.zeros([B, R, H, hd])),
        };
        return logits;
      },
      async step(next: Int32Array, j: number): Promise<Float32Array> {
        if (!prompt || !recent) throw new Error("JaxEngine: step before prefill");
        // Finished and padding rows keep feeding a token; their outputs are ignored.
        nextB.set(next);
        for (let i = 0; i < B; i++) pos[i] = Math.min(lens[i] + j, C - 1);
        const m = decodeMasks(lens, P, R, j);
        const cur: KVCache = recent;
        recent = null; // consumed by the call below
        const out: { logits: Arr; cache: KVCache } = decodeProgram(
          tree.ref(params),
          tree.ref(prompt),
          cur,
          np.array(embedRows(wte, D, nextB, wpe, pos), { shape: [B, D] }),
          np.array(m.write, { shape: [R] }),
          np.array(m.promptBias, { shape: [B, P] }),
          np.array(m.recentBias, { shape: [R] }),
        );
        recent = out.cache;
        // Reading the logits is the one host round trip per step (and keeps queued work bounded).
        if (syncDecode) {
          const logits = out.logits.dataSync() as Float32Array;
          await new Promise<void>((resolve) => setImmediate(resolve)); // let other tasks run between steps
          return logits;
        }
        return (await out.logits.data()) as Float32Array;
      },
      close(): void {
        for (const xs of [...ks, ...vs]) for (const a of xs) a.dispose();
        if (prompt) tree.dispose(prompt);
        if (recent) tree.dispose(recent);
        tree.dispose(params);
      },
    };
  }
}

/**
 * `SamplingClient` over a parameter source (the backend's current weights, borrowed per batch), decoding on
 * jax-js (`JaxEngine`); batching, seeding and stopping as `BatchedSampler`.
 */
export class EmbeddedSampler extends BatchedSampler {
  /**
   * @param config model shape (defaults filled)
   * @param borrowParams returns a new reference to the current weights; the sampler disposes it after the batch
   */
  constructor(config: Required<GPTConfig>, borrowParams: () => WeightsSnapshot, options: SamplerOptions = {}) {
    super(
      config,
      new JaxEngine(config, borrowParams, options.promptBucket ?? 32, options.prefillTokens ?? 4096, options.syncDecode ?? true),
      options.maxBatchRows ?? 256,
    );
  }
}
