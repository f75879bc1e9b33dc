/**
 * The critic of `rl.advantage: gae` on the embedded GPT: a linear value head V(s_t) = h_t·w + b on the policy
 * trunk's final hidden states h_t (`EmbeddedBackend.hiddenStates`, detached: the critic does not train the trunk),
 * fitted with veRL's clipped value loss (verl `compute_value_loss`, verl/trainer/ppo/core_algos.py:1799-1838 @
 * volcengine/verl b178a3cd56f58b2d502255daba591e92833930a7, from TRL's PPO trainer) and Adam. Host-side float64:
 * the head has dModel + 1 parameters, so its math is exact and cheap next to the trunk forward that feeds it.
 * veRL's critic is a separate model with its own trunk; this shares the policy's features (a "value probe") and
 * keeps the default GPT's parameters, checkpoints and initialisation untouched. The head and its Adam state are
 * saved beside the policy in each RL checkpoint (`value-head.json`, {@link ValueHeadState}) and restored on resume.
 */
import type { Datum, Metrics } from "../../core/types.ts";
import type { CriticHooks, ValueHeadOptions } from "../../core/training.ts";

/** The verl value loss of a batch and its gradient w.r.t. the predictions. */
export interface ValueLoss {
  /** `0.5 · token-mean(max((v − R)², (clip(v, old ± c) − R)²))` over masked tokens (reward units²). */
  loss: number;
  /** Fraction of masked tokens where the clipped branch is the larger (verl `vf_clipfrac`). */
  clipfrac: number;
  /** ∂loss/∂v `[batch][seq]`: `m·(v − R)/Σm` where the unclipped branch is taken, else 0. */
  grad: number[][];
}

/**
 * veRL's clipped value loss (core_algos.py:1799-1838 @ b178a3c), token-mean:
 * `v̂ = clip(v, old − c, old + c)`, `ℓ_t = max((v − R)², (v̂ − R)²)`, `loss = 0.5 · Σ m·ℓ / Σ m`.
 * @param values predictions `[batch][seq]`, returns targets `[batch][seq]`, oldValues the values the returns were
 *   computed with `[batch][seq]`, masks 0/1 `[batch][seq]`; cliprange c > 0 (verl `critic.cliprange_value`, 0.5)
 * @throws Error on shape mismatches
 */
export function valueLoss(
  values: readonly (readonly number[])[],
  returns: readonly (readonly number[])[],
  oldValues: readonly (readonly number[])[],
  masks: readonly (readonly number[])[],
  cliprange: number,
): ValueLoss {
  if (values.length !== returns.length || values.length !== oldValues.length || values.length !== masks.length) {
    throw new Error(`valueLoss: batch sizes differ: values ${values.length}, returns ${returns.length}, oldValues ${oldValues.length}, masks ${masks.length}`);
  }
  const n = masks.reduce((a, m) => a + m.reduce((x, y) => x + y, 0), 0);
  let sum = 0;
  let clipped = 0;
  const grad = values.map((row, b) => {
    if (row.length !== masks[b].length || returns[b].length !== row.length || oldValues[b].length !== row.length) {
      throw new Error(`valueLoss: row ${b} lengths differ`);
    }
    return row.map((v, t) => {
      if (masks[b][t] === 0) return 0;
      const R = returns[b][t];
      const o = oldValues[b][t];
      const vc = Math.min(Math.max(v, o - cliprange), o + cliprange);
      const l1 = (v - R) ** 2;
      const l2 = (vc - R) ** 2;
      sum += masks[b][t] * Math.max(l1, l2);
      if (l2 > l1) {
        clipped += masks[b][t];
        return 0; // the clipped branch is constant in v (v̂ ≠ v there)
      }
      return (masks[b][t] * (v - R)) / n;
    });
  });
  return { loss: n > 0 ? (0.5 * sum) / n : 0, clipfrac: n > 0 ? clipped / n : 0, grad };
}

/** Format tag of {@link ValueHeadState}. */
export const VALUE_HEAD_FORMAT = "agentic-rl/value-head@1";

