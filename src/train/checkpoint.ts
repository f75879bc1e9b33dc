/**
 * Policy checkpoints as self-contained folders: the backend's weights and optimizer state (with its own manifest
 * and checksums), plus `tokenizer.json` (Hugging Face format) and `gpt.json` (model shape), so `arl eval` and
 * `arl rollout` can load a policy from the folder alone.
 */
import { createHash } from "node:crypto";
import { existsSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { writeFileAtomic } from "./runDir.ts";
import { join } from "node:path";
import { EmbeddedBackend } from "../policy/embedded/backend.ts";
import { TinkerBackend, type TinkerCheckpointPointer } from "../policy/tinker/backend.ts";
import type { TrainingBackend } from "../core/training.ts";
import type { GPTConfig } from "../policy/embedded/gpt.ts";
import { WordTokenizer, type TokenizerJson } from "../policy/tokenizer.ts";
import type { Tokenizer } from "../core/tokenizer.ts";
import { HfTokenizer } from "../policy/hf/tokenizer.ts";

const sha256 = (text: string) => createHash("sha256").update(text).digest("hex");
/** The files `savePolicy` adds beside the backend's own (which has its own manifest). */
const POLICY_FILES = ["tokenizer.json", "gpt.json"] as const;

/**
 * Saves backend state + tokenizer + model shape under `dir`, with sha256 checksums in `policy-manifest.json`.
 * Every file goes through temp file + rename; `policy-manifest.json` is removed first and written last, so a folder
 * without it (or whose files do not match it) is an incomplete checkpoint.
 * @param extra more text files to write and checksum (e.g. `trainer-state.json` of a resumable RL checkpoint)
 */
export async function savePolicy(dir: string, backend: TrainingBackend, tokenizer: Tokenizer, gpt: GPTConfig, extra: Record<string, string> = {}): Promise<void> {
  rmSync(join(dir, "policy-manifest.json"), { force: true });
  await backend.save(dir);
  if (tokenizer instanceof HfTokenizer) {
    // A real model's tokenizer: keep its chat template and generation config beside tokenizer.json.
    for (const f of ["tokenizer_config.json", "chat_template.jinja", "generation_config.json"]) {
      if (existsSync(join(tokenizer.sourceDir, f))) writeFileAtomic(join(dir, f), readFileSync(join(tokenizer.sourceDir, f), "utf8"));
    }
  }
  const texts: Record<string, string> = { "tokenizer.json": JSON.stringify(tokenizer.toJSON()), "gpt.json": JSON.stringify(gpt), ...extra };
  for (const [f, text] of Object.entries(texts)) writeFileAtomic(join(dir, f), text);
  writeFileAtomic(join(dir, "policy-manifest.json"), JSON.stringify(Object.fromEntries(Object.entries(texts).map(([f, text]) => [f, sha256(text)]))));
}

/**
 * Checks a checkpoint folder without loading it: `policy-manifest.json` present and valid, every file it lists
 * matching its sha256, and the backend's own files — the embedded `manifest.json` and every file it lists (weights,
 * Adam state), or a Tinker `tinker.json` pointer.
 * @returns undefined when whole, else what is wrong, naming the file (e.g. `tensors.bin does not match its checksum`)
 */
export function checkpointProblem(dir: string): string | undefined {
  if (!existsSync(dir)) return "no such folder";
  const readManifest = (file: string): Record<string, string> | string => {
    const path = join(dir, file);
    if (!existsSync(path)) return `missing ${file} (incomplete: the save did not finish)`;
    try {
      const value = JSON.parse(readFileSync(path, "utf8")) as unknown;
      if (value === null || typeof value !== "object") return `${file} is not a JSON object`;
      return value as Record<string, string>;
    } catch (e) {
      return `${file} is not valid JSON (${(e as Error).message})`;
    }
  };
  const checkFiles = (files: Record<string, unknown>, manifest: string): string | undefined => {
    for (const [f, expected] of Object.entries(files)) {
      const path = join(dir, f);
      if (!existsSync(path)) return `missing ${f} (listed in ${manifest})`;
      if (typeof expected !== "string" || createHash("sha256").update(readFileSync(path)).digest("hex") !== expected) {
        return `${f} does not match its checksum in ${manifest} (corrupt or truncated)`;
      }
    }
    return undefined;
  };
  const policy = readManifest("policy-manifest.json");
  if (typeof policy === "string") return policy;
  for (const f of POLICY_FILES) if (!(f in policy)) return `policy-manifest.json lists no checksum for ${f}`;
  const bad = checkFiles(policy, "policy-manifest.json");
  if (bad) return bad;
  if (existsSync(join(dir, "tinker.json"))) return undefined;
  const backend = readManifest("manifest.json");
  if (typeof backend === "string") return backend;
  const files = (backend as { files?: Record<string, unknown> }).files;
  if (!files || typeof files !== "object" || Object.keys(files).length === 0) return "manifest.json lists no files";
  return checkFiles(files, "manifest.json");
}

/** Format tag of `trainer-state.json`. */
export const TRAINER_STATE_FORMAT = "agentic-rl/trainer-state@1";

/**
 * What an RL checkpoint holds besides the policy, so training resumes exactly where it stopped
 * (`checkpoints/step-<n>/trainer-state.json`, checksummed in `policy-manifest.json`).
 */
export interface TrainerState {
  format: typeof TRAINER_STATE_FORMAT;
  /** RL steps completed (the next step to run). */
  step: number;
  /** State of the RL data generator (world pick, task order, sampling seeds): `Rng.getState()`. */
  rngState: number;
  /** State of the PPO-ptx replay generator. */
  replayRngState: number;
  /**
   * Metrics of every completed step, in order (non-finite values as null). The detector monitor is rebuilt by
   * replaying them (its state is a pure function of this sequence), and `trainRl` returns them.
   */
  steps: Array<Record<string, number | null>>;
  /** Non-finite (skipped) steps in a row at the end. */
  nonFiniteRun: number;
  /** Whether the reward-error warning was already given. */
  warnedRewardErrors: boolean;
}

/** Serialises a trainer state (JSON; NaN/Inf become null). */
export function trainerStateText(state: TrainerState): string {
  return JSON.stringify(state);
}

/**
 * Reads `trainer-state.json` of a checkpoint (the caller has verified its checksum with `checkpointProblem`).
 * @throws Error naming the file when it is missing, not JSON or of another format
 */
export function readTrainerState(dir: string): TrainerState {
  const path = join(dir, "trainer-state.json");
  if (!existsSync(path)) throw new Error(`checkpoint ${dir}: missing trainer-state.json (not a resumable RL checkpoint)`);
  let state: TrainerState;
  try {
    state = JSON.parse(readFileSync(path, "utf8")) as TrainerState;
  } catch (e) {
    throw new Error(`checkpoint ${dir}: trainer-state.json is not valid JSON (${(e as Error).message})`);
  }
  if (state.format !== TRAINER_STATE_FORMAT) throw new Error(`checkpoint ${dir}: trainer-state.json has format ${JSON.stringify(state.format)}, expected ${TRAINER_STATE_FORMAT}`);
  if (!Number.isInteger(state.step) || state.step < 0 || state.steps.length !== state.step) {
    throw new Error(`checkpoint ${dir}: trainer-state.json step ${state.step} does not match its ${state.steps?.length} step metrics`);
  }
  return state;
}

/** A checkpoint `arl train --resume` continues from. */
export interface ResumePoint {
  /** The checkpoint folder. */
  dir: string;
  state: TrainerState;
}

/**
 * The last good RL checkpoint under `checkpointsDir`: `final` and `step-<n>` folders, newest first, each verified
 * (`checkpointProblem`) and holding a `trainer-state.json`; bad ones are reported through `warn` by name with the
 * one used instead (`checkpoint runs/x/checkpoints/step-20: tensors.bin does not match its checksum …; using step-10`).
 * @returns undefined when no good RL checkpoint exists
 */
export function lastGoodCheckpoint(checkpointsDir: string, warn: (message: string) => void): ResumePoint | undefined {
  if (!existsSync(checkpointsDir)) return undefined;
  const candidates = readdirSync(checkpointsDir)
    .map((name) => ({ name, step: name === "final" ? Infinity : /^step-(\d+)$/.test(name) ? Number(name.slice(5)) : -1 }))
    .filter((c) => c.step >= 0)
    .sort((a, b) => b.step - a.step);
  const bad: string[] = [];
  let found: ResumePoint | undefined;
  for (const c of candidates) {
    const dir = join(checkpointsDir, c.name);
    let problem = checkpointProblem(dir);
    if (problem === undefined && !existsSync(join(dir, "trainer-state.json"))) problem = "no trainer-state.json (not a resumable RL checkpoint)";
    if (problem === undefined) {
      try {
        found = { dir, state: readTrainerState(dir) };
        break;
      } catch (e) {
        problem = (e as Error).message.replace(`checkpoint ${dir}: `, "");
      }
    }
    bad.push(`checkpoint ${dir}: ${problem}`);
  }
  const using = found ? `using ${found.dir.slice(checkpointsDir.length + 1)}` : "no earlier checkpoint; RL restarts from the warm start";
  for (const b of bad) warn(`${b}; ${using}`);
  return found;
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
 * `options.sampler`: the embedded backend's sampling engine (`policy.sampler`; default "onnx").
 * @throws Error naming the folder or file when it is missing or corrupt (checksums are verified by the backend)
 */
export async function loadPolicy(dir: string, options: { sampler?: "jax" | "onnx" } = {}): Promise<LoadedPolicy> {
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
    let pointer: TinkerCheckpointPointer;
    try {
      pointer = JSON.parse(readFileSync(pointerPath, "utf8")) as TinkerCheckpointPointer;
    } catch (e) {
      throw new Error(`checkpoint ${dir}: tinker.json is not valid JSON (${(e as Error).message})`);
    }
    const backend = await TinkerBackend.create({ baseUrl: pointer.baseUrl, baseModel: pointer.baseModel, apiKey: process.env.TINKER_API_KEY });
    await backend.load(dir);
    return { backend, tokenizer, gpt };
  }
  const backend = await EmbeddedBackend.create(gpt, { seed: 0, samplerEngine: options.sampler ?? "onnx" });
  await backend.load(dir);
  return { backend, tokenizer, gpt };
}
