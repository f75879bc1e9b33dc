/**
 * The research env's per-episode breakdown (`RecipeInstance.breakdown`), read from the trajectory alone (its turns'
 * actions and tool results, and `traj.grade`'s parts — so a counterfactual world's gold is the episode's own):
 * - `reasons_found`: share of the gold reasons found with a valid citation (the grade's `recall`; 0 without an answer);
 * - `padding`: among episodes that claim a reason (notes or answer), the share of claimed labels that are not gold reasons;
 * - `evidence`: among episodes that claim a gold reason, the share of those whose cited document was opened and
 *   supports it (the grade's `evidence`);
 * - `stage/filing`, `stage/call`, `stage/news`, `stage/costs`: the episode opened that stage's document;
 * - `sequence`: it opened all four in the seed's order (revenue change → commentary → industry → costs);
 * - `success` (score 1), `f1` (the grade's F1 whatever the score mode), `count/searches`, `count/opens` and
 *   `count/notes` (calls per episode; `count/` keys are shown as counts, not rates).
 */
import type { Trajectory } from "../../core/types.ts";

/** The breakdown keys and their labels, in table order. */
export const RESEARCH_BREAKDOWN_LABELS: Readonly<Record<string, string>> = {
  reasons_found: "reasons found",
  padding: "padding",
  evidence: "evidence",
  "stage/filing": "filing",
  "stage/call": "call",
  "stage/news": "news",
  "stage/costs": "costs",
  sequence: "in order",
  success: "success (F1 = 1)",
  f1: "F1",
  "count/searches": "searches",
  "count/opens": "opens",
  "count/notes": "notes",
};

/** The breakdown of one episode (see the file doc). A trajectory without a grade counts as nothing found. */
export function researchBreakdown(traj: Pick<Trajectory, "turns" | "grade" | "answer">): Record<string, number> {
  const p = traj.grade?.parts ?? {};
  const out: Record<string, number> = {};
  out.reasons_found = p.recall ?? 0;
  if (p.claimed === 1) {
    out.padding = p.padding ?? 0;
    // `evidence` is 1 by definition when no gold label is claimed: the rate is over answers that claim one (some
    // claimed label is gold exactly when not every claimed label is padding).
    if ((p.padding ?? 1) < 1) out.evidence = p.evidence ?? 0;
  }
  for (const s of ["filing", "call", "news", "costs"]) out[`stage/${s}`] = p[`opened_${s}`] ?? 0;
  out.sequence = p.in_order ?? 0;
  out.success = (traj.grade?.score ?? 0) >= 1 - 1e-9 ? 1 : 0;
  out.f1 = p.f1 ?? 0;
  let searches = 0;
  let opens = 0;
  let notes = 0;
  for (const t of traj.turns) {
    if (t.action.type !== "tool_call") continue;
    for (const c of t.action.calls) {
      if (c.name === "search") searches++;
      else if (c.name === "open") opens++;
      else if (c.name === "note") notes++;
    }
  }
  out["count/searches"] = searches;
  out["count/opens"] = opens;
  out["count/notes"] = notes;
  return out;
}
