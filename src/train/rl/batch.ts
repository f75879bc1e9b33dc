/**
 * The typed batch an RL step's stages pass along: one datum per trajectory of the groups it trains on, in group then
 * member order, with what the later stages read beside it (sampled-token masks, turn spans, the estimator's view).
 * `toBatch` builds it; `estimate` fills the advantages, `correct` the old / reference logprobs, `update` trains on it.
 */
import type { Datum, TrajectoryGroup } from "../../core/types.ts";
import { assertTrajectory, trajectoryToDatum } from "../../algo/datum.ts";
import type { EstimatorTrajectory } from "../../algo/estimators.ts";
import { hasTurnRewards, tokenRewardsFromTurns, turnAnchors, turnRewards, turnSpans } from "../../algo/turns.ts";
import type { ExperimentConfig } from "../config.ts";

/** One RL step's training batch. Arrays indexed by datum are `[batch]`, in group then member order. */
export interface RlBatch {
  /** The groups it trains on (DAPO's filter applied). */
  groups: TrajectoryGroup[];
  /**
   * Per trajectory: tokens, weights (the loss mask) and the sampler's logprobs; `advantages` from `estimate`;
   * logprobs corrected and `refLogprobs` set by `correct`.
   */
  datums: Datum[];
  /** Per datum `[seq-1]`: 1 where the policy sampled the target token (observation tokens are 0). */
  sampledMasks: number[][];
  /** Per datum: its turns' target indices (`turnSpans`). */
  spans: number[][][];
  /** `[group][member]`: the trajectories as the advantage estimator reads them. */
  estimatorInputs: EstimatorTrajectory[][];
  /**
   * Per datum (from `estimate`): its scalar advantage, or for token estimators its largest |A_t|; 0 = no gradient,
   * so the update leaves it out.
   */
  advantages: number[];
  /** `gae` only (from `estimate`): the critic's pre-update values and its regression targets, `[batch][seq-1]`. */
  critic?: { oldValues: number[][]; returns: number[][] };
}

/**
 * The batch of `groups`: each trajectory (checked) as a datum with advantage 0 (observation tokens trained only
 * when `rl.maskObservations` is off); with `rl.turnRewards` or `gigpo`, its turns' rewards and anchors for the
 * estimator (turn rewards also kept on the trajectory's reward).
 * @throws Error on a broken trajectory invariant
 */
export function toBatch(rl: ExperimentConfig["rl"], groups: TrajectoryGroup[]): RlBatch {
  const batch: RlBatch = { groups, datums: [], sampledMasks: [], spans: [], estimatorInputs: [], advantages: [] };
  const withTurnRewards = hasTurnRewards(rl.turnRewards);
  for (const g of groups) {
    batch.estimatorInputs.push(
      g.trajectories.map((traj) => {
        assertTrajectory(traj);
        const d = trajectoryToDatum(traj, 0, { trainObservations: !rl.maskObservations });
        batch.sampledMasks.push(traj.lossMask.slice(1));
        batch.datums.push(d);
        const t: EstimatorTrajectory = { reward: traj.reward!.total, mask: d.weights };
        const s = turnSpans(traj);
        batch.spans.push(s);
        if (withTurnRewards || rl.advantage === "gigpo") {
          // Turn-level credit (src/algo/turns.ts): step rewards at each turn's end, GiGPO's anchors.
          const tr = withTurnRewards ? turnRewards(traj, rl.turnRewards) : traj.turns.map(() => 0);
          if (withTurnRewards) {
            traj.reward!.turnRewards = tr;
            t.tokenRewards = tokenRewardsFromTurns(s, tr, traj.reward!.total, d.weights.length);
          }
          t.turns = { spans: s, rewards: tr, anchors: turnAnchors(traj) };
        }
        return t;
      }),
    );
  }
  return batch;
}
