/**
 * `rl.lossFn` → what a backend is asked for: the embedded backend's loss name and options, or a Tinker server's
 * loss name and `loss_fn_config` — or a config error naming what that server offers. Sources: veRL
 * `actor.policy_loss.loss_mode` (verl/trainer/ppo/core_algos.py @ b178a3c: `vanilla` :1159, `gspo` :1253, `cispo`
 * :1721), Tinker docs "Loss functions" (`ppo`, `importance_sampling`, `cispo`, `dro`), and each Tinker-API server's
 * loss list (`TINKER_SERVER_LOSSES`).
 */
import type { LossConfig, LossFnName } from "../policy/types.ts";
import type { TinkerServerFamily } from "../policy/tinker/families.ts";
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

/**
 * The Tinker loss for `rl` on a server of `family`. Clip bounds always go in `loss_fn_config` as absolute ratios
 * (`clip_low_threshold = 1 − clipLow`): the servers' own cispo defaults differ (TuFT 0.9/1.1, verl-tinker 0/4).
 * `dro` sends `beta` (verl-tinker requires it; TuFT defaults to 0.01).
 * @throws Error `rl.<field>: …` from {@link tinkerFamilyProblem}, naming what the server offers, when it has no such
 *   loss (`gspo` outside SkyRL) or a dual clip is set (no server's `ppo` has one)
 */
export function tinkerLossFor(rl: RlLossFields, family: TinkerServerFamily): TinkerLoss {
  const problem = tinkerFamilyProblem(rl, family);
  if (problem !== undefined && problem.field !== "lossAggMode") throw new Error(`rl.${problem.field}: ${problem.message}`);
  const clip = { clip_low_threshold: 1 - rl.clipLow, clip_high_threshold: 1 + rl.clipHigh };
  // Each RL loss goes by its own name on every server that has it.
  switch (rl.lossFn) {
    case "ppo":
    case "cispo":
    case "gspo":
      return { lossFn: rl.lossFn, lossFnConfig: clip };
    case "importance_sampling":
      return { lossFn: rl.lossFn };
    case "dro":
      return { lossFn: rl.lossFn, lossFnConfig: { beta: rl.droBeta } };
  }
}

/**
 * Why `rl` cannot train on a Tinker server of `family` (the `rl` field and the reason naming what that server
 * offers), or undefined: the server lacks the loss `tinkerLossFor` would send (e.g. `gspo` outside SkyRL), a dual
 * clip (no server's `ppo` has one), or `dro` with per-token weights that differ (`seq-mean-token-mean`: its β is one
 * number per request, `droDatums`). Checked from the config when `policy.tinker.server` names the family, and once
 * the server is detected (`createBackend`, `arl train --dry-run`) — before any training.
 */
export function tinkerFamilyProblem(rl: RlLossFields, family: TinkerServerFamily): { field: string; message: string } | undefined {
  const offered = TINKER_SERVER_LOSSES[family];
  const offers = `this ${family} server offers ${offered.losses.join(", ")} (${offered.source})`;
  if (rl.clipRatioC !== undefined) return { field: "clipRatioC", message: `no Tinker-API server's ppo has a dual clip; unset it or use policy.backend embedded; ${offers}` };
  if (!offered.losses.includes(rl.lossFn)) return { field: "lossFn", message: `"${rl.lossFn}" needs the server loss "${rl.lossFn}"; ${offers}` };
  if (rl.lossFn === "dro" && lossAggModeOf(rl) === "seq-mean-token-mean") {
    return { field: "lossAggMode", message: 'dro on a Tinker server sends one β per request, so tokens weighted differently ("seq-mean-token-mean") cannot be sent; use token-mean, seq-mean-token-sum or seq-mean-token-sum-norm' };
  }
  return undefined;
}

/**
 * What the Tinker client of this repository sends (src/policy/tinker/backend.ts `forwardBackward`: `tinkerLossFor`'s
 * name and `loss_fn_config`; `dro` with β folded into the normalisation, `droDatums`): every RL loss. Whether the
 * server has it is known once its family is known (`policy.tinker.server`, or detected when the backend connects
 * and by `--dry-run`): a loss the server lacks is then a config error naming what that server offers
 * (`tinkerFamilyProblem`), before any training.
 */
export const TINKER_CLIENT_SENDS: readonly RlLossFn[] = RL_LOSS_FNS;

/**
 * Why a config's algorithm cannot run on its backend (the `rl` field and the reason), or undefined. Tinker: the loss
 * must be one the client sends (`TINKER_CLIENT_SENDS`), no dual clip, no `gae` (a value head lives in the embedded GPT);
 * with `server` naming the family (`policy.tinker.server`, not `auto`), also {@link tinkerFamilyProblem}.
 */
export function backendAlgorithmProblem(backend: "embedded" | "tinker", rl: RlLossFields, server: TinkerServerFamily | "auto" = "auto"): { field: string; message: string } | undefined {
  if (backend !== "tinker") return undefined;
  if (rl.advantage === "gae") {
    return { field: "advantage", message: '"gae" needs a value head, which only policy.backend embedded has; with tinker use grpo, drgrpo, rloo, opo, grpo_passk, reinforce_plus_plus, reinforce_plus_plus_baseline or gigpo' };
  }
  if (rl.clipRatioC !== undefined) return { field: "clipRatioC", message: "no Tinker-API server's ppo has a dual clip; unset it or use policy.backend embedded" };
  if (!TINKER_CLIENT_SENDS.includes(rl.lossFn)) {
    const servers = Object.entries(TINKER_SERVER_LOSSES).filter(([, v]) => v.losses.includes(rl.lossFn)).map(([k]) => k);
    return {
      field: "lossFn",
      message: `"${rl.lossFn}" is not sent by the Tinker client yet (it sends ${TINKER_CLIENT_SENDS.join(", ")}); servers that offer it: ${servers.join(", ") || "none"}; use policy.backend embedded`,
    };
  }
  return server === "auto" ? undefined : tinkerFamilyProblem(rl, server);
}
