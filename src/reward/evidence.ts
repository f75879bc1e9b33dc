/**
 * What a trajectory did with evidence: the passages it retrieved, whether the gold answer was among them, whether
 * the answer follows them, which documents it cited, and how many tool calls the task needed. Shared by the
 * evidence / necessity reward terms and the hacking detectors, so a term and its detector can never disagree.
 */
import type { Passage, Task, Trajectory } from "../core/types.ts";
import { emCheck, normalizeAnswer, normalizedWords } from "./em.ts";
import { SequenceMatcher } from "./match.ts";

/** True when the episode answered without any search (a guess, or parametric knowledge). */
export function answeredWithoutSearch(t: Trajectory): boolean {
  return t.answer !== null && t.searches === 0;
}

/** Every passage the trajectory retrieved, in turn and rank order (duplicates kept). */
export function retrievedPassages(traj: Trajectory): Passage[] {
  return traj.turns.flatMap((t) => t.passages ?? []);
}

/**
 * True when `needle`, normalised (Search-R1 `normalizeAnswer`), occurs as whole words in normalised `text`.
 * For one text and one needle; the terms that test many passages or many golds use `wholeWordMatcher` and
 * `normalizedPassageWords`, which normalise each text once and scan it once.
 */
export function containsNormalized(text: string, needle: string): boolean {
  const n = normalizeAnswer(needle);
  if (n === "") return false;
  return ` ${normalizeAnswer(text)} `.includes(` ${n} `);
}

/** A passage's text normalised (`normalizeAnswer`) and its words, computed once per passage object and text. */
interface NormalizedPassage {
  text: string;
  norm: string;
  words?: string[];
}
const NORMALIZED = new WeakMap<Passage, NormalizedPassage>();

function cached(p: Passage): NormalizedPassage {
  let hit = NORMALIZED.get(p);
  if (hit === undefined || hit.text !== p.text) {
    hit = { text: p.text, norm: normalizeAnswer(p.text) };
    NORMALIZED.set(p, hit);
  }
  return hit;
}

/**
 * `normalizeAnswer(p.text)`, cached on the passage object (recomputed when its `text` changed): the evidence terms
 * and detectors read the same passages several times per trajectory.
 */
export function normalizedText(p: Passage): string {
  return cached(p).norm;
}

/** The words of `normalizedText(p)` (`normalizedWords`), cached likewise. */
export function normalizedPassageWords(p: Passage): string[] {
  const hit = cached(p);
  hit.words ??= normalizedWords(hit.norm);
  return hit.words;
}

/**
 * A matcher for `containsNormalized(text, needles[i])` over many texts at once: `.first(normalizedPassageWords(p))`
 * is the index of the first needle (in list order) that occurs as whole words in the passage's normalised text, or
 * −1. Each needle is normalised once and matched as a sequence of words (Aho–Corasick, `SequenceMatcher`): whole
 * words in `" " + text + " "` are exactly contiguous runs of its words, as normalised texts have single spaces and
 * none at either end. A needle that normalises to `""` never matches, as in `containsNormalized`. Build
 * O(Σ |needle|), each text O(|text|), whatever the number of needles.
 */
export function wholeWordMatcher(needles: readonly string[]): SequenceMatcher {
  return new SequenceMatcher(
    needles.map((n) => {
      const words = normalizedWords(normalizeAnswer(n));
      return words.length === 0 ? null : words;
    }),
  );
}

/**
 * The first retrieved passage (turn and rank order) in which some gold answer occurs (whole words, normalised), and
 * the first such gold (in `task.answers` order); `undefined` when none does. O(passages + golds) characters.
 */
export function firstGoldPassage(traj: Trajectory): { passage: Passage; gold: string } | undefined {
  const passages = retrievedPassages(traj);
  if (passages.length === 0) return undefined;
  const golds = traj.task.answers;
  const m = wholeWordMatcher(golds);
  if (m.empty) return undefined;
  for (const p of passages) {
    const i = m.first(normalizedPassageWords(p));
    if (i >= 0) return { passage: p, gold: golds[i] };
  }
  return undefined;
}

/**
 * True when the evidence for the answer was retrieved. Where the environment knows which passages hold the answer
 * (`task.evidenceIds` non-empty), every one of them must have been retrieved — a comparison needs both areas, a
 * bridge both hops; a gold string that merely occurs in one passage (a country's name in its own area passage) is
 * not the answer's evidence. Otherwise (real data): some gold answer occurs (whole words, normalised) in the text of
 * a retrieved passage (`firstGoldPassage`: each passage and each gold normalised once, one scan per passage).
 */
export function goldRetrieved(traj: Trajectory): boolean {
  const evidence = traj.task.evidenceIds ?? [];
  if (evidence.length > 0) {
    const ids = new Set(retrievedPassages(traj).map((p) => p.id));
    return evidence.every((id) => ids.has(id));
  }
  return firstGoldPassage(traj) !== undefined;
}

/**
 * The first retrieved passage in which the (non-null) answer occurs, whole words, normalised; `undefined` when none
 * does or there is no answer. The answer is normalised once, each passage once (`normalizedText`) and scanned
 * once: O(|answer| + Σ |passage|) — re-normalising the answer for every passage was quadratic.
 */
export function groundingPassage(traj: Trajectory): Passage | undefined {
  const passages = retrievedPassages(traj);
  if (traj.answer === null || passages.length === 0) return undefined;
  const m = wholeWordMatcher([traj.answer]);
  if (m.empty) return undefined;
  return passages.find((p) => m.first(normalizedPassageWords(p)) >= 0);
}

/** True when the answer is non-null and occurs (whole words, normalised) in the text of a retrieved passage. */
export function answerGrounded(traj: Trajectory): boolean {
  return groundingPassage(traj) !== undefined;
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
      const text = normalizedText(p);
      const prev = seen.get(p.fact);
      if (prev !== undefined && prev !== text) return i;
      if (prev === undefined) seen.set(p.fact, text);
    }
  }
  return undefined;
}
