/**
 * Warm start: the demonstrations (the recipe's own, or its scripted personas' mixture in its real and counterfactual
 * worlds) and a fresh policy trained on them with SFT — the base every RL run and lab design starts from (there are
 * no pretrained weights here).
 */
import { Rng } from "../core/rng.ts";
import type { Trajectory } from "../core/types.ts";
import { ScriptedAgent } from "../rollout/agent.ts";
import { rolloutGroups } from "../rollout/rollout.ts";
import type { TrainingBackend } from "../core/training.ts";
import { createBackend } from "./backends.ts";
import { savePolicy } from "./checkpoint.ts";
import { ConfigError, type ExperimentConfig } from "./config.ts";
import type { Reporter } from "./reporter.ts";
import type { ModelShape } from "./resume.ts";
import type { RunDir } from "./runDir.ts";
import { personaMix, type Setup } from "./setup.ts";
import { trainSft } from "./sft.ts";

/**
 * Warm-start demonstrations: `sft.demosPerTask` episodes per training task by the recipe's persona mixture (a
 * persona drawn per episode by weight), in the real world and `sft.counterfactualWorlds` counterfactual copies
 * (config fault injection off; the env's own failures stay, so recovery is demonstrated).
 * @returns trajectories with loss mask 1 on the personas' tokens
 */
async function personaDemos(s: Setup, config: ExperimentConfig): Promise<Trajectory[]> {
  const { instance } = s;
  const mix = personaMix(instance, config, s.recipe.name);
  const names = Object.keys(mix).sort();
  const weights = names.map((n) => mix[n]);
  const total = weights.reduce((a, b) => a + b, 0);
  if (!(total > 0)) throw new ConfigError([`the ${s.recipe.name} env's persona weights sum to ${total}; expected > 0`]);
  const pick = (episodeSeed: number): string => {
    let u = new Rng(episodeSeed ^ 0x2545f491).next() * total;
    for (let i = 0; i < names.length; i++) if ((u -= weights[i]) < 0) return names[i];
    return names[names.length - 1];
  };
  // One persona per episode: the rollout gives turn t the seed (episode seed + t).
  const mixture = new ScriptedAgent(s.tokenizer, (ctx) => instance.scriptedTurn(pick(ctx.seed - ctx.turnIndex), ctx));
  const demos: Trajectory[] = [];
  for (let k = 0; k <= config.sft.counterfactualWorlds; k++) {
    const groups = await rolloutGroups(instance.train, { makeEnv: instance.makeEnv(k, { faults: false }), agent: mixture, tokenizer: s.tokenizer, limits: s.limits }, {
      groupSize: config.sft.demosPerTask,
      seed: config.run.seed + 100 * k,
    });
    demos.push(...groups.flatMap((g) => g.trajectories));
  }
  return demos;
}

/**
 * The warm-start demonstrations of a run: the recipe's `demonstrations` hook when it has one, else its persona mixture.
 * @returns trajectories with loss mask 1 on the demonstrated tokens
 * @throws ConfigError when the recipe's persona weights do not sum to > 0
 */
export async function warmStartDemos(s: Setup, config: ExperimentConfig): Promise<Trajectory[]> {
  if (s.instance.demonstrations === undefined) return personaDemos(s, config);
  return s.instance.demonstrations({
    tokenizer: s.tokenizer,
    limits: s.limits,
    demosPerTask: config.sft.demosPerTask,
    counterfactualWorlds: config.sft.counterfactualWorlds,
    personas: personaMix(s.instance, config, s.recipe.name),
  });
}

/**
 * Warm start: a fresh policy trained with SFT on `demos`; metrics go to `run`, the policy to
 * `run.checkpoint("sft")`.
 */
export async function warmStart(s: ModelShape, config: ExperimentConfig, demos: readonly Trajectory[], run: RunDir, reporter: Reporter): Promise<TrainingBackend> {
  const backend = await createBackend(config, s.gpt, undefined, s.tokenizer);
  const sftBar = reporter.bar("warm start (SFT)", config.sft.steps);
  await trainSft(backend, demos, {
    steps: config.sft.steps,
    batchSize: config.sft.batchSize,
    learningRate: config.sft.learningRate,
    gradClip: config.rl.gradClip,
    seed: config.run.seed,
    maxNonFiniteSteps: config.rl.maxNonFiniteSteps,
    onSkip: (step, reason) => reporter.log(`warning: sft step ${step}: ${reason}; update skipped (train/skipped_nonfinite in metrics.jsonl)`),
    onStep: (step, metrics, ms) => {
      run.logMetrics("sft", step, metrics);
      run.logTimings("sft", step, { step_ms: ms });
      sftBar.update(step + 1, { loss: metrics.loss.toFixed(3) });
    },
  });
  sftBar.stop();
  await savePolicy(run.checkpoint("sft"), backend, s.tokenizer, s.gpt);
  return backend;
}
