/**
 * `rl.lossFn` → what a backend is asked for: the backend loss name and its options (`LossConfig`), and the loss
 * aggregation `rl.lossAggMode` resolves to. Only the backend boundary (src/core/training.ts) is named here: what a
 * Tinker server makes of the loss is `src/policy/tinker/losses.ts`, and the config checks that join the two are
 * `src/train/backendAlgorithm.ts`. Sources: veRL `actor.policy_loss.loss_mode` (verl/trainer/ppo/core_algos.py @
 * b178a3c: `vanilla` :1159, `gspo` :1253, `cispo` :1721), Tinker docs "Loss functions" (`ppo`, `importance_sampling`,
 * `cispo`, `dro`).
 */
import type { LossConfig, LossFnName } from "../core/training.ts";
import type { AdvantageEstimatorName } from "./estimators.ts";
import type { LossAggMode } from "./losses.ts";

/** Every `rl.lossFn`: the Tinker API's RL loss names (`gspo`: SkyRL's Tinker server, veRL `loss_mode: gspo`). */
export const RL_LOSS_FNS = ["ppo", "importance_sampling", "cispo", "dro", "gspo"] as const satisfies readonly LossFnName[];
/** A name in `RL_LOSS_FNS`. */
export type RlLossFn = (typeof RL_LOSS_FNS)[number];

/** The `rl` fields the loss reads (a subset of `RlConfig`). */
export interface RlLossFields {
  lossFn: RlLossFn;
  clipLow: number;
  clipHigh: number;
  clipRatioC?: number;
  droBeta: number;
  lossAggMode: LossAggMode | "auto";
  advantage: AdvantageEstimatorName;
}

/**
 * The backend loss of `rl.lossFn` and its options (`clipRatioC`, dual clip, only with `ppo`; `droBeta` with `dro`).
 * @throws Error `rl.clipRatioC: …` when set with a loss other than ppo
 */
export function backendLossOf(rl: RlLossFields): { lossFn: LossFnName; config: Pick<LossConfig, "clipLow" | "clipHigh" | "clipRatioC" | "droBeta"> } {
  if (rl.clipRatioC !== undefined && rl.lossFn !== "ppo") {
    throw new Error(`rl.clipRatioC: dual clip applies to rl.lossFn "ppo" only (veRL vanilla), not "${rl.lossFn}"; unset it`);
  }
  const base = { clipLow: rl.clipLow, clipHigh: rl.clipHigh };
  switch (rl.lossFn) {
    case "dro":
      return { lossFn: "dro", config: { ...base, droBeta: rl.droBeta } };
    case "ppo":
      return { lossFn: "ppo", config: rl.clipRatioC === undefined ? base : { ...base, clipRatioC: rl.clipRatioC } };
    default:
      return { lossFn: rl.lossFn, config: base };
  }
}

/**
 * The aggregation `rl.lossAggMode` resolves to: an explicit mode as given; `auto` is `seq-mean-token-mean` for gspo
 * (veRL's `compute_policy_loss_gspo` forces it, core_algos.py:1311-1314), `seq-mean-token-sum-norm` for drgrpo
 * (Dr.GRPO; this repository's drgrpo always meant it), else `token-mean` (veRL's default `loss_agg_mode`).
 */
export function lossAggModeOf(rl: Pick<RlLossFields, "lossAggMode" | "lossFn" | "advantage">): LossAggMode {
  if (rl.lossAggMode !== "auto") return rl.lossAggMode;
  if (rl.lossFn === "gspo") return "seq-mean-token-mean";
  if (rl.advantage === "drgrpo") return "seq-mean-token-sum-norm";
  return "token-mean";
}
