/**
 * `policy.init: base` (issue 32 part 4): an experiment's embedded policy starts from a pretrained base model — the
 * folder `arl pretrain` writes as `<run.dir>/base/` (src/pretrain/pretrain.ts), or the one the package ships — instead
 * of fresh weights and a word tokenizer of the env's texts. The folder holds:
 * - `base.json` — `{format: BASE_FORMAT, config (the GPTConfig, vocabulary included), fingerprint, steps, tokens, …}`;
 * - `tokenizer.json` — the base's byte-level BPE (every protocol's tags and stops are special tokens);
 * - `meta.json`, `tensors.bin`, `manifest.json` — the weights, in the embedded checkpoint format (no Adam moments).
 *
 * `setupExperiment` takes the tokenizer and the model shape from here (`policyBaseOf`), and `createBackend` the
 * weights (`loadBaseWeights`), with a fresh optimizer, when it loads no checkpoint.
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { EmbeddedBackend } from "../policy/embedded/backend.ts";
import { resolveConfig, type GPTConfig } from "../policy/embedded/gpt.ts";
import { baseDirOf } from "../policy/config.ts";
import { HfTokenizer } from "../policy/hf/tokenizer.ts";
import { ConfigError, type ExperimentConfig } from "./config.ts";

/** Format tag of `base.json`. */
export const BASE_FORMAT = "agentic-rl/base@1";

/** The files a base folder must hold (besides what `arl pretrain` may add). */
export const BASE_FILES = ["base.json", "tokenizer.json", "meta.json", "tensors.bin", "manifest.json"] as const;

/** A base folder as an experiment uses it. */
export interface PolicyBase {
  /** The folder (`policy.base`, or the package's). */
  dir: string;
  /** `base.json`'s fingerprint: sha256 (hex) of the tokenizer's bytes then the weights'. */
  fingerprint: string;
  /** The model shape: `base.json`'s `config`, exactly (vocabulary included). */
  gpt: GPTConfig;
  /** The base's tokenizer (`tokenizer.json`; no chat template, BOS or EOS of its own). */
  tokenizer: HfTokenizer;
}

const problem = (dir: string, what: string) => new ConfigError([`policy.base: ${dir}: ${what} (a base folder is what \`arl pretrain\` writes as <run.dir>/base: ${BASE_FILES.join(", ")})`]);

/**
 * Checks that `dir` holds every file of a base folder.
 * @throws ConfigError naming `policy.base`, the folder and the first file missing
 */
export function checkBaseFiles(dir: string): void {
  if (!existsSync(dir)) throw problem(dir, "no such folder");
  const missing = BASE_FILES.find((f) => !existsSync(join(dir, f)));
  if (missing !== undefined) throw problem(dir, `missing ${missing}`);
}

/**
 * Reads a base folder: its `base.json` (format, shape, fingerprint) and its tokenizer. The weights are read later,
 * by {@link loadBaseWeights}.
 * @throws ConfigError naming `policy.base` when the folder or a file is missing, `base.json` is not valid JSON, has
 *   another format or an invalid shape, or the shape's vocabulary differs from the tokenizer's
 */
export function readBase(dir: string): PolicyBase {
  checkBaseFiles(dir);
  let info: { format?: unknown; config?: unknown; fingerprint?: unknown };
  try {
    info = JSON.parse(readFileSync(join(dir, "base.json"), "utf8")) as typeof info;
  } catch (e) {
    throw problem(dir, `base.json is not valid JSON (${(e as Error).message})`);
  }
  if (info === null || typeof info !== "object") throw problem(dir, "base.json is not a JSON object");
  if (info.format !== BASE_FORMAT) throw problem(dir, `base.json has format ${JSON.stringify(info.format)}, expected ${JSON.stringify(BASE_FORMAT)}`);
  if (typeof info.fingerprint !== "string") throw problem(dir, "base.json has no fingerprint");
  const config = info.config;
  if (config === null || typeof config !== "object" || Array.isArray(config)) throw problem(dir, "base.json has no config (the model shape)");
  try {
    resolveConfig(config as GPTConfig);
  } catch (e) {
    throw problem(dir, `base.json's config is not a model shape (${(e as Error).message})`);
  }
  let tokenizer: HfTokenizer;
  try {
    tokenizer = HfTokenizer.fromDir(dir);
  } catch (e) {
    throw problem(dir, `tokenizer.json does not load (${(e as Error).message})`);
  }
  const gpt = { ...config } as GPTConfig;
  if (gpt.vocabSize !== tokenizer.vocabSize) throw problem(dir, `base.json's config has vocabSize ${gpt.vocabSize}, tokenizer.json ${tokenizer.vocabSize} tokens`);
  return { dir, fingerprint: info.fingerprint, gpt, tokenizer };
}

/**
 * The base an experiment starts from: undefined unless `policy.init` is `base` and `policy.backend` is `embedded`
 * (a Tinker server's model is its own start). Reads the folder (`readBase`) and checks the config against it.
 * @throws ConfigError naming `policy.base` (see `readBase`); `policy.contextLength` when it exceeds the base's
 *   context; `policy.sampler` / `policy.trainer` when the base runs on the onnx engines only (RoPE or token shift)
 *   and the field is `jax`
 */
export function policyBaseOf(config: ExperimentConfig): PolicyBase | undefined {
  const p = config.policy;
  if (p.init !== "base" || p.backend !== "embedded") return undefined;
  const base = readBase(baseDirOf(p));
  const problems: string[] = [];
  if (p.contextLength > base.gpt.contextLength) {
    problems.push(`policy.contextLength: ${p.contextLength} exceeds the base model's context of ${base.gpt.contextLength} tokens (policy.base ${base.dir}); allowed: ≤ ${base.gpt.contextLength}`);
  }
  const onnxOnly = base.gpt.positional === "rope" ? "RoPE positions" : base.gpt.tokenShift === true ? "the token shift" : undefined;
  for (const field of ["sampler", "trainer"] as const) {
    if (onnxOnly !== undefined && p[field] === "jax") problems.push(`policy.${field}: the base model (policy.base ${base.dir}) uses ${onnxOnly}, which run on the onnx engines only; got jax, allowed: onnx`);
  }
  if (problems.length > 0) throw new ConfigError(problems);
  return base;
}

/**
 * Loads a base folder's weights into `backend` (weights only: Adam restarts at step 0 with zero moments).
 * @throws ConfigError naming `policy.base` when a file is missing, fails its checksum, holds a non-finite value, or
 *   the saved shape differs from the backend's
 */
export async function loadBaseWeights(backend: EmbeddedBackend, dir: string): Promise<void> {
  checkBaseFiles(dir);
  try {
    await backend.load(dir, { optimizer: false });
  } catch (e) {
    throw problem(dir, `its weights do not load (${(e as Error).message})`);
  }
}
