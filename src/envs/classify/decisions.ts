/**
 * The classification env's per-episode breakdown (`RecipeInstance.breakdown`), read from `traj.grade`'s parts (the
 * strict rubric, whatever the design pays):
 * - `correct`: one label, the right one; `one_cue` / `two_cue`: the same on one-cue / two-cue tickets only;
 * - `first_cue`: on fine-first tickets, the answer's first label is the fine thing's (the first-cue habit);
 * - `hedged`: two or more labels or a hedge word; `multi_label`: two or more labels; `confidence`: a confidence word;
 * - `success` (score 1 under the design paid); `count/labels` (labels named per answer, a count).
 */
import type { Trajectory } from "../../core/types.ts";
import { LABELS } from "./world.ts";

/** The breakdown keys and their labels, in table order. */
export const CLASSIFY_BREAKDOWN_LABELS: Readonly<Record<string, string>> = {
  correct: "correct (one right label)",
  one_cue: "one-cue tickets",
  two_cue: "two-cue tickets",
  first_cue: "first-cue habit",
  hedged: "hedged",
  multi_label: "several labels",
  confidence: "confidence words",
  success: "success (design's score 1)",
  "count/labels": "labels named",
};

/** The breakdown of one episode (see the file doc). A trajectory without a grade counts as wrong. */
export function classifyBreakdown(traj: Pick<Trajectory, "grade" | "answer">): Record<string, number> {
  const p = traj.grade?.parts ?? {};
  const out: Record<string, number> = { correct: p.correct ?? 0 };
  out[(p.two_cue ?? 0) === 1 ? "two_cue" : "one_cue"] = p.correct ?? 0;
  if ((p.fine_first ?? 0) === 1) out.first_cue = p.first_cue ?? 0;
  const labels = Math.round((p.labels ?? 0) * LABELS.length);
  if (traj.answer !== null) {
    out.hedged = p.hedged ?? 0;
    out.multi_label = labels > 1 ? 1 : 0;
    out.confidence = p.confidence ?? 0;
    out["count/labels"] = labels;
  }
  out.success = (traj.grade?.score ?? 0) >= 1 - 1e-9 ? 1 : 0;
  return out;
}
