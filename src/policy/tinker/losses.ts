/**
 * The losses of Tinker-API servers: which RL losses each server family takes (read in its source), the
 * `forward_backward` loss name and `loss_fn_config` this client sends for a backend loss, `dro`'s β folded into one
 * number per request, and the loss recomputed from the returned logprobs when a server reports none. The client
 * (`backend.ts`) sends through them; the config checks that name `rl.*` fields (src/train/backendAlgorithm.ts) read
 * `TINKER_SERVER_LOSSES` and `tinkerServerProblem`.
 */
import type { LossConfig, LossFnName } from "../../core/training.ts";
import type { Datum } from "../../core/types.ts";
import type { TinkerServerFamily } from "./families.ts";
import { lossFromLogprobs, type WireDatum } from "./wire.ts";

/** The RL losses each Tinker-API server takes, from its source (file:line @ commit). */
export const TINKER_SERVER_LOSSES: Record<TinkerServerFamily, { losses: readonly string[]; source: string }> = {
  tinker: { losses: ["cross_entropy", "importance_sampling", "ppo", "cispo", "dro"], source: "Tinker docs, Loss functions (tinker 0.25 LossFnType)" },
  skyrl: { losses: ["cross_entropy", "importance_sampling", "ppo", "gspo", "cispo", "ppo_critic", "dppo"], source: "NovaSky-AI/SkyRL @ a9564572eb8e91076be43c1bd5e4615e3de17265 skyrl/tinker/api.py:610-622" },
  tuft: { losses: ["cispo", "cross_entropy", "dro", "importance_sampling", "ppo"], source: "agentscope-ai/TuFT @ 102eefd4cf8fb0241ba656d14df4928f0b2c0c9e src/tuft/loss_fn/__init__.py:19-25" },
  "verl-tinker": { losses: ["cross_entropy", "importance_sampling", "ppo", "cispo", "dro", "custom_from_config"], source: "verl-project/verl-recipe @ 48ea0a797fa29867ea0ad92aff7d284eec7d4be3 verl_tinker/src/verl_tinker/schemas.py:43-50, tinker_ops.py:66-95" },
  arl: { losses: ["cross_entropy", "importance_sampling", "ppo"], source: "src/policy/tinker/wire.ts LossFn (arl serve trainer)" },
  unknown: { losses: ["cross_entropy", "importance_sampling", "ppo"], source: "the three losses every server above implements" },
};

/** A Tinker `forward_backward` loss: name and `loss_fn_config`. */
export interface TinkerLoss {
  lossFn: string;
  lossFnConfig?: Record<string, number>;
}

/** An RL loss of the Tinker API: every `LossFnName` but `cross_entropy` (the `rl.lossFn` values). */
export type TinkerRlLoss = Exclude<LossFnName, "cross_entropy">;

/**
 * What a Tinker loss is made of: the loss and its options, named as the `rl.*` fields they come from (`RlLossFields`
 * of src/algo/policyLoss.ts has them all).
 */
export interface TinkerLossFields {
  lossFn: TinkerRlLoss;
  clipLow: number;
  clipHigh: number;
  clipRatioC?: number;
  droBeta: number;
}

/**
 * Why a Tinker server of `family` cannot take `loss` (the `rl` field and the reason, naming what that server offers),
 * or undefined: a dual clip is set (no server's `ppo` has one), or the server lacks the loss `tinkerLossFor` would
 * send (e.g. `gspo` outside SkyRL).
 */
export function tinkerServerProblem(
  loss: Pick<TinkerLossFields, "lossFn" | "clipRatioC">,
  family: TinkerServerFamily,
): { field: string; message: string } | undefined {
  const offered = TINKER_SERVER_LOSSES[family];
  const offers = `this ${family} server offers ${offered.losses.join(", ")} (${offered.source})`;
  if (loss.clipRatioC !== undefined) return { field: "clipRatioC", message: `no Tinker-API server's ppo has a dual clip; unset it or use policy.backend embedded; ${offers}` };
  if (!offered.losses.includes(loss.lossFn)) return { field: "lossFn", message: `"${loss.lossFn}" needs the server loss "${loss.lossFn}"; ${offers}` };
  return undefined;
}

/**
 * The Tinker loss for `loss` on a server of `family`. Clip bounds always go in `loss_fn_config` as absolute ratios
 * (`clip_low_threshold = 1 − clipLow`): the servers' own cispo defaults differ (TuFT 0.9/1.1, verl-tinker 0/4).
 * `dro` sends `beta` (verl-tinker requires it; TuFT defaults to 0.01).
 * @throws Error `rl.<field>: …` from {@link tinkerServerProblem}, naming what the server offers, when it has no such
 *   loss (`gspo` outside SkyRL) or a dual clip is set (no server's `ppo` has one)
 */
export function tinkerLossFor(loss: TinkerLossFields, family: TinkerServerFamily): TinkerLoss {
  const problem = tinkerServerProblem(loss, family);
  if (problem !== undefined) throw new Error(`rl.${problem.field}: ${problem.message}`);
  const clip = { clip_low_threshold: 1 - loss.clipLow, clip_high_threshold: 1 + loss.clipHigh };
  // Each RL loss goes by its own name on every server that has it.
  switch (loss.lossFn) {
    case "ppo":
    case "cispo":
    case "gspo":
      return { lossFn: loss.lossFn, lossFnConfig: clip };
    case "importance_sampling":
      return { lossFn: loss.lossFn };
    case "dro":
      return { lossFn: loss.lossFn, lossFnConfig: { beta: loss.droBeta } };
  }
}

