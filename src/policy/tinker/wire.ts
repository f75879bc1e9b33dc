/**
 * The Tinker training API on the wire (JSON): request and response shapes as the public Tinker SDK defines them
 * (`tinker/types`: `Datum`, `ModelInput` with `encoded_text` chunks, `TensorData`, `ForwardBackwardInput`,
 * `AdamParams`, `SamplingParams`, `SampleResponse`, `TryAgainResponse`, `RequestFailedResponse`) and as SkyRL's
 * Tinker server (`skyrl-tx/tx/tinker/api.py`) accepts them. One module for both sides: the client builds these, the
 * server (`src/serve/trainer.ts`) validates them with the zod schemas below.
 *
 * Loss semantics (Tinker docs, "Loss functions"): every loss is a **sum** over tokens —
 * `cross_entropy`: Σ −wₜ·lpₜ; `importance_sampling`: Σ −rₜ·Aₜ; `ppo`: Σ −min(rₜAₜ, clip(rₜ, lo, hi)·Aₜ) with
 * `loss_fn_config` `{clip_low_threshold, clip_high_threshold}` as absolute ratio bounds (default 0.8 / 1.2).
 * Normalisation (per-token mean, Dr.GRPO constant) is the client's job: it pre-scales weights / advantages.
 */
import { z } from "zod";
import type { Datum } from "../../core/types.ts";
import { describeValue } from "../../core/values.ts";
import type { LossConfig, LossFnName } from "../../core/training.ts";

/** Largest finite float32 (a larger `float32` value would be Infinity once the server stores it). */
const FLOAT32_MAX = 3.4028234663852886e38;

/**
 * `TensorData` (SDK `types/tensor_data.py`): a flattened dense tensor. `data` `[n]`; `dtype` `int64` (token ids:
 * safe integers) or `float32` (finite, |x| ≤ 3.4e38); `shape`, when given, must hold exactly n values (the SDK
 * reshapes `data` to it: `np.asarray(data).reshape(shape)` fails otherwise). CSR-sparse tensors
 * (`sparse_crow_indices` / `sparse_col_indices`) are refused: this server reads dense data only.
 */
export interface TensorData {
  data: number[];
  dtype?: "int64" | "float32";
  shape?: number[] | null;
}
export const TensorData = z
  .object({
    // Elements are checked below, once: a per-element schema would answer one message per bad value.
    data: z.array(z.unknown()),
    dtype: z.enum(["int64", "float32"]).optional(),
    shape: z.array(z.number().int().nonnegative()).nullish(),
    sparse_crow_indices: z.unknown().optional(),
    sparse_col_indices: z.unknown().optional(),
  })
  .superRefine((t, ctx) => {
    const notNumber = t.data.findIndex((x) => typeof x !== "number" || !Number.isFinite(x));
    if (notNumber >= 0) {
      const x = t.data[notNumber];
      ctx.addIssue({ code: "custom", path: ["data", notNumber], message: `expected a finite number, got ${shown(x)}` });
      return;
    }
    const data = t.data as number[];
    for (const k of ["sparse_crow_indices", "sparse_col_indices"] as const) {
      if (t[k] != null) ctx.addIssue({ code: "custom", path: [k], message: "sparse (CSR) tensors are not supported by this server: send dense data" });
    }
    if (t.shape != null) {
      const size = t.shape.reduce((a, b) => a * b, 1);
      if (size !== data.length) ctx.addIssue({ code: "custom", path: ["shape"], message: `shape [${t.shape.join(", ")}] holds ${size} values, data has ${data.length}` });
    }
    const bad = t.dtype === "int64" ? data.findIndex((x) => !Number.isSafeInteger(x)) : data.findIndex((x) => Math.abs(x) > FLOAT32_MAX);
    if (bad >= 0) {
      const want = t.dtype === "int64" ? "an integer (dtype int64)" : `a float32 value (|x| ≤ ${FLOAT32_MAX})`;
      ctx.addIssue({ code: "custom", path: ["data", bad], message: `${data[bad]} is not ${want}` });
    }
  })
  .transform((t): TensorData => ({ data: t.data as number[], dtype: t.dtype, shape: t.shape }));

/** One chunk of a `ModelInput`; only token chunks (`encoded_text`) are supported here (no images). */
export const ModelInputChunk = z.object({
  type: z.literal("encoded_text").optional(),
  tokens: z.array(z.number().int().nonnegative()),
});

/** `ModelInput`: the input tokens as a list of chunks, concatenated. */
export const ModelInput = z.object({ chunks: z.array(ModelInputChunk).min(1) });
export type ModelInput = z.infer<typeof ModelInput>;

