/**
 * Our GPT (see `../embedded/gpt.ts`) as an ONNX "decoder with past" graph built from a set of weights, so sampling
 * can run on onnxruntime-node. One graph serves prefill and decode: it takes T new tokens per row plus a KV cache
 * of S past slots per row, and returns the logits of one selected position per row and the new tokens' keys and
 * values (the caller keeps the cache; see `engine.ts`).
 *
 * The model, exactly as `gpt.ts`: learned token + position embeddings; pre-LayerNorm blocks (LN eps 1e-5; causal
 * multi-head attention with the fused `[D, 3D]` qkv projection, weights laid out `[in, out]`; tanh-GELU MLP);
 * final LayerNorm; LM head tied to the token embedding (logits = h · wteᵀ). Differences in arithmetic only: the
 * attention scale 1/√hd is folded into the query weights, and softmax/GELU use onnxruntime's exp/tanh (accurate
 * to a few float32 ulps) where the trainer uses its polynomial `fastExp` (relative error ≈ 1e-5) — sampled-token
 * logprobs agree with the trainer's to ≈ 1.5e-5 nats (measured; test/policy-onnx.test.ts checks 1e-4).
 *
 * Graph inputs (B rows, T new tokens per row, S cache slots per row; H heads, hd = D/H):
 * - `ids`, `pos` int64 `[B, T]`: token ids and their positions (< contextLength)
 * - `sel` float `[B, 1, T]`: one-hot of the position whose logits are returned (prefill: each row's last prompt
 *   token; decode, T = 1: all ones)
 * - `bias_past` float `[B, 1, T, S]`, `bias_new` float `[1, 1, T, T]`: additive attention masks (0 = attend,
 *   −1e9 = not), for each row's cache slots and for the new tokens (causal, the same for every row)
 * - `split` int64 `[2]` = [S, T]; `shape_bthd` int64 `[4]` = [B, T, H, hd]; `shape_btd` int64 `[3]` = [B, T, D]
 * - `past_k.{l}` float `[B, H, hd, S]` (keys stored transposed, so q·kᵀ needs no transpose), `past_v.{l}` float
 *   `[B, H, S, hd]`, for each layer l
 *
 * Outputs: `logits` float `[B, 1, V]`; `k.{l}` float `[B, H, hd, T]` and `v.{l}` float `[B, H, T, hd]`.
 */
import { ropeTables, shiftPermutation, TOKEN_SHIFT_SCALE, type GPTConfig } from "../embedded/gpt.ts";
import { GraphBuilder } from "./graph.ts";

/** Additive attention-mask value for slots that must not be attended (as `gpt.ts`). */
export const MASKED = -1e9;

/** How the graph computes tanh-GELU. */
export type GeluMode = "op20" | "composed";

/** Options of `buildGptModel`. */
export interface GptModelOptions {
  /**
   * "op20": the opset-20 `Gelu(approximate="tanh")` op; "composed": 0.5·x·(1 + tanh(√(2/π)(x + 0.044715x³)))
   * from opset-17 elementwise ops (onnxruntime may fuse it). Default "op20".
   */
  gelu?: GeluMode;
}

/** Names of the per-layer cache inputs/outputs. */
export const io = {
  pastK: (l: number): string => `past_k.${l}`,
  pastV: (l: number): string => `past_v.${l}`,
  k: (l: number): string => `k.${l}`,
  v: (l: number): string => `v.${l}`,
};

/**
 * Builds the ONNX model of the GPT with `weights` baked in as initializers.
 * @param config the model shape (defaults filled)
 * @param weights every parameter by its `paramShapes` name (`wte` `[V*D]`, `blocks.0.wqkv` `[D*3D]`, …; row-major
 *   `[in, out]`)
 * @returns ModelProto bytes (about 4 bytes per parameter plus a few KB)
 * @throws Error when a parameter is missing or has the wrong size
 */
