/**
 * A small nanoGPT-style decoder-only transformer on jax-js: learned token + position embeddings, pre-LayerNorm
 * blocks (causal multi-head self-attention, tanh-GELU MLP), final LayerNorm, LM head tied to the token embedding
 * (as GPT-2 / nanoGPT). Pure functions over a parameter pytree; every function follows jax-js's ownership rule
 * (it consumes its array arguments), so they can be traced by `jit`/`grad`.
 *
 * Shapes: `B` batch rows, `T` sequence length (tokens), `D` dModel, `H` heads, `hd = D/H`, `V` vocabSize,
 * `C` contextLength, `L` layers, `P` prompt-cache slots, `R` recent-cache slots (sampling).
 *
 * Token embeddings are gathered on the host (`embedRows`) and passed in as x0 `[B, T, D]`; the trunk adds the
 * position embeddings and the tied head multiplies by wteᵀ, so `wte` receives its head gradient from autodiff and
 * its lookup gradient from the host scatter of ∂L/∂x0 (`scatterAddRows`).
 */
import { Rng } from "../../core/rng.ts";
import { lax, numpy as np } from "./jax.ts";

import { paramShapes, resolveConfig, type GPTConfig } from "./gptConfig.ts";

export { paramCount, paramShapes, resolveConfig, ropeTables, ROPE_BASE, shiftPermutation, TOKEN_SHIFT_SCALE, type GPTConfig } from "./gptConfig.ts";

type Arr = np.Array;

/** Parameters of one transformer block. Weights are `[in, out]` so `x @ w`. */
export type BlockParams = {
  ln1g: Arr; // [D]
  ln1b: Arr; // [D]
  wqkv: Arr; // [D, 3D]
  bqkv: Arr; // [3D]
  wo: Arr; // [D, D]
  bo: Arr; // [D]
  ln2g: Arr; // [D]
  ln2b: Arr; // [D]
  w1: Arr; // [D, M]
  b1: Arr; // [M]
  w2: Arr; // [M, D]
  b2: Arr; // [D]
};

/** All parameters (a jax-js pytree). `wte` is also the LM head (tied). */
export type GPTParams = {
  wte: Arr; // [V, D]
  wpe: Arr; // [C, D]
  blocks: BlockParams[];
  lnfg: Arr; // [D]
  lnfb: Arr; // [D]
};

/** Per-layer KV cache: `[L]` of `[B, slots, H, hd]` for keys and for values. */
export type KVCache = { k: Arr[]; v: Arr[] };

const LN_EPS = 1e-5;
/** Score of masked attention slots before the max (finite, so a fully masked row cannot produce NaN). */
const MASKED = -1e9;

/**
 * Deterministic GPT-2 initialisation as host buffers, filled by a seeded JS PRNG (identical across runs and
 * thread counts): weights ~ N(0, 0.02), residual projections (`wo`, `w2`) ~ N(0, 0.02/√(2L)), biases 0, LN gains 1.
 * Under RoPE `wpe` is all zeros and stays so (its gradient is zero): one parameter layout serves both kinds of model.
 * @returns `[name, data]` in `paramShapes` order.
 */
export function initParamData(config: GPTConfig, seed: number): [string, Float32Array][] {
  const c = resolveConfig(config);
  const rng = new Rng(seed);
  const normal = (n: number, std: number): Float32Array => {
    const a = new Float32Array(n);
    for (let i = 0; i < n; i += 2) {
      // Box–Muller: two normals per pair of uniforms; 1 - u keeps log away from 0.
      const r = Math.sqrt(-2 * Math.log(1 - rng.next()));
      const th = 2 * Math.PI * rng.next();
      a[i] = r * Math.cos(th) * std;
      if (i + 1 < n) a[i + 1] = r * Math.sin(th) * std;
    }
    return a;
  };
  const residStd = 0.02 / Math.sqrt(2 * c.nLayers);
  return paramShapes(c).map(([name, shape]) => {
    const n = shape.reduce((a, b) => a * b, 1);
    const leaf = name.slice(name.lastIndexOf(".") + 1);
    let data: Float32Array;
    if (leaf === "ln1g" || leaf === "ln2g" || leaf === "lnfg") data = new Float32Array(n).fill(1);
    else if (shape.length === 1 || (name === "wpe" && c.positional === "rope")) data = new Float32Array(n);
    else data = normal(n, leaf === "wo" || leaf === "w2" ? residStd : 0.02);
    return [name, data];
  });
}

