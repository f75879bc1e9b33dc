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

// ---------------------------------------------------------------------------------------------------------------
// More estimators, named as veRL's `algorithm.adv_estimator` (verl `verl/trainer/ppo/core_algos.py`
// `AdvantageEstimator`, volcengine/verl @ b178a3cd56f58b2d502255daba591e92833930a7).

/** `true` when every reward equals the first (decided on the rewards, as in `grpoAdvantages`). */
function allEqual(xs: readonly number[]): boolean {
  return xs.every((x) => x === xs[0]);
}

function checkFinite(fn: string, xs: readonly number[]): void {
  xs.forEach((r, i) => {
    if (!Number.isFinite(r)) throw new Error(`${fn}: rewards[${i}] is not finite (${r})`);
  });
}

/**
 * RLOO outcome advantages (Ahmadian et al. 2024, "Back to Basics", arXiv 2402.14740 §3.2; verl `rloo`,
 * `compute_rloo_outcome_advantage`, core_algos.py:476-525 @ b178a3c): each member's baseline is the mean of the
 * OTHER members, `A_i = r_i − (Σ_{j≠i} r_j)/(n−1)`, which verl writes as `r_i·n/(n−1) − mean·n/(n−1)` (the same value;
 * this computes verl's form). A group of size 1 gets `[0]` (verl leaves the raw reward there); an all-equal group
 * gets exactly 0.
 * @param rewards total rewards `[group]`
 * @returns advantages `[group]` (reward units)
 * @throws Error when a reward is not finite
 */
export function rlooAdvantages(rewards: readonly number[]): number[] {
  checkFinite("rlooAdvantages", rewards);
  const n = rewards.length;
  if (n <= 1 || allEqual(rewards)) return rewards.map(() => 0);
  const mean = rewards.reduce((a, b) => a + b, 0) / n;
  const k = n / (n - 1);
  return rewards.map((r) => r * k - mean * k);
}

/**
 * OPO outcome advantages (Hao et al. 2025, "On-Policy RL with Optimal reward baseline", arXiv 2505.23585; verl `opo`,
 * `compute_opo_outcome_advantage`, core_algos.py:528-579 @ b178a3c): the baseline is the length-weighted mean reward
 * of the group, `b = Σ_j |y_j|·r_j / Σ_j |y_j|`, `A_i = r_i − b`. A group of size 1 gets `[0]` (verl: the raw reward);
 * an all-equal group gets exactly 0.
 * @param rewards total rewards `[group]`
 * @param lengths each member's trained-token count `[group]` (tokens, ≥ 0)
 * @returns advantages `[group]` (reward units)
 * @throws Error when a reward is not finite, the lengths differ in count, or all lengths are 0
 */
export function opoAdvantages(rewards: readonly number[], lengths: readonly number[]): number[] {
  checkFinite("opoAdvantages", rewards);
  if (lengths.length !== rewards.length) throw new Error(`opoAdvantages: ${rewards.length} rewards but ${lengths.length} lengths`);
  const n = rewards.length;
  if (n <= 1 || allEqual(rewards)) return rewards.map(() => 0);
  const total = lengths.reduce((a, b) => a + b, 0);
  if (!(total > 0)) throw new Error("opoAdvantages: every member has 0 trained tokens");
  const b = rewards.reduce((a, r, i) => a + lengths[i] * r, 0) / total;
  return rewards.map((r) => r - b);
}

/**
 * Pass@k advantages (Chen et al. 2025, arXiv 2503.19595; verl `grpo_passk`, `compute_grpo_passk_outcome_advantage`,
 * core_algos.py:360-419 @ b178a3c): only the group's best member is reinforced, by `r_max − r_second`, divided by the
 * group's unbiased std + eps when `normalizeStd`; every other member gets 0. Ties for the best go to the first
 * (torch.topk's order on equal values is not specified; verl's pick is then arbitrary).
 * @param rewards total rewards `[group]`, at least 2
 * @returns advantages `[group]`
 * @throws Error when a reward is not finite or the group has fewer than 2 members (as verl)
 */
export function passkAdvantages(rewards: readonly number[], options: GrpoOptions): number[] {
  checkFinite("passkAdvantages", rewards);
  const n = rewards.length;
  if (n < 2) throw new Error(`passkAdvantages: Pass@k needs at least 2 members per group, got ${n}`);
  const out = rewards.map(() => 0);
  if (allEqual(rewards)) return out;
  let best = 0;
  for (let i = 1; i < n; i++) if (rewards[i] > rewards[best]) best = i;
  const second = Math.max(...rewards.filter((_, i) => i !== best));
  let a = rewards[best] - second;
  if (options.normalizeStd) {
    const mean = rewards.reduce((x, y) => x + y, 0) / n;
    const std = Math.sqrt(rewards.reduce((x, r) => x + (r - mean) ** 2, 0) / (n - 1));
    a /= std + (options.eps ?? 1e-6);
  }
  out[best] = a;
  return out;
}

