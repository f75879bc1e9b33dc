/**
 * Adam with decoupled weight decay (AdamW, Loshchilov & Hutter 2019; PyTorch `torch.optim.AdamW` semantics) and an
 * optional global gradient-norm clip, as one jit-compiled update over a whole parameter pytree.
 *
 * Per leaf, at step t (1-based), with g the (clipped) gradient:
 *   p ← p − lr·wd·p                       (only leaves with ndim ≥ 2: matrices and embeddings, as nanoGPT)
 *   m ← β1·m + (1−β1)·g;  v ← β2·v + (1−β2)·g²
 *   p ← p − lr · (m / (1−β1^t)) / (√(v / (1−β2^t)) + ε)
 * Clip: g ← g · min(1, gradClip / (‖g‖₂ + 1e-6)) with ‖g‖₂ over all leaves, when gradClip > 0.
 */
import type { AdamParams } from "../../core/training.ts";
import { jit, numpy as np, tree, type JsTree } from "./jax.ts";

type Arr = np.Array;

/** Defaults of `AdamParams` fields left undefined. */
export const ADAM_DEFAULTS = { beta1: 0.9, beta2: 0.95, eps: 1e-8, weightDecay: 0, gradClip: 0 } as const;

/** Adam state for a parameter pytree `P` (moments have the parameters' shapes). */
export interface AdamState<P> {
  /** Number of updates applied so far. */
  step: number;
  m: P;
  v: P;
}

/** Fresh Adam state (zero moments, step 0). Consumes nothing; `params` is only read for shapes. */
export function adamInit<P extends JsTree<Arr>>(params: P): AdamState<P> {
  const zeros = (x: Arr): Arr => np.zeros(x.shape);
  return { step: 0, m: tree.map(zeros, params) as P, v: tree.map(zeros, params) as P };
}

/** Hyper-parameter vector layout fed to the jit (an array, so changing lr does not recompile). */
const HP = { lr: 0, b1: 1, b2: 2, eps: 3, wd: 4, bc1: 5, bc2: 6, clip: 7 } as const;

/**
 * The traced update: (params, grads, m, v, hp[8]) → [params, m, v, gradNorm, nonFinite], where nonFinite counts the
 * new leaves (params, m and v) holding a NaN or ±Inf. Consumes all inputs.
 */
function adamUpdateTraced(params: Arr[], grads: Arr[], m: Arr[], v: Arr[], hp: Arr): [Arr[], Arr[], Arr[], Arr, Arr] {
  const h = (i: number): Arr => hp.ref.slice(i);
  let sq: Arr | null = null;
  for (const g of grads) {
    const s = np.square(g.ref).sum();
    sq = sq === null ? s : sq.add(s);
  }
  const gnorm = np.sqrt(sq ?? np.zeros([]));
  const clip = h(HP.clip);
  // scale = 1 when clip ≤ 0 (off), else min(1, clip / (norm + 1e-6)).
  const scale = np.where(
    clip.ref.greater(0),
    np.minimum(1, clip.div(gnorm.ref.add(1e-6))),
    1,
  );
  const lr = h(HP.lr);
  const b1 = h(HP.b1);
  const b2 = h(HP.b2);
  const eps = h(HP.eps);
  const wd = h(HP.wd);
  const bc1 = h(HP.bc1);
  const bc2 = h(HP.bc2);
  hp.dispose();
  const outP: Arr[] = [];
  const outM: Arr[] = [];
  const outV: Arr[] = [];
  params.forEach((p, i) => {
    const g = grads[i].mul(scale.ref);
    const mi = m[i].mul(b1.ref).add(g.ref.mul(np.subtract(1, b1.ref)));
    const vi = v[i].mul(b2.ref).add(np.square(g).mul(np.subtract(1, b2.ref)));
    const update = mi.ref.div(bc1.ref).div(np.sqrt(vi.ref.div(bc2.ref)).add(eps.ref));
    let pi = p;
    if (pi.ndim >= 2) pi = pi.ref.sub(pi.mul(lr.ref.mul(wd.ref)));
    outP.push(pi.sub(update.mul(lr.ref)));
    outM.push(mi);
    outV.push(vi);
  });
  for (const a of [scale, lr, b1, b2, eps, wd, bc1, bc2]) a.dispose();
  // One flag per new leaf, summed on the device: the caller refuses an update that is not finite everywhere.
  let nonFinite: Arr = np.zeros([]);
  for (const x of [...outP, ...outM, ...outV]) nonFinite = nonFinite.add(np.where(np.isfinite(x.ref).all(), 0, 1));
  return [outP, outM, outV, gnorm, nonFinite];
}

