/**
 * `policy.init: base` (issue 32 part 4): an experiment's embedded policy starts from a pretrained base model — the
 * folder `arl pretrain` writes as `<run.dir>/base/` (src/pretrain/pretrain.ts), or the one the package ships — instead
 * of fresh weights and a word tokenizer of the env's texts. The folder holds:
 * - `base.json` — `{format: BASE_FORMAT, config (the GPTConfig, vocabulary included), fingerprint, steps, tokens, …}`;
 * - `tokenizer.json` — the base's byte-level BPE (every protocol's tags and stops are special tokens);
 * - `meta.json`, `tensors.bin`, `manifest.json` — the weights, in the embedded checkpoint format (no Adam moments).
 *
 * `setupExperiment` takes the tokenizer and the model shape from here (`policyBaseOf`; with `policy.fixedPrompts:
 * token`, `withPromptTokens` adds one learned token per constant system prompt of the env), and `createBackend` the
 * weights (`loadBaseWeights`: the base's, plus one `wte` row per prompt token), with a fresh optimizer, when it loads
 * no checkpoint.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Tokenizer } from "../core/tokenizer.ts";
import type { EmbeddedBackend } from "../policy/embedded/backend.ts";
import { loadCheckpoint, saveCheckpoint } from "../policy/embedded/checkpoint.ts";
import { resolveConfig, type GPTConfig } from "../policy/embedded/gpt.ts";
import { baseDirOf } from "../policy/config.ts";
import { HfTokenizer } from "../policy/hf/tokenizer.ts";
import { ConfigError, type ExperimentConfig } from "./config.ts";

/** Format tag of `base.json`. */
export const BASE_FORMAT = "agentic-rl/base@1";

/**
 * Config defaults of every run that starts from a base (`policy.init: base`), under the recipe's `baseDefaults` and
 * the user's fields: the base's context (its tokens are byte-level BPE pieces: an episode is 1.4–3× as many tokens as
 * under an env's word tokenizer, so the recipes' word-token contexts are too short), and an RL learning rate for a
 * model that starts pretrained — measured on travel from a base: at the from-scratch 1e-3 one RL step took the policy
 * from 0.64 reward to 58 % invalid actions (KL to the warm start 0.018 → 0.72) and RL ended at 0 % success.
 */
export const BASE_START_DEFAULTS: Readonly<Record<string, string>> = { "policy.contextLength": "1024", "rl.learningRate": "1e-4" };

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

/** What a run reads from a base with its learned prompt tokens (`withPromptTokens`). */
export interface PromptTokenBase {
  /** The base's tokenizer plus one added token per prompt, ids `V`, `V + 1`, … (`V` the base's vocabulary). */
  tokenizer: HfTokenizer;
  /** The base's shape with `vocabSize` `V +` the number of prompt tokens. */
  gpt: GPTConfig;
  /** How many prompt tokens were added (0: the base's own tokenizer and shape). */
  promptTokens: number;
}

/**
 * `policy.fixedPrompts: token`: the base's tokenizer with each of the env's constant system prompts
 * (`RecipeInstance.fixedPrompts`: instructions + tool schemas, the same text in every episode) as one added token
 * (`HfTokenizer.withAddedTokens`: an ordinary `tokenizer.json`, so checkpoints save and reload it as any other), and
 * the model shape with that many more `wte` rows. Prompts that are empty, repeated, or already one token of the base
 * add nothing. Measured: travel's prompt is 609 base tokens, complaints' 674, research's 607 — most of the base's
 * 1 024-token context; as one token each episode pays 1.
 * @returns the base's own tokenizer and shape when no prompt needs a token
 */
export function withPromptTokens(base: PolicyBase, prompts: readonly string[]): PromptTokenBase {
  const wanted = prompts.filter((p, i) => p !== "" && prompts.indexOf(p) === i && base.tokenizer.encode(p).length > 1);
  if (wanted.length === 0) return { tokenizer: base.tokenizer, gpt: base.gpt, promptTokens: 0 };
  const tokenizer = base.tokenizer.withAddedTokens(wanted);
  return { tokenizer, gpt: { ...base.gpt, vocabSize: tokenizer.vocabSize }, promptTokens: wanted.length };
}

