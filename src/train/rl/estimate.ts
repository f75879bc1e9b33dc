/**
 * The estimate stage of an RL step: the `rl.advantage` estimator (src/algo/estimators.ts) over the batch's groups,
 * reading the critic's values first for `gae` (the backend's value head, `./critic.ts`).
 */
import { estimateAdvantages, ESTIMATORS } from "../../algo/estimators.ts";
import { perTurnAdvantage } from "../../algo/turns.ts";
import type { RlBatch } from "./batch.ts";
import type { RlContext } from "./context.ts";
import { criticOf } from "./critic.ts";

/**
 * Sets each datum's token advantages, `batch.advantages`, each trajectory's `reward.turnAdvantages` (what each turn
 * was credited, so in the run's samples), and for `gae` `batch.critic` (old values and returns).
 * @throws Error when `gae` runs on a backend without a value head (a non-empty batch), or on estimator errors
 */
export async function estimate(ctx: RlContext, batch: RlBatch): Promise<void> {
  const rl = ctx.config.rl;
  const { datums, estimatorInputs } = batch;
  const needsValues = ESTIMATORS[rl.advantage].needsValues;
  // Made at the first gae step even when DAPO's filter left nothing to train on, so checkpoints carry it from then on.
  const critic = needsValues ? criticOf(ctx) : undefined;
  let oldValues: number[][] | undefined;
  if (needsValues && datums.length > 0) {
    if (!critic) throw new Error('rl.advantage "gae": this backend has no value head (policy.backend embedded has one)');
    const values = await critic.values(datums);
    let k = 0;
    estimatorInputs.forEach((g) => g.forEach((t) => (t.values = values[k++])));
    oldValues = values;
  }
  const estimated = estimateAdvantages(rl.advantage, estimatorInputs, { gamma: rl.gamma, lam: rl.lam, gigpoStepWeight: rl.gigpoStepWeight, gigpoNormStd: rl.gigpoNormStd });
  let k = 0;
  estimated.tokens.forEach((g, gi) =>
    g.forEach((tok, i) => {
      batch.groups[gi].trajectories[i].reward!.turnAdvantages = perTurnAdvantage(tok, batch.spans[k]);
      datums[k++].advantages = tok;
      batch.advantages.push(estimated.scalars ? estimated.scalars[gi][i] : tok.reduce((a, x) => Math.max(a, Math.abs(x)), 0));
    }),
  );
  // The update stage fits the critic to these returns (veRL update_critic), clipped around the old values.
  if (oldValues) batch.critic = { oldValues, returns: estimated.returns!.flat() };
}
