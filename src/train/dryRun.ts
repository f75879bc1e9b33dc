/**
 * `arl train --dry-run`: validates everything a run needs without training or writing anything — the resolved config
 * and reward, the recipe and its options, the tokenizer, the embedded model's memory, the warm-start demonstrations,
 * the Tinker server (when `policy.backend` is tinker), data files, the run folder and (with `resume`) its config and
 * checkpoints.
 */
import { existsSync, statSync } from "node:fs";
import { join } from "node:path";
import type { EnvRecipe } from "../env/recipe.ts";
import { unusedAlgorithmWarning } from "../algo/config.ts";
import { tinkerFamilyProblem } from "./backendAlgorithm.ts";
import { loadCorpus, loadQA } from "../retrieval/corpus.ts";
import { tinkerServerFamily } from "./backends.ts";
import { checkpointProblem, lastGoodCheckpoint } from "./checkpoint.ts";
import { ConfigError, type ExperimentConfig } from "./config.ts";
import { rewardConfigOf } from "../reward/config.ts";
import { trainLengthBucket } from "../policy/config.ts";
import { memoryLine, memoryWarning } from "./memoryReport.ts";
import { checkCheckpointShape, checkSameConfig } from "./resume.ts";
import { lockHolder } from "./runDir.ts";
import { planRunFolder } from "./runFolder.ts";
import { checkMemory, evalTasks, promptTokensNote, setupExperiment, unknownTokenWarning, type Setup } from "./setup.ts";
import { warmStartDemos } from "./warmStart.ts";

/** A tiny fetch with a timeout, for the dry run's reachability check. */
async function reachable(url: string, timeoutMs: number): Promise<string | undefined> {
  try {
    const r = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
    return r.ok ? undefined : `GET ${url} answered HTTP ${r.status}`;
  } catch (e) {
    const err = e as Error & { cause?: { code?: string; message?: string } };
    return `GET ${url} failed (${err.name === "TimeoutError" ? `no answer in ${timeoutMs} ms` : (err.cause?.code ?? err.cause?.message ?? err.message)})`;
  }
}

/**
 * Checks a data file is a non-empty QA (`kind: "data"`) or corpus (`kind: "corpus"`) JSONL file.
 * @returns the number of records @throws ConfigError naming the flag, the file and what was expected
 */
export async function checkDataFile(file: string, kind: "data" | "corpus"): Promise<number> {
  const flag = `--${kind}`;
  const expected = kind === "data" ? "a QA JSONL file (FlashRAG, NQ-open or Bamboogle lines)" : "a wiki-18 JSONL file ({id, contents} lines)";
  if (!existsSync(file)) throw new ConfigError([`${flag}: no such file ${file} (expected ${expected})`]);
  if (!statSync(file).isFile()) throw new ConfigError([`${flag}: ${file} is not a file (expected ${expected})`]);
  let n: number;
  try {
    n = kind === "data" ? (await loadQA(file)).length : (await loadCorpus(file)).length;
  } catch (e) {
    throw new ConfigError([`${flag}: ${(e as Error).message}`]);
  }
  if (n === 0) throw new ConfigError([`${flag}: ${file} is empty (expected ${expected}, at least one line)`]);
  return n;
}

/** Checks a real model's tokenizer folder (`policy.tinker.tokenizer`). @throws ConfigError naming the field */
function checkTokenizerFolder(config: ExperimentConfig): void {
  const tok = config.policy.tinker.tokenizer;
  if (config.policy.backend !== "tinker" || tok === undefined) return;
  if (!existsSync(tok) || !statSync(tok).isDirectory()) {
    throw new ConfigError([`policy.tinker.tokenizer: no such folder ${tok} (expected a folder with tokenizer.json and tokenizer_config.json)`]);
  }
  if (!existsSync(join(tok, "tokenizer.json"))) throw new ConfigError([`policy.tinker.tokenizer: ${tok} has no tokenizer.json (expected a Hugging Face tokenizer folder)`]);
}

/**
 * The Tinker server answers and its family has the configured RL loss (`tinkerFamilyProblem`), as a run would detect.
 * @returns the summary line @throws ConfigError naming `policy.tinker.baseUrl` or `rl.<field>`
 */
async function checkTinker(config: ExperimentConfig): Promise<string> {
  const url = `${config.policy.tinker.baseUrl.replace(/\/+$/, "")}/api/v1/healthz`;
  const problem = await reachable(url, 5000);
  if (problem !== undefined) throw new ConfigError([`policy.tinker.baseUrl: ${config.policy.tinker.baseUrl} is not reachable: ${problem} (expected a Tinker API server, e.g. \`arl serve trainer\`)`]);
  // The server's family decides which RL losses it has: detected here as a run would, so --dry-run refuses what
  // the first update would (e.g. gspo on a server without it).
  const family = await tinkerServerFamily(config);
  const lossProblem = config.rl.steps > 0 ? tinkerFamilyProblem(config.rl, family) : undefined;
  if (lossProblem !== undefined) throw new ConfigError([`rl.${lossProblem.field}: ${lossProblem.message}`]);
  return `tinker: ${config.policy.tinker.baseUrl} reachable (a ${family} server; rl.lossFn ${config.rl.lossFn} is one of its losses)`;
}

/**
 * The run folder as a run would take it (a run already in it, a live process holding it, a folder arl did not write)
 * and, with `resume`, its config and checkpoints (checksums, tokenizer and model shape).
 * @returns summary lines @throws ConfigError naming the folder or field
 */
