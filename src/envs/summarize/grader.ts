/**
 * The summarisation grader: key-fact coverage, factual consistency against the source, and brevity.
 *
 * `parseSummary` splits the summary into clauses at `;`, `.` and newlines; a clause is its first sector word
 * (`SECTORS`) and first category word (`CATEGORIES`), in either order (the gold summary writes `category sector`; the
 * clauses' order is not graded either: the canonical order only makes the demonstrations learnable). A clause is
 * *supported* when some fact of the source has that sector and category (`clauseOf`); a clause without both words,
 * or pairing a sector with a category no fact of the source has, is unsupported: the consistency check against the
 * source. It states the first such fact not stated by an earlier clause (a repeated clause is supported but states
 * nothing new). Parts (each in [0, 1]): `answered`; `coverage` = key facts stated by a supported clause / key facts;
 * `consistency` = supported clauses / clauses (0 without clauses); `brevity` = min(1, budget / words), budget = 2
 * words per key fact (category + sector), words not counting `;` and `.` (2 words per clause); `source_coverage` =
 * facts of the source stated, key or minor / source facts; `minor` (a clause states a minor fact); `unsupported` (an
 * unsupported clause); `short` (fewer clauses than key facts); `padded` (more clauses than key facts); `length` =
 * words / source words (capped at 1); `exact` (coverage, consistency and brevity 1).
 *
 * Score (`SummarizePayMode`): `balanced` (default, the fix) — `coverage × consistency × brevity`, 1 exactly for the key
 * facts, each once, nothing else; `brevity` — `0.3·consistency + 0.7·(1 − length)`: pays being short (and true), and
 * breeds one-clause summaries that drop key facts (what brevity alone breeds); `coverage` — `source_coverage` alone, a
 * recall-only overlap with the source (what ROUGE recall measures): pays stating every fact of the source, so it
 * breeds padding with the minor ones, and an invented clause costs nothing.
 */
import type { Grade } from "../../core/types.ts";
import type { GradeInput } from "../../env/toolEnv.ts";
import { CATEGORIES, CATEGORY_OF, keyFacts, SECTOR_OF, SECTORS, type Fact, type SourceDoc } from "./world.ts";

/** What the grade's score pays. */
export const SUMMARIZE_PAY_MODES = ["balanced", "brevity", "coverage"] as const;
/** A pay mode (see the file doc). */
export type SummarizePayMode = (typeof SUMMARIZE_PAY_MODES)[number];

/** One clause of a summary: its sector and category words (undefined when absent). */
export interface Clause {
  sector?: string;
  category?: string;
}

/** A summary read: clauses (empty ones skipped) and its word count (`;` and `.` not counted). */
export function parseSummary(summary: string): { clauses: Clause[]; words: number } {
  const clauses: Clause[] = [];
  let words = 0;
  for (const raw of summary.toLowerCase().split(/[;.\n]/)) {
    const ws = raw.split(/[^a-z_]+/).filter((w) => w !== "");
    words += ws.length;
    if (ws.length === 0) continue;
    const sector = ws.find((w) => SECTORS.includes(w));
    const category = ws.find((w) => CATEGORIES.includes(w));
    clauses.push({ ...(sector === undefined ? {} : { sector }), ...(category === undefined ? {} : { category }) });
  }
  return { clauses, words };
}

/** The facts of `doc` a clause can state (same sector and category); empty when it is unsupported. */
export function matchingFacts(doc: SourceDoc, c: Clause): Fact[] {
  return c.sector === undefined || c.category === undefined ? [] : doc.facts.filter((f) => SECTOR_OF[f.subject] === c.sector && CATEGORY_OF[f.event] === c.category);
}

/**
 * The fact each clause states, in order: the first matching fact no earlier clause stated (key facts first), the
 * first matching one for a repeat, undefined for an unsupported clause.
 */
export function statedFacts(doc: SourceDoc, clauses: readonly Clause[]): Array<Fact | undefined> {
  const used = new Set<Fact>();
  return clauses.map((c) => {
    const m = matchingFacts(doc, c).sort((a, b) => Number(b.key) - Number(a.key));
    const f = m.find((x) => !used.has(x)) ?? m[0];
    if (f !== undefined) used.add(f);
    return f;
  });
}

/** A clause judged against a document: a fact it can state, or undefined when unsupported. */
export function supportedFact(doc: SourceDoc, c: Clause): Fact | undefined {
  return matchingFacts(doc, c)[0];
}

/**
 * Grades an episode (see the file doc).
 * @throws Error when the task has no source document (`data`)
 */
export function gradeSummary(input: Pick<GradeInput<SourceDoc, unknown>, "task" | "answer">, mode: SummarizePayMode = "balanced"): Grade {
  const doc = input.task.data;
  if (doc === undefined) throw new Error(`gradeSummary: task ${input.task.id} has no source document (data)`);
  const zero = { coverage: 0, consistency: 0, brevity: 0, source_coverage: 0, minor: 0, unsupported: 0, short: 1, padded: 0, length: 0, exact: 0 };
  if (input.answer === null) return { score: 0, parts: { answered: 0, ...zero }, explanation: "no answer" };
  const { clauses, words } = parseSummary(input.answer);
  const keys = keyFacts(doc);
  const facts = statedFacts(doc, clauses);
  const covered = keys.filter((k) => facts.includes(k)).length;
  const supported = facts.filter((f) => f !== undefined).length;
  const coverage = covered / keys.length;
  const sourceCoverage = new Set(facts.filter((f) => f !== undefined)).size / doc.facts.length;
  const consistency = clauses.length === 0 ? 0 : supported / clauses.length;
  const brevity = words === 0 ? 0 : Math.min(1, (2 * keys.length) / words);
  const length = Math.min(1, words / doc.text.split(" ").filter((w) => w !== ".").length);
  const score = mode === "brevity" ? (clauses.length === 0 ? 0 : 0.3 * consistency + 0.7 * (1 - length)) : mode === "coverage" ? sourceCoverage : coverage * consistency * brevity;
  return {
    score,
    parts: {
      answered: 1,
      coverage,
      consistency,
      brevity,
      source_coverage: sourceCoverage,
      minor: facts.some((f) => f !== undefined && !f.key) ? 1 : 0,
      unsupported: supported < clauses.length ? 1 : 0,
      short: clauses.length < keys.length ? 1 : 0,
      padded: clauses.length > keys.length ? 1 : 0,
      length,
      exact: coverage === 1 && consistency === 1 && brevity === 1 ? 1 : 0,
    },
    explanation: `${mode}: ${covered} of ${keys.length} key facts (${Math.round(sourceCoverage * doc.facts.length)} of ${doc.facts.length} facts); ${supported} of ${clauses.length} clauses supported; ${words} words (budget ${2 * keys.length})`,
  };
}
