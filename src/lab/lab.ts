/**
 * The reward lab, on any env recipe: one shared warm start, then each design trained by RL with the same seed, data
 * and budget, evaluated on the same held-out tasks, watched by the hacking detectors, and compared in `report.html`.
 * How the designs are judged is the recipe's `labReport` (`./judge.ts`): a QA lab (the search env) reports EM,
 * searches and guess rate by known vs unknown facts and its claims; a loophole lab (the default) reports each
 * design's expected detectors against what fired. Run folder: `runs/<lab>/` with `config.yaml`, the warm start's
 * `metrics.jsonl` and `checkpoints/sft`, `designs/<design>/` (a full RL run folder each), `lab.json` and `report.html`.
 */
import { join } from "node:path";
import { Rng } from "../core/rng.ts";
import type { Task, Trajectory } from "../core/types.ts";
import type { EnvRecipe } from "../env/recipe.ts";
import { computeReward } from "../reward/compose.ts";
import { formatTrajectory } from "../rollout/format.ts";
import { createBackend } from "../train/backends.ts";
import { checkpointProblem } from "../train/checkpoint.ts";
import { rewardConfigOf } from "../reward/config.ts";
import { ConfigError, type ExperimentConfig } from "../train/config.ts";
import { memoryWarning } from "../train/memoryReport.ts";
import { silentReporter, type Reporter } from "../train/reporter.ts";
import { checkCheckpointShape, type ModelShape } from "../train/resume.ts";
import { slug, trainRl } from "../train/rlLoop.ts";
import { RunDir } from "../train/runDir.ts";
import { replayDatums, rlWorlds } from "../train/runner.ts";
import { buildInstance, checkMemory, checkReward, evalTasks, setupExperiment, unknownTokenWarning, type Setup } from "../train/setup.ts";
import { evalRow, policyAgent } from "../train/summary.ts";
import { warmStart, warmStartDemos } from "../train/warmStart.ts";
import { designConfigs, resolveDesigns, type LabDesign } from "./designs.ts";
import { labFingerprint } from "./fingerprint.ts";
import { labJudge } from "./judge.ts";
import type { AnyLabResult } from "./types.ts";

/** Options of `runLab`. */
export interface LabOptions {
  overwrite: boolean;
  /** Marks the result as a quick (CI-sized) lab; the caller applies the quick config. */
  quick: boolean;
  /**
   * A warm-start checkpoint every design starts from (and the KL reference), instead of training one here — e.g.
   * `runs/lab-algorithms/checkpoints/sft` to add a design to an earlier lab's comparison. It must have the lab's
   * model shape and vocabulary; `lab.json` records it (`warmStartFrom`).
   */
  warmStart?: string;
}

/**
 * The quick lab's overrides for a recipe: its `--smoke` sizes (`EnvRecipe.smoke`), one counterfactual world, 4 RL steps
 * per design, no checkpoints or step samples, detectors reading from the second step.
 */
export function quickLabOverrides(recipe: Pick<EnvRecipe, "smoke">): Record<string, string> {
  return {
    ...recipe.smoke,
    "sft.counterfactualWorlds": "1",
    "rl.steps": "4",
    "rl.counterfactualWorlds": "1",
    "run.checkpointEvery": "0",
    "run.samplesPerStep": "0",
    "detectors.baselineSteps": "1",
    "detectors.window": "2",
  };
}

/**
 * Checks a given warm-start checkpoint before the lab folder is touched: whole (`checkpointProblem`) and of the
 * lab's model shape and vocabulary (`checkCheckpointShape`).
 * @throws ConfigError naming `--warm-start` and what is wrong
 */
function checkWarmStart(dir: string, s: ModelShape): void {
  const problem = checkpointProblem(dir);
  if (problem !== undefined) throw new ConfigError([`--warm-start: checkpoint ${dir}: ${problem}`]);
  try {
    checkCheckpointShape(dir, s);
  } catch (e) {
    if (e instanceof ConfigError) throw new ConfigError(e.problems.map((p) => `--warm-start: ${p}`));
    throw e;
  }
}

