/**
 * Token-level RL / SFT losses (Tinker's names) as traceable jax-js functions, and the jit-compiled
 * forward(+backward) programs of the embedded backend.
 *
 * Per target token t with weight w_t, current logprob lp_t, sampler logprob q_t, advantage A_t, r_t = exp(lp_t − q_t):
 * - `cross_entropy`:        ℓ_t = −lp_t
 * - `importance_sampling`:  ℓ_t = −r_t·A_t
 * - `ppo`:                  ℓ_t = −min(r_t·A_t, clip(r_t, 1−clipLow, 1+clipHigh)·A_t)
 *   - with dual clip (`clipRatioC` = c): for A_t < 0, ℓ_t = min(−c·A_t, ℓ_t) (veRL `vanilla`)
 * - `gspo`:                 `ppo` with r_t replaced by the sequence ratio s_b = exp(mean_t∈b (lp − q)) (log clamped at
 *                           10), whose gradient per token is s_b·∂lp_t (veRL `gspo`)
 * - `cispo`:                ℓ_t = −sg(clip(r_t, 1−clipLow, 1+clipHigh))·A_t·lp_t
 * - `dro`:                  ℓ_t = −(lp_t·A_t − ½β(lp_t − q_t)²)
 * - with a reference policy and klCoef > 0: ℓ_t += klCoef·k3_t, k3_t = exp(ref_t − lp_t) − (ref_t − lp_t) − 1
 *   (Schulman's k3, verl `low_var_kl`).
 * Aggregate: loss = Σ_t w_t·ℓ_t · invDenom, invDenom = 1/Σw (`tokens`), 1/(constantLength·batch) (`constant`) or 1
 * (`sum`, the Tinker API's convention).
 */
import type { LossFnName } from "../../core/training.ts";
import { lmHead, trunk, type GPTParams } from "./gpt.ts";
import { jit, lax, nn, numpy as np, valueAndGrad, type OwnedFunction } from "./jax.ts";

type Arr = np.Array;

/** Inputs of one padded micro-batch; all `[B, T]` (targets int32, others float32, nats). */
export type LossInputs = {
  targets: Arr;
  weights: Arr;
  /** Sampler logprobs q_t (zeros when absent). */
  samplerLp: Arr;
  advantages: Arr;
  /** Reference logprobs (zeros when absent; only read when the program was built with KL). */
  refLp: Arr;
  /** `[6]`: clipLow, clipHigh, klCoef, invDenom, clipRatioC (dual clip; read only when compiled with it), droBeta. */
  hp: Arr;
};

/** Order of the `[STAT_COUNT]` statistics vector: sums over the micro-batch of w_t·x_t. */
export const STAT = { tokens: 0, clipped: 1, kl: 2, entropy: 3, ratio: 4, loss: 5, clippedLower: 6 } as const;
export const STAT_COUNT = 7;

/** Static choices a loss program is compiled for. */
export interface LossSpec {
  lossFn: LossFnName;
  /** Add the k3 KL term and report k3 as `kl` (needs refLp). */
  useKl: boolean;
  nHeads: number;
  /** `ppo`: dual clip with hp[4] = clipRatioC. */
  dualClip?: boolean;
}

/**
 * Per-token statistics of the current policy from logits `[N, V]` (consumed; treated as constants): the target
 * logprob lp `[N]`, the softmax p `[N, V]` (materialised) and the entropy `[N]` (nats).
 */
function tokenStats(logits: Arr, targetsOneHot: Arr) {
  const x = lax.stopGradient(logits);
  const m = x.ref.max(-1, { keepdims: true });
  const e = np.exp(x.ref.sub(m.ref));
  const sumE = e.ref.sum(-1, { keepdims: true });
  const lse = m.add(np.log(sumE.ref)); // [N,1]
  const p = materialize(e.mul(np.reciprocal(sumE)));
  const lp = x.ref.mul(targetsOneHot).sum(-1).sub(lse.ref.reshape([-1]));
  const entropy = lse.reshape([-1]).sub(p.ref.mul(x).sum(-1));
  return { lp, p, entropy };
}

