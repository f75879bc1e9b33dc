/**
 * The ONNX sampling engine: the same `SamplingClient` as the jax-js `EmbeddedSampler` (requests, batching by event
 * order, per-row seeded PRNGs, `TokenSampler` draws, stop tokens, `maxTokens`, context cap — all shared through
 * `BatchedSampler`), with the logits computed by onnxruntime-node on an ONNX graph of our GPT (`model.ts`) built
 * from the trainer's current weights.
 *
 * - Weights: each batch borrows the backend's current weights; when their version differs from the session's,
 *   the session is rebuilt from host copies of them before the batch (tens of ms for the small models here, see
 *   `rebuilds`), so each sampling batch uses the weights current when it starts.
 * - KV cache in JS memory, one per layer: keys `[rows, H, hd, S]` (transposed, so q·kᵀ is a plain MatMul) and
 *   values `[rows, H, S, hd]`, S = longest prompt + decode steps. Row i's prompt fills slots `[0, len_i)` and its
 *   j-th new token slot len_i + j, so each row's valid slots are a prefix, masked per row by `bias_past`. The graph
 *   returns only the new tokens' keys/values; the engine writes them into the cache, which is fed back to the next
 *   step without copying (onnxruntime-node wraps input buffers); until rows are dropped, onnxruntime writes the
 *   logits straight into the buffer the draws read.
 * - Prefill runs once per distinct prompt (the n samples of a call, or identical prompts of different calls, share
 *   it), in chunks of ≈ `prefillTokens` tokens, longest prompts first; its logits and cache are copied to every row
 *   with that prompt.
 * - Rows that finish early are dropped from the computed batch once no more than 3/4 of them are still running
 *   (the caches of the running rows are compacted in place), so a batch with stop tokens gets cheaper as it goes.
 * - Deterministic: the same seed, prompts and thread count on the same machine give identical tokens and logprobs
 *   (test/policy-onnx.test.ts checks 1 and 2 threads). The cache buffers are reused from batch to batch (zeroed).
 */
import type { InferenceSession, Tensor } from "onnxruntime-node";
import type { GPTConfig } from "../embedded/gpt.ts";
import { tree } from "../embedded/jax.ts";
import { BatchedSampler, type DecodeRun, type LogitsEngine, type WeightsSnapshot } from "../embedded/batchedSampler.ts";
import { io, MASKED } from "./model.ts";
import type { Ort } from "./ort.ts";
import { createGptSession, hostWeights, type GptSession, type OnnxSessionOptions } from "./session.ts";

/** Options of `OnnxSampler`. */
export interface OnnxSamplerOptions extends OnnxSessionOptions {
  /** Most rows decoded together (default 256); larger batches run as several in sequence. */
  maxBatchRows?: number;
  /** Prompt tokens per prefill run (default 4096): distinct prompts are prefilled in chunks of about this many. */
  prefillTokens?: number;
}

/** One session rebuild (a weight change seen by a new batch). */
export interface RebuildStats {
  /** Weights version the session was built for (`WeightsSnapshot.version`; null when the source has none). */
  version: number | null;
  /** Reading the weights to the host (ms). */
  readMs: number;
  /** Serialising the model + creating the session (ms). */
  buildMs: number;
  /** Serialised model size (bytes). */
  modelBytes: number;
}

type Feeds = Record<string, Tensor>;

const i64 = (xs: ArrayLike<number>): BigInt64Array => {
  const a = new BigInt64Array(xs.length);
  for (let i = 0; i < xs.length; i++) a[i] = BigInt(xs[i]);
  return a;
};

/**
 * KV-cache buffers reused from batch to batch (fresh multi-MB arrays cost page faults and GC on every batch), up
 * to `KEEP_BYTES` in all; larger ones are dropped after their batch.
 */
class CacheBuffers {
  static readonly KEEP_BYTES = 128 * 2 ** 20;
  private readonly slots: Float32Array[] = [];

  /** A zero-filled `[size]` view of buffer `slot` (grown when too small). */
  take(slot: number, size: number): Float32Array {
    const have = this.slots[slot];
    if (have && have.length >= size) {
      const view = have.subarray(0, size);
      view.fill(0);
      return view;
    }
    const fresh = new Float32Array(size);
    this.slots[slot] = fresh;
    return fresh;
  }