function checkRunFolder(config: ExperimentConfig, s: Setup, options: { resume?: boolean; overwrite?: boolean }): string[] {
  const folder = join(config.run.dir, config.run.name);
  const configFile = join(folder, "config.yaml");
  const holder = existsSync(configFile) ? lockHolder(folder) : undefined;
  if (holder !== undefined) throw new ConfigError([`run.name: run folder ${folder} is in use by process ${holder} (another arl train/lab); wait for it or stop it (remove ${join(folder, ".lock")} only if that process is gone)`]);
  // The same decision RunDir makes (src/train/runFolder.ts): refuses system folders and folders arl did not write.
  const planned = planRunFolder(config.run.dir, config.run.name, { overwrite: options.overwrite, resume: options.resume === true && existsSync(configFile), resumable: true });
  if (!(options.resume && existsSync(configFile))) return [`run folder: ${planned.describe}`];
  checkSameConfig(configFile, config);
  const warnings: string[] = [];
  const sftDir = join(folder, "checkpoints", "sft");
  const sftProblem = checkpointProblem(sftDir);
  let from = "scratch (no whole warm-start checkpoint)";
  if (sftProblem === undefined) {
    checkCheckpointShape(sftDir, s);
    const rl = lastGoodCheckpoint(join(folder, "checkpoints"), (m) => warnings.push(m));
    if (rl) checkCheckpointShape(rl.dir, s);
    from = rl ? `${rl.dir} (RL step ${rl.state.step} of ${config.rl.steps})` : `the warm start (${sftDir})`;
  } else if (existsSync(sftDir)) {
    warnings.push(`checkpoint ${sftDir}: ${sftProblem}`);
  }
  return [...warnings.map((w) => `warning: ${w}`), `resume: would continue ${folder} from ${from}`];
}

/**
 * `arl train --dry-run` on a recipe (see the file doc).
 * @returns lines of a short summary
 * @throws ConfigError naming the field, file or checkpoint and what was expected
 */
export async function dryRun(
  config: ExperimentConfig,
  recipe: EnvRecipe,
  options: { resume?: boolean; overwrite?: boolean; data?: string; corpus?: string } = {},
): Promise<string[]> {
  checkTokenizerFolder(config);
  const s = setupExperiment(config, recipe);
  const lines = [`env ${recipe.name} (${s.protocol.name}): ${s.instance.describe()}; ${s.instance.train.length} train / ${s.instance.test.length} test tasks (${evalTasks(s, config).length} evaluated)`];
  if (s.instance.train.length === 0 || s.instance.test.length === 0) throw new ConfigError([`env.options: the ${recipe.name} env built ${s.instance.train.length} train / ${s.instance.test.length} test tasks; both must be ≥ 1`]);
  const tok = config.policy.backend === "tinker" ? config.policy.tinker.tokenizer : undefined;
  const padding = config.policy.backend === "embedded" ? `, training lengths padded to multiples of ${trainLengthBucket(config.policy)} (${config.policy.trainer} trainer)` : "";
  const source = tok !== undefined ? ` from ${tok}` : s.base !== undefined ? ` from the base ${s.base.dir}${promptTokensNote(s.base.promptTokens)}` : " (the env's words)";
  const model = s.base !== undefined ? `base model ${s.gpt.nLayers}×${s.gpt.dModel} (fingerprint ${s.base.fingerprint.slice(0, 12)}, its context ${s.gpt.contextLength})` : `model ${config.policy.nLayers}×${config.policy.dModel}`;
  lines.push(`tokenizer: ${s.tokenizer.vocabSize} tokens${source}; ${model}, context ${config.policy.contextLength}${padding}`);
  const mem = checkMemory(config, s);
  if (mem !== undefined) {
    // The figure the run warns with (./memoryReport.ts), and the warning itself when it is past the limit.
    lines.push(memoryLine(mem));
    const warning = memoryWarning(mem);
    if (warning !== undefined) lines.push(`warning: ${warning}`);
  }
  if (config.sft.steps > 0) {
    const demos = await warmStartDemos(s, config);
    if (demos.length === 0) throw new ConfigError([`sft: no warm-start demonstrations (expected ≥ 1; check sft.demosPerTask and sft.personas)`]);
    lines.push(`warm start: ${demos.length} demonstrations, ${config.sft.steps} SFT steps`);
    const unknown = unknownTokenWarning(s, demos);
    if (unknown !== undefined) lines.push(`warning: ${unknown}`);
  }
  lines.push(`RL: ${config.rl.steps} steps × ${config.rl.tasksPerStep} tasks × ${config.rl.groupSize} episodes; reward ${Object.entries(rewardConfigOf(config).weights).map(([t, w]) => `${t} ${w}`).join(", ")}`);
  const unusedWarning = unusedAlgorithmWarning(config);
  if (unusedWarning !== undefined) lines.push(`warning: ${unusedWarning}`);
  if (config.policy.backend === "tinker") lines.push(await checkTinker(config));
  if (options.data !== undefined) lines.push(`data: ${await checkDataFile(options.data, "data")} questions in ${options.data}`);
  if (options.corpus !== undefined) lines.push(`corpus: ${await checkDataFile(options.corpus, "corpus")} passages in ${options.corpus}`);
  lines.push(...checkRunFolder(config, s, options));
  return lines;
}
