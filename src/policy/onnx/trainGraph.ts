/**
 * Our GPT's training step as one ONNX graph, so that forward + backward run on onnxruntime's CPU kernels (MLAS
 * GEMMs; the whole step 1.6–1.8× PyTorch's on the base shape here, 7.8–8.8× on a larger one, BENCHMARKS.md)
 * instead of jax-js's wasm kernels. The backward is written out by hand, layer by layer (reverse-mode over the same ops as
 * `../embedded/gpt.ts`), and the loss head is `../embedded/loss.ts`'s closed form: ∂L/∂logits_t =
 * c_t·(onehot_t − softmax_t) with c_t = ∂L/∂lp_t. The weights are graph *inputs* (not initializers), so one session
 * serves every update and no model is rebuilt.
 *
 * The model, exactly as `gpt.ts`: position embeddings added to the host-gathered token embeddings x0; pre-LayerNorm
 * blocks (eps 1e-5; causal attention with the fused `[D, 3D]` qkv projection, scores scaled by 1/√hd; tanh-GELU
 * MLP); final LayerNorm; LM head tied to `wte`. Differences in arithmetic only: onnxruntime's exp/tanh where the
 * jax-js trainer uses its polynomial `fastExp` (relative error ≈ 1e-5), and its own summation orders.
 *
 * Graph inputs (B rows, T tokens; dynamic): every parameter by its `paramShapes` name; `x0` float `[B, T, D]`;
 * `bias` float `[T, T]` (`causalBias`); for "train" and "logprob": `targets` int64 `[B, T]`; for "train": `weights`,
 * `sampler_lp`, `advantages`, `ref_lp` float `[B, T]` and `hp` float `[6]` (lossPlan's order).
 * Outputs: "train": `loss` `[]`, `lp` `[B, T]`, `stats` `[7]` (loss.ts's STAT order), `grad.<name>` for every
 * parameter but `wpe`, `grad.wpe` `[T, D]` (rows ≥ T are zero; the caller pads), `grad.x0` `[B, T, D]` (the caller
 * scatters it into wte's rows); "logprob": `lp`; "hidden": `hidden` `[B·T, D]` (after the final LayerNorm).
 *
 * Sources: the backward of LayerNorm, softmax and attention as in Karpathy's llm.c `train_gpt2.c`
 * (layernorm_backward, attention_backward, gelu_backward); ONNX operator semantics from onnx/docs/Operators.md
 * (opset 20) and onnxruntime's contrib `FusedMatMul` (com.microsoft, docs/ContribOperators.md).
 */
import { paramShapes, shiftPermutation, TOKEN_SHIFT_SCALE, type GPTConfig } from "../embedded/gpt.ts";
import type { LossSpec } from "../embedded/loss.ts";
import { GraphBuilder, type AttrValue } from "./graph.ts";

/** What a graph computes (see the file comment). */
export type TrainGraphMode = "train" | "logprob" | "hidden";

/** The loss head's static choices ("train" only): `loss.ts`'s LossSpec without the head count. */
export type TrainGraphLoss = Omit<LossSpec, "nHeads">;

const LN_EPS = 1e-5;