  /** Drops every buffer when together they exceed `KEEP_BYTES`. */
  trim(): void {
    const bytes = this.slots.reduce((s, a) => s + (a?.byteLength ?? 0), 0);
    if (bytes > CacheBuffers.KEEP_BYTES) this.slots.length = 0;
  }
}

/** The onnxruntime-node logits engine (see the module comment). */
class OnnxEngine implements LogitsEngine {
  private session: GptSession | null = null;
  private version: unknown = undefined;
  /** Every rebuild so far (oldest first). */
  readonly rebuilds: RebuildStats[] = [];
  /** KV-cache memory kept between batches (batches run one at a time). */
  private readonly buffers = new CacheBuffers();

  constructor(
    private readonly config: Required<GPTConfig>,
    private readonly borrowParams: () => WeightsSnapshot,
    private readonly options: OnnxSamplerOptions,
  ) {}

  /** The session for the current weights, rebuilt when they changed since the last batch. */
  private async currentSession(): Promise<GptSession> {
    const snap = this.borrowParams();
    try {
      const version = snap.version ?? snap.wte;
      if (this.session && version === this.version) return this.session;
      const t0 = performance.now();
      const weights = snap.host ?? (await hostWeights(snap.params));
      const readMs = performance.now() - t0;
      const built = await createGptSession(this.config, weights, this.options);
      const old = this.session;
      this.session = built;
      this.version = version;
      this.rebuilds.push({ version: snap.version ?? null, readMs, buildMs: built.buildMs, modelBytes: built.modelBytes });
      if (this.rebuilds.length > 100) this.rebuilds.shift();
      if (old) await old.session.release();
      return built;
    } finally {
      tree.dispose(snap.params);
    }
  }

  async open(prompts: number[][], maxSteps: number): Promise<DecodeRun> {
    const session = await this.currentSession();
    const context: OnnxRunContext = {
      ort: session.ort,
      session: session.session,
      config: this.config,
      prefillTokens: this.options.prefillTokens ?? 4096,
      buffers: this.buffers,
    };
    return new OnnxRun(context, prompts, Math.max(0, maxSteps));
  }

  /** Releases the session (a later batch builds a new one). */
  async release(): Promise<void> {
    const s = this.session;
    this.session = null;
    this.version = undefined;
    if (s) await s.session.release();
  }
}

/** What every batch of one `OnnxEngine` runs on: its session, model shape, prefill chunking and cache memory. */
interface OnnxRunContext {
  ort: Ort;
  session: InferenceSession;
  config: Required<GPTConfig>;
  /** Prompt tokens per prefill run (`OnnxSamplerOptions.prefillTokens`). */
  prefillTokens: number;
  /** KV-cache memory kept between batches. */
  buffers: CacheBuffers;
}

/** The shape of one ONNX graph call: `rows` (B) rows of `tokens` (T) new tokens each, over `slots` (S) past slots. */
interface FeedShape {
  rows: number;
  tokens: number;
  slots: number;
}

/** The per-call input arrays of one graph call, shaped as `FeedShape` says (see `OnnxRun.feeds`). */
interface FeedData {
  /** Token ids `[B, T]`. */
  ids: BigInt64Array;
  /** Positions `[B, T]`. */
  pos: BigInt64Array;
  /** One-hot of the position whose logits are returned, `[B, 1, T]`. */
  sel: Float32Array;
  /** Additive mask over past slots, `[B, 1, T, S]`. */
  biasPast: Float32Array;
  /** Additive causal mask among the new tokens, `[1, 1, T, T]`. */
  biasNew: Float32Array;
  /**
   * Token-shift models: each position's k-th previous token offset by (k−1)·vocab `[B, T, K]` (the sampler graph's
   * stacked shift table, model.ts) and whether it has one `[B, T, K]` (1/0).
   */
  prev?: BigInt64Array;
  prevMask?: Float32Array;
}

/** One batch on an ONNX session: the JS-side KV cache, prefill and decode steps. */
class OnnxRun implements DecodeRun {
  readonly paddedRows: number;
  readonly promptLen: number;
  private readonly n: number;
  private readonly lens: Int32Array;
  /** Token-shift models: the last K tokens fed to each logical row, newest first `[n, K]` (the next position's previous tokens). */
  private readonly recent: Int32Array;
  /** The token shift's window K (1 when the model has no shift: the arrays are then unused). */
  private readonly K: number;
  /** Cache slots per row. */
  private readonly S: number;
  /** Per layer: keys `[rows, H, hd, S]`, values `[rows, H, S, hd]` (rows in `phys` order). */
  private readonly kc: Float32Array[] = [];
  private readonly vc: Float32Array[] = [];
  /** Logical row of each computed (physical) row. */
  private phys: Int32Array;
  /** Logits handed back: logical row i at `[i*V, (i+1)*V)`. */
  private readonly logits: Float32Array;
  private readonly ort: Ort;
  private readonly session: InferenceSession;
  private readonly config: Required<GPTConfig>;
  private readonly prefillTokens: number;
  private readonly buffers: CacheBuffers;

