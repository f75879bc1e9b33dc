/**
 * The one experiment runner, for every env: build the recipe → warm start (SFT on its demonstrations) → the baseline
 * and warm-start rows → RL (`trainRl`) → the RL row; every artefact goes to the run folder. `arl train`, the library's
 * `train()` and (through its parts) `arl lab` run this; the recipe is the only thing that knows the env.
 */
import type { Trajectory } from "../core/types.ts";
import type { EnvRecipe } from "../env/recipe.ts";
import { trajectoryToDatum } from "../algo/datum.ts";
import { unusedAlgorithmWarning } from "../algo/config.ts";
import { createBackend } from "./backends.ts";
import type { ExperimentConfig } from "./config.ts";
import { memoryWarning } from "./memoryReport.ts";
import { silentReporter, type Reporter } from "./reporter.ts";
import { openRun, resumeIntent } from "./resume.ts";
import { rlPolicyLabel, slug, trainRl, type RlWorld } from "./rlLoop.ts";
import { checkMemory, checkReward, evalTasks, promptTokensNote, setupExperiment, unknownTokenWarning, type Setup } from "./setup.ts";
import { baselineAgents, evalRow, policyAgent, type ExperimentSummary, type SummaryRow } from "./summary.ts";
import { warmStart, warmStartDemos } from "./warmStart.ts";

/** How a run treats the folder it writes: replace a finished run (`overwrite`) or continue it (`resume`). */
export interface RunOptions {
  overwrite: boolean;
  resume?: boolean;
}

/** The RL worlds of a recipe: the real one and `rl.counterfactualWorlds` copies, each with its training tasks. */
export function rlWorlds(s: Pick<Setup, "instance">, config: ExperimentConfig): RlWorld[] {
  const { instance } = s;
  return Array.from({ length: config.rl.counterfactualWorlds + 1 }, (_, k) => ({ train: instance.trainTasks?.(k) ?? instance.train, makeEnv: instance.makeEnv(k) }));
}

/** The datums replayed with `rl.ptxCoef` during RL: the recipe's `replay` pick of the demonstrations (else none). */
export function replayDatums(s: Pick<Setup, "instance">, demos: readonly Trajectory[]) {
  return (s.instance.replay?.(demos) ?? []).map((t) => trajectoryToDatum(t, 0));
}

/**
 * Runs the whole experiment on a recipe: SFT on its demonstrations, the baseline and warm-start rows, RL, the RL row;
 * writes the run folder (config, metrics, timings, samples, checkpoints, summary). With `resume`, continues the run
 * already in the folder (same config, checked field by field) from its last good RL checkpoint, else its warm start,
 * else from scratch; `metrics.jsonl` then ends byte-identical to an uninterrupted run's.
 * @throws ConfigError on a bad config (before the run folder is touched: reward terms, protocol, env options, a model
 *   too large for the embedded backend), a different config under `resume`, or a checkpoint of another shape; Error on
 *   a broken trajectory invariant; NonFiniteError when training meets NaN/Inf `rl.maxNonFiniteSteps` steps in a row
 */
export async function runExperiment(config: ExperimentConfig, recipe: EnvRecipe, reporter: Reporter = silentReporter, options: RunOptions = { overwrite: false }): Promise<ExperimentSummary> {
  checkReward(config); // before the run folder exists, so a bad config leaves nothing behind
  const resuming = resumeIntent(config, reporter, options);
  const s = setupExperiment(config, recipe);
  // A model too large for the embedded backend is refused before the run folder is touched.
  const warning = memoryWarning(checkMemory(config, s));
  if (warning !== undefined) reporter.log(`warning: ${warning}`);
  const unusedWarning = unusedAlgorithmWarning(config);
  if (unusedWarning !== undefined) reporter.log(`warning: ${unusedWarning}`);
  const { run, plan } = openRun(config, s, resuming, reporter, options);
  run.writeConfig(config);
  reporter.log(`env ${recipe.name} (${s.protocol.name}): ${s.instance.describe()}; ${s.instance.train.length} train / ${s.instance.test.length} test tasks; vocabulary ${s.tokenizer.vocabSize} tokens${s.base !== undefined ? ` (base ${s.base.dir}, fingerprint ${s.base.fingerprint.slice(0, 12)}${promptTokensNote(s.base.promptTokens)})` : ""}`);
  const demos = await warmStartDemos(s, config);
  reporter.log(`warm start: ${demos.length} demonstrations`);
  const unknown = unknownTokenWarning(s, demos);
  if (unknown !== undefined) reporter.log(`warning: ${unknown}`);
  const backend = plan.sft ? await createBackend(config, s.gpt, run.checkpoint("sft")) : await warmStart(s, config, demos, run, reporter);

  const tasks = evalTasks(s, config);
  const rows: Array<{ row: SummaryRow; trajectories: Trajectory[] }> = [];
  for (const b of baselineAgents(backend, s, config)) rows.push(await evalRow(b.label, b.agent, tasks, { setup: s, config, reporter }));
  rows.push(await evalRow("Warm start (SFT)", policyAgent(backend, s, config), tasks, { setup: s, config, reporter }));
  const label = rlPolicyLabel(config.rl);
  const rl = await trainRl({ backend, worlds: rlWorlds(s, config), replayDatums: replayDatums(s, demos), setup: s, config, run, reporter, referenceDir: run.checkpoint("sft"), label, resume: plan.rl });
  rows.push(await evalRow(label, policyAgent(backend, s, config), tasks, { setup: s, config, reporter }));

  const summary: ExperimentSummary = {
    run: run.path,
    env: recipe.name,
    protocol: s.protocol.name,
    split: "test",
    rows: rows.map((r) => r.row),
    breakdownLabels: s.instance.breakdownLabels,
    graded: rows.some((r) => r.trajectories.some((t) => t.grade !== undefined)),
    detectors: rl.detectors.firing(),
  };
  run.writeSummary(summary);
  for (const r of rows) run.writeSamples(`eval-${slug(r.row.policy)}`, r.trajectories);
  return summary;
}