/**
 * The base's `wte` `[V, D]` grown to `[V + n, D]` for `n` learned prompt tokens: row `V + i` is the mean (in float64,
 * stored as float32) of the base's rows of the base tokens of prompt token `V + i`'s text (`tokenizer.decode`, then the
 * base tokenizer's `encode`); rows `< V` are the base's. Deterministic: same base and prompts, same rows.
 * @param wte the base's `[V * D]` row-major table
 * @throws ConfigError naming `policy.base` when `tokenizer` lacks those ids or a text encodes to no base token
 */
export function promptRows(base: PolicyBase, wte: Float32Array, tokenizer: Tokenizer, vocabSize: number): Float32Array {
  const V = base.gpt.vocabSize;
  const D = wte.length / V;
  if (tokenizer.vocabSize !== vocabSize) throw problem(base.dir, `the run's tokenizer has ${tokenizer.vocabSize} tokens, its model ${vocabSize} (the base's ${V} + prompt tokens)`);
  const out = new Float32Array(vocabSize * D);
  out.set(wte);
  const sum = new Float64Array(D);
  for (let id = V; id < vocabSize; id++) {
    const ids = base.tokenizer.encode(tokenizer.decode([id]));
    if (ids.length === 0) throw problem(base.dir, `prompt token ${id} decodes to no text of the base's tokenizer`);
    sum.fill(0);
    for (const t of ids) for (let d = 0; d < D; d++) sum[d] += wte[t * D + d];
    for (let d = 0; d < D; d++) out[id * D + d] = sum[d] / ids.length;
  }
  return out;
}

/**
 * Loads a base folder's weights into `backend` (weights only: Adam restarts at step 0 with zero moments). A backend
 * with more vocabulary rows than the base (`withPromptTokens`' shape) gets the base's weights with `wte` grown by
 * `promptRows` from `tokenizer` (the run's; it names the prompt tokens' texts), every other tensor as saved.
 * @throws ConfigError naming `policy.base` when a file is missing, fails its checksum, holds a non-finite value, or
 *   the saved shape differs from the backend's (other than the prompt tokens' rows); when the backend has extra rows
 *   and no `tokenizer` of that size is given
 */
export async function loadBaseWeights(backend: EmbeddedBackend, dir: string, tokenizer?: Tokenizer): Promise<void> {
  checkBaseFiles(dir);
  const base = readBase(dir);
  const extra = backend.config.vocabSize - base.gpt.vocabSize;
  let from = dir;
  try {
    if (extra > 0) {
      if (tokenizer === undefined) throw problem(dir, `the model has ${extra} more vocabulary rows than the base and no tokenizer names them (policy.fixedPrompts: token needs setupExperiment's tokenizer)`);
      const { meta, tensors } = await loadCheckpoint(dir);
      const wte = tensors.get("params.wte");
      if (wte === undefined || wte.length !== base.gpt.vocabSize * backend.config.dModel) throw problem(dir, `its weights have no wte of [${base.gpt.vocabSize}, ${backend.config.dModel}]`);
      tensors.set("params.wte", promptRows(base, wte, tokenizer, backend.config.vocabSize));
      // The grown weights go through the checkpoint format, so `load` checks the rest of the shape and every value.
      from = mkdtempSync(join(tmpdir(), "arl-base-prompts-"));
      const params = [...tensors].filter(([name]) => name.startsWith("params."));
      await saveCheckpoint(from, { config: { ...meta.config, vocabSize: backend.config.vocabSize }, adamStep: 0 }, params);
    }
    await backend.load(from, { optimizer: false });
  } catch (e) {
    if (e instanceof ConfigError) throw e;
    throw problem(dir, `its weights do not load (${(e as Error).message.replaceAll(from, dir)})`);
  } finally {
    if (from !== dir) rmSync(from, { recursive: true, force: true });
  }
}