  /**
   * @param context the engine's session, model shape, prefill chunking and cache buffers
   * @param prompts the batch's prompts (token ids); maxSteps the most decode steps that will follow the prefill
   */
  constructor(
    context: OnnxRunContext,
    private readonly prompts: number[][],
    private readonly maxSteps: number,
  ) {
    this.ort = context.ort;
    this.session = context.session;
    this.config = context.config;
    this.prefillTokens = context.prefillTokens;
    this.buffers = context.buffers;
    this.n = prompts.length;
    this.lens = Int32Array.from(prompts.map((p) => p.length));
    this.K = this.config.shiftWindow;
    this.recent = new Int32Array(this.n * this.K);
    prompts.forEach((p, i) => {
      for (let k = 1; k <= this.K; k++) this.recent[i * this.K + k - 1] = p[p.length - k] ?? 0;
    });
    const maxLen = Math.max(...prompts.map((p) => p.length));
    this.promptLen = maxLen;
    this.paddedRows = this.n;
    this.S = maxLen + maxSteps;
    this.phys = Int32Array.from({ length: this.n }, (_, i) => i);
    this.logits = new Float32Array(this.n * this.config.vocabSize);
  }

  slots(decodeSteps: number): number {
    return this.promptLen + decodeSteps;
  }

  close(): void {
    this.kc.length = 0;
    this.vc.length = 0;
    this.buffers.trim();
  }

  /** Feeds shared by prefill and decode: the `data` arrays wrapped as tensors of `shape`, plus the shape inputs. */
  private feeds(shape: FeedShape, data: FeedData): Feeds {
    const { rows: B, tokens: T, slots: S } = shape;
    const { ids, pos, sel, biasPast, biasNew } = data;
    const { nHeads: H, dModel: D } = this.config;
    const hd = D / H;
    const shift: Feeds = this.config.tokenShift
      ? { prev_ids: new this.ort.Tensor("int64", data.prev!, [B, T, this.K]), prev_mask: new this.ort.Tensor("float32", data.prevMask!, [B, T, this.K, 1]) }
      : {};
    return {
      ...shift,
      ids: new this.ort.Tensor("int64", ids, [B, T]),
      pos: new this.ort.Tensor("int64", pos, [B, T]),
      sel: new this.ort.Tensor("float32", sel, [B, 1, T]),
      bias_past: new this.ort.Tensor("float32", biasPast, [B, 1, T, S]),
      bias_new: new this.ort.Tensor("float32", biasNew, [1, 1, T, T]),
      split: new this.ort.Tensor("int64", i64([S, T]), [2]),
      shape_bthd: new this.ort.Tensor("int64", i64([B, T, H, hd]), [4]),
      shape_btd: new this.ort.Tensor("int64", i64([B, T, D]), [3]),
    };
  }

