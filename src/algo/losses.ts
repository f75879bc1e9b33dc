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

// ---------------------------------------------------------------------------------------------------------------
// veRL's policy losses and loss aggregation (volcengine/verl @ b178a3cd56f58b2d502255daba591e92833930a7,
// verl/trainer/ppo/core_algos.py), the reference the embedded backend is tested against.

/** veRL `actor.loss_agg_mode` values (core_algos.py:1025-1081 `agg_loss` @ b178a3c). */
export const LOSS_AGG_MODES = ["token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"] as const;
/** A name in `LOSS_AGG_MODES`. */
export type LossAggMode = (typeof LOSS_AGG_MODES)[number];

/**
 * veRL's `agg_loss` (core_algos.py:1025-1081 @ b178a3c) on one batch, with masks 0/1:
 * - `token-mean`: `Σ m·ℓ / Σ m` (0 when Σ m = 0)
 * - `seq-mean-token-sum`: mean over non-empty sequences of `Σ_t m·ℓ`
 * - `seq-mean-token-mean`: mean over non-empty sequences of `Σ_t m·ℓ / Σ_t m`
 * - `seq-mean-token-sum-norm` (Dr.GRPO): `Σ m·ℓ / (scaleFactor · batch)`. veRL's micro-batch form is
 *   `Σ m·ℓ / loss_scale_factor`, times the micro-batch's share of the mini-batch (dp_actor.py:576), which over a
 *   mini-batch is this; `scaleFactor` defaults there to the padded response length (here: `rl.maxTokensPerTurn ×
 *   env.maxTurns`).
 * @param tokenLosses `[batch][seq]`; masks `[batch][seq]` 0/1
 * @throws Error on a shape mismatch, or `seq-mean-token-sum-norm` without a positive `scaleFactor`
 */
export function aggLoss(tokenLosses: readonly (readonly number[])[], masks: readonly (readonly number[])[], mode: LossAggMode, scaleFactor?: number): number {
  if (tokenLosses.length !== masks.length) throw new Error(`aggLoss: ${tokenLosses.length} loss rows but ${masks.length} mask rows`);
  const rows = tokenLosses.map((row, b) => {
    if (row.length !== masks[b].length) throw new Error(`aggLoss: row ${b} has ${row.length} losses but ${masks[b].length} mask entries`);
    let sum = 0;
    let n = 0;
    row.forEach((l, t) => {
      if (masks[b][t] !== 0) {
        sum += masks[b][t] * l;
        n += masks[b][t];
      }
    });
    return { sum, n };
  });
  const nonEmpty = rows.filter((r) => r.n > 0);
  switch (mode) {
    case "token-mean": {
      const n = rows.reduce((a, r) => a + r.n, 0);
      return n === 0 ? 0 : rows.reduce((a, r) => a + r.sum, 0) / n;
    }
    case "seq-mean-token-sum":
      return nonEmpty.length === 0 ? 0 : nonEmpty.reduce((a, r) => a + r.sum, 0) / nonEmpty.length;
    case "seq-mean-token-mean":
      return nonEmpty.length === 0 ? 0 : nonEmpty.reduce((a, r) => a + r.sum / r.n, 0) / nonEmpty.length;
    case "seq-mean-token-sum-norm":
      if (scaleFactor === undefined || !(scaleFactor > 0)) throw new Error(`aggLoss: "seq-mean-token-sum-norm" needs a positive scaleFactor, got ${scaleFactor}`);
      return rows.length === 0 ? 0 : rows.reduce((a, r) => a + r.sum, 0) / (scaleFactor * rows.length);
  }
}

/** How a batch is handed to a backend so that its `Σ w·ℓ · invDenom` is `aggLoss(…, mode)`. */
export interface AggregationPlan {
  /** Per-token weights `[batch][seq]` (the masks, or the masks rescaled per sequence). */
  weights: number[][];
  /** The backend normalisation (`LossConfig.normalization`). */
  normalization: "tokens" | "constant";
  /** For `constant`: the divisor per datum (tokens). */
  constantLength?: number;
}

/**
 * Expresses an aggregation mode with the two normalisations every backend has (`tokens`: ÷ Σw; `constant`: ÷
 * (constantLength·batch)) and per-sequence weight scales, so it runs unchanged on the embedded backend and on a
 * Tinker server (whose losses are sums; the client folds the weights into the advantages):
 * - `token-mean` → masks, `tokens`
 * - `seq-mean-token-sum` → masks × B/B′ (B′ = non-empty sequences), `constant` with length 1
 * - `seq-mean-token-mean` → masks × B/(B′·n_b) (n_b = the sequence's masked tokens), `constant` with length 1
 * - `seq-mean-token-sum-norm` → masks, `constant` with length `scaleFactor`
 * Since every loss here is a per-token `ℓ_t` times its weight, `Σ_b Σ_t w·ℓ · invDenom` equals `aggLoss`.
 * @param masks `[batch][seq]` 0/1
 * @throws Error for `seq-mean-token-sum-norm` without a positive `scaleFactor`
 */