/**
 * Masked whitening over a whole batch (verl `verl_F.masked_whiten`, verl/utils/torch_functional.py:322-339 @
 * b178a3c): `(x − mean) · rsqrt(var + 1e-8)` with mean and the UNBIASED variance (Bessel factor N/(N−1), N = number
 * of masked entries, `masked_var`) over the entries whose mask is 1; entries whose mask is 0 become 0 here (verl
 * whitens them too, and its callers multiply by the mask afterwards). Fewer than 2 masked entries, or all masked
 * entries equal, give all zeros (verl raises for N ≤ 1).
 * @param values `[batch][seq]`
 * @param masks `[batch][seq]` of 0/1
 * @returns `[batch][seq]`
 * @throws Error on a shape mismatch or a non-finite masked value
 */
export function maskedWhiten(values: readonly (readonly number[])[], masks: readonly (readonly number[])[]): number[][] {
  if (values.length !== masks.length) throw new Error(`maskedWhiten: ${values.length} value rows but ${masks.length} mask rows`);
  const picked: number[] = [];
  values.forEach((row, b) => {
    if (row.length !== masks[b].length) throw new Error(`maskedWhiten: row ${b} has ${row.length} values but ${masks[b].length} mask entries`);
    row.forEach((v, t) => {
      if (masks[b][t] === 1) {
        if (!Number.isFinite(v)) throw new Error(`maskedWhiten: values[${b}][${t}] is not finite (${v})`);
        picked.push(v);
      }
    });
  });
  const n = picked.length;
  if (n < 2 || allEqual(picked)) return values.map((row) => row.map(() => 0));
  const mean = picked.reduce((a, b) => a + b, 0) / n;
  const variance = (picked.reduce((a, v) => a + (v - mean) ** 2, 0) / n) * (n / (n - 1));
  const inv = 1 / Math.sqrt(variance + 1e-8);
  return values.map((row, b) => row.map((v, t) => (masks[b][t] === 1 ? (v - mean) * inv : 0)));
}

/**
 * Discounted returns over a trajectory's policy tokens: `G_t = r_t + γ·G_{t'}` where `t'` is the next position whose
 * mask is 1 (observation / prompt tokens, mask 0, neither receive a return nor break the chain). This is verl's
 * REINFORCE++ return (core_algos.py:582-618 @ b178a3c) except at mask-0 positions inside a response: verl multiplies
 * the running return by the mask there ("reset after EOS"), which in a multi-turn trajectory zeroes the return of
 * every turn before the last tool observation (the zero-advantage bug of SkyRL #1507 / veRL RFC #7244). Rewards at
 * mask-0 positions are carried to the next earlier policy token.
 * @param rewards `[seq]` per-token rewards (e.g. the outcome reward at the last policy token, a turn reward at the
 *   last token of its turn)
 * @param mask `[seq]` of 0/1
 * @param gamma discount per policy token, in [0, 1]
 * @returns `[seq]` returns, 0 where the mask is 0
 * @throws Error on a length mismatch
 */
export function discountedReturns(rewards: readonly number[], mask: readonly number[], gamma: number): number[] {
  if (rewards.length !== mask.length) throw new Error(`discountedReturns: ${rewards.length} rewards but ${mask.length} mask entries`);
  const out = new Array<number>(rewards.length).fill(0);
  let running = 0;
  let pending = 0; // rewards seen at mask-0 positions, added to the next earlier policy token
  for (let t = rewards.length - 1; t >= 0; t--) {
    if (mask[t] !== 1) {
      pending += rewards[t];
      continue;
    }
    running = rewards[t] + pending + gamma * running;
    pending = 0;
    out[t] = running;
  }
  return out;
}

/**
 * REINFORCE++ advantages (Hu 2025, arXiv 2501.03262 §3; verl `reinforce_plus_plus`,
 * `compute_reinforce_plus_plus_outcome_advantage`, core_algos.py:582-618 @ b178a3c): per-token discounted returns
 * (`discountedReturns`, γ = verl `algorithm.gamma`, default 1.0), whitened over every policy token of the batch
 * (`maskedWhiten`, the batch-level normalisation that replaces the critic). No group baseline.
 * @param tokenRewards `[batch][seq]`
 * @param masks `[batch][seq]` 0/1 policy-token masks
 * @param gamma discount in [0, 1]
 * @returns `{ advantages, returns }`, both `[batch][seq]` (0 where the mask is 0)
 * @throws Error on shape mismatches
 */
