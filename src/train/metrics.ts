/**
 * Episode metrics shared by training steps and evaluation. All are means over episodes unless named otherwise;
 * lengths in tokens. No wall-clock values here (they go to timings.jsonl).
 */
import type { Metrics, Trajectory } from "../core/types.ts";
import { emCheck } from "../reward/em.ts";
import { answeredWithoutSearch } from "../reward/evidence.ts";

/** Arithmetic mean; 0 for an empty list. */
export function mean(xs: readonly number[]): number {
  return xs.length === 0 ? 0 : xs.reduce((a, b) => a + b, 0) / xs.length;
}

/** EM of one trajectory's final answer against its task's gold answers (Search-R1 normalisation). */
export function trajectoryEm(t: Trajectory): number {
  return t.answer === null ? 0 : emCheck(t.answer, t.task.answers);
}

export { answeredWithoutSearch } from "../reward/evidence.ts";

/**
 * Metrics of a batch of episodes: `reward/mean`, `reward/std`, `em`, `searches`, `searches/known`,
 * `searches/unknown`, `guess_rate` (answered without search), `invalid_rate` (invalid actions per turn),
 * `no_answer_rate`, `response_length` (sampled tokens per episode), `observation_length` (tokens per episode).
 */
export function episodeMetrics(trajs: readonly Trajectory[]): Metrics {
  const rewards = trajs.map((t) => t.reward?.total ?? 0);
  const m = mean(rewards);
  const known = trajs.filter((t) => t.task.known === true);
  const unknown = trajs.filter((t) => t.task.known === false);
  const turns = trajs.reduce((a, t) => a + t.turns.length, 0);
  return {
    "reward/mean": m,
    "reward/std": Math.sqrt(mean(rewards.map((r) => (r - m) ** 2))),
    em: mean(trajs.map(trajectoryEm)),
    searches: mean(trajs.map((t) => t.searches)),
    "searches/known": mean(known.map((t) => t.searches)),
    "searches/unknown": mean(unknown.map((t) => t.searches)),
    guess_rate: mean(trajs.map((t) => (answeredWithoutSearch(t) ? 1 : 0))),
    invalid_rate: turns === 0 ? 0 : trajs.reduce((a, t) => a + t.invalidActions, 0) / turns,
    no_answer_rate: mean(trajs.map((t) => (t.answer === null ? 1 : 0))),
    response_length: mean(trajs.map((t) => t.turns.reduce((a, turn) => a + turn.sampledTokens, 0))),
    observation_length: mean(trajs.map((t) => t.turns.reduce((a, turn) => a + turn.observationTokens, 0))),
  };
}
