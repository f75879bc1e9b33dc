/**
 * The news-brief world of the summarisation env (`--env summarize`): short source documents of 4–6 sentences, each one
 * fact — a subject and what happened to it (`the factory closed after the storm .`). Some events are *key* (a closure,
 * a resignation, a recall, …: `KEY_EVENTS`), the others minor (`MINOR_EVENTS`: a visit, a meeting, …). The summary a
 * careful editor writes is abstractive in a fixed vocabulary: each key fact as `<sector> <category>` — the subject's
 * sector (`SECTOR_OF`: factory → industry, mayor → politics) and the event's category (`CATEGORY_OF`: closed → closure)
 * — in source order, `;`-separated: `industry closure ; politics resignation`. A summary in the source's own words
 * (`factory closed`) is not read as a clause: the first version asked for that, and the from-scratch 2 × 96 model did
 * not learn to copy the words (README, "Measured"); word → label mappings it learns (the classify and extract envs).
 * Every word is one token of the embedded word tokenizer; a held-out document is an unseen combination of seen facts.
 * Task kind of EasyR1's summarisation examples, generated (no data set to download).
 */
import { Rng } from "../../core/rng.ts";
import type { Task } from "../../core/types.ts";

/** Subjects of facts. */
export const SUBJECTS = ["factory", "mayor", "bank", "port", "union", "school", "airline", "hospital", "museum", "league", "council", "startup"] as const;
/** Key events: a summary must keep them. */
export const KEY_EVENTS = ["closed", "resigned", "recalled", "merged", "flooded", "struck", "collapsed", "expanded"] as const;
/** Minor events: a summary should leave them out. */
export const MINOR_EVENTS = ["visited", "met", "posted", "celebrated", "painted", "hosted"] as const;
/** The sector of each subject (the summary's first word of a clause). */
export const SECTOR_OF: Readonly<Record<string, string>> = {
  factory: "industry",
  startup: "industry",
  mayor: "politics",
  council: "politics",
  bank: "finance",
  union: "labour",
  school: "education",
  museum: "culture",
  league: "sport",
  airline: "transport",
  port: "transport",
  hospital: "health",
};
/** The category of each event (the summary's second word of a clause). */
export const CATEGORY_OF: Readonly<Record<string, string>> = {
  closed: "closure",
  resigned: "resignation",
  recalled: "recall",
  merged: "merger",
  flooded: "flood",
  struck: "strike",
  collapsed: "collapse",
  expanded: "expansion",
  visited: "visit",
  met: "meeting",
  posted: "post",
  celebrated: "celebration",
  painted: "painting",
  hosted: "gathering",
};
/** Every sector word and every category word. */
export const SECTORS: readonly string[] = [...new Set(Object.values(SECTOR_OF))];
export const CATEGORIES: readonly string[] = Object.values(CATEGORY_OF);

/** Sentence tails (after `the <subject> <event>`). */
export const TAILS = ["after the storm", "on monday", "last week", "this morning", "in the north", "again", "without warning"] as const;

/** One fact of a document. */
export interface Fact {
  subject: string;
  event: string;
  key: boolean;
}

/** A document (`Task.data`): its facts in order, which of them are key, and the text. */
export interface SourceDoc {
  facts: Fact[];
  text: string;
}

/** 32-bit FNV-1a of a string. */
function hash(s: string): number {
  let h = 0x811c9dc5;
  for (const ch of s) h = Math.imul(h ^ ch.charCodeAt(0), 0x01000193) >>> 0;
  return h;
}

/** The key facts of a document, in order. */
export function keyFacts(doc: SourceDoc): Fact[] {
  return doc.facts.filter((f) => f.key);
}

/** A fact as a summary clause: `<sector> <category>` (`industry closure`). */
export function clauseOf(f: Fact): string {
  return `${SECTOR_OF[f.subject]} ${CATEGORY_OF[f.event]}`;
}

/** The summary of `facts`: their clauses, `;`-separated (`summaryOf(keyFacts(doc))` is the gold one). */
export function summaryOf(facts: readonly Fact[]): string {
  return facts.map(clauseOf).join(" ; ");
}

/**
 * The tasks of world `seed`: `numTrain` + `numTest` distinct documents of 4–6 facts with distinct subjects, 1–3 of
 * them key. A document is held out when its (first key fact, second fact) pair hashes into the test fifth.
 * Deterministic in the seed.
 * @throws Error when the seed is not an integer or a count is out of range (`numTest` in [4, 400], `numTrain` in [10, 4000])
 */
export function summarizeTasks(seed: number, numTest = 120, numTrain = 1500): { train: Task<SourceDoc>[]; test: Task<SourceDoc>[] } {
  if (!Number.isInteger(seed)) throw new Error(`summarize world: seed must be an integer, got ${seed}`);
  if (!Number.isInteger(numTest) || numTest < 4 || numTest > 400) throw new Error(`numTestTasks must be an integer in [4, 400], got ${numTest}`);
  if (!Number.isInteger(numTrain) || numTrain < 10 || numTrain > 4000) throw new Error(`numTrainTasks must be an integer in [10, 4000], got ${numTrain}`);
  const rng = new Rng((hash("summarize") ^ Math.imul(seed >>> 0, 0x9e3779b1)) >>> 0);
  const out = { train: [] as Task<SourceDoc>[], test: [] as Task<SourceDoc>[] };
  const seen = new Set<string>();
  for (let tries = 0; (out.train.length < numTrain || out.test.length < numTest) && tries < 200 * (numTrain + numTest); tries++) {
    const n = 4 + rng.int(3);
    const nKey = 1 + rng.int(3);
    const subjects = rng.shuffle([...SUBJECTS]).slice(0, n);
    const keyAt = new Set(rng.shuffle(subjects.map((_, i) => i)).slice(0, nKey));
    const facts: Fact[] = subjects.map((subject, i) => ({ subject, event: keyAt.has(i) ? rng.pick(KEY_EVENTS) : rng.pick(MINOR_EVENTS), key: keyAt.has(i) }));
    const text = facts.map((f) => `the ${f.subject} ${f.event} ${rng.pick(TAILS)} .`).join(" ");
    const k = facts.find((f) => f.key)!;
    const held = hash(`${seed}|${k.subject} ${k.event}|${facts[0].subject} ${facts[0].event}|${facts[1].subject}`) % 5 === 0;
    const split = held ? "test" : "train";
    if (out[split].length >= (held ? numTest : numTrain) || seen.has(text)) continue;
    seen.add(text);
    const doc: SourceDoc = { facts, text };
    out[split].push({ id: `summarize:${split}:${out[split].length}`, question: text, answers: [summaryOf(keyFacts(doc))], kind: "summarize", data: doc, meta: { facts: String(n), key: String(nKey) } });
  }
  return out;
}
