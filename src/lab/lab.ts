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
import { checkpointProblem } from "../train/checkpoint.ts";
import { ConfigError, SMOKE_OVERRIDES, rewardConfigOf, type ExperimentConfig } from "../train/config.ts";
import { checkCheckpointShape, checkMemory, checkReward, evalRow, evalTasks, setup, silentReporter, slug, trainRl, trainRlOn, warmStart, warmStartDemos, memoryWarning, type Reporter } from "../train/experiment.ts";
import { checkRecipeMemory, evalRecipeRow, policyAgent, recipeContext, recipeDemos, recipeEvalTasks, recipeSetup, unknownTokenWarning, type RecipeSetup } from "../train/recipeRun.ts";
import type { EnvRecipe } from "../env/recipe.ts";
import { mean, trajectoryEm } from "../train/metrics.ts";
import { RunDir } from "../train/runDir.ts";
import { computeClaims, loopholeVerdicts } from "./claims.ts";
import { designConfigs, resolveDesigns, resolveEnvDesigns } from "./designs.ts";
import { labFingerprint } from "./fingerprint.ts";
import { renderEnvReport, renderReport } from "./report.ts";
import type { DesignResult, EnvDesignResult, EnvLabResult, EvalSummary, LabResult } from "./types.ts";

/** Options of `runLab` / `runEnvLab`. */
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

/**
 * Checks a given warm-start checkpoint before the lab folder is touched: whole (`checkpointProblem`) and of the
 * lab's model shape and vocabulary (`checkCheckpointShape`).
 * @throws ConfigError naming `--warm-start` and what is wrong
 */
function checkWarmStart(dir: string, s: Pick<RecipeSetup, "gpt" | "tokenizer">): void {
  const problem = checkpointProblem(dir);
  if (problem !== undefined) throw new ConfigError([`--warm-start: checkpoint ${dir}: ${problem}`]);
  try {
    checkCheckpointShape(dir, s);
  } catch (e) {
    if (e instanceof ConfigError) throw new ConfigError(e.problems.map((p) => `--warm-start: ${p}`));
    throw e;
  }
}

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

/**
 * Runs a lab: warm start once, then RL per design (`lab.designs`), evaluation, claims, `lab.json` and `report.html`.
 * @returns the lab's results (also written to `lab.json`)
 * Also writes the warm start's held-out episodes (`samples/eval-warm-start-sft.jsonl`) beside each design's.
 * @throws ConfigError for unknown designs, invalid overrides, an env other than `search` (see `runEnvLab`), a
 *   `warmStart` checkpoint of another shape, or a model too large for the embedded backend (before any training);
 *   Error when the run folder exists and `overwrite` is false
 */
export async function runLab(config: ExperimentConfig, reporter: Reporter = silentReporter, options: LabOptions = { overwrite: false, quick: false }): Promise<LabResult> {
  if (config.env.name !== "search") {
    throw new ConfigError([`env.name: runLab trains the search env's designs; for the ${config.env.name} env use runEnvLab(config, getRecipe("${config.env.name}")) (arl lab --env ${config.env.name})`]);
  }
  const designs = resolveDesigns(config);
  const configs = designConfigs(config, designs); // validate every design before training anything
  for (const c of configs) checkReward(c);
  const algorithmNote = labAlgorithmNote(config, designs);
  if (algorithmNote !== undefined) reporter.log(`note: ${algorithmNote}`);
  const t0 = performance.now();
  const s = setup(config);
  // A model that cannot fit the embedded backend is refused before the lab folder is touched (designs cannot
  // override policy.*, so the lab's config decides for all of them).
  const warning = memoryWarning(checkMemory(config, s));
  if (warning !== undefined) reporter.log(`warning: ${warning}`);
  if (options.warmStart !== undefined) checkWarmStart(options.warmStart, s);
  const lab = new RunDir(config.run.dir, config.run.name, options);
  lab.writeConfig(config);
  reporter.log(
    `lab ${config.run.name}: designs ${designs.map((d) => d.name).join(", ")}; ${config.rl.steps} RL steps each from one warm start ` +
      `(${s.world.train.length} train / ${s.world.test.length} test questions)`,
  );
  const demos = await warmStartDemos(s, config);
  const sftDir = options.warmStart ?? lab.checkpoint("sft");
  const sft = options.warmStart !== undefined ? await createBackend(config, s.gpt, options.warmStart) : await warmStart(s, config, demos, lab, reporter);
  const tasks = evalTasks(s.world, config);
  const warmRow = await evalRow("Warm start (SFT)", sft, tasks, "agent", s, config, reporter);
  lab.writeSamples(`eval-${slug(warmRow.policy)}`, warmRow.trajectories); // the viewer's Compare: warm start vs a design
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
    const backend = await createBackend(cfg, s.gpt, sftDir); // the same warm start (weights and optimizer state) for every design
    const r0 = performance.now();
    const rl = await trainRl(backend, demos, s, cfg, run, reporter, sftDir, `RL ${design.name}`);
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
  const result: LabResult = { ...partial, claims: computeClaims(partial), ...(options.warmStart !== undefined ? { warmStartFrom: options.warmStart } : {}) };
  result.fingerprint = labFingerprint(result);
  lab.writeText("lab.json", JSON.stringify(result, null, 2) + "\n");
  lab.writeText("report.html", await renderReport(result, config.rl));
  return result;
}