/** Forces a contiguous buffer (see gpt.ts): a reduction over a unit axis. */
function materialize(x: Arr): Arr {
  return x.reshape([...x.shape, 1]).sum(-1);
}

/**
 * Traced loss with an analytic gradient through the LM head: params, x0 `[B,T,D]` (token embeddings) and inputs
 * (all consumed) → [surrogate, { loss, lp `[B,T]`, stats }].
 *
 * The per-token loss depends on the logits only through lp_t, so ∂L/∂logits_t = c_t·(onehot_t − softmax_t) with
 * c_t = ∂L/∂lp_t computed in closed form below. The returned surrogate Σ stopgrad(∂L/∂logits)·logits has exactly
 * the gradient of L w.r.t. everything upstream, without differentiating through log-softmax (which in jax-js
 * materialises several `[B,T,V]` buffers and exps). Its value is not the loss; the loss is returned in the aux.
 */
function lossTraced(spec: LossSpec, params: GPTParams, x0: Arr, bias: Arr, inp: LossInputs): [Arr, LossAux] {
  const [B, T] = inp.targets.shape;
  const N = B * T;
  const { wte, ...rest } = params;
  const V = wte.shape[0];
  const logits = lmHead(trunk(rest, x0, bias, spec.nHeads), wte); // [N,V]
  const cls = np.arange(V, undefined, undefined, { dtype: np.int32 }).reshape([1, V]);
  const oh = np.equal(inp.targets.reshape([N, 1]), cls).astype(np.float32);
  const st = tokenStats(logits.ref, oh.ref);
  const lp = st.lp.reshape([B, T]);
  const w = inp.weights;
  const h = (i: number): Arr => inp.hp.ref.slice(i);
  const clipLow = h(0);
  const clipHigh = h(1);
  const klCoef = h(2);
  const invDenom = h(3);
  const clipRatioC = h(4);
  const droBeta = h(5);
  inp.hp.dispose();
  const q = inp.samplerLp;
  const A = inp.advantages;

  let ell: Arr; // per-token loss [B,T]
  let dl: Arr; // ∂ℓ/∂lp [B,T]
  let ratio: Arr;
  let clipped: Arr;
  let clippedLower: Arr | undefined;
  if (!(spec.lossFn === "ppo" && spec.dualClip)) clipRatioC.dispose();
  if (spec.lossFn !== "dro") droBeta.dispose();
  if (spec.lossFn === "cross_entropy") {
    ell = lp.ref.neg();
    dl = np.fullLike(lp.ref, -1);
    ratio = np.exp(lp.ref.sub(q.ref));
    clipped = np.zerosLike(lp.ref);
    A.dispose();
    clipLow.dispose();
    clipHigh.dispose();
  } else {
    const r = np.exp(lp.ref.sub(q.ref));
    ratio = r.ref;
    if (spec.lossFn === "importance_sampling") {
      ell = r.ref.mul(A.ref).neg();
      dl = r.mul(A).neg();
      clipped = np.zerosLike(lp.ref);
      clipLow.dispose();
      clipHigh.dispose();
    } else if (spec.lossFn === "cispo") {
      // The clipped IS weight is a constant (sg): the gradient is −clip(r)·A on every token.
      const c = np.clip(r.ref, np.subtract(1, clipLow), clipHigh.add(1));
      clipped = np.notEqual(c.ref, r).astype(np.float32);
      const cA = c.mul(A);
      ell = cA.ref.mul(lp.ref).neg();
      dl = cA.neg();
    } else if (spec.lossFn === "dro") {
      r.dispose();
      clipLow.dispose();
      clipHigh.dispose();
      const d = lp.ref.sub(q.ref);
      ell = lp.ref.mul(A.ref).sub(d.ref.mul(d.ref).mul(droBeta.ref).mul(0.5)).neg();
      dl = d.mul(droBeta).sub(A);
      clipped = np.zerosLike(lp.ref);
    } else if (spec.lossFn === "gspo") {
      // GSPO: s_b = exp(min(Σ_t m·(lp − q) / max(Σ_t m, 1), 10)), m = [w ≠ 0]; the token's ratio has s_b's value.
      r.dispose();
      const m = np.notEqual(w.ref, 0).astype(np.float32);
      const n = np.maximum(m.ref.sum(-1, { keepdims: true }), 1);
      const logS = np.minimum(lp.ref.sub(q.ref).mul(m).sum(-1, { keepdims: true }).div(n), 10);
      const s = np.broadcastTo(np.exp(logS), [B, T]);
      ratio.dispose();
      ratio = s.ref;
      const unclipped = s.ref.mul(A.ref);
      const clippedObj = np.clip(s.ref, np.subtract(1, clipLow), clipHigh.add(1)).mul(A.ref);
      clipped = np.less(clippedObj.ref, unclipped.ref).astype(np.float32);
      ell = np.minimum(unclipped, clippedObj).neg();
      dl = s.mul(A).neg().mul(np.subtract(1, clipped.ref));
    } else {
      const unclipped = r.ref.mul(A.ref);
      const clippedObj = np.clip(r.ref, np.subtract(1, clipLow), clipHigh.add(1)).mul(A.ref);
      // The clip decides where the clipped objective is the smaller one (verl's pg_clipfrac); there the ratio is
      // clamped, so the gradient is 0. Elsewhere (incl. ties inside the range) it is that of −r·A.
      clipped = np.less(clippedObj.ref, unclipped.ref).astype(np.float32);
      ell = np.minimum(unclipped, clippedObj).neg();
      dl = r.mul(A.ref).neg().mul(np.subtract(1, clipped.ref));
      if (spec.dualClip) {
        // veRL vanilla: for A < 0, ℓ = min(−c·A, ℓ); where −c·A is the smaller the loss is constant (gradient 0).
        const l3 = A.ref.mul(clipRatioC).neg();
        const lower = np.logicalAnd(np.less(A.ref, 0), np.greater(ell.ref, l3.ref)).astype(np.float32);
        ell = np.where(np.greater(lower.ref, 0), l3, ell);
        dl = dl.mul(np.subtract(1, lower.ref));
        clippedLower = lower;
      }
      A.dispose();
    }
  }
  let klTok: Arr;
  if (spec.useKl) {
    const d = inp.refLp.sub(lp.ref); // ref − lp
    const ed = np.exp(d.ref);
    const k3 = ed.ref.sub(d).sub(1);
    klTok = k3.ref;
    ell = ell.add(k3.mul(klCoef.ref));
    dl = dl.add(np.subtract(1, ed).mul(klCoef)); // ∂k3/∂lp = 1 − exp(ref − lp)
  } else {
    inp.refLp.dispose();
    klCoef.dispose();
    klTok = q.ref.sub(lp.ref);
  }
  q.dispose();
  const wsum = (x: Arr): Arr => x.mul(w.ref).sum();
  const loss = ell.ref.mul(w.ref).sum().mul(invDenom.ref);
  const c = dl.mul(w.ref).mul(invDenom).reshape([N, 1]); // ∂L/∂lp
  const G = lax.stopGradient(materialize(oh.sub(st.p).mul(c))); // ∂L/∂logits [N,V]
  const surrogate = G.mul(logits).sum();
  const lowerSum = clippedLower === undefined ? np.zeros([]) : wsum(clippedLower);
  const stats = np.stack([w.ref.sum(), wsum(clipped), wsum(klTok), wsum(st.entropy.reshape([B, T])), wsum(ratio), wsum(ell), lowerSum]);
  w.dispose();
  return [surrogate, { loss, lp, stats }];
}

