/**
 * Episode metrics shared by training steps and evaluation. All are means over episodes unless named otherwise;
 * lengths in tokens. No wall-clock values here (they go to timings.jsonl).
 */
import { toolCallCounts, totalToolCalls, type Metrics, type Trajectory } from "../core/types.ts";
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
 * `no_answer_rate`, `response_length` (sampled tokens per episode), `observation_length` (tokens per episode),
 * `tool_calls` (calls per episode, every tool) and `tool_calls/<name>` per tool called in the batch, `tool_errors`
 * is the rollout's; with graded episodes (tool envs) `grade/score` and `grade/<part>` (means over graded episodes).
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
    ...toolMetrics(trajs),
  };
}

/** `tool_calls`, `tool_calls/<name>` (sorted by name) and, over graded episodes, `grade/score` and `grade/<part>`. */
export function toolMetrics(trajs: readonly Trajectory[]): Metrics {
  const out: Metrics = { tool_calls: mean(trajs.map(totalToolCalls)) };
  const names = [...new Set(trajs.flatMap((t) => Object.keys(toolCallCounts(t))))].sort();
  for (const name of names) out[`tool_calls/${name}`] = mean(trajs.map((t) => toolCallCounts(t)[name] ?? 0));
  const graded = trajs.filter((t) => t.grade !== undefined);
  if (graded.length > 0) {
    out["grade/score"] = mean(graded.map((t) => t.grade!.score));
    const parts = [...new Set(graded.flatMap((t) => Object.keys(t.grade!.parts)))].sort();
    for (const p of parts) {
      const has = graded.filter((t) => t.grade!.parts[p] !== undefined);
      out[`grade/${p}`] = mean(has.map((t) => t.grade!.parts[p]));
    }
  }
  return out;
}