/**
 * The quick env lab's overrides for a recipe: its `--smoke` sizes (`EnvRecipe.smoke`), one counterfactual world, 4 RL
 * steps per design, no checkpoints or step samples, detectors reading from the second step (as `QUICK_LAB_OVERRIDES`).
 */
export function quickEnvLabOverrides(recipe: Pick<EnvRecipe, "smoke">): Record<string, string> {
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
 * A lab on any env recipe (`arl lab --env NAME`): the recipe's warm start once (SFT on its personas'
 * demonstrations), then RL per design (`lab.designs`, resolved by `resolveEnvDesigns`: the recipe's own designs, the
 * algorithm designs, `lab.define`), each from that warm start with the same seed, data and budget, evaluated on the
 * same held-out tasks with the recipe's grader and breakdown, watched by the hacking detectors; per design, the
 * loophole verdict (expected detectors vs what fired). Writes `runs/<lab>/` like `runLab`: `config.yaml`, the warm
 * start's metrics and `checkpoints/sft`, `samples/eval-warm-start-sft.jsonl`, `designs/<design>/` (a full RL run
 * folder each, with its held-out episodes), `lab.json` (`EnvLabResult`) and `report.html`. A design that overrides
 * `env.options.*` trains and is evaluated on its own build of the env (same tokenizer and warm start).
 * @returns the lab's results (also written to `lab.json`)
 * @throws ConfigError for unknown designs, invalid overrides, a bad recipe option, a `warmStart` checkpoint of another
 *   shape or a model too large for the embedded backend (before any training); Error when the run folder exists and
 *   `overwrite` is false
 */
