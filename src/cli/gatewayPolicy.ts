/**
 * What `arl serve gateway` serves (its flags are in `serveGateway.ts`, which loads this file only when the gateway
 * starts): the policy of `--checkpoint`, `--smoke` or a Tinker server, and the rollout-record writer.
 */import { appendFileSync, mkdirSync } from "node:fs";
import { dirname } from "node:path";
import type { GatewayPolicy } from "../gateway/server.ts";
import type { RolloutRecord } from "../gateway/types.ts";
import { getRecipe } from "../envs/index.ts";
import { EmbeddedBackend } from "../policy/embedded/backend.ts";
import { IM_END } from "../protocol/hermes.ts";
import { withRecipeDefaults } from "../train/recipeDefaults.ts";
import { loadPolicy } from "../train/checkpoint.ts";
import { ConfigError, resolveConfig } from "../train/config.ts";
import { applyOverrides } from "../train/configFile.ts";
import { gptConfigOf, setupExperiment } from "../train/setup.ts";
import { loadTokenizer } from "../policy/hf/index.ts";
import type { Tokenizer } from "../core/tokenizer.ts";
import { closeBackend, createBackend } from "../train/backends.ts";
import { checkpointModelName } from "./serveFlags.ts";

/** The policy to serve and how to release it. */
export interface LoadedGatewayPolicy {
  policy: GatewayPolicy;
  /** A warning to print (e.g. a checkpoint whose vocabulary lacks the hermes tags), or undefined. */
  warning?: string;
  dispose(): void;
}

/**
 * The policy of `--checkpoint` or `--smoke`.
 * @param overrides dotted config overrides applied to the smoke config (`--policy.dModel 64`)
 * @throws ConfigError unless exactly one of checkpoint / smoke is given; Error naming the folder or file when a
 *   checkpoint is missing or corrupt
 */
export async function loadGatewayPolicy(
  opts: { checkpoint?: string; smoke?: boolean; modelName?: string; maxTokens?: number },
  overrides: Record<string, string> = {},
): Promise<LoadedGatewayPolicy> {
  if (overrides["policy.backend"] === "tinker") return loadTinkerGatewayPolicy(opts, overrides);
  if ((opts.checkpoint === undefined) === (opts.smoke !== true)) {
    throw new ConfigError(["--checkpoint or --smoke: give exactly one (a policy checkpoint folder, e.g. runs/travel/checkpoints/final, or a fresh smoke model)"]);
  }
  if (opts.checkpoint !== undefined) {
    const p = await loadPolicy(opts.checkpoint);
    let warning: string | undefined;
    try {
      p.tokenizer.id(IM_END);
    } catch {
      warning = `the checkpoint's vocabulary has no ${IM_END} token: it was not trained with the hermes protocol (e.g. a search-env run), so its completions will rarely end a turn or call tools`;
    }
    return {
      policy: { name: opts.modelName ?? checkpointModelName(opts.checkpoint), sampler: p.backend.samplingClient(), tokenizer: p.tokenizer, contextLength: p.gpt.contextLength, ...(opts.maxTokens ? { maxTokens: opts.maxTokens } : {}) },
      ...(warning !== undefined ? { warning } : {}),
      dispose: () => (p.backend as { dispose?: () => void }).dispose?.(),
    };
  }
  const recipe = getRecipe("travel"); // the smoke policy speaks hermes: a tiny untrained model of the travel env
  const config = resolveConfig(applyOverrides(withRecipeDefaults({}, recipe, true), { "env.protocol": "hermes", ...overrides }));
  const s = setupExperiment(config, recipe);
  const backend = await EmbeddedBackend.create(s.gpt, config.run.seed);
  return {
    policy: { name: opts.modelName ?? "arl/smoke", sampler: backend.samplingClient(), tokenizer: s.tokenizer, contextLength: s.gpt.contextLength, ...(opts.maxTokens ? { maxTokens: opts.maxTokens } : {}) },
    dispose: () => backend.dispose(),
  };
}

/**
 * A Tinker server's sampler behind the gateway (`--policy.backend tinker --policy.tinker.baseUrl <url>
 * --policy.tinker.baseModel <name>`): a new model of the base model on that server (`createBackend`, as `arl train`
 * makes one), sampled through its sampling client. The gateway renders chat messages into tokens itself, so it needs
 * the served model's tokenizer: `--policy.tinker.tokenizer <dir>` (a Hugging Face tokenizer folder, context
 * `policy.contextLength`), or `--checkpoint <dir>` when the server serves that checkpoint as its base model
 * (`arl serve trainer --checkpoint <dir>`: its tokenizer and context are read, its weights stay on the server).
 * @throws ConfigError naming `policy.tinker.tokenizer` when neither gives a tokenizer, or `--smoke` with tinker; Error
 *   when the server refuses the model
 */
async function loadTinkerGatewayPolicy(opts: { checkpoint?: string; smoke?: boolean; modelName?: string; maxTokens?: number }, overrides: Record<string, string>): Promise<LoadedGatewayPolicy> {
  if (opts.smoke === true) throw new ConfigError(["--smoke: with --policy.backend tinker the server's model is served; drop --smoke"]);
  const config = resolveConfig(applyOverrides({}, overrides));
  const t = config.policy.tinker;
  let tokenizer: Tokenizer;
  let contextLength = config.policy.contextLength;
  if (t.tokenizer !== undefined) tokenizer = loadTokenizer(t.tokenizer);
  else if (opts.checkpoint !== undefined) {
    const p = await loadPolicy(opts.checkpoint);
    tokenizer = p.tokenizer;
    contextLength = p.gpt.contextLength;
    (p.backend as { dispose?: () => void }).dispose?.();
  } else {
    throw new ConfigError(["policy.tinker.tokenizer: with --policy.backend tinker the gateway renders messages with the served model's tokenizer — --policy.tinker.tokenizer <folder with tokenizer.json>, or --checkpoint <dir> for a model the server serves from that checkpoint (arl serve trainer --checkpoint <dir>)"]);
  }
  console.error(`tinker: connecting to ${t.baseUrl} (model ${t.baseModel}; each request retries for ${t.retryForMs} ms while the server is unreachable)`);
  const backend = await createBackend(config, gptConfigOf(config, tokenizer.vocabSize));
  return {
    policy: { name: opts.modelName ?? t.baseModel, sampler: backend.samplingClient(), tokenizer, contextLength, ...(opts.maxTokens ? { maxTokens: opts.maxTokens } : {}) },
    dispose: () => closeBackend(backend),
  };
}

/**
 * An `onRecord` that appends each record as one JSON line to `file` (its folder created).
 * @throws Error when the folder cannot be created
 */
export function jsonlRecorder(file: string): (record: RolloutRecord) => void {
  mkdirSync(dirname(file), { recursive: true });
  return (record) => appendFileSync(file, `${JSON.stringify(record)}\n`);
}