  async prefill(): Promise<Float32Array> {
    const { vocabSize: V, dModel: D, nLayers: L, nHeads: H } = this.config;
    const hd = D / H;
    const S = this.S;
    // Distinct prompts, longest first (chunks of similar length pad less).
    const key = new Map<string, number>();
    const uniq: number[][] = [];
    const rowU = new Int32Array(this.n);
    this.prompts.forEach((p, i) => {
      const k = p.join(",");
      let u = key.get(k);
      if (u === undefined) {
        u = uniq.length;
        key.set(k, u);
        uniq.push(p);
      }
      rowU[i] = u;
    });
    const rowsOf: number[][] = uniq.map(() => []);
    rowU.forEach((u, i) => rowsOf[u].push(i));
    const order = uniq.map((_, u) => u).sort((a, b) => uniq[b].length - uniq[a].length || a - b);
    if (this.maxSteps > 0) {
      for (let l = 0; l < L; l++) {
        this.kc.push(this.buffers.take(2 * l, this.n * H * hd * S));
        this.vc.push(this.buffers.take(2 * l + 1, this.n * H * S * hd));
      }
    }
    for (let k = 0; k < order.length; ) {
      const T = uniq[order[k]].length;
      const chunk = order.slice(k, k + Math.max(1, Math.floor(this.prefillTokens / T)));
      k += chunk.length;
      const B = chunk.length;
      const ids = new BigInt64Array(B * T);
      const pos = new BigInt64Array(B * T);
      const sel = new Float32Array(B * T);
      const K = this.K;
      const V = this.config.vocabSize;
      const prev = new BigInt64Array(B * T * K);
      const prevMask = new Float32Array(B * T * K);
      chunk.forEach((u, b) => {
        const p = uniq[u];
        for (let t = 0; t < T; t++) {
          ids[b * T + t] = BigInt(t < p.length ? p[t] : 0);
          pos[b * T + t] = BigInt(t);
          for (let k = 1; k <= Math.min(K, t); k++) {
            prev[(b * T + t) * K + k - 1] = BigInt((k - 1) * V + (t - k < p.length ? p[t - k] : 0));
            prevMask[(b * T + t) * K + k - 1] = 1;
          }
        }
        sel[b * T + p.length - 1] = 1;
      });
      const biasNew = new Float32Array(T * T);
      for (let i = 0; i < T; i++) biasNew.fill(MASKED, i * T + i + 1, (i + 1) * T);
      // No past: one dummy slot, masked.
      const feeds = this.feeds({ rows: B, tokens: T, slots: 1 }, { ids, pos, sel, biasPast: new Float32Array(B * T).fill(MASKED), biasNew, prev, prevMask });
      for (let l = 0; l < L; l++) {
        feeds[io.pastK(l)] = new this.ort.Tensor("float32", new Float32Array(B * H * hd), [B, H, hd, 1]);
        feeds[io.pastV(l)] = new this.ort.Tensor("float32", new Float32Array(B * H * hd), [B, H, 1, hd]);
      }
      const out = await this.session.run(feeds);
      const lg = out.logits.data as Float32Array;
      chunk.forEach((u, b) => {
        for (const i of rowsOf[u]) this.logits.set(lg.subarray(b * V, (b + 1) * V), i * V);
      });
      for (let l = 0; l < this.kc.length; l++) {
        const kOut = out[io.k(l)].data as Float32Array; // [B,H,hd,T]
        const vOut = out[io.v(l)].data as Float32Array; // [B,H,T,hd]
        const kc = this.kc[l];
        const vc = this.vc[l];
        chunk.forEach((u, b) => {
          const len = uniq[u].length;
          for (const i of rowsOf[u]) {
            for (let hd0 = 0; hd0 < H * hd; hd0++) {
              // keys: row (h, d) of [H, hd, ·] holds slots contiguously
              const src = (b * H * hd + hd0) * T;
              const dst = (i * H * hd + hd0) * S;
              for (let t = 0; t < len; t++) kc[dst + t] = kOut[src + t];
            }
            for (let h = 0; h < H; h++) {
              // values: head h of [H, ·, hd] holds len·hd floats contiguously
              const src = (b * H + h) * T * hd;
              const dst = (i * H + h) * S * hd;
              for (let x = 0; x < len * hd; x++) vc[dst + x] = vOut[src + x];
            }
          }
        });
      }
    }
    return this.logits;
  }

  /** Drops finished rows from the computed batch (their caches are squeezed out in place, order kept). */
  private compact(done: Uint8Array): void {
    const { dModel: D } = this.config;
    const rowSize = D * this.S; // floats per row per layer, for keys and for values alike
    const keep = Array.from(this.phys).filter((i) => !done[i]);
    let dst = 0;
    this.phys.forEach((i, src) => {
      if (done[i]) return;
      if (src !== dst) {
        for (const a of [...this.kc, ...this.vc]) a.copyWithin(dst * rowSize, src * rowSize, (src + 1) * rowSize);
      }
      dst++;
    });
    this.phys = Int32Array.from(keep);
  }

