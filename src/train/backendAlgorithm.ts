/**
 * Which algorithm a backend can run: the config checks that join the RL loss fields (`rl.*`, src/algo/policyLoss.ts)
 * to what a Tinker-API server takes (src/policy/tinker/losses.ts), each naming the `rl` field and the reason. Glue
 * between `algo` and `policy`, which name neither each other. Checked from the config (`backendAlgorithmProblem`) and
 * once a Tinker server's family is detected (`tinkerFamilyProblem`).
 */
import { lossAggModeOf, RL_LOSS_FNS, type RlLossFields, type RlLossFn } from "../algo/policyLoss.ts";
import type { TinkerServerFamily } from "../policy/tinker/families.ts";
import { TINKER_SERVER_LOSSES, tinkerServerProblem } from "../policy/tinker/losses.ts";

/**
 * Why `rl` cannot train on a Tinker server of `family` (the `rl` field and the reason naming what that server
 * offers), or undefined: the server lacks the loss `tinkerLossFor` would send (e.g. `gspo` outside SkyRL), a dual
 * clip (no server's `ppo` has one), or `dro` with per-token weights that differ (`seq-mean-token-mean`: its β is one
 * number per request, `droDatums`). Checked from the config when `policy.tinker.server` names the family, and once
 * the server is detected (`createBackend`, `arl train --dry-run`) — before any training.
 */
export function tinkerFamilyProblem(rl: RlLossFields, family: TinkerServerFamily): { field: string; message: string } | undefined {
  const problem = tinkerServerProblem(rl, family);
  if (problem !== undefined) return problem;
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
export function backendAlgorithmProblem(
  backend: "embedded" | "tinker",
  rl: RlLossFields,
  server: TinkerServerFamily | "auto" = "auto",
): { field: string; message: string } | undefined {
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