/** The held-out tasks shown as examples: up to `n`, about 2 known and the rest unknown, seeded. */
export function exampleTasks(tasks: readonly Task[], n: number, seed: number): Task[] {
  const shuffled = new Rng(seed + 13).shuffle(tasks);
  const known = shuffled.filter((t) => t.known === true).slice(0, Math.min(2, Math.floor(n / 2)));
  const rest = shuffled.filter((t) => !known.includes(t)).slice(0, n - known.length);
  return [...known, ...rest];
}

/**
 * A dotted `--rl.advantage` / `--rl.lossFn` (or the config's) applies to every design that does not set its own:
 * an algorithm design's name then no longer says what it trains. Returns that note, or undefined when the lab's
 * algorithm is the default (`grpo`, `ppo`) or every design sets both.
 */
export function labAlgorithmNote(config: ExperimentConfig, designs: readonly { name: string; overrides: Record<string, string> }[]): string | undefined {
  const { advantage, lossFn } = config.rl;
  if (advantage === "grpo" && lossFn === "ppo") return undefined;
  // A design is under the lab's algorithm when it leaves unset a field the lab sets away from its default.
  const unset = (d: { overrides: Record<string, string> }) => (advantage !== "grpo" && d.overrides["rl.advantage"] === undefined) || (lossFn !== "ppo" && d.overrides["rl.lossFn"] === undefined);
  const under = designs.filter(unset).map((d) => d.name);
  if (under.length === 0) return undefined;
  return `rl.advantage ${advantage} and rl.lossFn ${lossFn} (the lab's config or flags) apply to every design that does not set its own: ${under.join(", ")} (the report's "algorithm" column says what each trained)`;
}

/** One design's RL and held-out evaluation, as the lab's judge records it. */
async function runDesign(lab: RunDir, design: LabDesign, cfg: ExperimentConfig, ds: Setup, shared: { demos: readonly Trajectory[]; sftDir: string; tasks: Task[]; reporter: Reporter }) {
  const d0 = performance.now();
  const run = new RunDir(join(lab.path, "designs"), design.name, { overwrite: true });
  run.writeConfig(cfg);
  const backend = await createBackend(cfg, ds.gpt, shared.sftDir); // the same warm start (weights and optimizer state) for every design
  const r0 = performance.now();
  const rl = await trainRl({ backend, worlds: rlWorlds(ds, cfg), replayDatums: replayDatums(ds, shared.demos), setup: ds, config: cfg, run, reporter: shared.reporter, referenceDir: shared.sftDir, label: `RL ${design.name}` });
  const rlWallMs = performance.now() - r0;
  const after = await evalRow(design.name, policyAgent(backend, ds, cfg), shared.tasks, { setup: ds, config: cfg, reporter: shared.reporter });
  run.writeSamples(`eval-${slug(design.name)}`, after.trajectories);
  return { run, rl, after, rlWallMs, d0 };
}

/**
 * Runs a lab on a recipe: warm start once, then RL per design (`lab.designs`, resolved by `resolveDesigns`: the
 * recipe's own designs, the algorithm designs, `lab.define`), each from that warm start with the same seed, data and
 * budget, evaluated on the same held-out tasks, judged by the recipe's `labReport`; writes `lab.json` and
 * `report.html`. A design that overrides `env.options.*` trains and is evaluated on its own build of the env (same
 * tokenizer and warm start). Also writes the warm start's held-out episodes (`samples/eval-warm-start-sft.jsonl`).
 * @returns the lab's results (also written to `lab.json`)
 * @throws ConfigError for unknown designs, invalid overrides, a bad recipe option, a `warmStart` checkpoint of another
 *   shape or a model too large for the embedded backend (before any training); Error when the run folder exists and
 *   `overwrite` is false
 */
