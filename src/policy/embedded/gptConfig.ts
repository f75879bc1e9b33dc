/**
 * The embedded GPT's shape: its config (`GPTConfig`, defaults and checks), the parameter layout every engine and
 * checkpoint shares (`paramShapes`), and the position tables of its RoPE variant. Kept apart from `gpt.ts` (the jax-js
 * model) so that the onnx engines and checkpoints read the shape without the jax-js program code.
 */

/** Model shape. */
export interface GPTConfig {
  /** Number of token ids. */
  vocabSize: number;
  /** Maximum sequence length the model attends over (tokens); position embeddings exist for `[0, C)`. */
  contextLength: number;
  /** Residual stream width. */
  dModel: number;
  nLayers: number;
  /** Attention heads; must divide `dModel`. */
  nHeads: number;
  /** MLP hidden width = mlpRatio × dModel (default 4). */
  mlpRatio?: number;
  /**
   * Positions: learned absolute embeddings `wpe` (GPT-2, default) or rotary embeddings on q and k (RoPE, Su et al.
   * 2021; the onnx trainer and sampler only — jax-js engines refuse it). Under RoPE `wpe` stays zero.
   */
  positional?: "learned" | "rope";
  /**
   * Token shift (default false): the input at position t is `e_t + ½·R·e_{t−1}` (`R` reverses the embedding's
   * channels; no previous token at a row's start), so every position also carries the previous token and a copying
   * ("induction") head needs one attention layer instead of two composed ones — the previous-token mixing of RWKV's
   * token shift and modded-nanogpt's embedding "smear", here fixed rather than learned. Measured (issue 32): a 2-layer
   * RoPE model learns to copy random 4–31-token spans at step ~150 with it, not by step 400 without. Onnx engines only.
   */
  tokenShift?: boolean;
  /**
   * How many previous tokens the token shift mixes in (default 1; 1–3, the shift on): position t's input is
   * `e_t + ½·Σ_{k ≤ window} P_k·e_{t−k}`, each `P_k` a fixed channel permutation ({@link shiftPermutation}) that moves
   * one quarter of the channels onto a different quarter, so an embedding kept in a quarter can carry the last tokens
   * side by side. A copy head keyed on one previous token confuses ids that share a digit pair (ids are single digits
   * under the base tokenizer); keyed on three it rarely does. Onnx engines only; `dModel` divisible by 4 when > 1.
   */
  shiftWindow?: number;
}

/**
 * The token shift's k-th permutation (k = 1…3) over `D` channels: `(P_k·e)[j] = e[perm[j]]`. k = 1 reverses the
 * channels (quarter 0 → quarter 3); k = 2 rolls them by D/4 (quarter 0 → 1); k = 3 by D/2 (quarter 0 → 2).
 * @throws Error for another k, or k > 1 with D not divisible by 4
 */
export function shiftPermutation(D: number, k: number): Int32Array {
  if (k === 1) return Int32Array.from({ length: D }, (_, j) => D - 1 - j);
  if ((k !== 2 && k !== 3) || D % 4 !== 0) throw new Error(`token shift: no permutation for k = ${k} over ${D} channels (k is 1–3, D divisible by 4)`);
  const s = ((k - 1) * D) / 4;
  return Int32Array.from({ length: D }, (_, j) => (j - s + D) % D);
}

/** Weight of the previous token in the token shift (see `GPTConfig.tokenShift`). */
export const TOKEN_SHIFT_SCALE = 0.5;

