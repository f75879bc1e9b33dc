/**
 * Trajectory → training datum (Tinker data model: `model_input` + `loss_fn_inputs` target_tokens / weights /
 * logprobs / advantages, next-token aligned), and the trajectory invariant check.
 */
import type { Datum, Trajectory } from "../core/types.ts";

/** `<task id>#<member>` (just the task id when the member is unknown). */
function trajectoryName(traj: Trajectory): string {
  return traj.member === undefined ? traj.task.id : `${traj.task.id}#${traj.member}`;
}

/**
 * Token integrity (TRL #5144: the trained tokens drift from the sampled ones): every token a turn generated
 * (`traj.sampled`, copied when the generator returned it) is the token at its position of `traj.tokens`, and, when
 * `targets` (a datum's `targetTokens`, `[seq-1]`) is given, the target at that position − 1. No-op when the
 * trajectory has no `sampled` record (built by hand).
 * @throws Error `token integrity: trajectory <task id>#<member> position <i>: trained token X, sampled Y`
 */
export function assertTokenIntegrity(traj: Trajectory, targets?: readonly number[]): void {
  for (const span of traj.sampled ?? []) {
    for (let j = 0; j < span.tokens.length; j++) {
      const pos = span.start + j;
      const want = span.tokens[j];
      const trained = targets === undefined ? traj.tokens[pos] : pos >= 1 ? targets[pos - 1] : traj.tokens[pos];
      if (trained !== want) {
        throw new Error(`token integrity: trajectory ${trajectoryName(traj)} position ${pos}: trained token ${trained}, sampled ${want}`);
      }
    }
  }
}

/**
 * Checks the invariants documented on `Trajectory`: `tokens`, `lossMask`, `logprobs` have equal length `[seq]`;
 * `promptLength` is an integer in [0, seq]; every mask entry is 0 or 1; the mask is 0 on the prompt; every logprob
 * is finite; the logprob is 0 wherever the mask is 0; the tokens at sampled positions are the sampled tokens
 * (`assertTokenIntegrity`).
 * @throws Error naming the trajectory's task id and the offending position
 */
export function assertTrajectory(traj: Trajectory): void {
  const id = traj.task.id;
  const n = traj.tokens.length;
  if (traj.lossMask.length !== n || traj.logprobs.length !== n) {
    throw new Error(
      `trajectory ${id}: length mismatch: tokens ${n}, lossMask ${traj.lossMask.length}, logprobs ${traj.logprobs.length}`,
    );
  }
  if (!Number.isInteger(traj.promptLength) || traj.promptLength < 0 || traj.promptLength > n) {
    throw new Error(`trajectory ${id}: promptLength ${traj.promptLength} outside [0, ${n}]`);
  }
  for (let i = 0; i < n; i++) {
    const m = traj.lossMask[i];
    const lp = traj.logprobs[i];
    if (m !== 0 && m !== 1) throw new Error(`trajectory ${id}: lossMask[${i}] = ${m}, expected 0 or 1`);
    if (m === 1 && i < traj.promptLength) {
      throw new Error(`trajectory ${id}: lossMask[${i}] = 1 inside the prompt (promptLength ${traj.promptLength})`);
    }
    if (!Number.isFinite(lp)) throw new Error(`trajectory ${id}: logprobs[${i}] = ${lp} is not finite`);
    if (m === 0 && lp !== 0) throw new Error(`trajectory ${id}: logprobs[${i}] = ${lp} where lossMask is 0 (expected 0)`);
  }
  assertTokenIntegrity(traj);
}

/** Options of `trajectoryToDatum`. */
export interface DatumOptions {
  /** Run `assertTrajectory` first (default true). */
  validate?: boolean;
  /** Reference-policy logprobs of the targets `[seq-1]` (nats), already target-aligned, for the k3 KL term. */
  refLogprobs?: readonly number[];
  /**
   * Train on observation tokens too: weight 1 on every target after the prompt, not only on sampled tokens
   * (Search-R1 Table 4's "w/o retrieved-token masking" ablation). Their `logprobs` stay 0 here; the caller must
   * fill them with the behaviour policy's logprobs (see `rlStep`). Default false.
   */
  trainObservations?: boolean;
}

/**
 * Builds the training datum of a trajectory. With `n = tokens.length`, all outputs are `[n-1]`:
 * `modelInput = tokens[0..n-2]`, `targetTokens = tokens[1..n-1]`, `weights = lossMask[1..]`,
 * `logprobs = logprobs[1..]`, `advantages[i] = advantage` where `weights[i] = 1`, else 0. Prompt, forced and
 * observation tokens therefore get weight 0 (their mask is 0) — unless `trainObservations`, which weights every
 * target after the prompt.
 * @param traj the trajectory `[seq]`
 * @param advantage its scalar advantage (e.g. from `grpoAdvantages`)
 * @throws Error (naming the task id) when validation fails, the trajectory has < 2 tokens, or `refLogprobs` is
 *   not `[seq-1]`; `token integrity: …` when a target differs from the sampled token at its position
 */
export function trajectoryToDatum(traj: Trajectory, advantage: number, opts: DatumOptions = {}): Datum {
  if (opts.validate ?? true) assertTrajectory(traj);
  const n = traj.tokens.length;
  if (n < 2) throw new Error(`trajectory ${traj.task.id}: needs at least 2 tokens to make a datum, has ${n}`);
  const weights = opts.trainObservations
    ? traj.lossMask.slice(1).map((_, i) => (i + 1 >= traj.promptLength ? 1 : 0))
    : traj.lossMask.slice(1);
  const datum: Datum = {
    modelInput: traj.tokens.slice(0, n - 1),
    targetTokens: traj.tokens.slice(1),
    weights,
    logprobs: traj.logprobs.slice(1),
    advantages: weights.map((w) => (w === 1 ? advantage : 0)),
  };
  // The datum trains on targetTokens: check them against what was sampled, not only the trajectory's copy.
  assertTokenIntegrity(traj, datum.targetTokens);
  if (opts.refLogprobs !== undefined) {
    if (opts.refLogprobs.length !== n - 1) {
      throw new Error(`trajectory ${traj.task.id}: refLogprobs has ${opts.refLogprobs.length} entries, expected ${n - 1}`);
    }
    datum.refLogprobs = [...opts.refLogprobs];
  }
  return datum;
}
