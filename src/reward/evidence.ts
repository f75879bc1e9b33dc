/**
 * What a trajectory did with evidence: the passages it retrieved, whether the gold answer was among them, whether
 * the answer follows them, which documents it cited, and how many tool calls the task needed. Shared by the
 * evidence / necessity reward terms and the hacking detectors, so a term and its detector can never disagree.
 */
import type { Passage, Task, Trajectory } from "../core/types.ts";
import { emCheck, normalizeAnswer } from "./em.ts";

/** True when the episode answered without any search (a guess, or parametric knowledge). */
export function answeredWithoutSearch(t: Trajectory): boolean {
  return t.answer !== null && t.searches === 0;
}

/** Every passage the trajectory retrieved, in turn and rank order (duplicates kept). */
export function retrievedPassages(traj: Trajectory): Passage[] {
  return traj.turns.flatMap((t) => t.passages ?? []);
}

/** True when `needle`, normalised (Search-R1 `normalizeAnswer`), occurs as whole words in normalised `text`. */
export function containsNormalized(text: string, needle: string): boolean {
  const n = normalizeAnswer(needle);
  if (n === "") return false;
  return ` ${normalizeAnswer(text)} `.includes(` ${n} `);
}

/**
 * True when the evidence for the answer was retrieved. Where the environment knows which passages hold the answer
 * (`task.evidenceIds` non-empty), every one of them must have been retrieved — a comparison needs both areas, a
 * bridge both hops; a gold string that merely occurs in one passage (a country's name in its own area passage) is
 * not the answer's evidence. Otherwise (real data): some gold answer occurs (whole words, normalised) in the text of
 * a retrieved passage.
 */
export function goldRetrieved(traj: Trajectory): boolean {
  const passages = retrievedPassages(traj);
  const evidence = traj.task.evidenceIds ?? [];
  if (evidence.length > 0) {
    const ids = new Set(passages.map((p) => p.id));
    return evidence.every((id) => ids.has(id));
  }
  return traj.task.answers.some((g) => passages.some((p) => containsNormalized(p.text, g)));
}

/** True when the answer is non-null and occurs (whole words, normalised) in the text of a retrieved passage. */
export function answerGrounded(traj: Trajectory): boolean {
  if (traj.answer === null) return false;
  const a = traj.answer;
  return retrievedPassages(traj).some((p) => containsNormalized(p.text, a));
}

/**
 * Search-then-ignore: the answer's evidence was retrieved (`goldRetrieved`), yet the final answer matches no gold
 * (including no answer at all).
 */
export function ignoredEvidence(traj: Trajectory): boolean {
  return goldRetrieved(traj) && (traj.answer === null || emCheck(traj.answer, traj.task.answers) === 0);
}

/**
 * Contents of the `<cite> … </cite>` blocks of a text, in order: each `<cite>` runs to the first `</cite>` after it
 * (what the lazy regex `/<cite>([\s\S]*?)<\/cite>/g` matches), found with one forward scan — the regex rescanned to
 * the end of the text for every unclosed `<cite>` (quadratic: 0.2 s on 100 000 characters of `<cite>`).
 */
function citeBlocks(text: string): string[] {
  const out: string[] = [];
  for (let from = 0; ; ) {
    const open = text.indexOf("<cite>", from);
    if (open < 0) break;
    const close = text.indexOf("</cite>", open + 6);
    if (close < 0) break; // no later <cite> can close either
    out.push(text.slice(open + 6, close));
    from = close + 7;
  }
  return out;
}

/**
 * The documents a trajectory cites: the trimmed contents of every `<cite> … </cite>` block in its turns' action
 * texts, in order (our citation syntax; a citation names a passage by title or id).
 */
export function citations(traj: Trajectory): string[] {
  return traj.turns.flatMap((t) => citeBlocks(t.actionText).map((c) => c.replace(/\s+/g, " ").trim()));
}

/**
 * Cited documents that were never retrieved in this trajectory: a citation matches a retrieved passage when it
 * equals the passage's id, or its title after normalisation.
 */
export function fabricatedCitations(traj: Trajectory): string[] {
  const passages = retrievedPassages(traj);
  const ids = new Set(passages.map((p) => p.id));
  const titles = new Set(passages.map((p) => normalizeAnswer(p.title)));
  return citations(traj).filter((c) => !ids.has(c) && !titles.has(normalizeAnswer(c)));
}

/**
 * The tool calls a task needs when the environment knows: 0 for a known fact (`task.known === true`), the number
 * of evidence passages (hops) for an unknown one; `undefined` when the task does not say (real data), including an
 * unknown task whose `evidenceIds` is empty (`Task.evidenceIds` is empty when the evidence is unknown, which must
 * not read as "needs 0 calls").
 */
export function neededCalls(task: Task): number | undefined {
  if (task.known === true) return 0;
  if (task.known === false && task.evidenceIds !== undefined && task.evidenceIds.length > 0) return task.evidenceIds.length;
  return undefined;
}

/**
 * Searches beyond the task's need: `max(0, searches − neededCalls(task))`, or `undefined` when the need is unknown.
 */
export function needlessSearches(traj: Trajectory): number | undefined {
  const need = neededCalls(traj.task);
  return need === undefined ? undefined : Math.max(0, traj.searches - need);
}

/**
 * Evidence conflict: the first turn index after which the retrieved passages (so far) include two passages with
 * the same `fact` key and different normalised text; `undefined` when no conflict was seen.
 */
export function firstConflictTurn(traj: Trajectory): number | undefined {
  const seen = new Map<string, string>();
  for (let i = 0; i < traj.turns.length; i++) {
    for (const p of traj.turns[i].passages ?? []) {
      if (p.fact === undefined) continue;
      const text = normalizeAnswer(p.text);
      const prev = seen.get(p.fact);
      if (prev !== undefined && prev !== text) return i;
      if (prev === undefined) seen.set(p.fact, text);
    }
  }
  return undefined;
}
