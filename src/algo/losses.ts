/**
 * Reference (plain-array) policy-gradient losses. These are the spec: the embedded jax-js backend implements the
 * same math and is tested against them. Logprobs are in nats. Sources: Tinker loss docs (`importance_sampling`,
 * `ppo`), verl `verl/trainer/ppo/core_algos.py` (`compute_policy_loss_vanilla`, `kl_penalty`, `agg_loss`),
 * Schulman 2020 "Approximating KL divergence", Dr.GRPO (Liu et al. 2025 §3.1).
 */

/** Per-token PPO loss and whether the clipped branch was taken. */
export interface PpoTokenLoss {
  /** −min(r·A, clip(r)·A). */
  loss: number;
  /** True when the clipped surrogate is strictly smaller than the unclipped one (its gradient is 0). */
  clipped: boolean;
  /** The importance ratio r = exp(logprob − samplerLogprob). */
  ratio: number;
}

/**
 * PPO clipped surrogate for one token (Schulman et al. 2017; Tinker `ppo`; verl `compute_policy_loss_vanilla`
 * without its dual-clip `clip_ratio_c` branch and without its ±20 clamp of the log-ratio):
 * `loss = −min(r·A, clip(r, 1−clipLow, 1+clipHigh)·A)`, `r = exp(logprob − samplerLogprob)`.
 * `clipped` matches verl's `pg_clipfrac` test (`pg_losses2 > pg_losses1`).
 * @param logprob current-policy logprob of the token (nats)
 * @param samplerLogprob sampler logprob q of the token (nats)
 * @param advantage the token's advantage
 * @param clipLow lower clip ε (ratio floor 1 − clipLow)
 * @param clipHigh upper clip ε (ratio ceiling 1 + clipHigh)
 */
export function ppoClipTokenLoss(
  logprob: number,
  samplerLogprob: number,
  advantage: number,
  clipLow: number,
  clipHigh: number,
): PpoTokenLoss {
  const ratio = Math.exp(logprob - samplerLogprob);
  const clippedRatio = Math.min(Math.max(ratio, 1 - clipLow), 1 + clipHigh);
  const unclippedObj = ratio * advantage;
  const clippedObj = clippedRatio * advantage;
  return { loss: -Math.min(unclippedObj, clippedObj), clipped: clippedObj < unclippedObj, ratio };
}

/**
 * Importance-sampling policy-gradient loss for one token (Tinker `importance_sampling`):
 * `loss = −exp(logprob − samplerLogprob) · A`.
 * @param logprob current-policy logprob (nats)
 * @param samplerLogprob sampler logprob (nats)
 * @param advantage the token's advantage
 */
export function importanceSamplingTokenLoss(logprob: number, samplerLogprob: number, advantage: number): number {
  return -Math.exp(logprob - samplerLogprob) * advantage;
}

/**
 * k3 estimator of KL(π ‖ π_ref) for one token (Schulman 2020; verl `kl_penalty` `low_var_kl`/`k3`):
 * `exp(ref − lp) − (ref − lp) − 1` ≥ 0, 0 when equal. Unlike verl, no clamping (verl clamps ref − lp to ±20 and
 * the result to ±10).
 * @param logprob current-policy logprob (nats)
 * @param refLogprob reference-policy logprob (nats)
 * @returns the per-token KL estimate (nats)
 */
export function k3Kl(logprob: number, refLogprob: number): number {
  const d = refLogprob - logprob;
  return Math.exp(d) - d - 1;
}

/** How per-token losses are reduced to a scalar (see `LossConfig.normalization`). */
export type AggregationMode = "tokens" | "constant";

/**
 * Reduces per-token losses of a batch to one scalar.
 * - `tokens` (token-mean, verl `token-mean`): `Σ w·ℓ / Σ w` over the whole batch; 0 when `Σ w = 0`.
 * - `constant` (Dr.GRPO, Liu et al. 2025 §3.1): `Σ w·ℓ / (constantLength × batch)`. (verl's
 *   `seq-mean-token-sum-norm` divides by the max length only, not by the batch size.)
 * @param tokenLosses `[batch][seq]` per-token losses
 * @param weights `[batch][seq]` loss weights (0/1 masks, or any non-negative weights)
 * @param mode aggregation mode
 * @param constantLength the constant (tokens); required for `constant`
 * @throws Error on shape mismatch, or for `constant` without a positive `constantLength`
 */
export function aggregateLoss(
  tokenLosses: readonly (readonly number[])[],
  weights: readonly (readonly number[])[],
  mode: AggregationMode,
  constantLength?: number,
): number {
  if (tokenLosses.length !== weights.length) {
    throw new Error(`aggregateLoss: ${tokenLosses.length} loss rows but ${weights.length} weight rows`);
  }
  let weighted = 0;
  let weightSum = 0;
  tokenLosses.forEach((row, b) => {
    const w = weights[b];
    if (row.length !== w.length) {
      throw new Error(`aggregateLoss: row ${b} has ${row.length} losses but ${w.length} weights`);
    }
    for (let i = 0; i < row.length; i++) {
      if (w[i] === 0) continue; // a masked token never contributes, even if its loss is NaN/∞
      weighted += w[i] * row[i];
      weightSum += w[i];
    }
  });
  if (mode === "tokens") return weightSum === 0 ? 0 : weighted / weightSum;
  if (constantLength === undefined || !(constantLength > 0)) {
    throw new Error(`aggregateLoss: mode "constant" needs a positive constantLength, got ${constantLength}`);
  }
  if (tokenLosses.length === 0) return 0;
  return weighted / (constantLength * tokenLosses.length);
}