/** Tinker's `Datum`: `model_input` `[seq-1]` and `loss_fn_inputs` (`target_tokens`, `weights`, `logprobs`, `advantages`, each `[seq-1]`). */
export const WireDatum = z.object({
  model_input: ModelInput,
  loss_fn_inputs: z.record(z.string(), TensorData),
});
export type WireDatum = z.infer<typeof WireDatum>;

/** The loss names the API knows (Tinker `LossFnType`, the subset every server implements). */
export const LossFn = z.enum(["cross_entropy", "importance_sampling", "ppo"]);

/** `ForwardBackwardInput`. */
export const ForwardBackwardInput = z.object({
  data: z.array(WireDatum).min(1),
  loss_fn: LossFn,
  loss_fn_config: z.record(z.string(), z.union([z.number(), z.string()])).nullish(),
});
export type ForwardBackwardInput = z.infer<typeof ForwardBackwardInput>;

/**
 * `POST /api/v1/forward_backward` (JSON form; SDK 0.25 sends it as protobuf, `proto.ts`) and `/api/v1/forward` bodies.
 * The input is `forward_backward_input`, or `forward_input` (the SDK's `ForwardRequest`, `types/forward_request.py`);
 * `forward_only` is the SDK 0.25 flag that makes `forward_backward` a forward pass.
 */
export const ForwardBackwardRequest = z
  .object({
    model_id: z.string().min(1),
    forward_backward_input: ForwardBackwardInput.optional(),
    forward_input: ForwardBackwardInput.optional(),
    seq_id: z.number().int().nullish(),
    forward_only: z.boolean().optional(),
  })
  .refine((r) => (r.forward_backward_input === undefined) !== (r.forward_input === undefined), {
    message: "give exactly one of forward_backward_input and forward_input",
  })
  .transform((r) => ({ model_id: r.model_id, seq_id: r.seq_id ?? null, forward_only: r.forward_only ?? false, forward_backward_input: (r.forward_backward_input ?? r.forward_input)! }));

/**
 * A client's value as a message shows it: numbers as JavaScript prints them (`1e+30`, `Infinity`), the rest cut to
 * 80 characters with their type (`"xxxx…" (a string)`, `describeValue`), so an echo stays short.
 */
const shown = (x: unknown): string => describeValue(x);

/** Client keys for a message: the first 5, each cut to 80 characters, then how many more. */
function shownKeys(keys: readonly string[]): string {
  const cut = keys.slice(0, 5).map((k) => (k.length > 80 ? `${k.slice(0, 80)}…` : k));
  return keys.length > 5 ? `${cut.join(", ")} … and ${keys.length - 5} more` : cut.join(", ");
}

/** A number field within `range` (`ok`), with `dflt` when absent; every refusal names the range and the value. */
function bounded(dflt: number, ok: (x: number) => boolean, range: string, hint = "") {
  const error = (iss: { input: unknown }): string => `expected a finite number in ${range}, got ${shown(iss.input)}${hint}`;
  return z.number({ error }).refine(ok, { error }).default(dflt);
}

/**
 * Tinker's `AdamParams` (SDK `src/tinker/types/optim_step_request.py` @ d595dc2: six plain floats, defaults lr 1e-4,
 * β 0.9 / 0.95, eps 1e-12, weight_decay 0, grad_clip_norm 0 = off; StrictBase, so no other field). The SDK sets no
 * bounds; these are the ones a real trainer enforces (PyTorch `torch/optim/adam.py` @ dc80ccd: 0 ≤ lr, 0 ≤ eps,
 * 0 ≤ β < 1, 0 ≤ weight_decay), made finite and tight enough that one update cannot wreck a model:
 * - `learning_rate` [0, 1] (LoRA RL uses ~1e-5…1e-4; above 1 is a typo);
 * - `beta1`, `beta2` [0, 1) and below 1 once rounded to float32 (the update runs in float32: 1 − β must not be 0);
 * - `eps` [1e-30, 1] (smaller rounds towards 0 in float32, where a zero moment gives 0/0 = NaN);
 * - `weight_decay` ≥ 0 with learning_rate × weight_decay ≤ 1 (decoupled decay multiplies the weights by 1 − lr·wd
 *   each step: above 1 it flips their sign and grows them without bound);
 * - `grad_clip_norm` ≥ 0, finite.
 * Unknown fields are refused (a misspelt `betas` would otherwise silently train with the defaults).
 */
