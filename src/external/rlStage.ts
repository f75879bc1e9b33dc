/**
 * The RL stage of an `arl train --agent` run: `trainAgent` over the real and RL's counterfactual worlds, with the
 * run folder's bookkeeping per step — metrics, `rollouts.jsonl`, the hacking detectors, sample transcripts and
 * checkpoints with the trainer state `--resume` continues from.
 */
import type { TrainingBackend } from "../core/training.ts";
import type { Tokenizer } from "../core/tokenizer.ts";
import type { Metrics } from "../core/types.ts";
import type { GPTConfig } from "../policy/embedded/gpt.ts";
import type { DetectorMonitor } from "../reward/detectors.ts";
import { TRAINER_STATE_FORMAT, savePolicy, trainerStateText, type TrainerState } from "../train/checkpoint.ts";
import type { ExperimentConfig } from "../train/config.ts";
import type { Reporter } from "../train/reporter.ts";
import type { ResumePlan } from "../train/resume.ts";
import type { RunDir } from "../train/runDir.ts";
import type { RetrievalLog } from "./reward.ts";
import type { AgentEstimator } from "./rollouts.ts";
import { logRollouts, writeAgentSamples } from "./samples.ts";
import { trainAgent, type AgentResumeState, type TrainAgentOptions } from "./train.ts";
import type { ServedWorld } from "./worlds.ts";

/** What the RL stage needs from the experiment. */
export interface AgentRlContext {
  config: ExperimentConfig;
  run: RunDir;
  reporter: Reporter;
  tokenizer: Tokenizer;
  gpt: GPTConfig;
  backend: TrainingBackend;
  /** The frozen warm start, for `hack/kl_ref` (absent when the detector is off). */
  reference?: TrainingBackend;
  base: Pick<TrainAgentOptions, "agent" | "gateway" | "grade" | "rolloutDeadlineMs">;
  /** Where the run resumes (`plan.rl`: the step, the generator's state and the metrics before it). */
  plan: ResumePlan;
  resumeStep: number;
  monitor: DetectorMonitor;
  /** What each rollout's search tool was served; a rollout's entry is dropped once its step is logged. */
  retrievals: RetrievalLog;
  /** The worlds RL draws from: the real one first, then RL's counterfactual copies. */
  worlds: readonly ServedWorld[];
}

/**
 * Runs `rl.steps` steps of `trainAgent` (from `resumeStep`), logging each step and checkpointing every
 * `run.checkpointEvery` steps and at the end (`checkpoints/final`).
 * @returns the metrics of every RL step, a resumed run's earlier ones included
 * @throws what `trainAgent` throws (a failed update)
 */
export async function trainAgentSteps(ctx: AgentRlContext): Promise<Metrics[]> {
  const { config, run, reporter, tokenizer, gpt, plan, monitor, backend } = ctx;
  const steps: Metrics[] = [];
  for (const [i, m] of (plan.rl?.state.steps ?? []).entries()) {
    const metrics = Object.fromEntries(Object.entries(m).map(([k, v]) => [k, v ?? NaN])) as Metrics;
    steps.push(metrics);
    monitor.observe(i, metrics); // its state is a pure function of the metrics it has seen (firings were logged)
  }
  const trainerState = (state: AgentResumeState): string =>
    trainerStateText({ format: TRAINER_STATE_FORMAT, step: state.step, rngState: state.rngState, replayRngState: 0, steps, nonFiniteRun: 0, warnedRewardErrors: false } satisfies TrainerState);
  const bar = reporter.bar("RL (agent)", config.rl.steps);
  bar.update(ctx.resumeStep);
  let last: AgentResumeState = { step: ctx.resumeStep, rngState: plan.rl?.state.rngState ?? 0 };
  await trainAgent({
    ...ctx.base,
    backend,
    reference: ctx.reference,
    worlds: ctx.worlds.map((w) => ({ tasks: w.world.train, env: w.env })),
    steps: config.rl.steps,
    tasksPerStep: config.rl.tasksPerStep,
    groupSize: config.rl.groupSize,
    seed: config.run.seed,
    resume: plan.rl ? { step: plan.rl.state.step, rngState: plan.rl.state.rngState } : undefined,
    lossFn: config.rl.lossFn,
    lossConfig: { clipLow: config.rl.clipLow, clipHigh: config.rl.clipHigh, ...(config.rl.lossFn === "dro" ? { droBeta: config.rl.droBeta } : {}), normalization: config.rl.advantage === "drgrpo" ? "constant" : "tokens", constantLength: config.rl.maxTokensPerTurn * config.env.maxTurns },
    adam: { learningRate: config.rl.learningRate, gradClip: config.rl.gradClip },
    estimator: config.rl.advantage as AgentEstimator,
    onStep: async (step, m, records, state) => {
      steps.push(m);
      last = state;
      run.logMetrics("rl", step, m);
      logRollouts(run, "rl", step, records, reporter);
      for (const r of records) ctx.retrievals.take(r.id); // a dropped rollout was never graded: forget what it searched
      for (const firing of monitor.observe(step, m)) {
        run.appendJsonl("detectors.jsonl", firing);
        reporter.log(`warning: reward-hacking detector fired: ${firing.message}`);
      }
      if (config.run.samplesPerStep > 0) writeAgentSamples(run, `step-${step}`, records.slice(0, config.run.samplesPerStep), tokenizer);
      if (config.run.checkpointEvery > 0 && (step + 1) % config.run.checkpointEvery === 0) {
        await savePolicy(run.checkpoint(`step-${step + 1}`), backend, tokenizer, gpt, { "trainer-state.json": trainerState(state) });
      }
      bar.update(step + 1, { reward: m.reward.toFixed(3) });
    },
  });
  bar.stop();
  await savePolicy(run.checkpoint("final"), backend, tokenizer, gpt, { "trainer-state.json": trainerState({ ...last, step: config.rl.steps }) });
  return steps;
}