/**
 * Builds the parameter pytree from named host buffers (as from `initParamData` or a checkpoint).
 * @throws Error when a parameter is missing or has the wrong size
 */
export function paramsFromData(config: GPTConfig, data: Map<string, Float32Array>): GPTParams {
  const c = resolveConfig(config);
  const get = (name: string, shape: number[]): Arr => {
    const d = data.get(name);
    const n = shape.reduce((a, b) => a * b, 1);
    if (!d) throw new Error(`missing parameter ${name}`);
    if (d.length !== n) throw new Error(`parameter ${name}: expected ${n} values [${shape}], got ${d.length}`);
    // jax-js takes views of a plain ArrayBuffer; a view of shared memory (a worker's buffer) is copied.
    return np.array(d.buffer instanceof ArrayBuffer ? (d as Float32Array<ArrayBuffer>) : new Float32Array(d), { shape });
  };
  const shapes = new Map(paramShapes(c));
  const blocks: BlockParams[] = [];
  for (let l = 0; l < c.nLayers; l++) {
    const g = (k: string): Arr => get(`blocks.${l}.${k}`, shapes.get(`blocks.${l}.${k}`)!);
    blocks.push({
      ln1g: g("ln1g"),
      ln1b: g("ln1b"),
      wqkv: g("wqkv"),
      bqkv: g("bqkv"),
      wo: g("wo"),
      bo: g("bo"),
      ln2g: g("ln2g"),
      ln2b: g("ln2b"),
      w1: g("w1"),
      b1: g("b1"),
      w2: g("w2"),
      b2: g("b2"),
    });
  }
  return {
    wte: get("wte", shapes.get("wte")!),
    wpe: get("wpe", shapes.get("wpe")!),
    blocks,
    lnfg: get("lnfg", shapes.get("lnfg")!),
    lnfb: get("lnfb", shapes.get("lnfb")!),
  };
}

/** Initial parameters on the jax-js device (see `initParamData`). */
export function initParams(config: GPTConfig, seed: number): GPTParams {
  return paramsFromData(config, new Map(initParamData(config, seed)));
}

/**
 * Leaves of any params-shaped pytree (params, grads, Adam moments) in `paramShapes` order, borrowed (no `.ref`).
 */
export function namedLeaves<T>(p: { wte: T; wpe: T; blocks: Record<string, T>[]; lnfg: T; lnfb: T }): [string, T][] {
  const out: [string, T][] = [
    ["wte", p.wte],
    ["wpe", p.wpe],
  ];
  const keys = ["ln1g", "ln1b", "wqkv", "bqkv", "wo", "bo", "ln2g", "ln2b", "w1", "b1", "w2", "b2"];
  p.blocks.forEach((b, l) => {
    for (const k of keys) out.push([`blocks.${l}.${k}`, b[k]]);
  });
  out.push(["lnfg", p.lnfg], ["lnfb", p.lnfb]);
  return out;
}

// ---------------------------------------------------------------------------------------------------------------
// Model math (traceable). All functions consume their array arguments.
//
// Speed notes (jax-js 0.1.25, wasm): `take` lowers to a one-hot matmul and its gradient (scatter) cannot be
// jit-compiled, so token embeddings are gathered on the host (see `embedRows`) and their gradient is scattered on
// the host; a matmul whose operand is a transposed view runs ~5× slower than on a contiguous buffer, so such
// operands are materialised first (`materialize`).