/** A config with defaults filled and checked. @throws Error when a dimension is invalid */
export function resolveConfig(config: GPTConfig): Required<GPTConfig> {
  const c: Required<GPTConfig> = { mlpRatio: 4, positional: "learned", tokenShift: false, shiftWindow: 1, ...config };
  for (const [k, v] of Object.entries(c)) {
    if (k === "positional" || k === "tokenShift") continue;
    if (typeof v !== "number" || !Number.isInteger(v) || v <= 0) throw new Error(`GPTConfig.${k} must be a positive integer, got ${v}`);
  }
  if (typeof c.tokenShift !== "boolean") throw new Error(`GPTConfig.tokenShift must be true or false, got ${String(c.tokenShift)}`);
  if (c.positional !== "learned" && c.positional !== "rope") throw new Error(`GPTConfig.positional must be one of learned, rope; got ${String(c.positional)}`);
  if (c.shiftWindow > 3) throw new Error(`GPTConfig.shiftWindow must be 1, 2 or 3, got ${c.shiftWindow}`);
  if (c.shiftWindow > 1 && c.dModel % 4 !== 0) throw new Error(`GPTConfig: shiftWindow ${c.shiftWindow} needs dModel divisible by 4, got ${c.dModel}`);
  if (c.dModel % c.nHeads !== 0) throw new Error(`GPTConfig: nHeads ${c.nHeads} must divide dModel ${c.dModel}`);
  if (c.positional === "rope" && (c.dModel / c.nHeads) % 2 !== 0) throw new Error(`GPTConfig: rope needs an even head width, got dModel/nHeads = ${c.dModel / c.nHeads}`);
  return c;
}

/** Shapes of every parameter, in the canonical order used by checkpoints: `[name, shape]`. */
export function paramShapes(config: GPTConfig): [string, number[]][] {
  const c = resolveConfig(config);
  const D = c.dModel;
  const M = c.mlpRatio * D;
  const out: [string, number[]][] = [
    ["wte", [c.vocabSize, D]],
    ["wpe", [c.contextLength, D]],
  ];
  for (let l = 0; l < c.nLayers; l++) {
    const p = `blocks.${l}.`;
    out.push(
      [p + "ln1g", [D]],
      [p + "ln1b", [D]],
      [p + "wqkv", [D, 3 * D]],
      [p + "bqkv", [3 * D]],
      [p + "wo", [D, D]],
      [p + "bo", [D]],
      [p + "ln2g", [D]],
      [p + "ln2b", [D]],
      [p + "w1", [D, M]],
      [p + "b1", [M]],
      [p + "w2", [M, D]],
      [p + "b2", [D]],
    );
  }
  out.push(["lnfg", [D]], ["lnfb", [D]]);
  return out;
}

/** Total number of parameters. */
export function paramCount(config: GPTConfig): number {
  return paramShapes(config).reduce((s, [, shape]) => s + shape.reduce((a, b) => a * b, 1), 0);
}

/** RoPE frequency base (Su et al. 2021 §3.4; Llama's `rope_theta` default). */
export const ROPE_BASE = 10000;
const ropeCache = new Map<string, { cos: Float32Array; sin: Float32Array }>();

/**
 * RoPE tables for positions `[0, T)` in the rotate-half layout (Llama / GPT-NeoX): `cos[t, i] = cos(t·θ_j)` and
 * likewise `sin`, with `j = i mod hd/2` and `θ_j = ROPE_BASE^(−2j/hd)`; both `[T, hd]` row-major, computed in float64
 * and rounded once. Cached per `(T, hd)`; callers must not write to them.
 */
export function ropeTables(T: number, hd: number): { cos: Float32Array; sin: Float32Array } {
  const key = `${T}x${hd}`;
  let t = ropeCache.get(key);
  if (!t) {
    const half = hd / 2;
    const cos = new Float32Array(T * hd);
    const sin = new Float32Array(T * hd);
    for (let p = 0; p < T; p++)
      for (let i = 0; i < hd; i++) {
        const a = p * Math.pow(ROPE_BASE, (-2 * (i % half)) / hd);
        cos[p * hd + i] = Math.cos(a);
        sin[p * hd + i] = Math.sin(a);
      }
    t = { cos, sin };
    if (ropeCache.size > 64) ropeCache.clear();
    ropeCache.set(key, t);
  }
  return t;
}
