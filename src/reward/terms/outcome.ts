/**
 * Outcome terms: is the answer right — `em`, `f1`, `cover_em` (Search-R1 `qa_em.py`, SQuAD v1.1), `judge` (an LLM
 * judge) and `outcome` (the env's own grade).
 */
import type { Trajectory } from "../../core/types.ts";
import { firstContainedGold, normalizeAnswer, tokenF1 } from "../em.ts";
import type { RewardContext, RewardTermFn, TermResult } from "../types.ts";
import { num, oneLine, plural } from "./common.ts";

/**
 * `em`: 1 when `traj.answer` exactly matches a gold of `traj.task.answers` after Search-R1 normalisation
 * (`emCheck`, Search-R1 `qa_em.py`), else 0; a null answer scores 0 ("no answer").
 */
export const emTerm: RewardTermFn = (traj) => {
  if (traj.answer === null) return { value: 0, explanation: "no answer" };
  const norm = normalizeAnswer(traj.answer);
  const golds = traj.task.answers;
  // `emCheck(answer, golds) === 1` exactly when some gold normalises to `norm`: the answer is normalised once.
  const hit = golds.find((g) => normalizeAnswer(g) === norm);
  if (hit !== undefined) {
    return { value: 1, explanation: `"${traj.answer}" matches gold "${hit}"` };
  }
  return {
    value: 0,
    explanation: `"${traj.answer}" (normalised "${norm}") matches none of ${plural(golds.length, "gold answer")}`,
  };
};

/**
 * `f1`: token F1 in [0, 1] of the answer against the best gold (`tokenF1`: SQuAD v1.1 `f1_score` over the
 * Search-R1-normalised tokens, maximised over golds); a null answer scores 0 ("no answer").
 */
export const f1Term: RewardTermFn = (traj) => {
  if (traj.answer === null) return { value: 0, explanation: "no answer" };
  const f1 = tokenF1(traj.answer, traj.task.answers);
  return { value: f1, explanation: `token F1 ${num(f1)} of "${traj.answer}" against ${plural(traj.task.answers.length, "gold answer")}` };
};

/**
 * `cover_em`: 1 when some normalised gold is a substring of the normalised answer (`subEmCheck`, Search-R1
 * `subem_check`), else 0; a null answer scores 0. Pays verbose answers that contain the gold.
 */
export const coverEmTerm: RewardTermFn = (traj) => {
  if (traj.answer === null) return { value: 0, explanation: "no answer" };
  // `subEmCheck`'s test, keeping which gold hit: one scan of the normalised answer for all golds.
  const hit = firstContainedGold(normalizeAnswer(traj.answer), traj.task.answers);
  if (hit >= 0) {
    return { value: 1, explanation: `gold "${traj.task.answers[hit]}" is contained in "${traj.answer}"` };
  }
  return { value: 0, explanation: `"${traj.answer}" contains none of ${plural(traj.task.answers.length, "gold answer")}` };
};

/** The error the `judge` term throws when no judge is configured (recorded on the breakdown by the composer). */
export const JUDGE_MISSING = "judge term needs reward.options.judge (an OpenAI-compatible endpoint)";

/**
 * `judge`: an LLM judge's score in [0, 1] for the answer (`ctx.judge.score(question, golds, answer)`, see
 * `judge.ts`); the judge's spend is passed on as `TermResult.cost`. A null answer scores 0 without calling the judge.
 * @throws Error(`JUDGE_MISSING`) when `ctx.judge` is absent; the judge's Error after its retries. The composer
 *   records either as the term's error with value 0; the trajectory is still rewarded.
 */
export const judgeTerm = async (traj: Trajectory, ctx: RewardContext): Promise<TermResult> => {
  if (ctx.judge === undefined) throw new Error(JUDGE_MISSING);
  if (traj.answer === null) return { value: 0, explanation: "no answer (judge not called)" };
  const r = await ctx.judge.score(traj.task.question, traj.task.answers, traj.answer);
  const reason = oneLine(r.reason, 120);
  return { value: r.score, explanation: `judge score ${num(r.score)} for "${traj.answer}": ${reason}`, cost: r.cost };
};

/**
 * `outcome`: the env's grade of the episode (`Trajectory.grade.score`, in [0, 1]; its named parts in the
 * explanation); 0 when the env gave no grade (an env without a grader: use `em` or `judge`).
 */
export const outcomeTerm: RewardTermFn = (traj) => {
  if (traj.grade === undefined) return { value: 0, explanation: "no grade (the env has no grader)" };
  const parts = Object.entries(traj.grade.parts).map(([k, v]) => `${k} ${v}`).join(", ");
  return { value: traj.grade.score, explanation: `grade ${traj.grade.score}${parts ? ` (${parts})` : ""}` };
};
