/**
 * Group-relative advantages (GRPO, Shao et al. 2024; Dr.GRPO, Liu et al. 2025 §3.1) on plain arrays, mirroring verl
 * `verl/trainer/ppo/core_algos.py` `compute_grpo_outcome_advantage`.
 */

/** Options of `grpoAdvantages`. */
export interface GrpoOptions {
  /** true: divide by the group std (GRPO); false: only subtract the mean (Dr.GRPO). */
  normalizeStd: boolean;
  /** Added to the std before dividing (verl `epsilon`); default 1e-6. */
  eps?: number;
}

/**
 * Outcome advantages of one group of trajectories sampled for the same task.
 * - `normalizeStd: true` (GRPO): `(r − mean) / (std + eps)` with `std` the UNBIASED sample std (divisor n − 1),
 *   because verl uses `torch.std`, whose default is Bessel-corrected.
 * - `normalizeStd: false` (Dr.GRPO, Liu et al. 2025 §3.1): `r − mean`.
 * A group of size 1 gets `[0]` (no within-group comparison). Note verl instead uses mean 0, std 1 there, giving
 * `r / (1 + eps)`.
 * An all-equal group gets exactly 0 for every member: equality is decided on the rewards themselves, not on the
 * centred values, whose float mean is not exact (eight rewards of 0.1 sum to 0.7999…, which left 1.4e-11 behind and
 * sent "zero-advantage" datums to the update).
 * Huge rewards cannot overflow: when the largest |reward| exceeds 2^500, the rewards are first divided by a power of
 * two (exact in binary floating point, so results below that size are bit-identical to the plain formula); GRPO's
 * result is scale-free, Dr.GRPO's is scaled back and must be finite.
 * @param rewards total rewards `[group]`
 * @returns advantages `[group]` (reward units, or reward-std units when normalised)
 * @throws Error when a reward is not finite, or when a Dr.GRPO advantage exceeds the float range (±1.8e308)
 */
export function grpoAdvantages(rewards: readonly number[], options: GrpoOptions): number[] {
  const eps = options.eps ?? 1e-6;
  rewards.forEach((r, i) => {
    if (!Number.isFinite(r)) throw new Error(`grpoAdvantages: rewards[${i}] is not finite (${r})`);
  });
  const n = rewards.length;
  if (n <= 1 || rewards.every((r) => r === rewards[0])) return rewards.map(() => 0);
  // Σr and Σd² overflow long before a reward does (d² at |d| ≈ 1.3e154): work on r / 2^k when rewards are huge.
  const largest = rewards.reduce((a, r) => Math.max(a, Math.abs(r)), 0);
  // log2 of values near Number.MAX_VALUE rounds to 1024, and 2^1024 is Infinity: cap the exponent at 1023.
  const scale = largest > 2 ** 500 ? 2 ** Math.min(1023, Math.floor(Math.log2(largest))) : 1;
  const scaled = scale === 1 ? rewards : rewards.map((r) => r / scale);
  const mean = scaled.reduce((a, b) => a + b, 0) / n;
  const centred = scaled.map((r) => r - mean);
  if (!options.normalizeStd) {
    const out = scale === 1 ? centred : centred.map((d) => d * scale);
    const bad = out.findIndex((a) => !Number.isFinite(a));
    if (bad >= 0) throw new Error(`grpoAdvantages: Dr.GRPO advantage of rewards[${bad}] = ${rewards[bad]} overflows the float range; bound the reward weights`);
    return out;
  }
  const std = Math.sqrt(centred.reduce((a, d) => a + d * d, 0) / (n - 1));
  return centred.map((d) => d / (std + eps / scale));
}

/**
 * Broadcasts a trajectory's scalar advantage onto its loss-masked tokens (outcome supervision: every sampled token
 * shares the advantage; verl multiplies by `response_mask`).
 * @param advantage the trajectory's advantage
 * @param lossMask `[seq]` of 0/1
 * @returns `[seq]`: `advantage` where the mask is 1, else 0
 * @throws Error when a mask entry is not 0 or 1
 */
export function tokenAdvantages(advantage: number, lossMask: readonly number[]): number[] {
  return lossMask.map((m, i) => {
    if (m !== 0 && m !== 1) throw new Error(`tokenAdvantages: lossMask[${i}] = ${m}, expected 0 or 1`);
    return m === 1 ? advantage : 0;
  });
}
