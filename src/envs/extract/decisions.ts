/**
 * The extraction env's per-episode breakdown (`RecipeInstance.breakdown`), read from `traj.grade`'s parts (the F1
 * rubric's measurements, whatever the design pays):
 * - `exact`: the gold record (F1 1, nothing hallucinated); `valid_json`; `f1`; `recall`; `precision`;
 * - `hallucinated`: among valid records, ≥ 1 hallucinated field; `extra_keys`: an unknown key; `wrong_type`;
 * - `success` (score 1 under the design paid); `count/hallucinated` (hallucinated fields per valid record).
 */
import type { Trajectory } from "../../core/types.ts";
import { FIELDS } from "./world.ts";

/** The breakdown keys and their labels, in table order. */
export const EXTRACT_BREAKDOWN_LABELS: Readonly<Record<string, string>> = {
  exact: "exact record",
  valid_json: "valid JSON",
  f1: "field F1",
  recall: "field recall",
  precision: "field precision",
  hallucinated: "hallucinated a field",
  extra_keys: "unknown keys",
  wrong_type: "wrong type",
  success: "success (design's score 1)",
  "count/hallucinated": "hallucinated fields",
};

/** The breakdown of one episode (see the file doc). A trajectory without a grade counts as wrong. */
export function extractBreakdown(traj: Pick<Trajectory, "grade" | "answer">): Record<string, number> {
  const p = traj.grade?.parts ?? {};
  const out: Record<string, number> = { exact: p.exact ?? 0, f1: p.f1 ?? 0, recall: p.recall ?? 0, precision: p.precision ?? 0 };
  if (traj.answer !== null) out.valid_json = p.valid_json ?? 0;
  if ((p.valid_json ?? 0) === 1) {
    out.hallucinated = (p.hallucinated ?? 0) > 0 ? 1 : 0;
    out.extra_keys = p.extra_keys ?? 0;
    out.wrong_type = p.wrong_type ?? 0;
    out["count/hallucinated"] = Math.round((p.hallucinated ?? 0) * FIELDS.length);
  }
  out.success = (traj.grade?.score ?? 0) >= 1 - 1e-9 ? 1 : 0;
  return out;
}
