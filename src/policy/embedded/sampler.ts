/**
 * The embedded sampling engine: batched autoregressive decoding with a KV cache on jax-js, over the backend's
 * current weights (`EmbeddedSampler`). Batching, seeding, draws and stopping are `BatchedSampler`'s
 * (`./batchedSampler.ts`); this file is the jax-js `LogitsEngine`.
 *
 * - KV cache in two parts per layer: the prompt cache `[B, P, H, hd]` written once by the prefill, and a small
 *   recent cache `[B, R, H, hd]` (R ≥ new tokens) where decode step j writes every row's j-th new token with a
 *   one-hot blend. jax-js has no in-place update, so each step rewrites the cache it writes to; keeping that part
 *   small (R, not the context) makes the write cheap. Shapes stay static, so each (rows, P, R) compiles once.
 * - Rows of different prompt lengths share a batch: prompts are right-padded to P, pad slots are masked per row,
 *   and each row has its own positions (prompt length + j). Rows are padded to a power of two, P to a multiple of
 *   `promptBucket`, R to a power of two, so few programs are compiled.
 */
import { BatchedSampler, type DecodeRun, type LogitsEngine, type WeightsSnapshot } from "./batchedSampler.ts";
import {
  causalBias,
  decodeMasks,
  decodeStep,
  embedRows,
  prefill,
  type DecodeCaches,
  type DecodeStepInput,
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

type PrefillProgram = OwnedFunction<(p: GPTParams, x0: Arr, lastIdx: Arr, bias: Arr) => { logits: Arr; cache: KVCache }>;
type DecodeProgram = OwnedFunction<(p: GPTParams, caches: DecodeCaches, input: DecodeStepInput) => { logits: Arr; cache: KVCache }>;

/** The next power of two ≥ n (n ≥ 1): decode batches are padded to it, so few programs are compiled. */
function nextPow2(n: number): number {
  return 1 << Math.ceil(Math.log2(Math.max(1, n)));
}

/** The largest power of two ≤ n (n ≥ 1). */
function prevPow2(n: number): number {
  return 1 << Math.floor(Math.log2(Math.max(1, n)));
}

const programCache = new Map<number, { prefill: PrefillProgram; decode: DecodeProgram }>();

/** The jit'd prefill and decode programs, shared by all samplers with the same head count (pure functions). */
function samplerPrograms(H: number): { prefill: PrefillProgram; decode: DecodeProgram } {
  let p = programCache.get(H);
  if (!p) {
    p = {
      // The arguments flatten (jax-js pytrees, keys in insertion order) to the leaves params, prompt, recent, x0,
      // write, promptBias, recentBias: callers build the two objects with their keys in that order.
      decode: jit((params: GPTParams, caches: DecodeCaches, input: DecodeStepInput) =>
        decodeStep(params, caches, input, H),
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
          { prompt: tree.ref(prompt), recent: cur },
          {
            x0: np.array(embedRows(wte, D, nextB, wpe, pos), { shape: [B, D] }),
            write: np.array(m.write, { shape: [R] }),
            promptBias: np.array(m.promptBias, { shape: [B, P] }),
            recentBias: np.array(m.recentBias, { shape: [R] }),
          },
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
