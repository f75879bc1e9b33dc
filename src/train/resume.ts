/**
 * `--resume`: whether a run continues the one in its folder (same config, field by field), where it continues from
 * (the warm start's checkpoint, the last good RL checkpoint), and cutting the folder back to that point so the
 * recomputed steps end byte-identical to an uninterrupted run's.
 */
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import type { GPTConfig } from "../policy/embedded/gpt.ts";
import type { Tokenizer } from "../core/tokenizer.ts";
import { checkpointProblem, lastGoodCheckpoint, type ResumePoint } from "./checkpoint.ts";
import { ConfigError, resolveConfig, type ExperimentConfig } from "./config.ts";
import { trainLengthBucket } from "../policy/config.ts";
import { readConfigFile } from "./configFile.ts";
import type { Reporter } from "./reporter.ts";
import { RunDir } from "./runDir.ts";

/** What a checkpoint must match: the model shape and the tokenizer. */
export interface ModelShape {
  gpt: GPTConfig;
  tokenizer: Tokenizer;
}

/** Dotted paths of a JSON value's leaves (`rl.groupSize` → 8); arrays are leaves. */
function leaves(value: unknown, prefix = "", out: Map<string, string> = new Map()): Map<string, string> {
  if (value !== null && typeof value === "object" && !Array.isArray(value)) {
    for (const [k, v] of Object.entries(value)) leaves(v, prefix ? `${prefix}.${k}` : k, out);
  } else if (value !== undefined) {
    out.set(prefix, JSON.stringify(value));
  }
  return out;
}

/**
 * Checks that a run folder's `config.yaml` (as written by `arl train`) resolves to `config`, for `--resume`
 * (`run.dir` and `run.name` may differ: they say where the folder is, so a moved or copied run resumes).
 * @throws ConfigError naming every differing field with both values; Error when the file cannot be read
 */
export function checkSameConfig(file: string, config: ExperimentConfig): void {
  let saved: ExperimentConfig;
  try {
    saved = resolveConfig(readConfigFile(file));
  } catch (e) {
    throw new ConfigError([`${file}: the run folder's config no longer validates (${(e as Error).message.replace(/\n/g, "; ")})`]);
  }
  // The length bucket as the trainer applies it (a folder written before the per-trainer defaults names it); with it
  // and the trainer compared, `jaxLengthBucket` says nothing more (it only feeds the jax-js trainer's default).
  const effective = (c: ExperimentConfig) => ({ ...c, policy: { ...c.policy, lengthBucket: trainLengthBucket(c.policy), jaxLengthBucket: undefined } });
  const a = leaves(JSON.parse(JSON.stringify(effective(saved))));
  const b = leaves(JSON.parse(JSON.stringify(effective(config))));
  const diffs = [...new Set([...a.keys(), ...b.keys()])]
    .filter((k) => k !== "run.dir" && k !== "run.name") // where the folder is, not what it trains (a moved run resumes)
    .filter((k) => a.get(k) !== b.get(k))
    .sort()
    .map((k) => `${k}: the run folder has ${a.get(k) ?? "(unset)"}, this command has ${b.get(k) ?? "(unset)"} (--resume needs the run's own config; pass the same --config and flags)`);
  if (diffs.length > 0) throw new ConfigError(diffs);
}

/**
 * @throws ConfigError when the checkpoint's tokenizer or model shape differs from what `s` builds
 */
export function checkCheckpointShape(dir: string, s: ModelShape): void {
  const gptPath = join(dir, "gpt.json");
  if (existsSync(gptPath)) {
    const saved = JSON.parse(readFileSync(gptPath, "utf8")) as GPTConfig;
    const bad = (Object.keys(s.gpt) as (keyof GPTConfig)[]).filter((k) => saved[k] !== s.gpt[k]).map((k) => `${k} ${saved[k]} vs ${s.gpt[k]}`);
    if (bad.length > 0) {
      throw new ConfigError([`checkpoint ${dir}: gpt.json does not match this config (${bad.join(", ")}; checkpoint vs config)${bad.some((b) => b.startsWith("vocabSize")) ? " — the tokenizer differs (policy.tinker.tokenizer, policy.fixedPrompts, env.options or run.seed changed?)" : ""}`]);
    }
  }
  const tokPath = join(dir, "tokenizer.json");
  if (existsSync(tokPath) && readFileSync(tokPath, "utf8") !== JSON.stringify(s.tokenizer.toJSON())) {
    throw new ConfigError([`checkpoint ${dir}: tokenizer.json differs from this config's tokenizer (${s.tokenizer.vocabSize} tokens): a different vocabulary (policy.tinker.tokenizer, policy.fixedPrompts, env.options or run.seed changed?)`]);
  }
}