type LossAux = { loss: Arr; lp: Arr; stats: Arr };
/**
 * Compiled forward+backward: (params, x0 `[B,T,D]`, causal bias `[T,T]`, inputs) →
 * [[surrogate, aux], [grads, ∂L/∂x0 `[B,T,D]`]].
 */
export type TrainProgram = OwnedFunction<
  (p: GPTParams, x0: Arr, bias: Arr, inp: LossInputs) => [[Arr, LossAux], [GPTParams, Arr]]
>;
/** Compiled forward only: (params, x0 `[B,T,D]`, causal bias `[T,T]`, targets `[B,T]`) → lp `[B,T]`. */
export type LogprobProgram = OwnedFunction<(p: GPTParams, x0: Arr, bias: Arr, targets: Arr) => Arr>;

// Programs are pure functions of their inputs (weights included), so they are shared by every backend in the
// process: a reference model or a reloaded policy reuses the compilations (jax-js compiles once per input shape).
const trainPrograms = new Map<string, TrainProgram>();
const logprobPrograms = new Map<number, LogprobProgram>();

/** The jit'd forward+backward for a loss spec (memoised per spec). */
export function makeTrainProgram(spec: LossSpec): TrainProgram {
  const key = `${spec.lossFn}:${spec.useKl}:${spec.nHeads}:${spec.dualClip === true}`;
  let prog = trainPrograms.get(key);
  if (!prog) {
    const f = (p: GPTParams, x0: Arr, bias: Arr, inp: LossInputs) => lossTraced(spec, p, x0, bias, inp);
    prog = jit(valueAndGrad(f, { hasAux: true, argnums: [0, 1] })) as unknown as TrainProgram;
    trainPrograms.set(key, prog);
  }
  return prog;
}

