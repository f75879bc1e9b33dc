/**
 * Policy checkpoints as self-contained folders: the backend's weights and optimizer state (with its own manifest
 * and checksums), plus `tokenizer.json` (Hugging Face format) and `gpt.json` (model shape), so `arl eval` and
 * `arl rollout` can load a policy from the folder alone.
 */
import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { writeFileAtomic } from "./runDir.ts";
import { join } from "node:path";
import { EmbeddedBackend } from "../policy/embedded/backend.ts";
import { TinkerBackend, type TinkerCheckpointPointer } from "../policy/tinker/backend.ts";
import type { TrainingBackend } from "../policy/types.ts";
import type { GPTConfig } from "../policy/embedded/gpt.ts";
import { WordTokenizer, type TokenizerJson } from "../policy/tokenizer.ts";

const sha256 = (text: string) => createHash("sha256").update(text).digest("hex");
/** The files `savePolicy` adds beside the backend's own (which has its own manifest). */
const POLICY_FILES = ["tokenizer.json", "gpt.json"] as const;

/** Saves backend state + tokenizer + model shape under `dir`, with sha256 checksums in `policy-manifest.json`. */
export async function savePolicy(dir: string, backend: TrainingBackend, tokenizer: WordTokenizer, gpt: GPTConfig): Promise<void> {
  await backend.save(dir);
  const texts = { "tokenizer.json": JSON.stringify(tokenizer.toJSON()), "gpt.json": JSON.stringify(gpt) };
  for (const f of POLICY_FILES) writeFileAtomic(join(dir, f), texts[f]);
  writeFileAtomic(join(dir, "policy-manifest.json"), JSON.stringify(Object.fromEntries(POLICY_FILES.map((f) => [f, sha256(texts[f])]))));
}

/** Reads and verifies one of the policy files. @throws Error naming the file when missing, changed or not JSON */
function readVerified(dir: string, file: (typeof POLICY_FILES)[number], manifest: Record<string, string>): unknown {
  const path = join(dir, file);
  if (!existsSync(path)) {
    throw new Error(`checkpoint ${dir}: missing ${file} (expected a folder written by arl train, e.g. runs/default/checkpoints/final)`);
  }
  const text = readFileSync(path, "utf8");
  if (manifest[file] !== sha256(text)) throw new Error(`checkpoint ${dir}: ${file} does not match its checksum in policy-manifest.json (corrupt or edited)`);
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new Error(`checkpoint ${dir}: ${file} is not valid JSON (${(e as Error).message})`);
  }
}

/** A policy loaded from a checkpoint folder. */
export interface LoadedPolicy {
  /** Embedded weights, or — for a folder a Tinker backend saved (`tinker.json`) — a new model on that server loaded with them. */
  backend: TrainingBackend;
  tokenizer: WordTokenizer;
  gpt: GPTConfig;
}

/**
 * Loads a policy saved by `savePolicy` (a Tinker checkpoint needs its server running; the key from `TINKER_API_KEY`).
 * @throws Error naming the folder or file when it is missing or corrupt (checksums are verified by the backend)
 */
export async function loadPolicy(dir: string): Promise<LoadedPolicy> {
  if (!existsSync(dir)) throw new Error(`checkpoint ${dir}: no such folder (e.g. runs/default/checkpoints/final)`);
  const manifestPath = join(dir, "policy-manifest.json");
  if (!existsSync(manifestPath)) throw new Error(`checkpoint ${dir}: missing policy-manifest.json (not a folder written by arl train)`);
  let manifest: Record<string, string>;
  try {
    manifest = JSON.parse(readFileSync(manifestPath, "utf8")) as Record<string, string>;
  } catch (e) {
    throw new Error(`checkpoint ${dir}: policy-manifest.json is not valid JSON (${(e as Error).message})`);
  }
  const tokenizer = new WordTokenizer(readVerified(dir, "tokenizer.json", manifest) as TokenizerJson);
  const gpt = readVerified(dir, "gpt.json", manifest) as GPTConfig;
  if (gpt.vocabSize !== tokenizer.vocabSize) {
    throw new Error(`checkpoint ${dir}: gpt.json vocabSize ${gpt.vocabSize} does not match tokenizer.json (${tokenizer.vocabSize} tokens)`);
  }
  const pointerPath = join(dir, "tinker.json");
  if (existsSync(pointerPath)) {
    const pointer = JSON.parse(readFileSync(pointerPath, "utf8")) as TinkerCheckpointPointer;
    const backend = await TinkerBackend.create({ baseUrl: pointer.baseUrl, baseModel: pointer.baseModel, apiKey: process.env.TINKER_API_KEY });
    await backend.load(dir);
    return { backend, tokenizer, gpt };
  }
  const backend = await EmbeddedBackend.create(gpt, 0);
  await backend.load(dir);
  return { backend, tokenizer, gpt };
}
