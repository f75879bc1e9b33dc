/**
 * DAPO's data-side pieces (Yu et al. 2025, "DAPO", arXiv 2503.14476 §3.2 dynamic sampling, §3.4 overlong reward
 * shaping), as veRL implements them (volcengine/verl @ b178a3cd56f58b2d502255daba591e92833930a7:
 * `verl/workers/reward_manager/dapo.py:112-125` overlong buffer; docs/algo/dapo.md "Dynamic Sampling" for
 * `algorithm.filter_groups`). The clip-higher part is `rl.clipHigh`; the token-level loss is `rl.lossAggMode`.
 */
import { Rng } from "../core/rng.ts";
import type { Trajectory, TrajectoryGroup } from "../core/types.ts";

/**
 * DAPO's soft overlong penalty (veRL `DAPORewardManager`, dapo.py:116-122): with `expected = maxLength − buffer`,
 * `penalty = min(−(length − expected)/buffer · factor, 0)`: 0 up to `expected`, falling linearly to `−factor` at
 * `maxLength` (and below it past the budget).
 * @param length the response's length (tokens; here the episode's sampled tokens)
 * @param maxLength the response budget (tokens; veRL `max_resp_len`)
 * @param buffer the buffer (tokens, > 0, ≤ maxLength; veRL `overlong_buffer.len`)
 * @param factor the penalty at the budget (veRL `penalty_factor`)
 * @returns the penalty (≤ 0, reward units)
 * @throws Error when buffer is not in (0, maxLength]
 */
export function overlongPenalty(length: number, maxLength: number, buffer: number, factor: number): number {
  if (!(buffer > 0 && buffer <= maxLength)) throw new Error(`overlongPenalty: buffer ${buffer} must be in (0, maxLength ${maxLength}] (veRL asserts max_resp_len ≥ overlong_buffer.len)`);
  const expected = maxLength - buffer;
  return Math.min((-(length - expected) / buffer) * factor, 0);
}

/** Sampled (policy) tokens of a trajectory (tokens). */
export function sampledLength(traj: Trajectory): number {
  return traj.lossMask.reduce((a, m) => a + m, 0);
}

/**
 * Adds DAPO's overlong penalty to every rewarded trajectory of `groups` as the reward term `overlong` (weight 1),
 * and to its total. Mutates the trajectories' `reward`.
 * @throws Error when a trajectory has no reward yet, or on an invalid buffer
 */
export function applyOverlongShaping(groups: readonly TrajectoryGroup[], maxLength: number, buffer: number, factor: number): void {
  for (const g of groups) {
    for (const t of g.trajectories) {
      if (!t.reward) throw new Error(`applyOverlongShaping: trajectory ${t.task.id} has no reward yet`);
      const len = sampledLength(t);
      const p = overlongPenalty(len, maxLength, buffer, factor);
      t.reward.terms.push({ name: "overlong", value: p, weight: 1, explanation: `DAPO overlong shaping: ${len} sampled tokens, budget ${maxLength}, buffer ${buffer}` });
      t.reward.total += p;
    }
  }
}

/**
 * DAPO dynamic sampling's filter (veRL `algorithm.filter_groups` with metric = the total reward): a group is kept
 * when its members' rewards are not all equal (an all-equal group has zero group-relative advantage everywhere).
 * @returns the groups whose total rewards differ, in order
 * @throws Error when a trajectory has no reward
 */
export function informativeGroups(groups: readonly TrajectoryGroup[]): TrajectoryGroup[] {
  return groups.filter((g) => {
    const r = g.trajectories.map((t) => {
      if (!t.reward) throw new Error(`informativeGroups: trajectory ${t.task.id} has no reward`);
      return t.reward.total;
    });
    return r.some((x) => x !== r[0]);
  });
}

/** Options of {@link dynamicSampling}. */
export interface DynamicSamplingOptions {
  /** Groups a step trains on (its number of tasks, veRL `train_batch_size`). */
  want: number;
  /** Most batches sampled, the first included (`rl.maxGenBatches`, veRL `max_num_gen_batches`). */
  maxBatches: number;
  /**
   * Collects and rewards extra batch number `batch` (1, 2, …) for `need` more groups (`need` ≥ 1); its groups are
   * filtered here.
   */
  collect(need: number, batch: number): Promise<readonly TrajectoryGroup[]>;
}

/**
 * DAPO dynamic sampling around a step's collection: keeps the informative groups of the first (rewarded) batch, and
 * collects more batches until `want` groups remain or `maxBatches` batches were sampled, one batch at a time
 * (veRL `RayDAPOTrainer.fit`, recipe/dapo/dapo_ray_trainer.py).
 * @param first the rewarded groups of the step's first batch
 * @returns the first `want` informative groups in collection order, and how many batches were sampled
 * @throws what `options.collect` throws; Error when a trajectory has no reward
 */
export async function dynamicSampling(
  first: readonly TrajectoryGroup[],
  options: DynamicSamplingOptions,
): Promise<{ groups: TrajectoryGroup[]; batches: number }> {
  let groups = informativeGroups(first);
  let batches = 1;
  while (groups.length < options.want && batches < options.maxBatches) {
    const extra = await options.collect(options.want - groups.length, batches);
    groups = [...groups, ...informativeGroups(extra)];
    batches++;
  }
  return { groups: groups.slice(0, options.want), batches };
}

/**
 * DAPO dynamic sampling's source of extra prompts (`RlContext.moreTasks`): as veRL's trainer, which keeps drawing
 * *new* batches from the dataloader until enough groups have non-equal rewards (`RayDAPOTrainer.fit`,
 * recipe/dapo/dapo_ray_trainer.py; `algorithm.filter_groups`), each call returns the next `n` tasks of a seeded
 * shuffle of the training tasks not in the step's batch; when those run out, a fresh shuffle of all of `train`.
 * Deterministic: the same `train`, `batch` and `seed` give the same sequence of tasks.
 * @param train the world's training tasks `[T]`; batch the step's own tasks; seed the step's seed (uint32)
 * @returns `(n) => n tasks` (fewer only when `train` is empty)
 */
export function moreTasksFrom<T>(train: readonly T[], batch: readonly T[], seed: number): (n: number) => T[] {
  const rng = new Rng((seed ^ 0x85ebca6b) >>> 0);
  const inBatch = new Set(batch);
  let pool = rng.shuffle(train.filter((t) => !inBatch.has(t)));
  let at = 0;
  return (n: number) => {
    const out: T[] = [];
    while (out.length < n && train.length > 0) {
      if (at >= pool.length) {
        pool = rng.shuffle(train);
        at = 0;
      }
      out.push(pool[at++]);
    }
    return out;
  };
}