export async function runEnvLab(config: ExperimentConfig, recipe: EnvRecipe, reporter: Reporter = silentReporter, options: LabOptions = { overwrite: false, quick: false }): Promise<EnvLabResult> {
  if (config.env.name !== recipe.name) throw new ConfigError([`env.name: the config names the ${config.env.name} env, the lab was given the ${recipe.name} recipe`]);
  const designs = resolveEnvDesigns(config, recipe);
  const configs = designConfigs(config, designs); // validate every design before training anything
  for (const c of configs) checkReward(c);
  const algorithmNote = labAlgorithmNote(config, designs);
  if (algorithmNote !== undefined) reporter.log(`note: ${algorithmNote}`);
  const t0 = performance.now();
  const s = recipeSetup(config, recipe);
  // Each design's env: the lab's, or its own build when the design changes env.options (same tokenizer and limits).
  const setups: RecipeSetup[] = configs.map((c) => (JSON.stringify(c.env.options) === JSON.stringify(config.env.options) ? s : { ...s, instance: recipe.build(recipeContext(c, recipe)) }));
  const warning = memoryWarning(checkRecipeMemory(config, s));
  if (warning !== undefined) reporter.log(`warning: ${warning}`);
  if (options.warmStart !== undefined) checkWarmStart(options.warmStart, s);
  const lab = new RunDir(config.run.dir, config.run.name, options);
  lab.writeConfig(config);
  reporter.log(
    `lab ${config.run.name} on env ${recipe.name} (${s.protocol.name}): designs ${designs.map((d) => d.name).join(", ")}; ${config.rl.steps} RL steps each from one warm start ` +
      `(${s.instance.train.length} train / ${s.instance.test.length} test tasks)`,
  );
  const demos = await recipeDemos(s, config);
  const unknown = unknownTokenWarning(s, demos);
  if (unknown !== undefined) reporter.log(`warning: ${unknown}`);
  const sftDir = options.warmStart ?? lab.checkpoint("sft");
  const sft = options.warmStart !== undefined ? await createBackend(config, s.gpt, options.warmStart) : await warmStart(s, config, demos, lab, reporter);
  const tasks = recipeEvalTasks(s, config);
  const warm = await evalRecipeRow("Warm start (SFT)", policyAgent(sft, s, config), tasks, s, config, reporter);
  lab.writeSamples(`eval-${slug(warm.row.policy)}`, warm.trajectories);
  const examples = exampleTasks(tasks, config.lab.examples, config.run.seed);
  const pick = (trajs: readonly Trajectory[]) => examples.map((task) => trajs.find((t) => t.task.id === task.id)).filter((t): t is Trajectory => t !== undefined);

  const results: EnvDesignResult[] = [];
  for (let i = 0; i < designs.length; i++) {
    const design = designs[i];
    const cfg = configs[i];
    const ds = setups[i];
    const d0 = performance.now();
    const run = new RunDir(join(lab.path, "designs"), design.name, { overwrite: true });
    run.writeConfig(cfg);
    const backend = await createBackend(cfg, s.gpt, sftDir);
    const worlds = Array.from({ length: cfg.rl.counterfactualWorlds + 1 }, (_, k) => ({ train: ds.instance.train, makeEnv: ds.instance.makeEnv(k) }));
    const r0 = performance.now();
    const rl = await trainRlOn(backend, worlds, [], ds, cfg, run, reporter, sftDir, `RL ${design.name}`);
    const rlWallMs = performance.now() - r0;
    const after = await evalRecipeRow(design.name, policyAgent(backend, ds, cfg), ds === s ? tasks : recipeEvalTasks(ds, cfg), ds, cfg, reporter);
    run.writeSummary({ design: design.name, env: recipe.name, row: after.row, detectors: rl.detectors.firing() });
    run.writeSamples(`eval-${slug(design.name)}`, after.trajectories);
    const reward = rewardConfigOf(cfg);
    const format = async (t: Trajectory) => formatTrajectory({ ...t, reward: await computeReward(t, reward) });
    results.push({
      name: design.name,
      description: design.description,
      weights: reward.weights,
      overrides: design.overrides,
      ...(design.expectedDetectors !== undefined ? { expectedDetectors: design.expectedDetectors } : {}),
      steps: rl.steps,
      detectors: rl.detectors.firing(),
      firingsDuringTraining: [...rl.detectors.history],
      after: after.row,
      examples: {
        before: await Promise.all(pick(warm.trajectories).map(format)),
        after: await Promise.all(pick(after.trajectories).map(format)),
      },
      wallMs: performance.now() - d0,
      rlWallMs,
    });
  }
  const result: EnvLabResult = {
    name: config.run.name,
    env: recipe.name,
    protocol: s.protocol.name,
    seed: config.run.seed,
    quick: options.quick,
    rlSteps: config.rl.steps,
    evalQuestions: tasks.length,
    breakdownLabels: s.instance.breakdownLabels,
    warmStart: warm.row,
    designs: results,
    loopholes: loopholeVerdicts(warm.row, results),
    ...(options.warmStart !== undefined ? { warmStartFrom: options.warmStart } : {}),
    wallMs: performance.now() - t0,
  };
  result.fingerprint = labFingerprint(result);
  lab.writeText("lab.json", JSON.stringify(result, null, 2) + "\n");
  lab.writeText("report.html", await renderEnvReport(result, config.rl));
  return result;
}