/**
 * Forces `x` into its own contiguous buffer: a sum over a new unit axis is a reduction kernel, which jax-js writes
 * out instead of fusing the view into the consumer's index arithmetic.
 */
function materialize(x: Arr): Arr {
  return x.reshape([...x.shape, 1]).sum(-1);
}

/** LayerNorm over the last axis. x `[..., D]`. */
function layerNorm(x: Arr, g: Arr, b: Arr): Arr {
  const mu = x.ref.mean(-1, { keepdims: true });
  const xc = x.sub(mu);
  const variance = np.square(xc.ref).mean(-1, { keepdims: true });
  return xc.div(np.sqrt(variance.add(LN_EPS))).mul(g).add(b);
}

/** x `[N, in]` @ w `[in, out]` + b `[out]` → `[N, out]`. */
function linear(x: Arr, w: Arr, b: Arr): Arr {
  return np.matmul(x, w).add(b);
}

/**
 * Two-operand einsum from a subscript string such as `"bthd,bshd->bhts"`. jax-js 0.1.25 parses string subscripts
 * with iterator helpers that Node 20 lacks, so this converts them to its numeric-index form.
 */
function ein(spec: string, a: Arr, b: Arr): Arr {
  const [lhs, out] = spec.split("->");
  const [sa, sb] = lhs.split(",");
  const id = (str: string): number[] => [...str].map((ch) => ch.charCodeAt(0) - 97);
  return np.einsum(a, id(sa), b, id(sb), id(out));
}

/**
 * exp on [−30, 30] (inputs are clamped) from SIMD-vectorisable ops only: jax-js's wasm `exp` is a scalar
 * function call, ~10× the cost of a vector multiply, and exps dominate the attention softmax and GELU.
 * exp(x) = p(x/128)^128 with p the degree-6 Taylor polynomial (relative error ≈ 1e-5). Its gradient is exp(x),
 * supplied through the identity e + e·(x − sg(x)) = e so autodiff does not trace the polynomial.
 */
export function fastExp(x: Arr): Arr {
  const xs = lax.stopGradient(x.ref);
  const y = np.clip(xs.ref, -30, 30).mul(1 / 128);
  let p = y.ref.mul(1 / 720).add(1 / 120);
  for (const c of [1 / 24, 1 / 6, 1 / 2, 1, 1]) p = p.mul(y.ref).add(c);
  y.dispose();
  for (let i = 0; i < 7; i++) p = p.ref.mul(p);
  const e = lax.stopGradient(p);
  return e.ref.add(e.mul(x.sub(xs)));
}

/**
 * Softmax over the last axis of s + bias, bias (broadcastable) 0 where allowed and `MASKED` where not. Masked
 * entries get probability ≈ exp(−30)·(allowed mass) ≈ 1e-13 (fastExp's clamp) instead of exactly 0. An additive
 * float bias (not a bool `where`) keeps the kernel vectorised.
 */
function maskedSoftmax(s: Arr, bias: Arr): Arr {
  const sb = s.add(bias);
  const m = lax.stopGradient(sb.ref.max(-1, { keepdims: true }));
  const e = fastExp(sb.sub(m));
  return e.ref.div(e.sum(-1, { keepdims: true }));
}

/** Additive causal mask `[T, T]` (row = query, column = key): 0 on and below the diagonal, `MASKED` above. */
export function causalBias(T: number): Float32Array<ArrayBuffer> {
  const b = new Float32Array(T * T);
  for (let i = 0; i < T; i++) for (let j = i + 1; j < T; j++) b[i * T + j] = MASKED;
  return b;
}

/** GPT-2's tanh-approximate GELU, 0.5·x·(1 + tanh(u)) = x / (1 + exp(−2u)), u = √(2/π)(x + 0.044715x³). */
function gelu(x: Arr): Arr {
  const u = x.ref.mul(x.ref).mul(0.044715).add(1).mul(x.ref).mul(Math.sqrt(2 / Math.PI));
  return x.div(fastExp(u.mul(-2)).add(1));
}