/** A small op vocabulary over a GraphBuilder (each returns its output's name). */
class Ops {
  private readonly consts = new Map<string, string>();
  constructor(readonly g: GraphBuilder) {}
  op(type: string, inputs: string[], attrs: Record<string, AttrValue> = {}, domain = ""): string {
    return this.g.node(type, inputs, 1, attrs, domain);
  }
  /** A float scalar constant (shared). */
  f(v: number): string {
    const key = `f${v}`;
    let name = this.consts.get(key);
    if (!name) {
      name = this.g.float(this.g.tmp("c"), [], new Float32Array([v]));
      this.consts.set(key, name);
    }
    return name;
  }
  /** An int64 vector constant (shared). */
  ints(v: number[]): string {
    const key = `i${v.join(",")}`;
    let name = this.consts.get(key);
    if (!name) {
      name = this.g.int64(this.g.tmp("k"), [v.length], v);
      this.consts.set(key, name);
    }
    return name;
  }
  add = (a: string, b: string) => this.op("Add", [a, b]);
  sub = (a: string, b: string) => this.op("Sub", [a, b]);
  mul = (a: string, b: string) => this.op("Mul", [a, b]);
  neg = (a: string) => this.op("Neg", [a]);
  exp = (a: string) => this.op("Exp", [a]);
  reshape = (a: string, shape: number[]) => this.op("Reshape", [a, this.ints(shape)]);
  transpose = (a: string, perm: number[]) => this.op("Transpose", [a], { perm });
  /** Σ over `axes`. */
  sum = (a: string, axes: number[], keepdims = 0) => this.op("ReduceSum", [a, this.ints(axes)], { keepdims });
  /** Σ of every element → `[]`. */
  total = (a: string) => this.op("ReduceSum", [a], { keepdims: 0 });
  mean = (a: string, axes: number[]) => this.op("ReduceMean", [a, this.ints(axes)], { keepdims: 1 });
  /** (batched) a @ b with optional transposes of the last two axes and a scale. */
  matmul = (a: string, b: string, transA = 0, transB = 0, alpha = 1) =>
    this.op("FusedMatMul", [a, b], { transA, transB, alpha: { f: alpha } }, "com.microsoft");
  /** 1.0 where the condition holds, else 0.0. */
  float = (boolOut: string) => this.op("Cast", [boolOut], { to: 1 });
  /** hp[i] as a scalar `[]`. */
  pick(vec: string, i: number): string {
    return this.op("Squeeze", [this.op("Slice", [vec, this.ints([i]), this.ints([i + 1])]), this.ints([0])]);
  }
}

/** Saved forward values of one LayerNorm (for its backward). */
interface LnSaved {
  y: string;
  xhat: string;
  rstd: string;
  gain: string;
}

function layerNorm(o: Ops, x: string, gain: string, bias: string): LnSaved {
  const [y, mean, rstd] = o.g.nodeN("LayerNormalization", [x, gain, bias], 3, { axis: -1, epsilon: { f: LN_EPS } });
  return { y, xhat: o.mul(o.sub(x, mean), rstd), rstd, gain };
}

/** dx, dgain, dbias of y = xhat·g + b, xhat = (x − μ)·rstd, over the last axis; dy `[N, D]`. */
function layerNormBackward(o: Ops, s: LnSaved, dy: string) {
  const dgain = o.sum(o.mul(dy, s.xhat), [0]);
  const dbias = o.sum(dy, [0]);
  const dxhat = o.mul(dy, s.gain);
  const m1 = o.mean(dxhat, [-1]);
  const m2 = o.mean(o.mul(dxhat, s.xhat), [-1]);
  const dx = o.mul(s.rstd, o.sub(o.sub(dxhat, m1), o.mul(s.xhat, m2)));
  return { dx, dgain, dbias };
}

/** d gelu_tanh(a) / da = ½(1 + tanh u) + ½·a·(1 − tanh²u)·u′, u = √(2/π)(a + 0.044715a³). */
function geluGrad(o: Ops, a: string): string {
  const k0 = Math.sqrt(2 / Math.PI);
  const a2 = o.mul(a, a);
  const u = o.mul(o.mul(a, o.add(o.mul(a2, o.f(0.044715)), o.f(1))), o.f(k0));
  const th = o.op("Tanh", [u]);
  const du = o.mul(o.add(o.mul(a2, o.f(3 * 0.044715)), o.f(1)), o.f(k0));
  const sech2 = o.sub(o.f(1), o.mul(th, th));
  return o.mul(o.f(0.5), o.add(o.add(o.f(1), th), o.mul(o.mul(a, sech2), du)));
}

/** Forward values of one block that its backward reads. */
interface BlockSaved {
  ln1: LnSaved;
  q: string;
  k: string;
  v: string;
  probs: string;
  attnOut: string;
  ln2: LnSaved;
  pre: string;
  act: string;
}

/**
 * Builds the graph (see the file comment).
 * @param config model shape (defaults filled)
 * @param mode what the graph outputs
 * @param loss the loss head's choices (mode "train" only)
 * @param dims the batch and sequence dimensions: symbolic names (default; one session serves every shape) or fixed
 *   sizes (measured no faster here: 234–267 vs 227–269 ms on the base step)
 * @returns ModelProto bytes (opset 20, IR 9, com.microsoft 1)
 * @throws Error when mode is "train" without `loss`
 */
