/**
 * The one place a run picks its model-math backend (`policy.backend`): the embedded CPU GPT in this process, or any
 * server of the Tinker training API. Everything downstream (SFT, rollout, reward, advantage, update, evaluation)
 * sees only `TrainingBackend`, so the loop is the same line for line on both.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { EmbeddedBackend } from "../policy/embedded/backend.ts";
import type { GPTConfig } from "../policy/embedded/gpt.ts";
import { TinkerBackend } from "../policy/tinker/backend.ts";
import type { TrainingBackend } from "../policy/types.ts";
import type { ExperimentConfig } from "./config.ts";

/**
 * A new backend as the config asks: embedded (fresh weights of `gpt` from `run.seed`, sampling on the
 * `policy.sampler` engine) or a new Tinker model of `policy.tinker.baseModel`; then, when `from` is given, the
 * weights saved there (the embedded files, or the `tinker.json` pointer a Tinker backend's `save` wrote).
 * @throws Error when `from` holds no weights this backend can load, or the Tinker server refuses the model
 */
export async function createBackend(config: ExperimentConfig, gpt: GPTConfig, from?: string): Promise<TrainingBackend> {
  if (config.policy.backend === "embedded") {
    const backend = await EmbeddedBackend.create(gpt, {
      seed: config.run.seed,
      samplerEngine: config.policy.sampler,
      maxTokensPerChunk: config.policy.microBatchTokens,
      lengthBucket: config.policy.lengthBucket,
    });
    if (from) await backend.load(from);
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
