/**
 * The servers of the Tinker training API and how they differ, as read in their public source (each entry cites
 * its repository, commit and files). The client (`backend.ts`) handles each difference or names it once at start.
 */
import type { TinkerClient } from "./client.ts";

/** A family of Tinker-API servers. `unknown`: a server none of the probes recognised (treated as JSON-only). */
export type TinkerServerFamily = "tinker" | "skyrl" | "tuft" | "verl-tinker" | "arl" | "unknown";

/** What the client needs to know of a family. */
export interface FamilyTraits {
  /** Encoding of `forward_backward` and its results. */
  wire: "json" | "protobuf";
  /** Whether `sampling_params.stop` may hold strings (else token ids only; the client cuts at the strings). */
  stopStrings: boolean;
  /** Whether RL losses read `weights` (as the mask; the mask is always folded into the advantages as well). */
  rlWeights: boolean;
  /** `adam_params` fields the server ignores (a non-default value is warned about by name). */
  ignoredAdam: string[];
  /** How long the server holds a `retrieve_future` poll before answering try_again / 408 (ms). */
  pollHoldMs: number;
  /** Differences that change what a run means, printed once when a backend is created. */
  startNotes: string[];
  /** Where the facts come from (repository @ commit: files). */
  source: string;
}

/** The families, from their sources. */
export const FAMILIES: Record<TinkerServerFamily, FamilyTraits> = {
  tinker: {
    wire: "protobuf",
    stopStrings: true,
    rlWeights: false,
    ignoredAdam: [],
    pollHoldMs: 30_000,
    startNotes: [],
    source: "thinking-machines-lab/tinker @ d595dc2ba62a1494aa0f452fe1d0dbb7b321b870 (SDK 0.25.0): src/tinker/resources/training.py, lib/api_future_impl.py, lib/internal_client_holder.py, proto/",
  },
  arl: {
    wire: "protobuf",
    stopStrings: true,
    rlWeights: true,
    ignoredAdam: [],
    pollHoldMs: 20_000,
    startNotes: [],
    source: "src/serve/trainer.ts (this repository)",
  },
  skyrl: {
    wire: "protobuf",
    stopStrings: true,
    rlWeights: true,
    ignoredAdam: ["beta1", "beta2", "eps", "weight_decay", "grad_clip_norm"],
    pollHoldMs: 300_000,
    startNotes: [
      "these notes are for SkyRL's FSDP backend (its JAX backend, the default, averages losses per sequence and is refused at the first forward_backward: start SkyRL with --backend fsdp)",
      "forward_backward reports the loss as total_loss:sum (read as the loss; no loss:sum)",
      "the FSDP backend applies only adam_params.learning_rate; betas, eps and weight decay are fixed at model creation and gradients are clipped at the server's trainer.max_grad_norm (default 1.0)",
      "LoRA alpha is fixed at 32 and lora_config's train_* flags are ignored",
      "load_weights is accepted only as a model's first request (a load after training goes to a fresh model)",
    ],
    source: "NovaSky-AI/SkyRL @ a9564572eb8e91076be43c1bd5e4615e3de17265: skyrl/tinker/api.py, engine.py, proto_serialization.py, skyrl/backends/skyrl_train_backend.py",
  },
  tuft: {
    wire: "protobuf",
    stopStrings: true,
    rlWeights: false,
    ignoredAdam: [],
    pollHoldMs: 120_000,
    startNotes: [
      "every training request's seq_id must be exactly the next one, with no de-duplication: a retry whose first answer was lost fails (409 Sequence conflict, on its poll) although the first was applied, and after a failed request every later one fails — resume the run from its last checkpoint",
      "forward_backward takes protobuf only (JSON → 415)",
    ],
    source: "agentscope-ai/TuFT @ 102eefd4cf8fb0241ba656d14df4928f0b2c0c9e: src/tuft/server.py, futures.py, compat.py, training_controller.py, loss_fn/",
  },
  "verl-tinker": {
    wire: "json",
    stopStrings: true,
    // verl-tinker finds the response tokens from `weights` (else from non-zero advantages/logprobs: 422 when none,
    // data/datum_processing.py:207-230), so the mask goes along.
    rlWeights: true,
    ignoredAdam: ["grad_clip_norm"],
    pollHoldMs: 30_000,
    startNotes: [
      "speaks the SDK 0.19 JSON wire only (no protobuf): forward_backward and forward go as JSON",
      "trains the whole model (lora_config is ignored) and serves one model per server",
      "a future's result is deleted when first retrieved: a response lost in transit fails that request",
      "sampler saves ignore the requested name (tinker://verl-tinker/weights/step-…)",
      "importance_sampling caps the ratio at 2.0 (verl's _loss.py)",
    ],
    source: "verl-project/verl-recipe @ 48ea0a797fa29867ea0ad92aff7d284eec7d4be3: verl_tinker/src/verl_tinker/tinker_router.py, tinker_ops.py, schemas.py (server pins tinker==0.19.0)",
  },
  unknown: {
    wire: "json",
    stopStrings: true,
    rlWeights: false,
    ignoredAdam: [],
    pollHoldMs: 30_000,
    startNotes: ["the server has no /api/v1/client/config and matched no known family: speaking the JSON wire (set policy.tinker.server / policy.tinker.wire to override)"],
    source: "no probe matched",
  },
};

/**
 * Which family a server is, from its `client/config` answer (null = none) and two GET probes, by what each
 * family's source answers: ours sets `arl_trainer`; SkyRL's `client/config` is only `{pjwt_auth_enabled}`
 * (api.py:895–902); verl-tinker's `healthz` says `ready` and its config has zero-sized byte semaphores
 * (tinker_router.py:541–571); TuFT lists `capabilities` per model in `get_server_capabilities` (state.py:115–129);
 * any other server with a `client/config` is taken for hosted Tinker.
 * @returns the family; `unknown` when the server has no `client/config` and nothing matched
 */
export async function detectFamily(client: TinkerClient, clientConfig: Record<string, unknown> | null): Promise<TinkerServerFamily> {
  if (clientConfig?.arl_trainer === true) return "arl";
  const health = await client.raw("healthz", { method: "GET", timeoutMs: 10_000 });
  let status: unknown;
  try {
    status = (JSON.parse(new TextDecoder().decode(health.body)) as { status?: unknown }).status;
  } catch {
    status = undefined;
  }
  if (status === "ready" || clientConfig?.sample_dispatch_bytes_semaphore_size === 0) return "verl-tinker";
  if (clientConfig && Object.keys(clientConfig).length === 1 && "pjwt_auth_enabled" in clientConfig) return "skyrl";
  const caps = await client.raw("get_server_capabilities", { method: "GET", timeoutMs: 10_000 });
  if (caps.status === 200) {
    try {
      const models = (JSON.parse(new TextDecoder().decode(caps.body)) as { supported_models?: Array<Record<string, unknown>> }).supported_models ?? [];
      if (models.some((m) => Array.isArray(m.capabilities))) return "tuft";
    } catch {
      // not JSON: no family evidence
    }
  }
  return clientConfig ? "tinker" : "unknown";
}
