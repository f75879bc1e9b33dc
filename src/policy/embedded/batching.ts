/**
 * How the embedded backend feeds a batch of datums to its trainer: validation, micro-batches of similar length
 * within a token budget, host-side embedding gathers, and unpacking per-token outputs back to datum order. For the
 * jax-js trainer, lengths are padded to coarse buckets and row counts to powers of two, so a run compiles only a
 * handful of program shapes; the onnx trainer takes any shape, so it pads only to a fine bucket (padding is all the
 * bucket decides there: the travel warm start's demonstrations are 85 % real tokens at bucket 128 with power-of-two
 * rows, 97 % at bucket 16 without; search's 48 % → 76 %).
 */
import type { Datum } from "../../core/types.ts";
import { causalBias, embedRows, type GPTConfig } from "./gpt.ts";
import { numpy as np } from "./jax.ts";
import type { LossInputs } from "./loss.ts";

type Arr = np.Array;

/** The next power of two ≥ n (n ≥ 1). */
export function nextPow2(n: number): number {
  return 1 << Math.ceil(Math.log2(Math.max(1, n)));
}

/** A padded micro-batch: datum indices, padded length T and padded row count. */
export interface Chunk {
  ids: number[];
  T: number;
  rows: number;
}

/** Options of a {@link Batcher}. */
export interface BatcherOptions {
  /** Padded sequence lengths are rounded up to a multiple of this (tokens). */
  lengthBucket: number;
  /** Tokens per micro-batch (rows × padded length). */
  maxTokensPerChunk: number;
  /**
   * Pad a call's last, partial micro-batch to a power-of-two row count (default true: the jax-js trainer compiles
   * one program per shape; the onnx trainer sets false, padded rows would be computed for nothing).
   */
  padRowsToPow2?: boolean;
}

/** Packs datums into padded device arrays for one model shape (see the file comment). */
export class Batcher {
  private readonly biasCache = new Map<number, Float32Array<ArrayBuffer>>();

  constructor(
    private readonly config: Required<GPTConfig>,
    private readonly options: BatcherOptions,
  ) {}

  /** The causal attention bias `[T, T]` as a fresh device array (host copy cached per T). */
  bias(T: number): Arr {
    return np.array(this.hostBias(T), { shape: [T, T] });
  }

  /** The causal attention bias `[T·T]` on the host (cached per T; do not modify). */
  hostBias(T: number): Float32Array<ArrayBuffer> {
    let b = this.biasCache.get(T);
    if (!b) {
      b = causalBias(T);
      this.biasCache.set(T, b);
    }
    return b;
  }

  /** @throws Error naming the datum when arrays disagree in length, are empty/too long, or hold invalid ids */
  validate(datums: Datum[]): void {
    if (datums.length === 0) throw new Error("empty batch");
    const { vocabSize: V, contextLength: C } = this.config;
    datums.forEach((d, i) => {
      const n = d.modelInput.length;
      if (n === 0) throw new Error(`datum ${i}: empty modelInput`);
      if (n > C) throw new Error(`datum ${i}: ${n} input tokens exceed the context window of ${C}`);
      for (const [name, arr] of [
        ["targetTokens", d.targetTokens],
        ["weights", d.weights],
        ["logprobs", d.logprobs],
        ["advantages", d.advantages],
        ["refLogprobs", d.refLogprobs],
      ] as const) {
        if (arr !== undefined && arr.length !== n) {
          throw new Error(`datum ${i}: ${name} has length ${arr.length}, modelInput has ${n}`);
        }
      }
      for (const arr of [d.modelInput, d.targetTokens]) {
        for (const t of arr) {
          if (!Number.isInteger(t) || t < 0 || t >= V) throw new Error(`datum ${i}: token id ${t} outside [0, ${V})`);
        }
      }
    });
  }