export function buildGptModel(config: Required<GPTConfig>, weights: Map<string, Float32Array>, options: GptModelOptions = {}): Uint8Array {
  const { vocabSize: V, contextLength: C, dModel: D, nLayers: L, nHeads: H, mlpRatio } = config;
  const M = mlpRatio * D;
  const hd = D / H;
  const geluMode = options.gelu ?? "op20";
  const g = new GraphBuilder();
  const w = (name: string, n: number): Float32Array => {
    const a = weights.get(name);
    if (!a) throw new Error(`ONNX model: missing parameter ${name}`);
    if (a.length !== n) throw new Error(`ONNX model: parameter ${name} has ${a.length} values, expected ${n}`);
    return a;
  };

  // Inputs.
  const ids = g.input("ids", "int64", ["B", "T"]);
  const pos = g.input("pos", "int64", ["B", "T"]);
  const sel = g.input("sel", "float", ["B", 1, "T"]);
  const biasPast = g.input("bias_past", "float", ["B", 1, "T", "S"]);
  const biasNew = g.input("bias_new", "float", [1, 1, "T", "T"]);
  const split = g.input("split", "int64", [2]);
  const shapeBTHD = g.input("shape_bthd", "int64", [4]);
  const shapeBTD = g.input("shape_btd", "int64", [3]);
  const pastK: string[] = [];
  const pastV: string[] = [];
  for (let l = 0; l < L; l++) {
    pastK.push(g.input(io.pastK(l), "float", ["B", H, hd, "S"]));
    pastV.push(g.input(io.pastV(l), "float", ["B", H, "S", hd]));
  }

  // Constants.
  const wteData = w("wte", V * D);
  const wte = g.float("wte", [V, D], wteData);
  const wteT = new Float32Array(D * V);
  for (let i = 0; i < V; i++) for (let j = 0; j < D; j++) wteT[j * V + i] = wteData[i * D + j];
  const head = g.float("wte_t", [D, V], wteT);
  const rope = config.positional === "rope";
  const wpe = rope ? undefined : g.float("wpe", [C, D], w("wpe", C * D));
  const flatND = g.int64("shape_nd", [2], [-1, D]);

  const layerNorm = (x: string, gain: string, bias: string): string =>
    g.node("LayerNormalization", [x, gain, bias], 1, { axis: -1, epsilon: { f: 1e-5 } });
  const gemm = (x: string, wName: string, bName: string): string => g.node("Gemm", [x, wName, bName]);
  const gelu = (x: string): string => {
    if (geluMode === "op20") return g.node("Gelu", [x], 1, { approximate: "tanh" });
    const c = (name: string, v: number): string => g.float(g.tmp(name), [], new Float32Array([v]));
    const x3 = g.node("Mul", [g.node("Mul", [x, x]), x]);
    const inner = g.node("Mul", [g.node("Add", [x, g.node("Mul", [x3, c("c044715", 0.044715)])]), c("sqrt2pi", Math.sqrt(2 / Math.PI))]);
    const t = g.node("Add", [g.node("Tanh", [inner]), c("one", 1)]);
    return g.node("Mul", [g.node("Mul", [x, t]), c("half", 0.5)]);
  };

  // Embeddings: [B, T, D] → [N, D], N = B·T.
  let tokEmb = g.node("Gather", [wte, ids], 1, { axis: 0 });
  if (config.tokenShift) {
    // Token shift (gpt.ts): + ½·Σ_k P_k·e(t−k). The host feeds each position's k-th previous token offset by k−1 vocab
    // rows ([B, T, K]) into a table of the K permuted, scaled embeddings, and a mask ([B, T, K, 1]) where there is none.
    const K = config.shiftWindow;
    const prevIds = g.input("prev_ids", "int64", ["B", "T", K]);
    const prevMask = g.input("prev_mask", "float", ["B", "T", K, 1]);
    const shifted = new Float32Array(K * V * D);
    for (let k = 1; k <= K; k++) {
      const perm = shiftPermutation(D, k);
      for (let i = 0; i < V; i++) for (let j = 0; j < D; j++) shifted[((k - 1) * V + i) * D + j] = TOKEN_SHIFT_SCALE * wteData[i * D + perm[j]];
    }
    const wteShift = g.float("wte_shift", [K * V, D], shifted);
    const terms = g.node("Mul", [g.node("Gather", [wteShift, prevIds], 1, { axis: 0 }), prevMask]); // [B, T, K, D]
    tokEmb = g.node("Add", [tokEmb, g.node("ReduceSum", [terms, g.int64("shift_axis", [1], [2])], 1, { keepdims: 0 })]);
  }
  let x = g.node("Reshape", [rope ? tokEmb : g.node("Add", [tokEmb, g.node("Gather", [wpe!, pos], 1, { axis: 0 })]), flatND]);
  // RoPE (rotate-half layout, gpt.ts `ropeTables`): cos/sin rows gathered by position, [B, 1, T, hd].
  let rotate = (t: string): string => t;
  if (rope) {
    const tables = ropeTables(C, hd);
    const axis1 = g.int64("axis1", [1], [1]);
    const cos = g.node("Unsqueeze", [g.node("Gather", [g.float("rope_cos", [C, hd], tables.cos), pos], 1, { axis: 0 }), axis1]);
    const sin = g.node("Unsqueeze", [g.node("Gather", [g.float("rope_sin", [C, hd], tables.sin), pos], 1, { axis: 0 }), axis1]);
    const halfSplit = g.int64("rope_split", [2], [hd / 2, hd / 2]);
    rotate = (t: string): string => {
      const [a, b] = g.nodeN("Split", [t, halfSplit], 2, { axis: -1 });
      const rot = g.node("Concat", [g.node("Neg", [b]), a], 1, { axis: -1 });
      return g.node("Add", [g.node("Mul", [t, cos]), g.node("Mul", [rot, sin])]);
    };
  }

  const scale = 1 / Math.sqrt(hd);
  for (let l = 0; l < L; l++) {
    const p = (k: string): string => `blocks.${l}.${k}`;
    const ln1g = g.float(p("ln1g"), [D], w(p("ln1g"), D));
    const ln1b = g.float(p("ln1b"), [D], w(p("ln1b"), D));
    // Split the fused [D, 3D] qkv weight into q, k, v ([in, out] row-major: column blocks), scaling q by 1/√hd.
    const wqkv = w(p("wqkv"), D * 3 * D);
    const bqkv = w(p("bqkv"), 3 * D);
    const part = (which: number, s: number): [Float32Array, Float32Array] => {
      const wm = new Float32Array(D * D);
      for (let i = 0; i < D; i++) for (let j = 0; j < D; j++) wm[i * D + j] = wqkv[i * 3 * D + which * D + j] * s;
      const bv = new Float32Array(D);
      for (let j = 0; j < D; j++) bv[j] = bqkv[which * D + j] * s;
      return [wm, bv];
    };
    const [wq, bq] = part(0, scale);
    const [wk, bk] = part(1, 1);
    const [wv, bv] = part(2, 1);
    const h = layerNorm(x, ln1g, ln1b);
    const heads = (m: Float32Array, b: Float32Array, name: string, perm: number[]): string =>
      g.node("Transpose", [g.node("Reshape", [gemm(h, g.float(p(`${name}_w`), [D, D], m), g.float(p(`${name}_b`), [D], b)), shapeBTHD])], 1, { perm });
    const q = rotate(heads(wq, bq, "q", [0, 2, 1, 3])); // [B,H,T,hd]
    const kRaw = g.node("Reshape", [gemm(h, g.float(p("k_w"), [D, D], wk), g.float(p("k_b"), [D], bk)), shapeBTHD]); // [B,T,H,hd]
    const k = rope
      ? g.node("Transpose", [rotate(g.node("Transpose", [kRaw], 1, { perm: [0, 2, 1, 3] }))], [io.k(l)], { perm: [0, 1, 3, 2] })
      : g.node("Transpose", [kRaw], [io.k(l)], { perm: [0, 2, 3, 1] }); // [B,H,hd,T]
    const v = g.node("Transpose", [g.node("Reshape", [gemm(h, g.float(p("v_w"), [D, D], wv), g.float(p("v_b"), [D], bv)), shapeBTHD])], [io.v(l)], { perm: [0, 2, 1, 3] }); // [B,H,T,hd]
    // One softmax over [past slots | new tokens].
    const sPast = g.node("Add", [g.node("MatMul", [q, pastK[l]]), biasPast]); // [B,H,T,S]
    const sNew = g.node("Add", [g.node("MatMul", [q, k]), biasNew]); // [B,H,T,T]
    const prob = g.node("Softmax", [g.node("Concat", [sPast, sNew], 1, { axis: 3 })], 1, { axis: -1 });
    const [pPast, pNew] = g.nodeN("Split", [prob, split], 2, { axis: 3 });
    const o = g.node("Add", [g.node("MatMul", [pPast, pastV[l]]), g.node("MatMul", [pNew, v])]); // [B,H,T,hd]
    const o2 = g.node("Reshape", [g.node("Transpose", [o], 1, { perm: [0, 2, 1, 3] }), flatND]); // [N, D]
    x = g.node("Add", [x, gemm(o2, g.float(p("wo"), [D, D], w(p("wo"), D * D)), g.float(p("bo"), [D], w(p("bo"), D)))]);
    const h2 = layerNorm(x, g.float(p("ln2g"), [D], w(p("ln2g"), D)), g.float(p("ln2b"), [D], w(p("ln2b"), D)));
    const a = gelu(gemm(h2, g.float(p("w1"), [D, M], w(p("w1"), D * M)), g.float(p("b1"), [M], w(p("b1"), M))));
    x = g.node("Add", [x, gemm(a, g.float(p("w2"), [M, D], w(p("w2"), M * D)), g.float(p("b2"), [D], w(p("b2"), D)))]);
  }
  // Select one position per row, then final LayerNorm and the tied head.
  const xl = g.node("MatMul", [sel, g.node("Reshape", [x, shapeBTD])]); // [B,1,D]
  const hN = layerNorm(xl, g.float("lnfg", [D], w("lnfg", D)), g.float("lnfb", [D], w("lnfb", D)));
  g.node("MatMul", [hN, head], ["logits"]);

  g.output("logits", "float", ["B", 1, V]);
  for (let l = 0; l < L; l++) {
    g.output(io.k(l), "float", ["B", H, hd, "T"]);
    g.output(io.v(l), "float", ["B", H, "T", hd]);
  }
  return geluMode === "op20" ? g.encode(20, 9) : g.encode(17, 8);
}