/** MLP half of a block on the residual stream x `[N, D]` → `[N, D]` (the residual add included). */
function mlp(x: Arr, p: BlockParams): Arr {
  const h = layerNorm(x.ref, p.ln2g, p.ln2b);
  const a = gelu(linear(h, p.w1, p.b1));
  return x.add(linear(a, p.w2, p.b2));
}

/** The layout of a full-sequence attention call: `batch` rows of `seqLen` tokens, `nHeads` heads. */
interface AttentionLayout { batch: number; seqLen: number; nHeads: number }

/**
 * Causal self-attention over full sequences. x `[B*T, D]` (residual, consumed), bias `[T, T]` (`causalBias`,
 * consumed), B/T/H from `layout` → `{ x: [B*T, D], k, v: [B,T,H,hd] }`. `keepKV` returns k/v for a KV cache
 * (prefill).
 */
function attentionFull(x: Arr, p: BlockParams, bias: Arr, layout: AttentionLayout, keepKV: boolean) {
  const { batch: B, seqLen: T, nHeads: H } = layout;
  const D = x.shape[1];
  const hd = D / H;
  const h = layerNorm(x.ref, p.ln1g, p.ln1b);
  const qkv = linear(h, p.wqkv, p.bqkv).reshape([B, T, 3, H, hd]);
  const q = qkv.ref.slice([], [], 0).mul(1 / Math.sqrt(hd));
  const k = qkv.ref.slice([], [], 1);
  const v = qkv.slice([], [], 2);
  const s = ein("bthd,bshd->bhts", q, keepKV ? k.ref : k); // [B,H,T,T]
  const pr = maskedSoftmax(s, bias.reshape([1, 1, T, T]));
  const o = materialize(ein("bhts,bshd->bthd", pr, keepKV ? v.ref : v).reshape([B * T, D]));
  const out = x.add(linear(o, p.wo, p.bo));
  return keepKV ? { x: out, k, v } : { x: out, k: null, v: null };
}

/**
 * Host-side embedding gather: rows of `table` (`[n, D]` row-major) for `ids` → `[ids.length, D]`, plus optional
 * `add` rows (e.g. positions) from `addTable` at `addIds`.
 */
export function embedRows(
  table: Float32Array,
  D: number,
  ids: ArrayLike<number>,
  addTable?: Float32Array,
  addIds?: ArrayLike<number>,
): Float32Array<ArrayBuffer> {
  const out = new Float32Array(ids.length * D);
  for (let i = 0; i < ids.length; i++) {
    const src = ids[i] * D;
    out.set(table.subarray(src, src + D), i * D);
    if (addTable && addIds) {
      const a = addIds[i] * D;
      for (let j = 0; j < D; j++) out[i * D + j] += addTable[a + j];
    }
  }
  return out;
}

/**
 * Host-side embedding gradient: adds row i of `grad` (`[ids.length, D]`) into row `ids[i]` of `out` (`[V, D]`), in
 * index order (deterministic). Rows with `ids[i] < 0` are skipped (padding).
 */
export function scatterAddRows(out: Float32Array, D: number, ids: ArrayLike<number>, grad: ArrayLike<number>): void {
  for (let i = 0; i < ids.length; i++) {
    if (ids[i] < 0) continue;
    const dst = ids[i] * D;
    const src = i * D;
    for (let j = 0; j < D; j++) out[dst + j] += grad[src + j];
  }
}

/**
 * Transformer trunk over full sequences starting at position 0.
 * x0 `[B, T, D]` token embeddings (consumed; positions are added here), bias `[T, T]` (`causalBias`, consumed)
 * → final-LayerNorm hidden `[B*T, D]`. `wte` is not used (the caller applies the tied head).
 */