  async step(next: Int32Array, j: number, done: Uint8Array): Promise<Float32Array> {
    const { contextLength: C, vocabSize: V, dModel: D, nLayers: L, nHeads: H } = this.config;
    const hd = D / H;
    const S = this.S;
    if (j >= this.maxSteps) throw new Error(`ONNX sampler: decode step ${j} beyond the ${this.maxSteps} planned`);
    let running = 0;
    for (const i of this.phys) if (!done[i]) running++;
    if (running === 0) return this.logits;
    if (running <= 0.75 * this.phys.length) this.compact(done);
    const phys = this.phys;
    const B = phys.length;
    const ids = new BigInt64Array(B);
    const pos = new BigInt64Array(B);
    const K = this.K;
    const prev = new BigInt64Array(B * K);
    const prevMask = new Float32Array(B * K);
    const biasPast = new Float32Array(B * S);
    phys.forEach((i, p) => {
      ids[p] = BigInt(next[i]);
      const slot = this.lens[i] + j; // this token's position and cache slot
      const r = this.recent.subarray(i * K, (i + 1) * K);
      for (let k = 1; k <= K; k++) {
        prev[p * K + k - 1] = BigInt((k - 1) * V + r[k - 1]);
        prevMask[p * K + k - 1] = slot - k >= 0 ? 1 : 0;
      }
      if (!done[i]) {
        r.copyWithin(1, 0, K - 1);
        r[0] = next[i];
      }
      pos[p] = BigInt(Math.min(slot, C - 1));
      biasPast.fill(MASKED, p * S + Math.min(slot, S), (p + 1) * S);
    });
    const feeds = this.feeds({ rows: B, tokens: 1, slots: S }, { ids, pos, sel: new Float32Array(B).fill(1), biasPast, biasNew: new Float32Array(1), prev, prevMask });
    for (let l = 0; l < L; l++) {
      feeds[io.pastK(l)] = new this.ort.Tensor("float32", this.kc[l].subarray(0, B * H * hd * S), [B, H, hd, S]);
      feeds[io.pastV(l)] = new this.ort.Tensor("float32", this.vc[l].subarray(0, B * H * S * hd), [B, H, S, hd]);
    }
    // Until rows are dropped, physical row p is logical row p: onnxruntime writes the logits in place.
    const inPlace = B === this.n;
    const fetches: Record<string, Tensor | null> = {
      logits: inPlace ? new this.ort.Tensor("float32", this.logits, [B, 1, V]) : null,
    };
    for (let l = 0; l < L; l++) fetches[io.k(l)] = fetches[io.v(l)] = null;
    const out = await this.session.run(feeds, fetches);
    if (!inPlace) {
      const lg = out.logits.data as Float32Array;
      phys.forEach((i, p) => this.logits.set(lg.subarray(p * V, (p + 1) * V), i * V));
    }
    for (let l = 0; l < L; l++) {
      const kNew = out[io.k(l)].data as Float32Array; // [B,H,hd,1]
      const vNew = out[io.v(l)].data as Float32Array; // [B,H,1,hd]
      const kc = this.kc[l];
      const vc = this.vc[l];
      phys.forEach((i, p) => {
        if (done[i]) return;
        const slot = this.lens[i] + j;
        for (let h = 0; h < H; h++) {
          const base = (p * H + h) * hd;
          for (let d = 0; d < hd; d++) kc[(base + d) * S + slot] = kNew[base + d];
          vc.set(vNew.subarray(base, base + hd), ((p * H + h) * S + slot) * hd);
        }
      });
    }
    return this.logits;
  }
}

/**
 * `SamplingClient` over a parameter source (the backend's current weights, borrowed per batch), decoding on
 * onnxruntime-node; batching, seeding and stopping exactly as the jax-js `EmbeddedSampler` (both are
 * `BatchedSampler`s), so the same seed gives the same tokens up to float noise in the logits.
 */
export class OnnxSampler extends BatchedSampler {
  private readonly onnxEngine: OnnxEngine;

  /**
   * @param config model shape (defaults filled)
   * @param borrowParams returns a new reference to the current weights; the sampler disposes it after reading
   * @throws Error (from the first batch) when onnxruntime-node cannot load or run the model
   */
  constructor(config: Required<GPTConfig>, borrowParams: () => WeightsSnapshot, options: OnnxSamplerOptions = {}) {
    const engine = new OnnxEngine(config, borrowParams, options);
    super(config, engine, options.maxBatchRows ?? 256);
    this.onnxEngine = engine;
  }

  /** Session rebuilds so far (the last 100), oldest first: one per weights version a batch has seen. */
  get rebuilds(): readonly RebuildStats[] {
    return this.onnxEngine.rebuilds;
  }

  /**
   * Releases the onnxruntime session (the next batch builds a new one). Call it only while no `sample()` call is
   * pending (e.g. when the backend is done).
   */
  async release(): Promise<void> {
    await this.onnxEngine.release();
  }
}