/** The loss fields `tinkerLossFor` reads, from a backend call's loss name and options (defaults as `rl.*`'s). */
export function tinkerLossFieldsOf(lossFn: LossFnName, config: LossConfig): TinkerLossFields {
  if (lossFn === "cross_entropy") throw new Error("tinkerLossFieldsOf: cross_entropy is not an RL loss");
  return {
    lossFn,
    clipLow: config.clipLow ?? 0.2,
    clipHigh: config.clipHigh ?? 0.2,
    ...(config.clipRatioC !== undefined ? { clipRatioC: config.clipRatioC } : {}),
    droBeta: config.droBeta ?? 0.05,
  };
}

/**
 * `dro` for a Tinker server, whose loss is `−Σ_t (lp·A − ½β(lp − q)²)` over every position of a datum with one β per
 * request (Tinker docs "Loss functions / DRO"; agentscope-ai/TuFT @ 102eefd4cf8fb0241ba656d14df4928f0b2c0c9e
 * `src/tuft/loss_fn/dro.py:25-35`), made equal to the embedded backend's `Σ_t w_t·k·ℓ_t` (k the normalisation:
 * 1/Σw for `tokens`, 1/(constantLength·batch) for `constant`, 1 for `sum`): the advantages carry `w·k` already
 * (`toWireDatums`), β becomes `β·w·k`, and at untrained positions (w = 0) q is set to the trainer's current logprob
 * `current`, where the penalty and its gradient `β(lp − q)` are then 0.
 * @param datums `[batch]` with weights, logprobs and advantages `[seq-1]`; current the trainer's logprobs `[batch][seq-1]`
 * @returns the datums to send and the β of the request
 * @throws Error when the trained tokens' weights differ (a per-token weight, e.g. `rl.lossAggMode` seq-mean-token-mean,
 *   cannot reach a single β): use token-mean, seq-mean-token-sum or seq-mean-token-sum-norm with dro on Tinker
 */
export function droDatums(datums: readonly Datum[], config: LossConfig, current: readonly (readonly number[])[]): { datums: Datum[]; beta: number } {
  const ws = datums.flatMap((d) => d.weights.filter((w) => w !== 0));
  const w = ws[0] ?? 0;
  if (ws.some((x) => Math.abs(x - w) > 1e-12 * Math.abs(w))) {
    throw new Error("rl.lossFn dro on a Tinker server: its β is one number per request, so tokens weighted differently (rl.lossAggMode seq-mean-token-mean) cannot be sent; use rl.lossAggMode token-mean, seq-mean-token-sum or seq-mean-token-sum-norm");
  }
  let k = 1;
  if (config.normalization === "constant") k = 1 / ((config.constantLength ?? 1) * datums.length);
  else if (config.normalization !== "sum") {
    const total = ws.reduce((a, b) => a + b, 0);
    k = total > 0 ? 1 / total : 0;
  }
  const out = datums.map((d, i) => ({ ...d, logprobs: (d.logprobs ?? []).map((q, t) => (d.weights[t] !== 0 ? q : current[i][t])) }));
  return { datums: out, beta: (config.droBeta ?? 0.05) * w * k };
}

/**
 * The loss of a `forward_backward` recomputed from the returned logprobs when the server reports none, for every
 * Tinker RL loss: `ppo`, `importance_sampling`, `cross_entropy` (`lossFromLogprobs`), and `cispo`
 * `−Σ sg(clip(r, lo, hi))·A·lp`, `dro` `−Σ (lp·A − ½β(lp − q)²)`, `gspo` `−Σ min(s·A, clip(s, lo, hi)·A)` with the
 * datum's sequence ratio `s = exp(mean (lp − q))` over its positions with A ≠ 0 (sums over the request, in nats).
 */
export function fallbackLoss(data: readonly WireDatum[], lossFn: string, cfg: Record<string, number> | undefined, logprobs: readonly number[][]): number {
  if (lossFn !== "cispo" && lossFn !== "dro" && lossFn !== "gspo") return lossFromLogprobs(data, lossFn, cfg, logprobs);
  const lo = cfg?.clip_low_threshold ?? 0.8;
  const hi = cfg?.clip_high_threshold ?? 1.2;
  const beta = cfg?.beta ?? 0.05;
  let loss = 0;
  data.forEach((d, i) => {
    const lp = logprobs[i];
    const q = d.loss_fn_inputs.logprobs?.data ?? [];
    const A = d.loss_fn_inputs.advantages?.data ?? [];
    if (lossFn === "gspo") {
      const on = lp.map((_, t) => t).filter((t) => A[t] !== 0);
      const s = Math.exp(Math.min(on.reduce((a, t) => a + lp[t] - q[t], 0) / Math.max(on.length, 1), 10));
      for (const t of on) loss -= Math.min(s * A[t], Math.min(hi, Math.max(lo, s)) * A[t]);
      return;
    }
    lp.forEach((x, t) => {
      loss -= lossFn === "cispo" ? Math.min(hi, Math.max(lo, Math.exp(x - q[t]))) * A[t] * x : x * A[t] - 0.5 * beta * (x - q[t]) ** 2;
    });
  });
  return loss;
}