export function trunk(params: Omit<GPTParams, "wte">, x0: Arr, bias: Arr, nHeads: number): Arr {
  const [B, T, D] = x0.shape;
  let x = x0.add(params.wpe.slice([0, T])).reshape([B * T, D]);
  for (const p of params.blocks) {
    x = attentionFull(x, p, bias.ref, { batch: B, seqLen: T, nHeads }, false).x;
    x = mlp(x, p);
  }
  bias.dispose();
  return layerNorm(x, params.lnfg, params.lnfb);
}

/** The tied LM head: h `[N, D]` @ wteᵀ → logits `[N, V]`. */
export function lmHead(h: Arr, wte: Arr): Arr {
  return np.matmul(h, wte.transpose());
}

/**
 * Full-sequence forward to logits. params (consumed), x0 `[B, T, D]` token embeddings (consumed, see
 * `embedRows`), bias `[T, T]` (`causalBias`, consumed) → logits `[B, T, V]`.
 */
export function forward(params: GPTParams, x0: Arr, bias: Arr, nHeads: number): Arr {
  const [B, T] = x0.shape;
  const { wte, ...rest } = params;
  const V = wte.shape[0];
  return lmHead(trunk(rest, x0, bias, nHeads), wte).reshape([B, T, V]);
}

/**
 * Prefill for sampling: runs right-padded prompts and returns their KV cache and the logits at each row's last
 * prompt token. x0 `[B, P, D]` token embeddings, lastIdx `[B]` int32 (= promptLength−1), bias `[P, P]`
 * (`causalBias`). @returns logits `[B, V]` and the prompt cache, `[B, P, H, hd]` per layer.
 */
export function prefill(params: GPTParams, x0: Arr, lastIdx: Arr, bias: Arr, nHeads: number) {
  const [B, P, D] = x0.shape;
  const V = params.wte.shape[0];
  let x = x0.add(params.wpe.slice([0, P])).reshape([B * P, D]);
  const cache: KVCache = { k: [], v: [] };
  for (const p of params.blocks) {
    const r = attentionFull(x, p, bias.ref, { batch: B, seqLen: P, nHeads }, true);
    cache.k.push(r.k!);
    cache.v.push(r.v!);
    x = mlp(r.x, p);
  }
  bias.dispose();
  // Select each row's last prompt position with a one-hot over P (a reduction, cheap) before the LM head.
  const cls = np.arange(P, undefined, undefined, { dtype: np.int32 }).reshape([1, P]);
  const sel = np.equal(lastIdx.reshape([B, 1]), cls).astype(np.float32).reshape([B, P, 1]);
  const xl = x.reshape([B, P, D]).mul(sel).sum(1); // [B, D]
  const hN = layerNorm(xl, params.lnfg, params.lnfb);
  return { logits: lmHead(hN, params.wte).reshape([B, V]), cache };
}

/**
 * Host-side masks of one decode step. Rows' prompts (right-padded to P) have lengths `lens`; at step j every row
 * feeds its j-th new token, which goes to slot j of the recent cache (R slots).
 * @returns promptBias `[B*P]` (0 for slots < len, `MASKED` after), recentBias `[R]` (0 for slots ≤ j) and write `[R]`
 *   (one-hot at j)
 */
export function decodeMasks(lens: ArrayLike<number>, P: number, R: number, j: number) {
  const B = lens.length;
  const promptBias = new Float32Array(B * P);
  for (let b = 0; b < B; b++) promptBias.fill(MASKED, b * P + Math.min(lens[b], P), (b + 1) * P);
  const recentBias = new Float32Array(R).fill(MASKED, j + 1);
  const write = new Float32Array(R);
  write[j] = 1;
  return { promptBias, recentBias, write };
}

