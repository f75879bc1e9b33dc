/**
 * The trainer server's reading of a `forward_backward` / `forward` input (`src/serve/trainer.ts`): Tinker wire datums
 * checked against the model and turned into our `Datum`s, and the loss config a `loss_fn_config` asks for.
 */
import type { Datum } from "../core/types.ts";
import type { GPTConfig } from "../policy/embedded/gpt.ts";
import { modelInputTokens, type ForwardBackwardInput, type TensorData } from "../policy/tinker/wire.ts";
import type { LossConfig } from "../core/training.ts";
import { describeValue } from "../core/values.ts";
import { HttpError } from "../http/server.ts";
import { cutKey } from "../http/limits.ts";

/**
 * Our datum from a wire datum, checked against the model's vocabulary and context; each tensor must be 1-D `[n]`
 * (n = the model_input's tokens). @throws HttpError 400
 */
export function toDatum(w: ForwardBackwardInput["data"][number], i: number, lossFn: string, gpt: GPTConfig): Datum {
  const modelInput = modelInputTokens(w.model_input);
  const get = (k: string): number[] | undefined => (w.loss_fn_inputs[k] as TensorData | undefined)?.data;
  const targets = get("target_tokens");
  if (!targets) throw new HttpError(400, `data.${i}.loss_fn_inputs.target_tokens: required`);
  const n = modelInput.length;
  if (n === 0 || n > gpt.contextLength) throw new HttpError(400, `data.${i}.model_input: ${n} tokens, expected 1..${gpt.contextLength} (the model's context)`);
  const check = (name: string, xs: number[] | undefined, required: boolean): void => {
    if (xs === undefined) {
      if (required) throw new HttpError(400, `data.${i}.loss_fn_inputs.${name}: required by loss ${lossFn}`);
      return;
    }
    if (xs.length !== n) throw new HttpError(400, `data.${i}.loss_fn_inputs.${name}: ${xs.length} values, model_input has ${n} tokens`);
    const shape = (w.loss_fn_inputs[name] as TensorData).shape;
    if (shape != null && shape.length !== 1) throw new HttpError(400, `data.${i}.loss_fn_inputs.${name}.shape: [${shape.join(", ")}], expected [${n}] (one value per model_input token)`);
  };
  const rl = lossFn !== "cross_entropy";
  check("target_tokens", targets, true);
  check("weights", get("weights"), false);
  check("logprobs", get("logprobs"), rl);
  check("advantages", get("advantages"), rl);
  for (const [name, xs] of [["model_input", modelInput], ["target_tokens", targets]] as const) {
    const bad = xs.findIndex((t) => !Number.isInteger(t) || t < 0 || t >= gpt.vocabSize);
    if (bad >= 0) throw new HttpError(400, `data.${i}.${name}[${bad}]: token id ${xs[bad]} outside [0, ${gpt.vocabSize})`);
  }
  // Values that would overflow float32 or make the loss non-finite are the caller's mistake, not the server's.
  for (const k of ["weights", "advantages", "logprobs"]) {
    const xs = get(k);
    const at = xs?.findIndex((x) => !Number.isFinite(x) || Math.abs(x) > 1e6) ?? -1;
    if (xs && at >= 0) throw new HttpError(400, `data.${i}.loss_fn_inputs.${k}[${at}]: ${xs[at]} is outside [-1e6, 1e6]`);
  }
  const advantages = get("advantages");
  // Tinker's RL losses take no weights: a token is trained where its advantage is non-zero.
  const weights = get("weights") ?? (rl ? advantages!.map((a) => (a !== 0 ? 1 : 0)) : targets.map(() => 1));
  return { modelInput, targetTokens: targets, weights, logprobs: get("logprobs"), advantages };
}

/**
 * The loss config of an input: Tinker's `ppo` bounds `clip_low_threshold` / `clip_high_threshold` (absolute ratio
 * bounds, default 0.8 / 1.2) as our ε-style `clipLow` / `clipHigh`, losses summed over tokens (Tinker's convention).
 * @throws HttpError 400 on an unknown key, a non-number, or bounds not around 1
 */
export function lossConfigOf(input: ForwardBackwardInput): LossConfig {
  const c = input.loss_fn_config ?? {};
  const num = (k: string, d: number): number => {
    const v = c[k];
    if (v === undefined) return d;
    if (typeof v !== "number") throw new HttpError(400, `loss_fn_config.${k}: expected a number, got ${describeValue(v)}`);
    return v;
  };
  for (const k of Object.keys(c)) {
    if (!["clip_low_threshold", "clip_high_threshold"].includes(k)) {
      throw new HttpError(400, `loss_fn_config.${cutKey(k)}: unknown key (allowed: clip_low_threshold, clip_high_threshold for ppo)`);
    }
  }
  const lo = num("clip_low_threshold", 0.8);
  const hi = num("clip_high_threshold", 1.2);
  if (!(lo <= 1 && hi >= 1)) throw new HttpError(400, `loss_fn_config: expected clip_low_threshold ≤ 1 ≤ clip_high_threshold, got ${lo}, ${hi}`);
  return { clipLow: 1 - lo, clipHigh: hi - 1, normalization: "sum" };
}