  /** Splits datum indices into micro-batches of similar length (longest first) within the token budget. */
  chunks(datums: Datum[]): Chunk[] {
    const order = datums.map((_, i) => i).sort((a, b) => datums[b].modelInput.length - datums[a].modelInput.length || a - b);
    const out: Chunk[] = [];
    for (let k = 0; k < order.length; ) {
      // The chunk's padded length is that of its first (longest) datum.
      const T = this.bucketLen(datums[order[k]].modelInput.length);
      const full = Math.max(1, Math.floor(this.options.maxTokensPerChunk / T));
      const ids = order.slice(k, k + full);
      k += ids.length;
      const pad = this.options.padRowsToPow2 ?? true;
      out.push({ ids, T, rows: ids.length === full || !pad ? ids.length : Math.min(full, nextPow2(ids.length)) });
    }
    return out;
  }

  /**
   * Right-pads a chunk to `[rows, T]` (pad token 0, weight 0) and gathers its token embeddings from `wte` (the host
   * copy `[V*D]`). `ids` are the input ids with −1 at padding (skipped by the gradient scatter).
   */
  packTokens(datums: Datum[], chunk: Chunk, wte: Float32Array) {
    const { rows, T, x0, ids, targets } = this.hostTokens(datums, chunk, wte);
    return { rows, T, x0: np.array(x0, { shape: [rows, T, this.config.dModel] }), ids, targets };
  }

  /** `packTokens` on the host: x0 `[rows·T·D]`, ids (−1 at padding) and targets `[rows·T]`. */
  hostTokens(datums: Datum[], chunk: Chunk, wte: Float32Array) {
    const { T, rows } = chunk;
    const D = this.config.dModel;
    const ids = new Int32Array(rows * T).fill(-1);
    const targets = new Int32Array(rows * T);
    chunk.ids.forEach((di, r) => {
      ids.set(datums[di].modelInput, r * T);
      targets.set(datums[di].targetTokens, r * T);
    });
    const x0 = embedRows(wte, D, ids.map((t) => Math.max(t, 0)));
    return { rows, T, x0, ids, targets };
  }

  /** `packTokens` plus the loss program's per-token inputs and hyper-parameters `hp`. */
  packInputs(datums: Datum[], chunk: Chunk, hp: number[], wte: Float32Array): { x0: Arr; ids: Int32Array; inputs: LossInputs } {
    const { rows, T, x0, ids, targets } = this.packTokens(datums, chunk, wte);
    const h = this.hostLossInputs(datums, chunk, hp);
    const f = (a: Float32Array<ArrayBuffer>): Arr => np.array(a, { shape: [rows, T] });
    const inputs: LossInputs = {
      targets: np.array(targets, { shape: [rows, T], dtype: np.int32 }),
      weights: f(h.weights),
      samplerLp: f(h.samplerLp),
      advantages: f(h.advantages),
      refLp: f(h.refLp),
      hp: np.array(h.hp),
    };
    return { x0, ids, inputs };
  }

  /** A chunk's per-token loss inputs on the host, each `[rows·T]` (zeros where a datum has none), and `hp`. */
  hostLossInputs(datums: Datum[], chunk: Chunk, hp: number[]) {
    const { rows, T } = chunk;
    const f = (get: (d: Datum) => number[] | undefined): Float32Array<ArrayBuffer> => {
      const a = new Float32Array(rows * T);
      chunk.ids.forEach((di, r) => {
        const v = get(datums[di]);
        if (v) a.set(v, r * T);
      });
      return a;
    };
    return {
      weights: f((d) => d.weights),
      samplerLp: f((d) => d.logprobs),
      advantages: f((d) => d.advantages),
      refLp: f((d) => d.refLogprobs),
      hp: new Float32Array(hp),
    };
  }

  /** Copies a chunk's per-token outputs `[rows, T]` into `out[datum]` (`[seq-1]` each). */
  unpackLogprobs(lp: ArrayLike<number>, datums: Datum[], chunk: Chunk, out: number[][]): void {
    const T = chunk.T;
    chunk.ids.forEach((di, r) => {
      const n = datums[di].modelInput.length;
      out[di] = Array.from({ length: n }, (_, t) => lp[r * T + t]);
    });
  }

  private bucketLen(n: number): number {
    return Math.min(this.config.contextLength, Math.ceil(n / this.options.lengthBucket) * this.options.lengthBucket);
  }
}
