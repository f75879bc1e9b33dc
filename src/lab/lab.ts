/**
 * The reward lab: one shared warm start, then each reward design trained by RL with the same seed, data and
 * budget, evaluated on the same held-out questions, watched by the hacking detectors, and compared in
 * `report.html`. Run folder: `runs/<lab>/` with `config.yaml`, the warm start's `metrics.jsonl` and
 * `checkpoints/sft`, `designs/<design>/` (a full RL run folder each), `lab.json` and `report.html`.
 */
import { join } from "node:path";
import { Rng } from "../core/rng.ts";
import type { Task, Trajectory } from "../core/types.ts";
import { computeReward } from "../reward/compose.ts";
import { answeredWithoutSearch, needlessSearches } from "../reward/evidence.ts";
import { formatTrajectory } from "../rollout/format.ts";
import { createBackend } from "../train/backends.ts";
import { SMOKE_OVERRIDES, rewardConfigOf, type ExperimentConfig } from "../train/config.ts";
import { checkMemory, checkReward, evalRow, evalTasks, setup, silentReporter, slug, trainRl, warmStart, warmStartDemos, memoryWarning, type Reporter } from "../train/experiment.ts";
import { mean, trajectoryEm } from "../train/metrics.ts";
import { RunDir } from "../train/runDir.ts";
import { computeClaims } from "./claims.ts";
import { designConfig, resolveDesigns } from "./designs.ts";
import { renderReport } from "./report.ts";
import type { DesignResult, EvalSummary, LabResult } from "./types.ts";

/** Options of `runLab`. */
export interface LabOptions {
  overwrite: boolean;
  /** Marks the result as a quick (CI-sized) lab; the caller applies the quick config. */
  quick: boolean;
}

/** The quick lab's config overrides: the smoke model and budgets, with enough RL steps for the detectors to read. */
export const QUICK_LAB_OVERRIDES: Record<string, string> = {
  ...SMOKE_OVERRIDES,
  "sft.counterfactualWorlds": "1",
  "rl.steps": "4",
  "rl.counterfactualWorlds": "1",
  "run.checkpointEvery": "0",
  "run.samplesPerStep": "0",
  "detectors.baselineSteps": "1",
  "detectors.window": "2",
};

/** EM, searches and guess rate (all / known / unknown) and needless searches of evaluation trajectories. */
export function evalSummary(trajs: readonly Trajectory[], result: Omit<EvalSummary, "needlessSearches" | "needlessSearchRate">): EvalSummary {
  const needless = trajs.map(needlessSearches).filter((x): x is number => x !== undefined);
  const guessedUnknown = trajs.filter((t) => t.task.known === false && answeredWithoutSearch(t));
  const { all, known, unknown } = result;
  return {
    all,
    known,
    unknown,
    needlessSearches: mean(needless),
    needlessSearchRate: mean(needless.map((x) => (x > 0 ? 1 : 0))),
    guessEmUnknown: mean(guessedUnknown.map(trajectoryEm)),
  };
}

/** The held-out tasks shown as examples: up to `n`, about 2 known and the rest unknown, seeded. */
export function exampleTasks(tasks: readonly Task[], n: number, seed: number): Task[] {
  const shuffled = new Rng(seed + 13).shuffle(tasks);
  const known = shuffled.filter((t) => t.known === true).slice(0, Math.min(2, Math.floor(n / 2)));
  const rest = shuffled.filter((t) => !known.includes(t)).slice(0, n - known.length);
  return [...known, ...rest];
}

/**
 * Runs a lab: warm start once, then RL per design (`lab.designs`), evaluation, claims, `lab.json` and `report.html`.
 * @returns the lab's results (also written to `lab.json`)
 * @throws ConfigError for unknown designs, invalid overrides or a model too large for the embedded backend (before any
 *   training); Error when the run folder
 *   exists and `overwrite` is false
 */
export async function runLab(config: ExperimentConfig, reporter: Reporter = silentReporter, options: LabOptions = { overwrite: false, quick: false }): Promise<LabResult> {
  const designs = resolveDesigns(config);
  const configs = designs.map((d) => designConfig(config, d)); // validate every design before training anything
  for (const c of configs) checkReward(c);
  const t0 = performance.now();
  const s = setup(config);
  // A model that cannot fit the embedded backend is refused before the lab folder is touched (designs cannot
  // override policy.*, so the lab's config decides for all of them).
  const warning = memoryWarning(checkMemory(config, s));
  if (warning !== undefined) reporter.log(`warning: ${warning}`);
  const lab = new RunDir(config.run.dir, config.run.name, options);
  lab.writeConfig(config);
  reporter.log(
    `lab ${config.run.name}: designs ${designs.map((d) => d.name).join(", ")}; ${config.rl.steps} RL steps each from one warm start ` +
      `(${s.world.train.length} train / ${s.world.test.length} test questions)`,
  );
  const demos = await warmStartDemos(s, config);
  const sft = await warmStart(s, config, demos, lab, reporter);
  const tasks = evalTasks(s.world, config);
  const warmRow = await evalRow("Warm start (SFT)", sft, tasks, "agent", s, config, reporter);
  const warmSummary = evalSummary(warmRow.trajectories, warmRow.result);
  const examples = exampleTasks(tasks, config.lab.examples, config.run.seed);
  const pick = (trajs: Trajectory[]) => examples.map((task) => trajs.find((t) => t.task.id === task.id)!).filter((t) => t !== undefined);

  const results: DesignResult[] = [];
  for (let i = 0; i < designs.length; i++) {
    const design = designs[i];
    const cfg = configs[i];
    const d0 = performance.now();
    const run = new RunDir(join(lab.path, "designs"), design.name, { overwrite: true });
    run.writeConfig(cfg);
    const backend = await createBackend(cfg, s.gpt, lab.checkpoint("sft")); // the same warm start (weights and optimizer state) for every design
    const r0 = performance.now();
    const rl = await trainRl(backend, demos, s, cfg, run, reporter, lab.checkpoint("sft"), `RL ${design.name}`);
    const rlWallMs = performance.now() - r0;
    const row = await evalRow(design.name, backend, tasks, "agent", s, cfg, reporter);
    run.writeSummary({ design: design.name, result: row.result, detectors: rl.detectors.firing() });
    run.writeSamples(`eval-${slug(design.name)}`, row.trajectories);
    // Examples are scored with this design's reward, so the report shows how each design pays the same behaviour.
    const reward = rewardConfigOf(cfg);
    const format = async (t: Trajectory) => formatTrajectory({ ...t, reward: await computeReward(t, reward) });
    results.push({
      name: design.name,
      description: design.description,
      weights: reward.weights,
      overrides: design.overrides,
      steps: rl.steps,
      detectors: rl.detectors.firing(),
      firingsDuringTraining: [...rl.detectors.history],
      after: evalSummary(row.trajectories, row.result),
      examples: {
        before: await Promise.all(pick(warmRow.trajectories).map(format)),
        after: await Promise.all(pick(row.trajectories).map(format)),
      },
      wallMs: performance.now() - d0,
      rlWallMs,
    });
  }
  const partial: Omit<LabResult, "claims"> = {
    name: config.run.name,
    seed: config.run.seed,
    quick: options.quick,
    rlSteps: config.rl.steps,
    evalQuestions: tasks.length,
    warmStart: warmSummary,
    designs: results,
    wallMs: performance.now() - t0,
  };
  const result: LabResult = { ...partial, claims: computeClaims(partial) };
  lab.writeText("lab.json", JSON.stringify(result, null, 2) + "\n");
  lab.writeText("report.html", await renderReport(result));
  return result;
}