const adamJit = jit(adamUpdateTraced);

/**
 * One AdamW update of a parameter pytree. Consumes `params`, `grads` and `state.m/v`; returns the new params and
 * state (step + 1), the global gradient norm before clipping, and `nonFinite`: how many of the new leaves (params,
 * m, v) hold a NaN or ±Inf (the caller must refuse such an update: it would poison the model for good).
 * @throws Error when a hyper-parameter is out of range or not finite (lr < 0, betas outside [0, 1), eps ≤ 0,
 *   weight decay < 0, grad clip < 0)
 */
export async function adamStep<P extends JsTree<Arr>>(
  params: P,
  grads: P,
  state: AdamState<P>,
  adam: AdamParams,
): Promise<{ params: P; state: AdamState<P>; gradNorm: number; nonFinite: number }> {
  const a = resolveAdamParams(adam);
  const t = state.step + 1;
  const hp = new Float32Array(8);
  hp[HP.lr] = a.learningRate;
  hp[HP.b1] = a.beta1;
  hp[HP.b2] = a.beta2;
  hp[HP.eps] = a.eps;
  hp[HP.wd] = a.weightDecay;
  hp[HP.bc1] = 1 - Math.pow(a.beta1, t);
  hp[HP.bc2] = 1 - Math.pow(a.beta2, t);
  hp[HP.clip] = a.gradClip > 0 ? a.gradClip : 0;
  const [pLeaves, def] = tree.flatten(params);
  const [gLeaves] = tree.flatten(grads);
  const [mLeaves] = tree.flatten(state.m);
  const [vLeaves] = tree.flatten(state.v);
  const [np_, nm, nv, gnorm, bad] = adamJit(pLeaves, gLeaves, mLeaves, vLeaves, np.array(hp));
  const gradNorm = (await gnorm.data())[0];
  const nonFinite = (await bad.data())[0];
  return {
    params: tree.unflatten(def, np_) as P,
    state: { step: t, m: tree.unflatten(def, nm) as P, v: tree.unflatten(def, nv) as P },
    gradNorm,
    nonFinite,
  };
}

/**
 * `adam` with `ADAM_DEFAULTS` filled where undefined, checked (shared by the jax-js update here and the host one in
 * `hostAdam.ts`).
 * @throws Error when a hyper-parameter is out of range or not finite (lr < 0, betas outside [0, 1), eps ≤ 0,
 *   weight decay < 0, grad clip < 0)
 */
export function resolveAdamParams(adam: AdamParams): { [K in keyof AdamParams]-?: number } {
  const a = { ...ADAM_DEFAULTS, ...stripUndefined(adam), learningRate: adam.learningRate };
  if (!(a.learningRate >= 0)) throw new Error(`Adam: learningRate must be ≥ 0, got ${a.learningRate}`);
  if (!(a.beta1 >= 0 && a.beta1 < 1) || !(a.beta2 >= 0 && a.beta2 < 1)) {
    throw new Error(`Adam: betas must be in [0, 1), got ${a.beta1}, ${a.beta2}`);
  }
  if (!(a.eps > 0) || !Number.isFinite(a.eps)) throw new Error(`Adam: eps must be a finite number > 0, got ${a.eps}`);
  if (!Number.isFinite(a.learningRate)) throw new Error(`Adam: learningRate must be finite, got ${a.learningRate}`);
  if (!(a.weightDecay >= 0) || !Number.isFinite(a.weightDecay)) throw new Error(`Adam: weightDecay must be a finite number ≥ 0, got ${a.weightDecay}`);
  if (!(a.gradClip >= 0) || !Number.isFinite(a.gradClip)) throw new Error(`Adam: gradClip must be a finite number ≥ 0 (0 = off), got ${a.gradClip}`);
  return a;
}

/** The fields of `o` that are defined (so spreading over defaults keeps the defaults). */
function stripUndefined(o: AdamParams): { [K in keyof AdamParams]-?: number } {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as { [K in keyof AdamParams]-?: number };
}
