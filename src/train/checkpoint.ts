/**
 * Policy checkpoints as self-contained folders: the backend's weights and optimizer state (with its own manifest
 * and checksums), plus `tokenizer.json` (Hugging Face format) and `gpt.json` (model shape), so `arl eval` and
 * `arl rollout` can load a policy from the folder alone.
 */
import { existsSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { EmbeddedBackend } from "../policy/embedded/backend.ts";
import type { GPTConfig } from "../policy/embedded/gpt.ts";
import { WordTokenizer, type TokenizerJson } from "../policy/tokenizer.ts";

function writeJsonAtomic(path: string, value: unknown): void {
  writeFileSync(`${path}.tmp`, JSON.stringify(value));
  renameSync(`${path}.tmp`, path);
}

/** Saves backend state + tokenizer + model shape under `dir`. */
export async function savePolicy(dir: string, backend: EmbeddedBackend, tokenizer: WordTokenizer, gpt: GPTConfig): Promise<void> {
  await backend.save(dir);
  writeJsonAtomic(join(dir, "tokenizer.json"), tokenizer.toJSON());
  writeJsonAtomic(join(dir, "gpt.json"), gpt);
}

/** A policy loaded from a checkpoint folder. */
export interface LoadedPolicy {
  backend: EmbeddedBackend;
  tokenizer: WordTokenizer;
  gpt: GPTConfig;
}

/**
 * Loads a policy saved by `savePolicy`.
 * @throws Error naming the folder or file when it is missing or corrupt (checksums are verified by the backend)
 */
export async function loadPolicy(dir: string): Promise<LoadedPolicy> {
  for (const f of ["tokenizer.json", "gpt.json"]) {
    if (!existsSync(join(dir, f))) {
      throw new Error(`checkpoint ${dir}: missing ${f} (expected a folder written by arl train, e.g. runs/default/checkpoints/final)`);
    }
  }
  const tokenizer = new WordTokenizer(JSON.parse(readFileSync(join(dir, "tokenizer.json"), "utf8")) as TokenizerJson);
  const gpt = JSON.parse(readFileSync(join(dir, "gpt.json"), "utf8")) as GPTConfig;
  if (gpt.vocabSize !== tokenizer.vocabSize) {
    throw new Error(`checkpoint ${dir}: gpt.json vocabSize ${gpt.vocabSize} does not match tokenizer.json (${tokenizer.vocabSize} tokens)`);
  }
  const backend = await EmbeddedBackend.create(gpt, 0);
  await backend.load(dir);
  return { backend, tokenizer, gpt };
}
