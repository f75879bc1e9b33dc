/**
 * The long-document QA env's per-episode breakdown (`RecipeInstance.breakdown`), read from `traj.grade`'s parts (the
 * checked rubric's measurements, whatever the design pays): `right_and_supported` (correct and cited to the gold
 * paragraph it read, nothing else cited), `correct`, `located` (read the gold paragraph); among answers: `cited`; among
 * citing answers: `fabricated` (a citation never read), `overcited` (more than one citation); `success` (score 1 under
 * the design paid); `count/reads` (read calls per episode).
 */
import type { Trajectory } from "../../core/types.ts";

/** The breakdown keys and their labels, in table order. */
export const LONGDOC_BREAKDOWN_LABELS: Readonly<Record<string, string>> = {
  right_and_supported: "right and supported",
  correct: "right department",
  located: "located the paragraph",
  cited: "cited",
  fabricated: "fabricated citation",
  overcited: "several citations",
  success: "success (design's score 1)",
  "count/reads": "reads",
};

/** The breakdown of one episode (see the file doc). */
export function longdocBreakdown(traj: Pick<Trajectory, "grade" | "answer" | "turns">): Record<string, number> {
  const p = traj.grade?.parts ?? {};
  const out: Record<string, number> = { right_and_supported: (p.correct ?? 0) * (p.supported ?? 0), correct: p.correct ?? 0, located: p.located ?? 0 };
  if (traj.answer !== null) {
    out.cited = p.cited ?? 0;
    if ((p.cited ?? 0) === 1) {
      out.fabricated = p.fabricated ?? 0;
      out.overcited = p.overcited ?? 0;
    }
  }
  out.success = (traj.grade?.score ?? 0) >= 1 - 1e-9 ? 1 : 0;
  out["count/reads"] = traj.turns.reduce((a, t) => a + (t.action.type === "tool_call" ? t.action.calls.filter((c) => c.name === "read").length : 0), 0);
  return out;
}
