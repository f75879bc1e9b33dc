/**
 * The one place a run picks its model-math backend (`policy.backend`): the embedded CPU GPT in this process, or any
 * server of the Tinker training API. Everything downstream (SFT, rollout, reward, advantage, update, evaluation)
 * sees only `TrainingBackend`, so the loop is the same line for line on both.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { EmbeddedBackend } from "../policy/embedded/backend.ts";
import type { GPTConfig } from "../policy/embedded/gpt.ts";
import { TinkerBackend, TINKER_SDK_WIRE_VERSION } from "../policy/tinker/backend.ts";
import { TinkerClient } from "../policy/tinker/client.ts";
import { detectFamily, type TinkerServerFamily } from "../policy/tinker/families.ts";
import type { Tokenizer } from "../core/tokenizer.ts";
import type { TrainingBackend } from "../core/training.ts";
import { tinkerFamilyProblem } from "./backendAlgorithm.ts";
import { ConfigError, type ExperimentConfig } from "./config.ts";
import { baseDirOf, trainLengthBucket } from "../policy/config.ts";
import { loadBaseWeights } from "./base.ts";

/**
 * A new backend as the config asks: embedded (fresh weights of `gpt` from `run.seed`, sampling on the
 * `policy.sampler` engine) or a new Tinker model of `policy.tinker.baseModel`; then, when `from` is given, the
 * weights saved there (the embedded files, or the `tinker.json` pointer a Tinker backend's `save` wrote). Without
 * `from`, an embedded backend with `policy.init: base` loads the base's weights (`policy.base`; weights only, a fresh
 * optimizer); `gpt` must then be the base's shape (`setupExperiment`'s `gpt`), and when that shape has learned
 * prompt tokens past the base's vocabulary (`policy.fixedPrompts: token`), `tokenizer` must be the run's
 * (`setupExperiment`'s), which names them: their `wte` rows start as the mean of their texts' base-token rows.
 * @throws Error when `from` holds no weights this backend can load, or the Tinker server refuses the model;
 *   ConfigError `rl.<field>: …` when `rl.steps` > 0 and the detected Tinker server lacks the RL loss
 *   (`tinkerFamilyProblem`); ConfigError naming `policy.base` when the base's weights are missing, corrupt or of
 *   another shape than `gpt` (but for prompt tokens that `tokenizer` names)
 */
export async function createBackend(config: ExperimentConfig, gpt: GPTConfig, from?: string, tokenizer?: Tokenizer): Promise<TrainingBackend> {
  if (config.policy.backend === "embedded") {
    const backend = await EmbeddedBackend.create(gpt, {
      seed: config.run.seed,
      samplerEngine: config.policy.sampler,
      trainerEngine: config.policy.trainer,
      maxTokensPerChunk: config.policy.microBatchTokens,
      lengthBucket: trainLengthBucket(config.policy),
    });
    try {
      if (from) await backend.load(from);
      else if (config.policy.init === "base") await loadBaseWeights(backend, baseDirOf(config.policy), tokenizer);
    } catch (e) {
      backend.dispose();
      throw e;
    }
    return backend;
  }
  const t = config.policy.tinker;
  const backend = await TinkerBackend.create({
    baseUrl: t.baseUrl,
    apiKey: process.env[t.apiKeyEnv],
    baseModel: t.baseModel,
    loraRank: t.loraRank,
    timeoutMs: t.timeoutMs,
    retryForMs: t.retryForMs,
    sendStopStrings: t.sendStopStrings,
    wire: t.wire,
    server: t.server,
    userMetadata: { run: config.run.name },
  });
  // What this server lacks is a config error now, before a warm start or evaluation is spent (the family is known
  // only once detected, unless policy.tinker.server names it: then the config check already refused it).
  const problem = config.rl.steps > 0 ? tinkerFamilyProblem(config.rl, backend.family) : undefined;
  if (problem !== undefined) {
    backend.close();
    throw new ConfigError([`rl.${problem.field}: ${problem.message}`]);
  }
  if (from) {
    if (!existsSync(join(from, "tinker.json"))) {
      throw new Error(`checkpoint ${from}: no tinker.json — policy.backend is tinker, but this checkpoint was written by the embedded backend (serve it with \`arl serve trainer --checkpoint ${from}\` and set policy.tinker.baseModel)`);
    }
    await backend.load(from);
  }
  return backend;
}

/** Releases what a backend holds open (a Tinker session's heartbeats). */
export function closeBackend(backend: TrainingBackend): void {
  if (backend instanceof TinkerBackend) backend.close();
}

/**
 * The family of the config's Tinker server: `policy.tinker.server` when it names one, else detected as
 * `TinkerBackend.create` detects it (`client/config`, then `detectFamily`'s probes), without opening a session.
 * @throws TinkerApiError when the server does not answer
 */
export async function tinkerServerFamily(config: ExperimentConfig): Promise<TinkerServerFamily> {
  const t = config.policy.tinker;
  if (t.server !== "auto") return t.server;
  const client = new TinkerClient({ baseUrl: t.baseUrl, apiKey: process.env[t.apiKeyEnv], timeoutMs: Math.min(t.timeoutMs, 10_000), retryForMs: 0 });
  try {
    return await detectFamily(client, await client.clientConfig(TINKER_SDK_WIRE_VERSION));
  } finally {
    client.close();
  }
}
