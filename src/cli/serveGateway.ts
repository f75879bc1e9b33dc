/**
 * `arl serve gateway`: the OpenAI-compatible training gateway (src/gateway/) in front of a policy — a checkpoint's
 * embedded policy (`--checkpoint <dir>`, loaded as `arl serve openai` does), a fresh smoke model (`--smoke`: the
 * travel recipe's smoke shape and hermes vocabulary, untrained), or a Tinker server's sampler
 * (`--policy.backend tinker`, `loadTinkerGatewayPolicy`). An agent points its OpenAI base URL at
 * `<url>/rollout/<id>/v1` and reports `POST <url>/rollout/<id>/reward {value, parts?}`.
 *
 * Rollouts are opened with `POST /rollout/<id>/open {meta?, deadline_ms?}` (an external trainer), or, with
 * `--open-on-demand`, by their first chat call (handy for trying an agent by hand; every id an agent invents becomes
 * a rollout). Each resolved rollout (rewarded, or dropped at its deadline / shutdown) is appended as one JSON line
 * (`RolloutRecord`, src/gateway/types.ts) to `--records <file>` when given.
 */
import { appendFileSync, mkdirSync } from "node:fs";
import { dirname } from "node:path";
import type { Command } from "commander";
import { startGateway, type GatewayPolicy } from "../gateway/server.ts";
import type { RolloutRecord } from "../gateway/types.ts";
import { getRecipe } from "../envs/index.ts";
import { EmbeddedBackend } from "../policy/embedded/backend.ts";
import { IM_END } from "../protocol/hermes.ts";
import { withRecipeDefaults } from "../train/recipeDefaults.ts";
import { loadPolicy } from "../train/checkpoint.ts";
import { ConfigError, resolveConfig } from "../train/config.ts";
import { applyOverrides } from "../train/configFile.ts";
import { gptConfigOf, setupExperiment } from "../train/setup.ts";
import { untilSignal } from "../http/server.ts";
import { loadTokenizer } from "../policy/hf/index.ts";
import type { Tokenizer } from "../core/tokenizer.ts";
import { closeBackend, createBackend } from "../train/backends.ts";
import { checkpointModelName, intFlag, serveFlags, serveOptions, type ServeFlags } from "./serveFlags.ts";

/** Flags of `serve gateway`. */
export interface GatewayFlags extends ServeFlags {
  checkpoint?: string;
  smoke?: boolean;
  modelName?: string;
  openOnDemand?: boolean;
  records?: string;
  deadline: string;
  callTimeout: string;
  maxTokens: string;
  seed: string;
}

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

/** Registers `serve gateway` under `serve` (default port 8500). */
export function registerServeGateway(serve: Command, overrides: () => Record<string, string> = () => ({})): void {
  serveFlags(
    serve
      .command("gateway")
      .description("An OpenAI-compatible training gateway: agents call /rollout/<id>/v1/chat/completions and report POST /rollout/<id>/reward; --policy.backend tinker --policy.tinker.baseUrl URL --policy.tinker.baseModel NAME serves a Tinker server's sampler (tokenizer: --policy.tinker.tokenizer DIR, or --checkpoint DIR the server serves)")
      .option("--checkpoint <dir>", "policy checkpoint folder to serve, e.g. runs/travel/checkpoints/final")
      .option("--smoke", "serve a fresh, untrained smoke model (the travel recipe's smoke shape and hermes vocabulary)")
      .option("--model-name <name>", "the model id the gateway reports (default arl/<run>-<checkpoint>, or arl/smoke)")
      .option("--open-on-demand", "open an unknown rollout on its first chat call (otherwise POST /rollout/<id>/open first)")
      .option("--records <file>", "append each finished rollout's record (RolloutRecord) as one JSON line to this file")
      .option("--deadline <ms>", "time a rollout has to be rewarded before it is dropped (ms)", "600000")
      .option("--call-timeout <ms>", "most time one sampling call may take (ms; then 504)", "120000")
      .option("--max-tokens <n>", "completion tokens when a request sends no max_tokens", "512")
      .option("--seed <n>", "base of the sampling seeds of requests that send no seed", "0"),
    8500,
  ).action(async (opts: GatewayFlags) => {
    const options = serveOptions(opts);
    const deadlineMs = intFlag("--deadline", opts.deadline, 1, 2 ** 31 - 1);
    const callTimeoutMs = intFlag("--call-timeout", opts.callTimeout, 1, 2 ** 31 - 1);
    const maxTokens = intFlag("--max-tokens", opts.maxTokens, 1, 2 ** 31 - 1);
    const seed = intFlag("--seed", opts.seed, 0, 2 ** 31 - 2);
    const loaded = await loadGatewayPolicy({ checkpoint: opts.checkpoint, smoke: opts.smoke, modelName: opts.modelName, maxTokens }, overrides());
    if (loaded.warning) console.warn(`warning: ${loaded.warning}`);
    const gateway = await startGateway({
      ...options,
      policy: loaded.policy,
      seed,
      deadlineMs,
      callTimeoutMs,
      openOnDemand: opts.openOnDemand === true,
      ...(opts.records ? { onRecord: jsonlRecorder(opts.records) } : {}),
    });
    console.log(`training gateway at ${gateway.url}  model: ${loaded.policy.name}`);
    console.log(`  agent base URL: ${gateway.url}/rollout/<id>/v1   reward: POST ${gateway.url}/rollout/<id>/reward {"value": …}`);
    if (opts.openOnDemand !== true) console.log(`  open a rollout first: POST ${gateway.url}/rollout/<id>/open {"meta": {…}}`);
    await untilSignal(gateway);
    gateway.registry.close("the gateway shut down before a reward");
    loaded.dispose();
  });
}
