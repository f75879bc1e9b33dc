/**
 * Evidence terms: did the policy use what it retrieved — `evidence_recall`, `grounded`, `ignored_evidence`,
 * `fabricated_citation`, `conflict_verify`; built on `../evidence.ts`, as the hacking detectors are.
 */
import { searchQuery } from "../../core/types.ts";
import { citations, fabricatedCitations, firstConflictTurn, firstGoldPassage, goldRetrieved, groundingPassage, ignoredEvidence, retrievedPassages } from "../evidence.ts";
import type { RewardTermFn } from "../types.ts";
import { neg, plural } from "./common.ts";

/** `evidence_recall`: 1 when the answer's evidence was retrieved (`goldRetrieved`: every `task.evidenceIds` passage, or else a passage containing a gold answer), else 0. */
export const evidenceRecallTerm: RewardTermFn = (traj) => {
  const passages = retrievedPassages(traj);
  const evidence = traj.task.evidenceIds ?? [];
  if (evidence.length > 0 && goldRetrieved(traj)) {
    return { value: 1, explanation: `all ${plural(evidence.length, "evidence passage")} retrieved (${evidence.join(", ")})` };
  }
  if (evidence.length === 0) {
    // `goldRetrieved` without evidence ids is `firstGoldPassage(traj) !== undefined`.
    const hit = firstGoldPassage(traj);
    if (hit !== undefined) return { value: 1, explanation: `gold "${hit.gold}" retrieved in passage ${hit.passage.id}` };
  }
  if (evidence.length > 0) {
    const ids = new Set(passages.map((p) => p.id));
    const missing = evidence.filter((id) => !ids.has(id));
    return { value: 0, explanation: `evidence not retrieved: ${missing.join(", ")}` };
  }
  return { value: 0, explanation: `no gold answer in ${plural(passages.length, "retrieved passage")}` };
};

/** `grounded`: 1 when the answer occurs (whole words, normalised) in a retrieved passage (`answerGrounded`), else 0. */
export const groundedTerm: RewardTermFn = (traj) => {
  if (traj.answer === null) return { value: 0, explanation: "no answer" };
  const answer = traj.answer;
  // `answerGrounded(traj)` is `groundingPassage(traj) !== undefined`.
  const p = groundingPassage(traj);
  if (p !== undefined) return { value: 1, explanation: `"${answer}" appears in passage ${p.id}` };
  return { value: 0, explanation: `"${answer}" appears in none of ${plural(retrievedPassages(traj).length, "retrieved passage")}` };
};

/**
 * `ignored_evidence`: −1 for search-then-ignore (`ignoredEvidence`: the answer's evidence was retrieved, yet the
 * final answer matches no gold, or there is none), else 0.
 */
export const ignoredEvidenceTerm: RewardTermFn = (traj) => {
  if (ignoredEvidence(traj)) {
    const a = traj.answer === null ? "no answer" : `answered "${traj.answer}"`;
    return { value: -1, explanation: `the answer's evidence was retrieved, yet ${a}` };
  }
  return { value: 0, explanation: goldRetrieved(traj) ? "evidence retrieved and answered correctly" : "the answer's evidence was not retrieved" };
};

/**
 * `fabricated_citation`: −(number of `<cite>…</cite>` citations naming no retrieved passage, by id or normalised
 * title; `fabricatedCitations`), else 0.
 */
export const fabricatedCitationTerm: RewardTermFn = (traj) => {
  const all = citations(traj);
  const fake = fabricatedCitations(traj);
  if (all.length === 0) return { value: 0, explanation: "no citations" };
  if (fake.length === 0) return { value: 0, explanation: `${plural(all.length, "citation")}, all retrieved` };
  return {
    value: neg(fake.length),
    explanation: `${fake.length} of ${plural(all.length, "citation")} never retrieved: ${fake.map((c) => `"${c}"`).join(", ")}`,
  };
};

/**
 * `conflict_verify`: 0 when the retrieved evidence never conflicted (`firstConflictTurn` undefined); else +1 when
 * the policy searched again in a turn after the one that revealed the conflict (it verified), −1 when it did not.
 * Turns are numbered from 1 in the explanation.
 */
export const conflictVerifyTerm: RewardTermFn = (traj) => {
  const first = firstConflictTurn(traj);
  if (first === undefined) return { value: 0, explanation: "no evidence conflict" };
  const later = traj.turns.findIndex((t, i) => i > first && searchQuery(t.action) !== undefined);
  return later >= 0
    ? { value: 1, explanation: `conflicting passages at turn ${first + 1}, searched again at turn ${later + 1}` }
    : { value: -1, explanation: `conflicting passages at turn ${first + 1}, never searched again` };
};