/** Where a resumed run starts: the warm start's checkpoint and the last good RL checkpoint, if any. */
export interface ResumePlan {
  /** Whether `checkpoints/sft` is whole (else SFT reruns from scratch). */
  sft: boolean;
  rl?: ResumePoint;
}

/** Finds what `--resume` continues from, reporting bad checkpoints by name through `warn`. */
export function planResume(run: RunDir, s: ModelShape, warn: (m: string) => void): ResumePlan {
  const sftDir = run.checkpoint("sft");
  const sftProblem = checkpointProblem(sftDir);
  if (sftProblem !== undefined) {
    if (existsSync(sftDir)) warn(`checkpoint ${sftDir}: ${sftProblem}; restarting from scratch`);
    return { sft: false };
  }
  checkCheckpointShape(sftDir, s);
  const rl = lastGoodCheckpoint(join(run.path, "checkpoints"), warn);
  if (rl) checkCheckpointShape(rl.dir, s);
  return { sft: true, rl };
}

/**
 * Cuts a run folder back to a resume point: metrics/timings lines of later RL steps (and a torn last line), later
 * detector firings, samples, checkpoints, evaluation samples and the summary are removed — they are recomputed.
 */
export function truncateRun(run: RunDir, plan: ResumePlan): void {
  const k = plan.rl?.state.step ?? 0;
  const keep = (row: Record<string, unknown>): boolean => plan.sft && (row.stage === "sft" || (row.stage === "rl" && typeof row.step === "number" && row.step < k));
  run.truncateJsonl("metrics.jsonl", keep);
  run.truncateJsonl("timings.jsonl", keep);
  run.truncateJsonl("detectors.jsonl", (row) => plan.sft && typeof row.step === "number" && row.step < k);
  run.remove("summary.json");
  for (const f of existsSync(join(run.path, "samples")) ? readdirSync(join(run.path, "samples")) : []) {
    const m = /^step-(\d+)\.jsonl$/.exec(f);
    if (!m || Number(m[1]) >= k || !plan.sft) run.remove(join("samples", f));
  }
  for (const c of existsSync(join(run.path, "checkpoints")) ? readdirSync(join(run.path, "checkpoints")) : []) {
    const m = /^step-(\d+)$/.exec(c);
    const keepIt = plan.sft && (c === "sft" || (m !== null && Number(m[1]) <= k) || (c === "final" && plan.rl?.dir === run.checkpoint("final")));
    if (!keepIt) run.remove(join("checkpoints", c));
  }
}

/**
 * Whether a run continues the one in its folder: `options.resume` and a `config.yaml` there (checked field by field
 * against `config`); a resume with nothing to continue is logged and starts from scratch.
 * @throws ConfigError for `resume` with `overwrite`, or a run folder whose config differs
 */
export function resumeIntent(config: ExperimentConfig, reporter: Reporter, options: { overwrite: boolean; resume?: boolean }): boolean {
  if (options.resume && options.overwrite) throw new ConfigError(["--resume and --overwrite: choose one (resume continues the run in the folder; overwrite replaces it)"]);
  const configFile = join(config.run.dir, config.run.name, "config.yaml");
  const resuming = options.resume === true && existsSync(configFile);
  if (resuming) checkSameConfig(configFile, config);
  else if (options.resume) reporter.log(`resume: ${join(config.run.dir, config.run.name)} holds no run yet; starting from scratch`);
  return resuming;
}

/**
 * Opens (takes) the run folder and, when `resuming`, finds the resume point (bad checkpoints warned by name) and cuts
 * the folder back to it (`truncateRun`), logging where the run continues from.
 * @throws ConfigError from `RunDir` (a run already there without --overwrite, a live lock) or `planResume`
 */
export function openRun(
  config: ExperimentConfig,
  s: ModelShape,
  resuming: boolean,
  reporter: Reporter,
  options: { overwrite: boolean },
): { run: RunDir; plan: ResumePlan } {
  const run = new RunDir(config.run.dir, config.run.name, { overwrite: options.overwrite, resume: resuming, resumable: true, log: (m) => reporter.log(m) });
  let plan: ResumePlan = { sft: false };
  if (resuming) {
    plan = planResume(run, s, (m) => reporter.log(`warning: ${m}`));
    truncateRun(run, plan);
    reporter.log(
      plan.rl
        ? `resuming ${run.path} from ${plan.rl.dir} (RL step ${plan.rl.state.step} of ${config.rl.steps})`
        : plan.sft
          ? `resuming ${run.path} from the warm start (${run.checkpoint("sft")}); RL from step 0`
          : `resuming ${run.path}: no whole checkpoint; starting from scratch`,
    );
  }
  return { run, plan };
}