/**
 * A value head's whole state as JSON (`value-head.json` of a checkpoint): weights `w` `[dModel]` and bias `b`, Adam's
 * first / second moments (`m`, `v` `[dModel]`; `mb`, `vb` for the bias) and its step count. Numbers are float64 and
 * round-trip exactly through JSON.
 */
export interface ValueHeadState {
  format: typeof VALUE_HEAD_FORMAT;
  dModel: number;
  w: number[];
  b: number;
  m: number[];
  v: number[];
  mb: number;
  vb: number;
  step: number;
}

/** A linear value head over `dModel` features, with its Adam state (β = 0.9 / 0.999, ε = 1e-8, no decay). */
export class ValueHead {
  readonly w: Float64Array;
  b = 0;
  private readonly m: Float64Array;
  private readonly v: Float64Array;
  private mb = 0;
  private vb = 0;
  private step = 0;

  /** @param dModel feature width; the head starts at zero (V ≡ 0). */
  constructor(
    readonly dModel: number,
    readonly options: ValueHeadOptions,
  ) {
    this.w = new Float64Array(dModel);
    this.m = new Float64Array(dModel);
    this.v = new Float64Array(dModel);
  }

  /** The head's whole state (weights and Adam moments), for a checkpoint. */
  state(): ValueHeadState {
    return { format: VALUE_HEAD_FORMAT, dModel: this.dModel, w: Array.from(this.w), b: this.b, m: Array.from(this.m), v: Array.from(this.v), mb: this.mb, vb: this.vb, step: this.step };
  }

  /**
   * Restores a state saved by {@link state} (a resumed run continues the fit where it stopped).
   * @throws Error when the format tag, `dModel` or an array's length does not match this head, or a value is not finite
   */
  restore(state: ValueHeadState): void {
    if (state?.format !== VALUE_HEAD_FORMAT) throw new Error(`value head: expected format ${VALUE_HEAD_FORMAT}, got ${JSON.stringify(state?.format)}`);
    if (state.dModel !== this.dModel) throw new Error(`value head: saved for dModel ${state.dModel}, this policy has ${this.dModel}`);
    for (const k of ["w", "m", "v"] as const) {
      const a = state[k];
      if (!Array.isArray(a) || a.length !== this.dModel || !a.every(Number.isFinite)) throw new Error(`value head: ${k} must be ${this.dModel} finite numbers`);
    }
    if (![state.b, state.mb, state.vb, state.step].every(Number.isFinite)) throw new Error("value head: b, mb, vb and step must be finite numbers");
    this.w.set(state.w);
    this.m.set(state.m);
    this.v.set(state.v);
    this.b = state.b;
    this.mb = state.mb;
    this.vb = state.vb;
    this.step = state.step;
  }

  /**
   * V for every row of each datum's features.
   * @param hidden per datum `[seq-1][dModel]` flattened
   * @returns `[batch][seq-1]` (reward units)
   */
  values(hidden: readonly Float32Array[]): number[][] {
    const D = this.dModel;
    return hidden.map((h) => {
      const n = h.length / D;
      const out = new Array<number>(n);
      for (let t = 0; t < n; t++) {
        let s = this.b;
        for (let k = 0; k < D; k++) s += h[t * D + k] * this.w[k];
        out[t] = s;
      }
      return out;
    });
  }

