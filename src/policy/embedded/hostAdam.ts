/**
 * AdamW on host buffers: the same update as `optim.ts` (PyTorch `torch.optim.AdamW` semantics, decoupled weight
 * decay on leaves with ndim ≥ 2, optional global-norm clip), for the onnx training engine, whose weights live on the
 * host (the update is memory-bound: ~1 ns per parameter here, far below a forward + backward).
 *
 * Per leaf, at step t (1-based), with g the (clipped) gradient:
 *   p ← p − lr·wd·p;  m ← β1·m + (1−β1)·g;  v ← β2·v + (1−β2)·g²;  p ← p − lr·(m/(1−β1^t)) / (√(v/(1−β2^t)) + ε)
 * The arithmetic is float64 per element, stored as float32.
 */
import type { AdamParams } from "../../core/training.ts";
import { resolveAdamParams } from "./optim.ts";

/** Host training state by parameter name (`paramShapes` order): weights and both Adam moments, each `[size]`. */
export interface HostAdamState {
  /** Updates applied so far. */
  step: number;
  weights: Map<string, Float32Array>;
  m: Map<string, Float32Array>;
  v: Map<string, Float32Array>;
}

/**
 * One AdamW update. Reads `state` and `grads`, returns new buffers (the old state stays intact, so a refused update
 * costs nothing to undo).
 * @param ndim number of dimensions of each leaf (weight decay applies where ≥ 2)
 * @returns the new state (step + 1), the global gradient norm before clipping, and the names (`params.<leaf>`,
 *   `adam.m.<leaf>`, `adam.v.<leaf>`) of new leaves holding a NaN/±Inf (the caller must refuse such an update)
 * @throws Error on hyper-parameters out of range (as `optim.ts`'s `adamStep`)
 */
export function hostAdamStep(
  state: HostAdamState,
  grads: Map<string, Float32Array>,
  ndim: Map<string, number>,
  adam: AdamParams,
): { state: HostAdamState; gradNorm: number; nonFinite: string[] } {
  const a = resolveAdamParams(adam);
  let sq = 0;
  for (const g of grads.values()) for (let i = 0; i < g.length; i++) sq += g[i] * g[i];
  const gradNorm = Math.sqrt(sq);
  const scale = a.gradClip > 0 ? Math.min(1, a.gradClip / (gradNorm + 1e-6)) : 1;
  const t = state.step + 1;
  const bc1 = 1 - Math.pow(a.beta1, t);
  const bc2 = 1 - Math.pow(a.beta2, t);
  const lr = a.learningRate;
  const decay = lr * a.weightDecay;
  // Locals, not property reads, in the loop below (the options object is in dictionary mode: ~20× slower).
  const b1 = a.beta1;
  const b2 = a.beta2;
  const eps = a.eps;
  const out: HostAdamState = { step: t, weights: new Map(), m: new Map(), v: new Map() };
  const nonFinite: string[] = [];
  for (const [name, p0] of state.weights) {
    const g0 = grads.get(name)!;
    const m0 = state.m.get(name)!;
    const v0 = state.v.get(name)!;
    const p = new Float32Array(p0.length);
    const m = new Float32Array(p0.length);
    const v = new Float32Array(p0.length);
    const wd = (ndim.get(name) ?? 1) >= 2 ? decay : 0;
    // x·0 is 0 for every finite x and NaN for NaN/±Inf: one running sum per tensor flags a non-finite value.
    let pz = 0;
    let mz = 0;
    let vz = 0;
    for (let i = 0; i < p.length; i++) {
      const g = g0[i] * scale;
      const mi = b1 * m0[i] + (1 - b1) * g;
      const vi = b2 * v0[i] + (1 - b2) * g * g;
      const pi = p0[i] - wd * p0[i] - (lr * (mi / bc1)) / (Math.sqrt(vi / bc2) + eps);
      m[i] = mi;
      v[i] = vi;
      p[i] = pi;
      pz += p[i] * 0;
      mz += m[i] * 0;
      vz += v[i] * 0;
    }
    if (pz !== 0) nonFinite.push(`params.${name}`);
    if (mz !== 0) nonFinite.push(`adam.m.${name}`);
    if (vz !== 0) nonFinite.push(`adam.v.${name}`);
    out.weights.set(name, p);
    out.m.set(name, m);
    out.v.set(name, v);
  }
  return { state: out, gradNorm, nonFinite };
}