export async function runLab(config: ExperimentConfig, recipe: EnvRecipe, reporter: Reporter = silentReporter, options: LabOptions = { overwrite: false, quick: false }): Promise<AnyLabResult> {
  if (config.env.name !== recipe.name) throw new ConfigError([`env.name: the config names the ${config.env.name} env, the lab was given the ${recipe.name} recipe`]);
  const designs = resolveDesigns(config, recipe);
  const configs = designConfigs(config, designs); // validate every design before training anything
  for (const c of configs) checkReward(c);
  const algorithmNote = labAlgorithmNote(config, designs);
  if (algorithmNote !== undefined) reporter.log(`note: ${algorithmNote}`);
  const t0 = performance.now();
  const s = setupExperiment(config, recipe);
  // Each design's env: the lab's, or its own build when the design changes env.options (same tokenizer and limits).
  const setups: Setup[] = configs.map((c) => (JSON.stringify(c.env.options) === JSON.stringify(config.env.options) ? s : { ...s, instance: buildInstance(c, recipe) }));
  // A model that cannot fit the embedded backend is refused before the lab folder is touched (designs cannot
  // override policy.*, so the lab's config decides for all of them).
  const warning = memoryWarning(checkMemory(config, s));
  if (warning !== undefined) reporter.log(`warning: ${warning}`);
  if (options.warmStart !== undefined) checkWarmStart(options.warmStart, s);
  const lab = new RunDir(config.run.dir, config.run.name, options);
  lab.writeConfig(config);
  reporter.log(
    `lab ${config.run.name} on env ${recipe.name} (${s.protocol.name}): designs ${designs.map((d) => d.name).join(", ")}; ${config.rl.steps} RL steps each from one warm start ` +
      `(${s.instance.train.length} train / ${s.instance.test.length} test tasks)`,
  );
  const demos = await warmStartDemos(s, config);
  const unknown = unknownTokenWarning(s, demos);
  if (unknown !== undefined) reporter.log(`warning: ${unknown}`);
  const sftDir = options.warmStart ?? lab.checkpoint("sft");
  const sft = options.warmStart !== undefined ? await createBackend(config, s.gpt, options.warmStart) : await warmStart(s, config, demos, lab, reporter);
  const tasks = evalTasks(s, config);
  const warm = await evalRow("Warm start (SFT)", policyAgent(sft, s, config), tasks, { setup: s, config, reporter });
  lab.writeSamples(`eval-${slug(warm.row.policy)}`, warm.trajectories); // the viewer's Compare: warm start vs a design
  const judge = labJudge(recipe, s, warm);
  const examples = exampleTasks(tasks, config.lab.examples, config.run.seed);
  const pick = (trajs: readonly Trajectory[]) => examples.map((task) => trajs.find((t) => t.task.id === task.id)).filter((t): t is Trajectory => t !== undefined);

  for (let i = 0; i < designs.length; i++) {
    const design = designs[i];
    const cfg = configs[i];
    const ds = setups[i];
    const { run, rl, after, rlWallMs, d0 } = await runDesign(lab, design, cfg, ds, { demos, sftDir, tasks: ds === s ? tasks : evalTasks(ds, cfg), reporter });
    run.writeSummary(judge.designSummary(design.name, after, rl.detectors.firing()));
    // Examples are scored with this design's reward, so the report shows how each design pays the same behaviour.
    const reward = rewardConfigOf(cfg);
    const format = async (t: Trajectory) => formatTrajectory({ ...t, reward: await computeReward(t, reward) });
    judge.addDesign({
      name: design.name,
      description: design.description,
      weights: reward.weights,
      overrides: design.overrides,
      ...(design.expectedDetectors !== undefined ? { expectedDetectors: design.expectedDetectors } : {}),
      steps: rl.steps,
      detectors: rl.detectors.firing(),
      firingsDuringTraining: [...rl.detectors.history],
      after,
      examples: {
        before: await Promise.all(pick(warm.trajectories).map(format)),
        after: await Promise.all(pick(after.trajectories).map(format)),
      },
      wallMs: performance.now() - d0,
      rlWallMs,
    });
  }
  const result = judge.result({
    name: config.run.name,
    seed: config.run.seed,
    quick: options.quick,
    rlSteps: config.rl.steps,
    evalQuestions: tasks.length,
    ...(options.warmStart !== undefined ? { warmStartFrom: options.warmStart } : {}),
    wallMs: performance.now() - t0,
  });
  result.fingerprint = labFingerprint(result);
  lab.writeText("lab.json", JSON.stringify(result, null, 2) + "\n");
  lab.writeText("report.html", await judge.report(result, config.rl));
  return result;
}
