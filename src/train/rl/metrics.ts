/**
 * The metrics of one RL step (deterministic: no wall-clock values): the first collected batch's episodes, rewards and
 * drops (what a plain step sees, whatever DAPO sampled on top), the correct stage's monitors, and the means of the
 * update's optimizer steps as `train/<name>`.
 */
import type { Metrics, Trajectory } from "../../core/types.ts";
import { hackingMetrics } from "../../reward/detectors.ts";
import { rolloutMetrics, type RolloutBatch } from "../../rollout/rollout.ts";
import { episodeMetrics, mean } from "../metrics.ts";
import type { UpdateResult } from "./update.ts";

/** The update metrics averaged over a step's optimizer steps, in this order, as `train/<key>`. */
const UPDATE_KEYS = ["loss", "kl", "entropy", "clip_fraction", "clip_fraction_lower", "grad_norm", "ratio_mean", "ptx_loss", "vf_loss", "vf_clipfrac", "vf_explained_var"];

/** What `stepMetrics` reads. */
export interface StepRecord {
  /** The step's first collected batch (its groups rewarded). */
  rollout: RolloutBatch;
  /** The correct stage's metrics (`hack/kl_ref`, `tis/*`). */
  correction: Metrics;
  /** DAPO dynamic sampling's (`train/gen_batches`, `train/kept_groups`). */
  dapo: Metrics;
  /** Datums in the training batch. */
  datums: number;
  update: UpdateResult;
}

/** A step's metrics, keys in the order `metrics.jsonl` has always had. */
export function stepMetrics(step: StepRecord): Metrics {
  const groups = step.rollout.groups;
  const trajectories = groups.flatMap((g) => g.trajectories);
  const metrics: Metrics = {
    ...episodeMetrics(trajectories),
    ...hackingMetrics(trajectories),
    ...step.correction,
    ...step.dapo,
    ...termMeans(trajectories),
    "reward/std_within_group": mean(groups.map((g) => std(g.trajectories.map((t) => t.reward!.total)))),
    "train/informative_fraction": step.datums === 0 ? 0 : step.update.informative / step.datums,
    ...rolloutMetrics(step.rollout),
  };
  for (const key of UPDATE_KEYS) {
    const vals = step.update.steps.map((m) => m[key]).filter((v) => v !== undefined);
    if (vals.length > 0) metrics[`train/${key}`] = mean(vals);
  }
  return metrics;
}

/** The metrics of a step none of whose episodes reached the update: its drops, and nothing informative. */
export function emptyStepMetrics(rollout: RolloutBatch): Metrics {
  return { ...rolloutMetrics(rollout), "train/informative_fraction": 0 };
}

/** Mean raw value of every reward term (`reward/term/<name>`) and the reward's outside cost (`reward/cost`). */
function termMeans(trajs: readonly Trajectory[]): Metrics {
  const out: Metrics = {};
  for (const name of trajs[0]?.reward?.terms.map((t) => t.name) ?? []) {
    out[`reward/term/${name}`] = mean(trajs.map((t) => t.reward!.terms.find((x) => x.name === name)!.value));
  }
  const cost = trajs.reduce((a, t) => a + (t.reward?.cost ?? 0), 0);
  if (cost > 0) out["reward/cost"] = cost;
  const errors = trajs.filter((t) => t.reward?.terms.some((x) => x.error !== undefined)).length;
  if (errors > 0) out["reward/errors"] = errors;
  return out;
}

function std(xs: number[]): number {
  const m = mean(xs);
  return Math.sqrt(mean(xs.map((x) => (x - m) ** 2)));
}