  /**
   * `options.updates` Adam steps on `valueLoss` of the batch.
   * @returns `vf_loss` (before the first step), `vf_clipfrac`, `vf_explained_var` (1 − Var(R − V)/Var(R) over masked
   *   tokens, before the steps; veRL's `critic/vf_explained_var`)
   */
  update(hidden: readonly Float32Array[], returns: readonly (readonly number[])[], oldValues: readonly (readonly number[])[], masks: readonly (readonly number[])[]): Metrics {
    const D = this.dModel;
    const lr = this.options.learningRate;
    let first: ValueLoss | undefined;
    let firstValues: number[][] | undefined;
    for (let it = 0; it < this.options.updates; it++) {
      const v = this.values(hidden);
      const l = valueLoss(v, returns, oldValues, masks, this.options.cliprange);
      if (!first) {
        first = l;
        firstValues = v;
      }
      const gw = new Float64Array(D);
      let gb = 0;
      l.grad.forEach((row, b) =>
        row.forEach((g, t) => {
          if (g === 0) return;
          gb += g;
          for (let k = 0; k < D; k++) gw[k] += g * hidden[b][t * D + k];
        }),
      );
      this.step++;
      const c1 = 1 - 0.9 ** this.step;
      const c2 = 1 - 0.999 ** this.step;
      for (let k = 0; k < D; k++) {
        this.m[k] = 0.9 * this.m[k] + 0.1 * gw[k];
        this.v[k] = 0.999 * this.v[k] + 0.001 * gw[k] * gw[k];
        this.w[k] -= (lr * (this.m[k] / c1)) / (Math.sqrt(this.v[k] / c2) + 1e-8);
      }
      this.mb = 0.9 * this.mb + 0.1 * gb;
      this.vb = 0.999 * this.vb + 0.001 * gb * gb;
      this.b -= (lr * (this.mb / c1)) / (Math.sqrt(this.vb / c2) + 1e-8);
    }
    if (!first || !firstValues) return {};
    return { vf_loss: first.loss, vf_clipfrac: first.clipfrac, vf_explained_var: explainedVariance(firstValues, returns, masks) };
  }
}

/** 1 − Var(R − V)/Var(R) over masked tokens (population variances); 0 when Var(R) = 0. */
export function explainedVariance(values: readonly (readonly number[])[], returns: readonly (readonly number[])[], masks: readonly (readonly number[])[]): number {
  const r: number[] = [];
  const d: number[] = [];
  masks.forEach((m, b) => m.forEach((x, t) => {
    if (x === 1) {
      r.push(returns[b][t]);
      d.push(returns[b][t] - values[b][t]);
    }
  }));
  const variance = (xs: number[]) => {
    const mu = xs.reduce((a, y) => a + y, 0) / xs.length;
    return xs.reduce((a, y) => a + (y - mu) ** 2, 0) / xs.length;
  };
  if (r.length === 0) return 0;
  const vr = variance(r);
  return vr === 0 ? 0 : 1 - variance(d) / vr;
}

/** A backend whose trunk features a value head can read (`EmbeddedBackend`). */
export interface HiddenStateSource {
  readonly config: { dModel: number };
  hiddenStates(datums: Datum[]): Promise<Float32Array[]>;
}

/**
 * The `gae` critic over a backend's trunk: `values` reads the features (and keeps them for the datums), `update`
 * fits the head on those same features (the pre-update policy's, as the returns were computed with).
 */
export function embeddedCritic(source: HiddenStateSource, options: ValueHeadOptions): {
  head: ValueHead;
  values(datums: Datum[]): Promise<number[][]>;
  update(datums: Datum[], returns: number[][], oldValues: number[][]): Promise<Metrics>;
} {
  const head = new ValueHead(source.config.dModel, options);
  let cache = new Map<Datum, Float32Array>();
  return {
    head,
    async values(datums) {
      const h = await source.hiddenStates(datums);
      cache = new Map(datums.map((d, i) => [d, h[i]]));
      return head.values(h);
    },
    async update(datums, returns, oldValues) {
      const missing = datums.filter((d) => !cache.has(d));
      const fresh = missing.length > 0 ? await source.hiddenStates(missing) : [];
      missing.forEach((d, i) => cache.set(d, fresh[i]));
      const masks = datums.map((d) => d.weights.map((w) => (w !== 0 ? 1 : 0)));
      return head.update(datums.map((d) => cache.get(d)!), returns, oldValues, masks);
    },
  };
}

/**
 * {@link embeddedCritic} as the `TrainingBackend.valueHead` capability: its `values` / `update`, and its head's state
 * as the JSON text of a checkpoint's `value-head.json` ({@link ValueHeadState}).
 */
export function valueHeadCritic(source: HiddenStateSource, options: ValueHeadOptions): CriticHooks {
  const e = embeddedCritic(source, options);
  return { ...e, stateText: () => JSON.stringify(e.head.state()), restoreText: (text) => e.head.restore(JSON.parse(text) as ValueHeadState) };
}