export function reinforcePlusPlusAdvantages(
  tokenRewards: readonly (readonly number[])[],
  masks: readonly (readonly number[])[],
  gamma: number,
): { advantages: number[][]; returns: number[][] } {
  if (tokenRewards.length !== masks.length) throw new Error(`reinforcePlusPlusAdvantages: ${tokenRewards.length} reward rows but ${masks.length} mask rows`);
  const returns = tokenRewards.map((r, b) => discountedReturns(r, masks[b], gamma));
  return { advantages: maskedWhiten(returns, masks), returns };
}

/**
 * REINFORCE++-baseline advantages (Hu 2025, arXiv 2501.03262; verl `reinforce_plus_plus_baseline`,
 * `compute_reinforce_plus_plus_baseline_outcome_advantage`, core_algos.py:422-473 @ b178a3c): subtract the group's
 * mean reward (a group of one keeps its reward, mean 0 as verl), broadcast onto the trajectory's policy tokens, then
 * whiten over every policy token of the batch (`maskedWhiten`).
 * @param groups per group, the members' total rewards `[group]`
 * @param masks per group, per member, the 0/1 token mask `[group][member][seq]`
 * @returns advantages `[group][member][seq]`
 * @throws Error when a reward is not finite or the shapes disagree
 */
export function reinforcePlusPlusBaselineAdvantages(
  groups: readonly (readonly number[])[],
  masks: readonly (readonly (readonly number[])[])[],
): number[][][] {
  if (groups.length !== masks.length) throw new Error(`reinforcePlusPlusBaselineAdvantages: ${groups.length} groups but ${masks.length} mask groups`);
  const rows: number[][] = [];
  const flatMasks: (readonly number[])[] = [];
  groups.forEach((rewards, g) => {
    checkFinite("reinforcePlusPlusBaselineAdvantages", rewards);
    if (rewards.length !== masks[g].length) throw new Error(`reinforcePlusPlusBaselineAdvantages: group ${g} has ${rewards.length} rewards but ${masks[g].length} masks`);
    const mean = rewards.length > 1 ? rewards.reduce((a, b) => a + b, 0) / rewards.length : 0;
    const centred = rewards.length > 1 && allEqual(rewards) ? rewards.map(() => 0) : rewards.map((r) => r - mean);
    rewards.forEach((_, i) => {
      rows.push(masks[g][i].map((m) => (m === 1 ? centred[i] : 0)));
      flatMasks.push(masks[g][i]);
    });
  });
  const white = maskedWhiten(rows, flatMasks);
  let k = 0;
  return groups.map((rewards) => rewards.map(() => white[k++]));
}

/**
 * Generalised Advantage Estimation over one trajectory's policy tokens (Schulman et al. 2016, arXiv 1506.02438 eq.
 * 16; verl `gae`, `compute_gae_advantage_return`, core_algos.py:214-263 @ b178a3c, itself from TRL's PPO trainer):
 * backwards over t, `δ_t = r_t + γ·V_next − V_t`, `Â_t = δ_t + γλ·Â_next`, where `V_next`/`Â_next` are those of the
 * next position whose mask is 1 (0 past the end): observation tokens are skipped, neither valued nor bootstrapped
 * from. `returns = Â + V` (the critic's regression target). Whitening over the batch is the caller's step
 * (`maskedWhiten`, as verl does after this loop).
 * @param rewards `[seq]` per-token rewards
 * @param values `[seq]` critic values V(s_t) (reward units)
 * @param mask `[seq]` 0/1
 * @param gamma discount (verl default 1.0), lam GAE λ (verl default 1.0)
 * @returns `{ advantages, returns }`, `[seq]` each, 0 where the mask is 0
 * @throws Error on length mismatches
 */
export function gaeAdvantages(
  rewards: readonly number[],
  values: readonly number[],
  mask: readonly number[],
  gamma: number,
  lam: number,
): { advantages: number[]; returns: number[] } {
  if (rewards.length !== mask.length || values.length !== mask.length) {
    throw new Error(`gaeAdvantages: lengths differ: rewards ${rewards.length}, values ${values.length}, mask ${mask.length}`);
  }
  const T = mask.length;
  const advantages = new Array<number>(T).fill(0);
  const returns = new Array<number>(T).fill(0);
  let nextValue = 0;
  let lastGae = 0;
  for (let t = T - 1; t >= 0; t--) {
    const delta = rewards[t] + gamma * nextValue - values[t];
    const gae = delta + gamma * lam * lastGae;
    if (mask[t] === 1) {
      nextValue = values[t];
      lastGae = gae;
      advantages[t] = gae;
      returns[t] = gae + values[t];
    }
  }
  return { advantages, returns };
}
