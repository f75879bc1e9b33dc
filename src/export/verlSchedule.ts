/**
 * Batch sizes and epochs of a veRL run, from the number of training rows (`verlSchedule`), so that `run.sh` makes a
 * real number of updates on any world.
 */

/** GRPO group size: responses sampled per prompt (`actor_rollout_ref.rollout.n`, veRL's Search-R1 example). */
export const ROLLOUT_N = 5;

/** Fewest training steps (batches) an epoch should have; the automatic batch size is at most rows / this. */
export const MIN_STEPS_PER_EPOCH = 4;

/** Default least number of training steps of a run (`VerlScheduleOptions.minSteps`). */
export const DEFAULT_MIN_STEPS = 50;

/** Largest automatic `data.train_batch_size` (veRL's `search_multiturn_grpo.yaml` value). */
export const MAX_TRAIN_BATCH_SIZE = 256;

/**
 * The automatic batch size is a multiple of this: then batch × `ROLLOUT_N` responses split evenly over 1, 2, 4 or 8
 * GPUs, as veRL requires (`real_train_batch_size % n_gpus == 0`, v0.5.0 `ray_trainer.py` `_validate_config`,
 * v0.9.0 `verl/utils/config.py` `validate_config`).
 */
export const BATCH_QUANTUM = 8;

/** Options of `verlSchedule`. */
export interface VerlScheduleOptions {
  /** Least number of training steps (default `DEFAULT_MIN_STEPS`); epochs are added until it is reached. */
  minSteps?: number;
  /** Prompts per step instead of the automatic size (an integer in [1, rows]; run.sh checks it against the GPUs). */
  trainBatchSize?: number;
}

/**
 * How a veRL run over `rows` training prompts is sized. veRL's train dataloader uses `drop_last=True` with
 * `data.train_batch_size` (v0.5.0 `ray_trainer.py` `_create_dataloader`; v0.9.0 `verl/trainer/ppo/v1/trainer_base.py`:
 * `steps_per_epoch = len(train_dataset) // train_batch_size`), and runs `trainer.total_epochs` epochs, stopping early
 * at `trainer.total_training_steps` (which cannot add steps beyond the epochs).
 */
export interface VerlSchedule {
  /** Training rows (prompts) in train.parquet. */
  rows: number;
  /** `data.train_batch_size`: prompts per training step (each gets `ROLLOUT_N` responses). */
  trainBatchSize: number;
  /** `actor_rollout_ref.actor.ppo_mini_batch_size`: prompts per optimizer update (a divisor of `trainBatchSize`). */
  ppoMiniBatchSize: number;
  /** Steps per epoch: ⌊rows / trainBatchSize⌋ (the last partial batch is dropped). */
  stepsPerEpoch: number;
  /** `trainer.total_epochs`: ⌈minSteps / stepsPerEpoch⌉. */
  epochs: number;
  /** `trainer.total_training_steps` = stepsPerEpoch × epochs (≥ minSteps). */
  totalSteps: number;
  /** Optimizer updates of the actor over the run: totalSteps × trainBatchSize / ppoMiniBatchSize (`ppo_epochs` 1). */
  updates: number;
  /** `trainer.test_freq`: validation every ⌈totalSteps / 5⌉ steps (and after the last; before the first by veRL's default). */
  testFreq: number;
  /** `trainer.save_freq` = totalSteps: one checkpoint, after the last step. */
  saveFreq: number;
}

/**
 * Sizes a veRL run from the dataset so that it makes a real number of updates. Rule:
 * 1. batch B = the largest multiple of `BATCH_QUANTUM` (8) that is ≤ min(`MAX_TRAIN_BATCH_SIZE`, ⌊rows /
 *    `MIN_STEPS_PER_EPOCH`⌋) — at least 4 steps per epoch, and B × n divides over 1, 2, 4 or 8 GPUs
 *    (`trainBatchSize` replaces B when given);
 * 2. steps per epoch S = ⌊rows / B⌋ (veRL drops the last partial batch);
 * 3. epochs E = ⌈minSteps / S⌉, total steps T = S × E (≥ minSteps, default 50);
 * 4. mini-batch M = B / 2 when that is still a multiple of 8 (two optimizer updates per step, as veRL's example
 *    512 / 256), else B.
 * E.g. 280 rows → B 64, S 4, E 13, T 52, M 32; 40 rows → B 8, S 5, E 10, T 50, M 8.
 * @param rows training prompts (rows of train.parquet)
 * @throws Error when rows < 32 (no batch of ≥ 8 prompts fits 4 times), or an option is out of range
 */
export function verlSchedule(rows: number, options: VerlScheduleOptions = {}): VerlSchedule {
  const minSteps = options.minSteps ?? DEFAULT_MIN_STEPS;
  if (!Number.isInteger(minSteps) || minSteps < 1 || minSteps > 1_000_000) {
    throw new Error(`export verl: minSteps must be an integer in [1, 1000000], got ${minSteps}`);
  }
  if (!Number.isInteger(rows) || rows < 0) throw new Error(`export verl: rows must be a non-negative integer, got ${rows}`);
  let batch: number;
  if (options.trainBatchSize !== undefined) {
    batch = options.trainBatchSize;
    if (!Number.isInteger(batch) || batch < 1 || batch > rows) {
      throw new Error(
        `export verl: trainBatchSize must be an integer in [1, ${rows}] (the train split's rows; veRL drops a partial batch, so a larger one makes no step), got ${batch}`,
      );
    }
  } else {
    const least = MIN_STEPS_PER_EPOCH * BATCH_QUANTUM;
    if (rows < least) {
      throw new Error(
        `export verl: the train split has ${rows} rows; veRL needs at least ${least} (${MIN_STEPS_PER_EPOCH} steps per epoch of ≥ ${BATCH_QUANTUM} prompts, ` +
          `a multiple of ${BATCH_QUANTUM} so that batch × rollout.n ${ROLLOUT_N} splits over 1, 2, 4 or 8 GPUs) — raise env.options.numCountries ` +
          `(or lower env.options.testFraction), or pass trainBatchSize (--train-batch-size)`,
      );
    }
    batch = Math.floor(Math.min(MAX_TRAIN_BATCH_SIZE, Math.floor(rows / MIN_STEPS_PER_EPOCH)) / BATCH_QUANTUM) * BATCH_QUANTUM;
  }
  const stepsPerEpoch = Math.floor(rows / batch);
  const epochs = Math.ceil(minSteps / stepsPerEpoch);
  const totalSteps = stepsPerEpoch * epochs;
  const ppoMiniBatchSize = batch % (2 * BATCH_QUANTUM) === 0 ? batch / 2 : batch;
  return {
    rows,
    trainBatchSize: batch,
    ppoMiniBatchSize,
    stepsPerEpoch,
    epochs,
    totalSteps,
    updates: (totalSteps * batch) / ppoMiniBatchSize,
    testFreq: Math.max(1, Math.ceil(totalSteps / 5)),
    saveFreq: totalSteps,
  };
}
