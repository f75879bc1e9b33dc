/**
 * The correct stage of an RL step: the "old" logprobs the loss compares against (the sampler's, the current policy's
 * for observation tokens, truncated importance sampling for the sampler/trainer mismatch), then the frozen
 * reference policy's logprobs for the KL term and the `hack/kl_ref` monitor.
 */
import type { Metrics } from "../../core/types.ts";
import { tisWeights } from "../../algo/losses.ts";
import { referenceKl } from "../../reward/detectors.ts";
import type { RlBatch } from "./batch.ts";
import type { RlContext } from "./context.ts";

/**
 * Correct: the old logprobs ({@link correctOldLogprobs}), then the reference's ({@link referenceLogprobs}).
 * @returns their metrics, `hack/kl_ref` first (the key order `metrics.jsonl` has always had)
 */
export async function correct(ctx: RlContext, batch: RlBatch): Promise<Metrics> {
  const tis = await correctOldLogprobs(ctx, batch);
  const kl = await referenceLogprobs(ctx, batch);
  return { ...kl, ...tis };
}

/**
 * Old-logprob correction, when observation tokens are trained (`rl.maskObservations` off) or `rl.tis` is on. One
 * forward of the current (pre-update) policy over the batch: observation tokens were never sampled, so they have no
 * sampler logprob and take the current policy's, as veRL recomputes old_log_prob with the actor. Sampled tokens keep
 * the sampler's — unless TIS, where the trainer's logprob is the PPO "old" policy and min(π_trainer/π_sampler,
 * `rl.tisCap`) weights the token's advantage. Mutates the datums' `logprobs` (and `advantages` under TIS).
 * @returns `tis/weight_mean`, `tis/truncated_fraction`, `tis/abs_logprob_diff` under TIS (over sampled tokens), else {}
 */
export async function correctOldLogprobs(ctx: RlContext, batch: RlBatch): Promise<Metrics> {
  const rl = ctx.config.rl;
  const { datums, sampledMasks } = batch;
  // DAPO's filter can leave nothing to train on (every group all-equal after rl.maxGenBatches batches).
  if (!((!rl.maskObservations || rl.tis) && datums.length > 0)) return {};
  const current = await ctx.backend.computeLogprobs(datums);
  let wSum = 0;
  let truncated = 0;
  let diff = 0;
  let n = 0;
  datums.forEach((d, b) => {
    const q = d.logprobs!;
    if (rl.tis) {
      const w = tisWeights(current[b], q, sampledMasks[b], rl.tisCap);
      w.forEach((x, i) => {
        if (sampledMasks[b][i] !== 1) return;
        const raw = Math.exp(current[b][i] - q[i]);
        wSum += x;
        truncated += raw > rl.tisCap ? 1 : 0;
        diff += Math.abs(current[b][i] - q[i]);
        n++;
      });
      d.advantages = d.advantages!.map((a, i) => (sampledMasks[b][i] === 1 ? a * w[i] : a));
    }
    d.logprobs = q.map((lp, i) => (sampledMasks[b][i] === 1 && !rl.tis ? lp : d.weights[i] === 1 ? current[b][i] : 0));
  });
  if (!(rl.tis && n > 0)) return {};
  return { "tis/weight_mean": wSum / n, "tis/truncated_fraction": truncated / n, "tis/abs_logprob_diff": diff / n };
}

/**
 * The reference policy's logprobs, when `ctx.reference` is set: on every datum as `refLogprobs` for the k3 KL term
 * when `rl.klCoef` > 0; else on the first two episodes of each group only, for the monitor (a quarter of the default
 * batch: a forward over the whole batch costs as much as half an update).
 * @returns `hack/kl_ref` (k1 KL of the sampled tokens, old logprobs vs the reference's), or {} without a reference
 */
export async function referenceLogprobs(ctx: RlContext, batch: RlBatch): Promise<Metrics> {
  const rl = ctx.config.rl;
  const { datums, sampledMasks } = batch;
  if (!ctx.reference || datums.length === 0) return {};
  const picked = rl.klCoef > 0 ? datums.map((_, i) => i) : datums.map((_, i) => i).filter((i) => i % rl.groupSize < 2);
  const ref = await ctx.reference.computeLogprobs(picked.map((i) => datums[i]));
  if (rl.klCoef > 0) datums.forEach((d, i) => (d.refLogprobs = ref[i]));
  return { "hack/kl_ref": referenceKl(picked.map((i) => datums[i].logprobs!), ref, picked.map((i) => sampledMasks[i])) };
}