export function aggregationPlan(masks: readonly (readonly number[])[], mode: LossAggMode, scaleFactor?: number): AggregationPlan {
  const counts = masks.map((m) => m.reduce((a, x) => a + x, 0));
  const B = masks.length;
  const nonEmpty = counts.filter((n) => n > 0).length;
  switch (mode) {
    case "token-mean":
      return { weights: masks.map((m) => [...m]), normalization: "tokens" };
    case "seq-mean-token-sum": {
      const k = nonEmpty > 0 ? B / nonEmpty : 0;
      return { weights: masks.map((m) => m.map((x) => x * k)), normalization: "constant", constantLength: 1 };
    }
    case "seq-mean-token-mean":
      return {
        weights: masks.map((m, b) => m.map((x) => (counts[b] > 0 ? (x * B) / (nonEmpty * counts[b]) : 0))),
        normalization: "constant",
        constantLength: 1,
      };
    case "seq-mean-token-sum-norm":
      if (scaleFactor === undefined || !(scaleFactor > 0)) throw new Error(`aggregationPlan: "seq-mean-token-sum-norm" needs a positive scaleFactor, got ${scaleFactor}`);
      return { weights: masks.map((m) => [...m]), normalization: "constant", constantLength: scaleFactor };
  }
}

/** Per-token result of a policy loss: the loss, ∂loss/∂logprob (for testing backends' gradients), and stats. */
export interface PolicyTokenLoss {
  loss: number;
  /** ∂ℓ/∂lp at this token (nats⁻¹ · advantage units). */
  dLogprob: number;
  /** The clip that zeroes this token's gradient was taken (veRL `pg_clipfrac`). */
  clipped: boolean;
  /** Dual-clip's lower branch was taken (veRL `pg_clipfrac_lower`). */
  clippedLower: boolean;
  /** The ratio used (token ratio, or GSPO's sequence ratio). */
  ratio: number;
}

/** The clip settings of `vanillaPolicyTokenLoss`, named as in `LossConfig`. */
export interface PolicyClip {
  /** ε_low: the ratio is clipped below at 1 − clipLow. */
  clipLow: number;
  /** ε_high: the ratio is clipped above at 1 + clipHigh (DAPO clip-higher when > clipLow). */
  clipHigh: number;
  /** Dual-clip bound c > 1 (veRL clip_ratio_c), or undefined for no dual clip. */
  clipRatioC?: number;
}

/**
 * veRL `vanilla` policy loss for one token (core_algos.py:1159-1250 @ b178a3c), PPO clip with separate low/high
 * ε (DAPO clip-higher, Yu et al. 2025 §3.1) and dual-clip (Ye et al. 2020, arXiv 1912.09729 §4.1): with
 * `r = exp(lp − q)`, `ℓ₁ = max(−A·r, −A·clip(r, 1−εlow, 1+εhigh))`; for A < 0 with `clipRatioC = c` set,
 * `ℓ = min(−A·c, ℓ₁)`, else `ℓ = ℓ₁`. Without `clipRatioC` this is `ppoClipTokenLoss` (veRL's default c is 3.0;
 * ours is off, so the default `ppo` stays Tinker's `ppo`). Unlike veRL, the log-ratio is not clamped to ±20.
 * @param lp current logprob (nats); q sampler / old logprob (nats); A advantage
 * @param clip the clip range (`clipLow`, `clipHigh`) and the dual-clip bound `clipRatioC` (c > 1, or undefined for none)
 * @throws Error when clipRatioC ≤ 1 (veRL asserts the same)
 */
export function vanillaPolicyTokenLoss(lp: number, q: number, A: number, clip: PolicyClip): PolicyTokenLoss {
  const { clipLow, clipHigh, clipRatioC } = clip;
  if (clipRatioC !== undefined && !(clipRatioC > 1)) throw new Error(`clipRatioC must be > 1 (dual-clip PPO), got ${clipRatioC}`);
  const base = ppoClipTokenLoss(lp, q, A, clipLow, clipHigh);
  const r = base.ratio;
  let loss = base.loss;
  let clippedLower = false;
  let dLogprob = base.clipped ? 0 : -A * r;
  if (clipRatioC !== undefined && A < 0) {
    const l3 = -A * clipRatioC;
    if (base.loss > l3) {
      clippedLower = true;
      loss = l3;
      dLogprob = 0;
    }
  }
  return { loss, dLogprob, clipped: base.clipped, clippedLower, ratio: r };
}