export const AdamParamsWire = z
  .strictObject({
    learning_rate: bounded(1e-4, (x) => x >= 0 && x <= 1, "[0, 1]", " (LoRA RL uses ~1e-5…1e-4)"),
    beta1: bounded(0.9, (x) => x >= 0 && Math.fround(x) < 1, "[0, 1) (at most 0.99999994: the update runs in float32)"),
    beta2: bounded(0.95, (x) => x >= 0 && Math.fround(x) < 1, "[0, 1) (at most 0.99999994: the update runs in float32)"),
    eps: bounded(1e-12, (x) => x >= 1e-30 && x <= 1, "[1e-30, 1]"),
    weight_decay: bounded(0, (x) => x >= 0, "[0, 1/learning_rate]"),
    grad_clip_norm: bounded(0, (x) => x >= 0, "[0, ∞) (0 = no clipping)"),
  }, {
    error: (iss) => (iss.code === "unrecognized_keys" ? `unknown field(s) ${shownKeys(iss.keys)} (AdamParams has learning_rate, beta1, beta2, eps, weight_decay, grad_clip_norm)` : undefined),
  })
  .superRefine((a, ctx) => {
    const decay = a.learning_rate * a.weight_decay;
    if (decay > 1) {
      ctx.addIssue({
        code: "custom",
        path: ["weight_decay"],
        message: `learning_rate × weight_decay is ${shown(decay)}, expected at most 1 (decoupled decay multiplies the weights by 1 − lr·wd each step: weight_decay ≤ ${shown(1 / a.learning_rate)} at learning_rate ${shown(a.learning_rate)})`,
      });
    }
  });
export type AdamParamsWire = z.infer<typeof AdamParamsWire>;

/** `POST /api/v1/optim_step` body. */
export const OptimStepRequest = z.object({ model_id: z.string().min(1), adam_params: AdamParamsWire, seq_id: z.number().int().nullish() });

/** `SamplingParams` (`stop`: strings or token ids; `top_k`/`top_p` must stay at their no-op defaults here). */
export const SamplingParams = z.object({
  max_tokens: z.number().int().min(1),
  seed: z.number().int().nullish(),
  stop: z.union([z.string(), z.array(z.string()), z.array(z.number().int().nonnegative())]).nullish(),
  temperature: z.number().min(0).default(1),
  top_k: z.number().int().default(-1),
  top_p: z.number().default(1),
});
export type SamplingParams = z.infer<typeof SamplingParams>;

/** `POST /api/v1/asample` body: a sampling session + `seq_id`, or exactly one of `base_model` / `model_path`. */
export const SampleRequest = z
  .object({
    num_samples: z.number().int().min(1).max(1024).default(1),
    prompt: ModelInput,
    sampling_params: SamplingParams,
    base_model: z.string().nullish(),
    model_path: z.string().nullish(),
    sampling_session_id: z.string().nullish(),
    seq_id: z.number().int().nullish(),
    prompt_logprobs: z.boolean().nullish(),
  })
  .refine((r) => (r.sampling_session_id ? true : (r.base_model == null) !== (r.model_path == null)), {
    message: "give sampling_session_id (+ seq_id), or exactly one of base_model and model_path",
  });

/** One sampled sequence on the wire: `tokens`/`logprobs` `[new]` (nats), `stop_reason` `stop` | `length`. */
export interface WireSampledSequence {
  stop_reason: "stop" | "length";
  tokens: number[];
  logprobs: number[] | null;
}

/** `SampleResponse`. */
export interface WireSampleResponse {
  type: "sample";
  sequences: WireSampledSequence[];
  prompt_logprobs: null;
}

/** `ForwardBackwardOutput`: per-datum `logprobs` (and `elementwise_loss` for cross entropy), `metrics` like `loss:sum`. */
export interface WireForwardBackwardOutput {
  loss_fn_output_type: string;
  loss_fn_outputs: Array<Record<string, TensorData>>;
  metrics: Record<string, number>;
}

/** The body of `retrieve_future` while the request is still running (`TryAgainResponse`). */
export interface WireTryAgain {
  type: "try_again";
  request_id: string;
  queue_state: "active" | "paused_capacity" | "paused_rate_limit";
}

/** A failed request (`RequestFailedResponse`): `category` `user` (4xx: fix the request) or `server`. */
export interface WireRequestFailed {
  error: string;
  category: "user" | "server" | "unknown";
}

/** `UntypedAPIFuture`, the answer of every asynchronous endpoint (`types/shared/untyped_api_future.py`). */
export interface WireFuture {
  request_id: string;
  model_id?: string | null;
  future_id?: string;
  status?: string;
}

