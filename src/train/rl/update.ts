/**
 * The update stage of an RL step: the policy loss over minibatches of the informative datums (the first minibatch is
 * on-policy, later ones are clipped by PPO), PPO-ptx replay in each, an optimizer step per minibatch (skipped when a
 * loss or gradient is not finite), then the critic's fit on the step's returns (`gae`).
 */
import type { Datum, Metrics } from "../../core/types.ts";
import { aggregationPlan } from "../../algo/losses.ts";
import { backendLossOf, lossAggModeOf } from "../../algo/policyLoss.ts";
import type { LossConfig } from "../../core/training.ts";
import type { RlBatch } from "./batch.ts";
import { responseBudget } from "./collect.ts";
import type { RlContext } from "./context.ts";
import { criticOf } from "./critic.ts";

/**
 * Scales a replay batch's weights so that, under `normalization: "constant"` with `constantLength = 1`, its loss is
 * `coef × (mean cross entropy over its weighted tokens)` whatever the batch's length.
 */
export function ptxDatums(batch: readonly Datum[], coef: number): Datum[] {
  const total = batch.reduce((a, d) => a + d.weights.reduce((x, y) => x + y, 0), 0);
  const scale = total > 0 ? (coef * batch.length) / total : 0;
  return batch.map((d) => ({ ...d, weights: d.weights.map((w) => w * scale) }));
}

/** What the update did: the metrics of each applied optimizer step and critic fit, and how many datums it trained on. */
export interface UpdateResult {
  /** One entry per applied minibatch (`loss`, the loss's metrics, `ptx_loss`, the optimizer's), then the critic's. */
  steps: Metrics[];
  /** Datums with a nonzero advantage (the others carry no gradient and are left out). */
  informative: number;
}

/**
 * Update: `rl.minibatches` forward/backward + optimizer steps over the batch's informative datums, each with
 * `rl.ptxBatchSize` replayed demonstrations when `rl.ptxCoef` > 0; a minibatch whose loss (or PTX loss) or gradient
 * norm is not finite is skipped (`ctx.onSkippedUpdate`). Then the critic fits the returns (`batch.critic`).
 * @throws Error when a loss is not finite and the backend cannot discard gradients; what the backend throws
 */
export async function update(ctx: RlContext, batch: RlBatch): Promise<UpdateResult> {
  const { backend, config } = ctx;
  const rl = config.rl;
  const loss = backendLossOf(rl);
  const aggMode = lossAggModeOf(rl);
  const lossConfig: LossConfig = {
    ...loss.config,
    klCoef: rl.klCoef,
    normalization: aggMode === "seq-mean-token-sum-norm" ? "constant" : "tokens",
    constantLength: responseBudget(config),
  };
  const steps: Metrics[] = [];
  const informative = batch.datums.filter((_, i) => batch.advantages[i] !== 0);
  const mbSize = Math.ceil(informative.length / rl.minibatches);
  for (let start = 0; start < informative.length; start += mbSize) {
    let mb = informative.slice(start, start + mbSize);
    let mbConfig = lossConfig;
    if (aggMode === "seq-mean-token-sum" || aggMode === "seq-mean-token-mean") {
      // Per-sequence means as per-token weights over a constant divisor (aggregationPlan), per minibatch as veRL.
      const plan = aggregationPlan(mb.map((d) => d.weights), aggMode);
      mb = mb.map((d, i) => ({ ...d, weights: plan.weights[i] }));
      mbConfig = { ...lossConfig, normalization: plan.normalization, constantLength: plan.constantLength };
    }
    const fb = await backend.forwardBackward(mb, loss.lossFn, mbConfig);
    const ptx: Metrics = {};
    if (ctx.replay && rl.ptxCoef > 0) {
      const replay = ctx.replay;
      const demos = Array.from({ length: rl.ptxBatchSize }, () => replay.datums[replay.next()]);
      const r = await backend.forwardBackward(ptxDatums(demos, rl.ptxCoef), "cross_entropy", { normalization: "constant", constantLength: 1 });
      ptx.ptx_loss = r.loss / rl.ptxCoef;
    }
    // A NaN/Inf loss: drop this minibatch's gradients instead of letting them poison the weights and Adam moments.
    const badLoss = !Number.isFinite(fb.loss) ? `loss ${fb.loss}` : ptx.ptx_loss !== undefined && !Number.isFinite(ptx.ptx_loss) ? `ptx_loss ${ptx.ptx_loss}` : undefined;
    if (badLoss !== undefined) {
      if (!backend.discardGradients) throw new Error(`${badLoss}: this backend cannot discard gradients, so the update cannot be skipped`);
      await backend.discardGradients();
      ctx.onSkippedUpdate?.(badLoss);
      continue;
    }
    const opt = await backend.optimStep({ learningRate: rl.learningRate, gradClip: rl.gradClip });
    if (opt.skipped === 1 || (opt.grad_norm !== undefined && !Number.isFinite(opt.grad_norm))) {
      ctx.onSkippedUpdate?.(`grad_norm ${opt.grad_norm}`); // the embedded backend refused it (weights unchanged)
      continue;
    }
    steps.push({ loss: fb.loss, ...fb.metrics, ...ptx, ...opt });
  }
  if (batch.critic) {
    // The critic regresses the GAE returns of the whole batch (veRL update_critic), clipped around the old values.
    const vf = await criticOf(ctx)!.update(batch.datums, batch.critic.returns, batch.critic.oldValues);
    for (const [k, v] of Object.entries(vf)) steps.push({ [k]: v });
  }
  return { steps, informative: informative.length };
}