/**
 * GSPO's sequence-level ratio (Zheng et al. 2025, arXiv 2507.18071 eq. 7; verl `gspo`, core_algos.py:1253-1326 @
 * b178a3c): `s = exp(mean over the sequence's masked tokens of (lp − q))`, the length-normalised sequence ratio.
 * veRL clamps its log at 10 (for numerical stability); so does this.
 * @param lp `[seq]` current logprobs, q `[seq]` old logprobs (nats), mask `[seq]` (non-zero = trained)
 */
export function gspoSequenceRatio(lp: readonly number[], q: readonly number[], mask: readonly number[]): number {
  let s = 0;
  let n = 0;
  mask.forEach((m, t) => {
    if (m !== 0) {
      s += lp[t] - q[t];
      n++;
    }
  });
  return Math.exp(Math.min(s / Math.max(n, 1), 10));
}

/**
 * GSPO token loss (verl `gspo` @ b178a3c): the token ratio `s_{i,t} = sg[s_i]·π/sg[π]` has the value of the sequence
 * ratio `s_i` and the gradient `s_i·∂lp_t`; `ℓ = max(−A·s, −A·clip(s, 1−εlow, 1+εhigh))`, gradient 0 where clipped.
 * veRL then aggregates with `seq-mean-token-mean` whatever `loss_agg_mode` says.
 * @param seqRatio `gspoSequenceRatio` of the token's sequence
 */
export function gspoTokenLoss(seqRatio: number, A: number, clipLow: number, clipHigh: number): PolicyTokenLoss {
  const s = seqRatio;
  const l1 = -A * s;
  const l2 = -A * Math.min(Math.max(s, 1 - clipLow), 1 + clipHigh);
  const clipped = l2 > l1;
  return { loss: Math.max(l1, l2), dLogprob: clipped ? 0 : -A * s, clipped, clippedLower: false, ratio: s };
}

/**
 * CISPO token loss (MiniMax-M1, arXiv 2506.13585 §3.1 eq. 4; verl `cispo`, core_algos.py:1721-1779 @ b178a3c; Tinker
 * `cispo`): `ℓ = −sg(clip(r, 1−εlow, 1+εhigh))·A·lp`; the clipped IS weight is detached, so every token keeps the
 * REINFORCE gradient `−clip(r)·A` (no token is silenced as PPO's clip does). `clipped` is veRL's `ratio ≠ clip(r)`.
 */
export function cispoTokenLoss(lp: number, q: number, A: number, clipLow: number, clipHigh: number): PolicyTokenLoss {
  const r = Math.exp(lp - q);
  const c = Math.min(Math.max(r, 1 - clipLow), 1 + clipHigh);
  return { loss: -c * A * lp, dLogprob: -c * A, clipped: c !== r, clippedLower: false, ratio: r };
}

/**
 * Tinker `dro` token loss (Richemond et al. 2024, arXiv 2405.19107; Tinker docs "Loss functions / DRO"):
 * `ℓ = −(lp·A − ½β(lp − q)²)`, ∂ℓ/∂lp = −A + β(lp − q).
 */
export function droTokenLoss(lp: number, q: number, A: number, beta: number): PolicyTokenLoss {
  const d = lp - q;
  return { loss: -(lp * A - 0.5 * beta * d * d), dLogprob: -A + beta * d, clipped: false, clippedLower: false, ratio: Math.exp(d) };
}

/**
 * Truncated importance-sampling weights for the sampler/trainer mismatch (Yao et al. 2025, "Your efficient RL
 * framework secretly brings you off-policy RL training"; verl `rollout_is: token`,
 * `compute_rollout_correction_weights`, verl/trainer/ppo/rollout_corr_helper.py:481-566 @ b178a3c):
 * `w_t = min(exp(π_old_t − q_t), cap)` with π_old the trainer's logprob of the sampled token before the update and
 * q the sampler's, detached, 0 where the mask is 0. veRL multiplies the per-token policy loss by `w`; ppo, cispo,
 * gspo and importance_sampling are linear in the advantage with a non-negative factor, so `A·w` is the same thing on
 * any backend. dro is not (its β penalty carries no A), so `rl.tis` with `dro` is a config error.
 * @param trainerLp `[seq]`, samplerLp `[seq]` (nats), mask `[seq]`
 * @param cap truncation (veRL `rollout_is_threshold`, default 2.0)
 * @throws Error when cap ≤ 0 (as veRL)
 */
export function tisWeights(trainerLp: readonly number[], samplerLp: readonly number[], mask: readonly number[], cap: number): number[] {
  if (!(cap > 0)) throw new Error(`rl.tisCap must be positive (veRL rollout_is_threshold), got ${cap}`);
  // veRL clamps the log-ratio at ±SAFETY_BOUND (20) before exp; so does this.
  return mask.map((m, t) => (m === 0 ? 0 : Math.min(Math.exp(Math.max(-20, Math.min(20, trainerLp[t] - samplerLp[t]))), cap)));
}