export function buildTrainGraph(config: Required<GPTConfig>, mode: TrainGraphMode, loss?: TrainGraphLoss, dims: { B: number | string; T: number | string } = { B: "B", T: "T" }): Uint8Array {
  const { B: Bd, T: Td } = dims;
  if (mode === "train" && !loss) throw new Error("buildTrainGraph: mode train needs a loss spec");
  const g = new GraphBuilder();
  const o = new Ops(g);
  const { dModel: D, nHeads: H, vocabSize: V } = config;
  const hd = D / H;
  const scale = 1 / Math.sqrt(hd);
  const P: Record<string, string> = {};
  for (const [name, shape] of paramShapes(config)) P[name] = g.input(name, "float", shape);
  const x0 = g.input("x0", "float", [Bd, Td, D]);
  const bias = g.input("bias", "float", [Td, Td]);

  // Forward. The residual stream is x [N, D] (N = B·T rows): every weight product is one 2-D GEMM (3-D operands
  // made onnxruntime run one GEMM per row block, ~1.4× slower here); only attention reshapes to [B, H, T, hd].
  const T = o.op("Shape", [x0], { start: 1, end: 2 });
  const pe = o.op("Slice", [P.wpe, o.ints([0]), T, o.ints([0])]); // [T, D]
  const btShape = o.op("Shape", [x0], { start: 0, end: 2 }); // [B, T]
  const headsShape = o.op("Concat", [btShape, o.ints([3, H, hd])], { axis: 0 });
  const headShape4 = o.op("Concat", [btShape, o.ints([H, hd])], { axis: 0 });
  const rope = config.positional === "rope";
  // RoPE (Su et al. 2021, §3.4; Llama's rotate-half layout): tables [T, hd] fed by the host, rows start at position 0.
  const cos = rope ? g.input("rope_cos", "float", [Td, hd]) : "";
  const sin = rope ? g.input("rope_sin", "float", [Td, hd]) : "";
  const half = hd / 2;
  const halves = (t: string) => g.nodeN("Split", [t, o.ints([half, half])], 2, { axis: -1 });
  /** x·cos + rotate_half(x)·sin, rotate_half(x) = [−x₂, x₁]. */
  const rotate = (t: string) => {
    const [a, b] = halves(t);
    return o.add(o.mul(t, cos), o.mul(o.op("Concat", [o.neg(b), a], { axis: -1 }), sin));
  };
  /** The transpose of `rotate`: dy·cos + [ (dy·sin)₂, −(dy·sin)₁ ]. */
  const rotateBack = (dy: string) => {
    const [a, b] = halves(o.mul(dy, sin));
    return o.add(o.mul(dy, cos), o.op("Concat", [b, o.neg(a)], { axis: -1 }));
  };
  // Token shift (gpt.ts `tokenShift`, `shiftWindow`): x_t = e_t + ½·Σ_k P_k·e_{t−k}, P_k fixed channel permutations
  // (gather along the last axis); a row starts with no previous tokens.
  const shift = config.tokenShift;
  const window = shift ? config.shiftWindow : 0;
  const permute = (t: string, k: number, inverse: boolean) => {
    const perm = shiftPermutation(D, k);
    const idx = inverse ? Int32Array.from(perm, (_, j) => perm.indexOf(j)) : perm;
    return o.op("Gather", [t, o.ints([...idx])], { axis: 2 });
  };
  /** `[B, T, D]` moved k positions later (zeros first) or, `back`, k positions earlier (zeros last). */
  const moved = (t: string, k: number, back: boolean) =>
    back
      ? o.op("Slice", [o.op("Pad", [t, o.ints([0, 0, 0, 0, k, 0])]), o.ints([k]), o.add(T, o.ints([k])), o.ints([1])])
      : o.op("Slice", [o.op("Pad", [t, o.ints([0, k, 0, 0, 0, 0])]), o.ints([0]), T, o.ints([1])]);
  let xIn = x0;
  for (let k = 1; k <= window; k++) xIn = o.add(xIn, o.mul(permute(moved(x0, k, false), k, false), o.f(TOKEN_SHIFT_SCALE)));
  let x = rope ? o.reshape(xIn, [-1, D]) : o.reshape(o.add(xIn, pe), [-1, D]);
  const saved: BlockSaved[] = [];
  for (let l = 0; l < config.nLayers; l++) {
    const p = (k: string) => P[`blocks.${l}.${k}`];
    const ln1 = layerNorm(o, x, p("ln1g"), p("ln1b"));
    const qkv = o.add(o.matmul(ln1.y, p("wqkv")), p("bqkv")); // [B, T, 3D]
    const heads = o.transpose(o.op("Reshape", [qkv, headsShape]), [2, 0, 3, 1, 4]); // [3, B, H, T, hd]
    const [q0, k0, v] = g.nodeN("Split", [heads, o.ints([1, 1, 1])], 3, { axis: 0 }).map((s) => o.op("Squeeze", [s, o.ints([0])]));
    const [q, k] = rope ? [rotate(q0), rotate(k0)] : [q0, k0];
    const probs = o.op("Softmax", [o.add(o.matmul(q, k, 0, 1, scale), bias)], { axis: -1 }); // [B, H, T, T]
    const attnOut = o.reshape(o.transpose(o.matmul(probs, v), [0, 2, 1, 3]), [-1, D]); // [N, D]
    x = o.add(x, o.add(o.matmul(attnOut, p("wo")), p("bo")));
    const ln2 = layerNorm(o, x, p("ln2g"), p("ln2b"));
    const pre = o.add(o.matmul(ln2.y, p("w1")), p("b1"));
    const act = o.op("Gelu", [pre], { approximate: "tanh" });
    x = o.add(x, o.add(o.matmul(act, p("w2")), p("b2")));
    saved.push({ ln1, q, k, v, probs, attnOut, ln2, pre, act });
  }
  const lnf = layerNorm(o, x, P.lnfg, P.lnfb);
  const h = lnf.y; // [N, D]
  if (mode === "hidden") {
    g.node("Identity", [h], ["hidden"]);
    g.output("hidden", "float", [typeof Bd === "number" && typeof Td === "number" ? Bd * Td : "N", D]);
    return g.encode(20, 9, { "com.microsoft": 1 });
  }
  const targets = g.input("targets", "int64", [Bd, Td]);
  const logits = o.matmul(h, P.wte, 0, 1); // [N, V]
  const logSm = o.op("LogSoftmax", [logits], { axis: -1 });
  const tFlat = o.reshape(targets, [-1, 1]);
  const bt = o.op("Shape", [targets]);
  const lpBT = o.op("Reshape", [o.op("GatherElements", [logSm, tFlat], { axis: 1 }), bt]); // [N, 1] → [B, T]
  g.node("Identity", [lpBT], ["lp"]);
  g.output("lp", "float", [Bd, Td]);
  if (mode === "logprob") return g.encode(20, 9, { "com.microsoft": 1 });

  // Loss head (loss.ts `lossTraced`, same formulas and statistics).
  const spec = loss!;
  const w = g.input("weights", "float", [Bd, Td]);
  const q = g.input("sampler_lp", "float", [Bd, Td]);
  const A = g.input("advantages", "float", [Bd, Td]);
  const refLp = g.input("ref_lp", "float", [Bd, Td]);
  const hp = g.input("hp", "float", [6]);
  const clipLow = o.pick(hp, 0);
  const clipHigh = o.pick(hp, 1);
  const klCoef = o.pick(hp, 2);
  const invDenom = o.pick(hp, 3);
  const lo = o.sub(o.f(1), clipLow);
  const hi = o.add(clipHigh, o.f(1));
  const zeros = o.mul(lpBT, o.f(0));
  let ell: string;
  let dl: string;
  let ratio: string;
  let clipped = zeros;
  let lower: string | undefined;
  if (spec.lossFn === "cross_entropy") {
    ell = o.neg(lpBT);
    dl = o.sub(zeros, o.f(1));
    ratio = o.exp(o.sub(lpBT, q));
  } else if (spec.lossFn === "importance_sampling") {
    ratio = o.exp(o.sub(lpBT, q));
    ell = o.neg(o.mul(ratio, A));
    dl = ell;
  } else if (spec.lossFn === "cispo") {
    ratio = o.exp(o.sub(lpBT, q));
    const c = o.op("Clip", [ratio, lo, hi]);
    clipped = o.float(o.op("Not", [o.op("Equal", [c, ratio])]));
    const cA = o.mul(c, A);
    ell = o.neg(o.mul(cA, lpBT));
    dl = o.neg(cA);
  } else if (spec.lossFn === "dro") {
    ratio = o.exp(o.sub(lpBT, q));
    const beta = o.pick(hp, 5);
    const d = o.sub(lpBT, q);
    ell = o.neg(o.sub(o.mul(lpBT, A), o.mul(o.mul(o.mul(d, d), beta), o.f(0.5))));
    dl = o.sub(o.mul(d, beta), A);
  } else if (spec.lossFn === "gspo") {
    const m = o.float(o.op("Not", [o.op("Equal", [w, o.f(0)])]));
    const n = o.op("Max", [o.sum(m, [-1], 1), o.f(1)]);
    const logS = o.op("Min", [o.op("Div", [o.sum(o.mul(o.sub(lpBT, q), m), [-1], 1), n]), o.f(10)]);
    ratio = o.add(o.exp(logS), zeros); // broadcast [B,1] → [B,T]
    const unclipped = o.mul(ratio, A);
    const clippedObj = o.mul(o.op("Clip", [ratio, lo, hi]), A);
    clipped = o.float(o.op("Less", [clippedObj, unclipped]));
    ell = o.neg(o.op("Min", [unclipped, clippedObj]));
    dl = o.mul(o.neg(o.mul(ratio, A)), o.sub(o.f(1), clipped));
  } else {
    ratio = o.exp(o.sub(lpBT, q));
    const unclipped = o.mul(ratio, A);
    const clippedObj = o.mul(o.op("Clip", [ratio, lo, hi]), A);
    clipped = o.float(o.op("Less", [clippedObj, unclipped]));
    ell = o.neg(o.op("Min", [unclipped, clippedObj]));
    dl = o.mul(o.neg(o.mul(ratio, A)), o.sub(o.f(1), clipped));
    if (spec.dualClip) {
      const l3 = o.neg(o.mul(A, o.pick(hp, 4)));
      const lowerB = o.op("And", [o.op("Less", [A, o.f(0)]), o.op("Greater", [ell, l3])]);
      ell = o.op("Where", [lowerB, l3, ell]);
      lower = o.float(lowerB);
      dl = o.mul(dl, o.sub(o.f(1), lower));
    }
  }
  let klTok: string;
  if (spec.useKl) {
    const d = o.sub(refLp, lpBT);
    const ed = o.exp(d);
    klTok = o.sub(o.sub(ed, d), o.f(1));
    ell = o.add(ell, o.mul(klTok, klCoef));
    dl = o.add(dl, o.mul(o.sub(o.f(1), ed), klCoef));
  } else {
    klTok = o.sub(q, lpBT);
  }
  const wsum = (a: string) => o.total(o.mul(a, w));
  g.node("Mul", [wsum(ell), invDenom], ["loss"]);
  g.output("loss", "float", []);
  const probsHead = o.exp(logSm); // [N, V]
  const entropy = o.reshape(o.neg(o.sum(o.mul(probsHead, logSm), [-1], 1)), [-1]); // [N]
  const entropyBT = o.op("Reshape", [entropy, bt]);
  const stats = [o.total(w), wsum(clipped), wsum(klTok), wsum(entropyBT), wsum(ratio), wsum(ell), lower ? wsum(lower) : o.f(0)];
  g.node("Concat", stats.map((s) => o.reshape(s, [1])), ["stats"], { axis: 0 });
  g.output("stats", "float", [7]);

  // Backward.
  const c = o.reshape(o.mul(o.mul(dl, w), invDenom), [-1, 1]); // ∂L/∂lp [N, 1]
  const onehot = o.op("OneHot", [o.reshape(targets, [-1]), o.ints([V]), g.float(g.tmp("ohv"), [2], new Float32Array([0, 1]))], { axis: -1 });
  const dLogits = o.mul(o.sub(onehot, probsHead), c); // [N, V]
  const grads: [string, string][] = [];
  const grad = (name: string, value: string) => grads.push([name, value]);
  const headGrad = o.matmul(dLogits, h, 1, 0); // [V, D]
  let dx = o.matmul(dLogits, P.wte); // [N, D]
  /** y = x @ w + b: records ∂w = xᵀ·dy and ∂b = Σ_rows dy, returns ∂x = dy·wᵀ. */
  const linearBack = (xIn: string, w: string, dy: string, wName: string, bName: string): string => {
    grad(bName, o.sum(dy, [0]));
    grad(wName, o.matmul(xIn, dy, 1, 0));
    return o.matmul(dy, w, 0, 1);
  };
  /** LayerNorm: records ∂gain and ∂bias, returns ∂x. */
  const lnBack = (ln: LnSaved, dy: string, gName: string, bName: string): string => {
    const r = layerNormBackward(o, ln, dy);
    grad(gName, r.dgain);
    grad(bName, r.dbias);
    return r.dx;
  };
  dx = lnBack(lnf, dx, "lnfg", "lnfb");
  for (let l = config.nLayers - 1; l >= 0; l--) {
    const name = (k: string) => `blocks.${l}.${k}`;
    const p = (k: string) => P[name(k)];
    const s = saved[l];
    // MLP: x += act @ w2 + b2, act = gelu(ln2.y @ w1 + b1).
    const dPre = o.mul(linearBack(s.act, p("w2"), dx, name("w2"), name("b2")), geluGrad(o, s.pre));
    dx = o.add(dx, lnBack(s.ln2, linearBack(s.ln2.y, p("w1"), dPre, name("w1"), name("b1")), name("ln2g"), name("ln2b")));
    // Attention: x += attnOut @ wo + bo.
    const dO = o.transpose(o.op("Reshape", [linearBack(s.attnOut, p("wo"), dx, name("wo"), name("bo")), headShape4]), [0, 2, 1, 3]); // [B, H, T, hd]
    const dP = o.matmul(dO, s.v, 0, 1);
    const dv = o.matmul(s.probs, dO, 1, 0);
    const dS = o.mul(s.probs, o.sub(dP, o.sum(o.mul(dP, s.probs), [-1], 1)));
    let dq = o.matmul(dS, s.k, 0, 0, scale);
    let dk = o.matmul(dS, s.q, 1, 0, scale);
    if (rope) [dq, dk] = [rotateBack(dq), rotateBack(dk)];
    const stacked = o.op("Concat", [dq, dk, dv].map((t) => o.op("Unsqueeze", [t, o.ints([0])])), { axis: 0 }); // [3, B, H, T, hd]
    const dQkv = o.reshape(o.transpose(stacked, [1, 3, 0, 2, 4]), [-1, 3 * D]); // [N, 3D]
    dx = o.add(dx, lnBack(s.ln1, linearBack(s.ln1.y, p("wqkv"), dQkv, name("wqkv"), name("bqkv")), name("ln1g"), name("ln1b")));
  }
  grad("wte", headGrad);
  const dx3 = o.op("Reshape", [dx, o.op("Shape", [x0])]); // [B, T, D]
  grad("wpe", rope ? o.mul(o.sum(dx3, [0]), o.f(0)) : o.sum(dx3, [0]));
  // The token shift's transpose: e_t's gradient also comes from each position t+k through ½·P_k·e_t.
  let dx0 = dx3;
  for (let k = 1; k <= window; k++) dx0 = o.add(dx0, o.mul(permute(moved(dx3, k, true), k, true), o.f(TOKEN_SHIFT_SCALE)));
  for (const [name, value] of grads) {
    g.node("Identity", [value], [`grad.${name}`]);
    g.output(`grad.${name}`, "float", name === "wpe" ? [Td, D] : (paramShapes(config).find(([n]) => n === name)![1]));
  }
  g.node("Identity", [dx0], ["grad.x0"]);
  g.output("grad.x0", "float", [Bd, Td, D]);
  return g.encode(20, 9, { "com.microsoft": 1 });
}
