/**
 * The summarisation env's per-episode breakdown (`RecipeInstance.breakdown`), read from `traj.grade`'s parts (the
 * balanced rubric's measurements, whatever the design pays): `exact` (every key fact, nothing else, within the
 * budget), `coverage`, `consistency`, `brevity`; among answers: `minor` (a minor fact kept), `unsupported` (a clause the
 * source does not support), `short` (fewer clauses than key facts), `padded` (more clauses than key facts); `success` (score 1 under the design paid);
 * `count/length` (summary words / source words, a ratio shown as a number).
 */
import type { Trajectory } from "../../core/types.ts";

/** The breakdown keys and their labels, in table order. */
export const SUMMARIZE_BREAKDOWN_LABELS: Readonly<Record<string, string>> = {
  exact: "exact summary",
  coverage: "key-fact coverage",
  consistency: "consistency",
  brevity: "brevity",
  minor: "kept a minor fact",
  unsupported: "unsupported clause",
  short: "dropped a key fact",
  padded: "padded (more clauses than key facts)",
  success: "success (design's score 1)",
  "count/length": "length / source",
};

/** The breakdown of one episode (see the file doc). A trajectory without a grade counts as wrong. */
export function summarizeBreakdown(traj: Pick<Trajectory, "grade" | "answer">): Record<string, number> {
  const p = traj.grade?.parts ?? {};
  const out: Record<string, number> = { exact: p.exact ?? 0, coverage: p.coverage ?? 0, consistency: p.consistency ?? 0, brevity: p.brevity ?? 0 };
  if (traj.answer !== null) {
    out.minor = p.minor ?? 0;
    out.unsupported = p.unsupported ?? 0;
    out.short = p.short ?? 0;
    out.padded = p.padded ?? 0;
    out["count/length"] = p.length ?? 0;
  }
  out.success = (traj.grade?.score ?? 0) >= 1 - 1e-9 ? 1 : 0;
  return out;
}
