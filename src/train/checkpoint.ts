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
import { WordTokenizer, type Tokenizer, type TokenizerJson } from "../policy/tokenizer.ts";
import { HfTokenizer } from "../policy/hf/tokenizer.ts";

const sha256 = (text: string) => createHash("sha256").update(text).digest("hex");
/** The files `savePolicy` adds beside the backend's own (which has its own manifest). */
const POLICY_FILES = ["tokenizer.json", "gpt.json"] as const;

/** Saves backend state + tokenizer + model shape under `dir`, with sha256 checksums in `policy-manifest.json`. */
export async function savePolicy(dir: string, backend: TrainingBackend, tokenizer: Tokenizer, gpt: GPTConfig): Promise<void> {
  await backend.save(dir);
  if (tokenizer instanceof HfTokenizer) {
    // A real model's tokenizer: keep its chat template and generation config beside tokenizer.json.
    for (const f of ["tokenizer_config.json", "chat_template.jinja", "generation_config.json"]) {
      if (existsSync(join(tokenizer.sourceDir, f))) writeFileAtomic(join(dir, f), readFileSync(join(tokenizer.sourceDir, f), "utf8"));
    }
  }
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
  /** The world's word tokenizer, or a real model's (a checkpoint of a Tinker run with `policy.tinker.tokenizer`). */
  tokenizer: Tokenizer;
  /** Embedded weights, or — for a folder a Tinker backend saved (`tinker.json`) — a new model on that server loaded with them. */
  backend: TrainingBackend;
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
  const tokJson = readVerified(dir, "tokenizer.json", manifest) as TokenizerJson;
  // The world's word-level vocabulary, or a real model's tokenizer saved by a Tinker run (with its config files).
  const tokenizer: Tokenizer = tokJson.model?.type === "WordPiece" && "<bos>" in (tokJson.model.vocab ?? {}) ? new WordTokenizer(tokJson) : HfTokenizer.fromDir(dir);
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