/** The two-part KV cache `decodeStep` reads: `prompt` (from `prefill`) and `recent` (the generated tokens'). */
export interface DecodeCaches { prompt: KVCache; recent: KVCache }
/** One decode step's inputs (`decodeStep`): x0 `[B, D]`, write `[R]`, promptBias `[B, P]`, recentBias `[R]`. */
export interface DecodeStepInput { x0: Arr; write: Arr; promptBias: Arr; recentBias: Arr }

/**
 * One decode step with a two-part KV cache (`caches`): the prompt cache `[B, P, H, hd]` per layer from `prefill`
 * (read-only, not consumed: pass `.ref`s) and a recent cache `[B, R, H, hd]` per layer for the tokens generated so far
 * (consumed, returned updated). At step j every row feeds one token (x0 `[B, D]` = its token + position embedding,
 * host-gathered; positions differ per row) whose k/v are blended into recent slot j (write `[R]` one-hot), so only
 * the small recent cache is rewritten per step. The row attends to its prompt slots (promptBias `[B, P]`) and to
 * recent slots ≤ j (recentBias `[R]`), one softmax over both parts. The `input` arrays are consumed.
 * @returns logits `[B, V]` (predicting each row's next position) and the new recent cache.
 */
export function decodeStep(params: GPTParams, caches: DecodeCaches, input: DecodeStepInput, nHeads: number) {
  const { prompt, recent } = caches;
  const { x0, write, promptBias, recentBias } = input;
  const [B, D] = x0.shape;
  const H = nHeads;
  const hd = D / H;
  const P = prompt.k[0].shape[1];
  const R = recent.k[0].shape[1];
  params.wpe.dispose();
  let x = x0;
  const w = write.reshape([1, R, 1, 1]);
  const keep = np.subtract(1, w.ref);
  const bP = promptBias.reshape([B, 1, P]);
  const bR = recentBias.reshape([1, 1, R]);
  const out: KVCache = { k: [], v: [] };
  params.blocks.forEach((p, l) => {
    const h = layerNorm(x.ref, p.ln1g, p.ln1b);
    const qkv = linear(h, p.wqkv, p.bqkv).reshape([B, 3, H, hd]);
    const q = qkv.ref.slice([], 0).mul(1 / Math.sqrt(hd)); // [B,H,hd]
    const kNew = qkv.ref.slice([], 1).reshape([B, 1, H, hd]);
    const vNew = qkv.slice([], 2).reshape([B, 1, H, hd]);
    // recent·(1−w) + w·new: exact at both w = 0 and w = 1.
    const kr = recent.k[l].mul(keep.ref).add(kNew.mul(w.ref));
    const vr = recent.v[l].mul(keep.ref).add(vNew.mul(w.ref));
    // One softmax over prompt and recent slots, without concatenating them.
    const sP = ein("bhd,bshd->bhs", q.ref, prompt.k[l]).add(bP.ref); // [B,H,P]
    const sR = ein("bhd,bshd->bhs", q, kr.ref).add(bR.ref); // [B,H,R]
    const m = lax.stopGradient(np.maximum(sP.ref.max(-1, { keepdims: true }), sR.ref.max(-1, { keepdims: true })));
    const eP = fastExp(sP.sub(m.ref));
    const eR = fastExp(sR.sub(m));
    const z = eP.ref.sum(-1, { keepdims: true }).add(eR.ref.sum(-1, { keepdims: true })); // [B,H,1]
    const oP = ein("bhs,bshd->bhd", eP, prompt.v[l]);
    const oR = ein("bhs,bshd->bhd", eR, vr.ref);
    const o = materialize(oP.add(oR).div(z).reshape([B, D]));
    x = x.add(linear(o, p.wo, p.bo));
    x = mlp(x, p);
    out.k.push(kr);
    out.v.push(vr);
  });
  w.dispose();
  keep.dispose();
  bP.dispose();
  bR.dispose();
  const hN = layerNorm(x, params.lnfg, params.lnfb);
  return { logits: lmHead(hN, params.wte), cache: out };
}