/** Compiled trunk forward: (params, x0 `[B,T,D]`, causal bias `[T,T]`) → final hidden states `[B·T, D]` (after lnf). */
export type HiddenProgram = OwnedFunction<(p: GPTParams, x0: Arr, bias: Arr) => Arr>;
const hiddenPrograms = new Map<number, HiddenProgram>();

/**
 * The jit'd trunk forward whose output feeds the LM head, no gradient (memoised per head count): the features of the
 * value head (`value.ts`, the `gae` critic).
 */
export function makeHiddenProgram(nHeads: number): HiddenProgram {
  let prog = hiddenPrograms.get(nHeads);
  if (!prog) {
    prog = jit((p: GPTParams, x0: Arr, bias: Arr): Arr => {
      const { wte, ...rest } = p;
      wte.dispose();
      return trunk(rest, x0, bias, nHeads);
    }) as unknown as HiddenProgram;
    hiddenPrograms.set(nHeads, prog);
  }
  return prog;
}

/** The jit'd target-logprob forward, no gradient (memoised per head count). */
export function makeLogprobProgram(nHeads: number): LogprobProgram {
  let prog = logprobPrograms.get(nHeads);
  if (!prog) {
    prog = buildLogprobProgram(nHeads);
    logprobPrograms.set(nHeads, prog);
  }
  return prog;
}

function buildLogprobProgram(nHeads: number): LogprobProgram {
  return jit((p: GPTParams, x0: Arr, bias: Arr, targets: Arr): Arr => {
    const [B, T] = targets.shape;
    const { wte, ...rest } = p;
    const V = wte.shape[0];
    const logits = lmHead(trunk(rest, x0, bias, nHeads), wte);
    const cls = np.arange(V, undefined, undefined, { dtype: np.int32 }).reshape([1, V]);
    const oh = np.equal(targets.reshape([B * T, 1]), cls).astype(np.float32);
    const st = tokenStats(logits, oh);
    st.p.dispose();
    st.entropy.dispose();
    return st.lp.reshape([B, T]);
  }) as unknown as LogprobProgram;
}
