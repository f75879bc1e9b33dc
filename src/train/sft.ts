/**
 * Warm start: supervised fine-tuning (cross entropy on loss-masked tokens) on demonstrations from scripted,
 * deliberately imperfect agents, so the policy learns the protocol and its "parametric knowledge", and RL has
 * habits to improve on (guessing, needless searches, vague queries).
 */
import { Rng } from "../core/rng.ts";
import type { Datum, Metrics, Trajectory } from "../core/types.ts";
import { trajectoryToDatum } from "../algo/datum.ts";
import type { TrainingBackend } from "../core/training.ts";

/** Options of the SFT loop. */
export interface SftOptions {
  steps: number;
  batchSize: number;
  learningRate: number;
  gradClip: number;
  seed: number;
  /** Called after every step with its metrics (`loss` in nats per token) and wall time (ms). */
  onStep?: (step: number, metrics: Metrics, ms: number) => void;
  /**
   * Steps in a row whose loss or gradient norm is NaN/Inf before training stops (default 3). Each such step is
   * skipped (gradients discarded, weights and Adam state untouched), reported to `onStep` with
   * `train/skipped_nonfinite: 1` and to `onSkip` with what was not finite.
   */
  maxNonFiniteSteps?: number;
  onSkip?: (step: number, reason: string) => void;
}

/** Thrown when training meets NaN/Inf in `maxNonFiniteSteps` steps in a row. */
export class NonFiniteError extends Error {}

/**
 * Counts NaN/Inf steps in a row and stops training after `max` of them.
 */
export class NonFiniteGuard {
  /** Skipped steps in a row so far. */
  run = 0;
  constructor(
    private readonly max: number,
    private readonly stage: string,
  ) {}

  /**
   * Records one step's outcome. @param reason what was not finite (e.g. `loss NaN`), undefined for a clean step
   * @throws NonFiniteError naming the stage, step, value and limit after `max` bad steps in a row
   */
  record(step: number, reason: string | undefined): void {
    this.run = reason === undefined ? 0 : this.run + 1;
    if (reason !== undefined && this.run >= this.max) {
      throw new NonFiniteError(
        `${this.stage} step ${step}: ${reason} — ${this.run} step(s) in a row without a usable update (NaN/Inf loss or gradient norm, or no trajectory; rl.maxNonFiniteSteps ${this.max}); training stopped. Lower the learning rate or check the data and rewards of these steps.`,
      );
    }
  }
}

/**
 * Trains on demonstrations with cross entropy for `steps` Adam steps over shuffled epochs, with a linear
 * learning-rate warm-up over the first 5 % of steps and cosine decay to 10 %.
 * Each batch's loss is Σ w·ℓ / (B × the demonstrations' mean trained tokens), whose expectation is the whole set's
 * token-mean NLL: batches are length-grouped, and dividing each by its own token count (token-mean per batch) gave
 * every token of a short-demonstration batch more weight than one of a long batch — a decision shared by short and
 * long demonstrations (answer now vs call a tool first) was learned towards the short side (weather example: 47 %
 * of demonstrations call first, the warm start called first with probability 0.04–0.15).
 * @throws Error when there are no demonstrations; NonFiniteError after `maxNonFiniteSteps` NaN/Inf steps in a row
 */
export async function trainSft(backend: TrainingBackend, demos: readonly Trajectory[], options: SftOptions): Promise<void> {
  if (demos.length === 0) throw new Error("sft: no demonstrations to train on");
  const datums: Datum[] = demos.map((t) => trajectoryToDatum(t, 0));
  const meanTokens = datums.reduce((a, d) => a + d.weights.reduce((x, w) => x + w, 0), 0) / datums.length;
  if (!(meanTokens > 0)) throw new Error("sft: the demonstrations have no trained tokens (every loss mask is 0)");
  const rng = new Rng(options.seed);
  let batches: Datum[][] = [];
  const warmup = Math.max(1, Math.round(options.steps * 0.05));
  const guard = new NonFiniteGuard(options.maxNonFiniteSteps ?? 3, "sft");
  for (let step = 0; step < options.steps; step++) {
    const t0 = performance.now();
    if (batches.length === 0) batches = lengthGroupedBatches(datums, options.batchSize, rng);
    const batch = batches.shift()!;
    const progress = step / Math.max(1, options.steps - 1);
    const lr =
      options.learningRate * (step < warmup ? (step + 1) / warmup : 0.1 + 0.9 * 0.5 * (1 + Math.cos(Math.PI * progress)));
    const fb = await backend.forwardBackward(batch, "cross_entropy", { normalization: "constant", constantLength: meanTokens });
    let reason: string | undefined;
    let opt: Metrics = {};
    if (!Number.isFinite(fb.loss)) {
      reason = `loss ${fb.loss}`;
      if (!backend.discardGradients) throw new Error(`sft step ${step}: ${reason}: this backend cannot discard gradients, so the step cannot be skipped`);
      await backend.discardGradients();
    } else {
      opt = await backend.optimStep({ learningRate: lr, gradClip: options.gradClip });
      if (opt.skipped === 1 || (opt.grad_norm !== undefined && !Number.isFinite(opt.grad_norm))) reason = `grad_norm ${opt.grad_norm}`;
    }
    if (reason !== undefined) options.onSkip?.(step, reason);
    options.onStep?.(step, reason === undefined ? { loss: fb.loss, lr, ...opt } : { loss: fb.loss, lr, "train/skipped_nonfinite": 1 }, performance.now() - t0);
    guard.record(step, reason);
  }
}

/**
 * One epoch of batches with similar lengths (a bucket sampler): shuffle, cut into pools of 8 batches, sort each
 * pool by length, cut into batches, shuffle the batch order. Batches are padded to their longest datum, so grouping
 * by length saves most of the padding compute while the order stays random.
 */
export function lengthGroupedBatches<T extends { targetTokens: readonly number[] }>(items: readonly T[], batchSize: number, rng: Rng): T[][] {
  const shuffled = rng.shuffle(items);
  const batches: T[][] = [];
  const pool = batchSize * 8;
  for (let start = 0; start < shuffled.length; start += pool) {
    const sorted = shuffled.slice(start, start + pool).sort((a, b) => a.targetTokens.length - b.targetTokens.length);
    for (let i = 0; i < sorted.length; i += batchSize) batches.push(sorted.slice(i, i + batchSize));
  }
  return rng.shuffle(batches);
}