/**
 * The loss a server computes, recomputed from the logprobs it returned (current policy, pre-update) — for servers
 * that report no loss metric. Same sums as Tinker's losses on the data as sent (normalisation already folded in):
 * `cross_entropy` Σ −wₜ·lpₜ; `importance_sampling` Σ −exp(lpₜ − oldₜ)·Aₜ; `ppo` Σ −min(rₜAₜ, clip(rₜ, lo, hi)·Aₜ).
 * @param data `[batch]` wire datums; `logprobs` `[batch][seq-1]` nats
 */
export function lossFromLogprobs(data: readonly WireDatum[], lossFn: string, lossFnConfig: Record<string, number> | undefined, logprobs: readonly number[][]): number {
  const lo = lossFnConfig?.clip_low_threshold ?? 0.8;
  const hi = lossFnConfig?.clip_high_threshold ?? 1.2;
  let loss = 0;
  data.forEach((d, i) => {
    const lp = logprobs[i];
    if (lossFn === "cross_entropy") {
      const w = d.loss_fn_inputs.weights?.data;
      lp.forEach((x, t) => (loss -= (w ? w[t] : 1) * x));
      return;
    }
    const old = d.loss_fn_inputs.logprobs?.data ?? [];
    const adv = d.loss_fn_inputs.advantages?.data ?? [];
    lp.forEach((x, t) => {
      const r = Math.exp(x - old[t]);
      const a = adv[t];
      loss -= lossFn === "ppo" ? Math.min(r * a, Math.min(hi, Math.max(lo, r)) * a) : r * a;
    });
  });
  return loss;
}

/** The absolute ratio clip bounds Tinker's `ppo` takes, from our ε-style `clipLow`/`clipHigh` (default 0.2/0.2). */
export function ppoLossConfig(config: LossConfig): Record<string, number> {
  return { clip_low_threshold: 1 - (config.clipLow ?? 0.2), clip_high_threshold: 1 + (config.clipHigh ?? 0.2) };
}

/**
 * Our datums → Tinker's, with the normalisation the embedded backend applies folded into the data (Tinker's losses
 * are sums): `tokens` divides by Σ weights of the batch, `constant` by `constantLength × batch`, `sum` by 1. Cross
 * entropy scales `weights`; the RL losses scale `advantages` (they are linear in it) and keep `weights` as the mask.
 * @param datums `[batch]`, arrays `[seq-1]`
 * @throws Error when `klCoef > 0` (the Tinker API has no KL term; use the KL monitor or fold KL into rewards), or
 *   when an RL loss lacks logprobs/advantages
 */
export function toWireDatums(datums: readonly Datum[], lossFn: LossFnName, config: LossConfig = {}, options: { rlWeights?: boolean } = {}): WireDatum[] {
  if ((config.klCoef ?? 0) > 0) {
    throw new Error("tinker backend: the Tinker API's losses have no KL term; set rl.klCoef 0 (hack/kl_ref still monitors the KL)");
  }
  let scale = 1;
  if (config.normalization === "constant") {
    if (!(config.constantLength && config.constantLength > 0)) throw new Error('normalization "constant" needs a positive constantLength');
    scale = 1 / (config.constantLength * datums.length);
  } else if (config.normalization !== "sum") {
    const total = datums.reduce((s, d) => s + d.weights.reduce((a, b) => a + b, 0), 0);
    scale = total > 0 ? 1 / total : 0;
  }
  const rl = lossFn !== "cross_entropy";
  return datums.map((d, i) => {
    const inputs: Record<string, TensorData> = { target_tokens: { data: d.targetTokens, dtype: "int64" } };
    if (!rl) inputs.weights = { data: d.weights.map((w) => w * scale), dtype: "float32" };
    else {
      if (!d.logprobs || !d.advantages) throw new Error(`datum ${i}: loss "${lossFn}" needs logprobs and advantages`);
      inputs.logprobs = { data: d.logprobs, dtype: "float32" };
      // The mask is folded into the advantages (the RL losses are linear in A, so A·w·scale masks and normalises):
      // Tinker's RL losses take target_tokens, logprobs and advantages only (docs "Loss functions").
      inputs.advantages = { data: d.advantages.map((a, t) => a * d.weights[t] * scale), dtype: "float32" };
      // `weights` only to servers that read it for the per-token metrics (arl serve trainer, `rlWeights`).
      if (options.rlWeights) inputs.weights = { data: d.weights, dtype: "float32" };
    }
    return { model_input: { chunks: [{ type: "encoded_text", tokens: d.modelInput }] }, loss_fn_inputs: inputs };
  });
}

/** The input tokens of a wire datum (chunks concatenated) `[seq-1]`. */
export function modelInputTokens(input: ModelInput): number[] {
  return input.chunks.flatMap((c) => c.tokens);
}
