/**
 * The news-brief world of the summarisation env (`--env summarize`): short source documents of 4–6 sentences, each one
 * fact — a subject and what happened to it (`the factory closed without warning .`), no event twice in a brief. Some
 * events are *key* (a closure, a resignation, a recall, …: `KEY_EVENTS`), the others minor (`MINOR_EVENTS`: a visit, a
 * meeting, …). Each event happens only to a few kinds of subject (`SUBJECTS_OF`: a closure to a factory, a school or
 * a museum; a resignation to a mayor, a union or a league), each of another sector, and a brief names one subject
 * that can take each of its events (the one it happened to). The summary a careful editor writes is abstractive in a
 * fixed vocabulary: each key fact as `<category> <sector>` — the event's category (`CATEGORY_OF`: closed → closure)
 * and the subject's sector (`SECTOR_OF`: factory → industry, mayor → politics) — `;`-separated, in the canonical
 * category order (`CATEGORY_ORDER`: closure first, expansion last), not in source order: `closure industry ;
 * resignation politics`.
 *
 * Why this shape (README, "Measured"): the from-scratch 2 × 96 model learns presence → label mappings (a cue word
 * anywhere in the context → a label: classify, extract) and did not learn positional copying or binding — neither the
 * source's own words (`factory closed`, the first version), nor "the next key fact after the one just written" in
 * source order (the second), nor the subject one token before an event word (the third: this world with any subject
 * taking any event; 3–4 % of held-out sectors right after 1000 SFT steps, 52 % after 2500 steps on 1500 briefs, 4 %
 * after 2000 steps on 10 000). Here each clause is two presence questions: its category — is there a `closed` in the
 * brief? (closure comes first in the canonical order) — and its sector — which of the subjects a closure can happen to
 * is in the brief? Which fact the clause states is still checked against the source (a sector with no such fact of
 * the brief is an unsupported claim). Every word is one token of the embedded word tokenizer; a held-out document is an
 * unseen combination of seen facts. Task kind of EasyR1's summarisation examples, generated (no data set to download).
 */
import { Rng } from "../../core/rng.ts";
import type { Task } from "../../core/types.ts";
import { drawSplit, fnv1a, taskCount, worldStream, type SplitCandidate } from "../../env/world.ts";

/** Subjects of facts. */
export const SUBJECTS = ["factory", "mayor", "bank", "port", "union", "school", "airline", "hospital", "museum", "league", "council", "startup"] as const;
/** Key events: a summary must keep them. */
export const KEY_EVENTS = ["closed", "resigned", "recalled", "merged", "flooded", "struck", "collapsed", "expanded"] as const;
/** Minor events: a summary should leave them out. */
export const MINOR_EVENTS = ["visited", "met", "posted", "celebrated", "painted", "hosted"] as const;
/** The sector of each subject (the summary's second word of a clause). */
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
/** The category of each event (the summary's first word of a clause). */
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
/**
 * The subjects each event can happen to (each of another sector): a brief that states `<subject> <event>` names no
 * other subject of `SUBJECTS_OF[event]`, so the clause's sector is whichever of them the brief names.
 */
export const SUBJECTS_OF: Readonly<Record<string, readonly string[]>> = {
  closed: ["factory", "school", "museum"],
  resigned: ["mayor", "union", "league"],
  recalled: ["startup", "hospital", "airline"],
  merged: ["bank", "airline", "council"],
  flooded: ["port", "museum", "hospital"],
  struck: ["union", "school", "port"],
  collapsed: ["bank", "league", "startup"],
  expanded: ["factory", "hospital", "school"],
  visited: ["mayor", "league"],
  met: ["union", "bank"],
  posted: ["startup", "museum"],
  celebrated: ["school", "airline"],
  painted: ["port", "council"],
  hosted: ["hospital", "factory"],
};
/** Every sector word and every category word. */
export const SECTORS: readonly string[] = [...new Set(Object.values(SECTOR_OF))];
export const CATEGORIES: readonly string[] = Object.values(CATEGORY_OF);
/**
 * The canonical order of a summary's clauses, by category: the key categories in `KEY_EVENTS` order, then the minor
 * ones in `MINOR_EVENTS` order (a summary that keeps minor facts lists them after every key one).
 */
export const CATEGORY_ORDER: readonly string[] = [...KEY_EVENTS, ...MINOR_EVENTS].map((e) => CATEGORY_OF[e]);

/**
 * Sentence tails (after `the <subject> <event>`), two words each: every sentence is 6 tokens, so a fact's subject and
 * event sit at the same offsets in every brief (tried to make reading the subject one token back from an event word a
 * fixed-offset lookup; it did not help: README, "Measured"; kept, it costs nothing).
 */
export const TAILS = ["on monday", "last week", "this morning", "without warning", "after midnight", "on friday", "in public"] as const;

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

/** The key facts of a document, in source order. */
export function keyFacts(doc: SourceDoc): Fact[] {
  return doc.facts.filter((f) => f.key);
}

/** `facts` sorted into the canonical category order (`CATEGORY_ORDER`; a brief has no event twice, so no ties). */
export function canonicalOrder(facts: readonly Fact[]): Fact[] {
  const rank = (f: Fact) => CATEGORY_ORDER.indexOf(CATEGORY_OF[f.event]);
  return [...facts].sort((a, b) => rank(a) - rank(b));
}

/** A fact as a summary clause: `<category> <sector>` (`closure industry`). */
export function clauseOf(f: Fact): string {
  return `${CATEGORY_OF[f.event]} ${SECTOR_OF[f.subject]}`;
}

/**
 * The summary of `facts`: their clauses in the canonical category order, `;`-separated (`summaryOf(keyFacts(doc))`
 * is the gold one: `closure industry ; merger finance`).
 */
export function summaryOf(facts: readonly Fact[]): string {
  return canonicalOrder(facts).map(clauseOf).join(" ; ");
}

/**
 * A subject for each event (in order), drawn from `SUBJECTS_OF[event]`, all distinct, such that for every event exactly
 * one subject of the brief can take it (no other drawn subject is in its `SUBJECTS_OF`); undefined when the draws
 * leave an event without one (the caller draws another brief).
 */
export function assignSubjects(events: readonly string[], rng: Rng): string[] | undefined {
  const out: string[] = [];
  for (const e of events) {
    const ok = SUBJECTS_OF[e].filter((s) => !out.includes(s) && !out.some((t) => SUBJECTS_OF[e].includes(t)) && !out.some((_, j) => SUBJECTS_OF[events[j]].includes(s)));
    if (ok.length === 0) return undefined;
    out.push(rng.pick(ok));
  }
  return out;
}

/**
 * The tasks of world `seed`: `numTrain` + `numTest` distinct documents of 4–6 facts with distinct subjects and
 * distinct events, 1–3 of them key, each event's subject the only one of the brief it can happen to
 * (`assignSubjects`), in a seeded order. A document is held out when its (first key fact, first fact, second subject)
 * hashes into the test fifth.
 * Deterministic in the seed.
 * @throws Error when the seed is not an integer or a count is out of range (`numTest` in [4, 400], `numTrain` in [10, 20000])
 */
export function summarizeTasks(seed: number, numTest = 120, numTrain = 1500): { train: Task<SourceDoc>[]; test: Task<SourceDoc>[] } {
  if (!Number.isInteger(seed)) throw new Error(`summarize world: seed must be an integer, got ${seed}`);
  taskCount("numTestTasks", numTest, [4, 400]);
  taskCount("numTrainTasks", numTrain, [10, 20000]);
  const rng = worldStream(seed, "summarize");
  return drawSplit(numTrain, numTest, (): SplitCandidate<SourceDoc> | undefined => {
    const n = 4 + rng.int(3);
    const nKey = 1 + rng.int(3);
    // Events drawn without replacement: a category names one fact of the brief, so the canonical order has no ties.
    const events = [...rng.shuffle([...KEY_EVENTS]).slice(0, nKey), ...rng.shuffle([...MINOR_EVENTS]).slice(0, n - nKey)];
    // Several draws for the same events before giving them up: dropping a failed draw at once would skew the briefs
    // towards few facts (more events are harder to place), and the key-fact counts with them.
    let subjects: string[] | undefined;
    for (let a = 0; a < 50 && subjects === undefined; a++) subjects = assignSubjects(events, rng);
    if (subjects === undefined) return undefined;
    const facts: Fact[] = rng.shuffle(events.map((event, i) => ({ subject: subjects[i], event, key: i < nKey })));
    const text = facts.map((f) => `the ${f.subject} ${f.event} ${rng.pick(TAILS)} .`).join(" ");
    const k = facts.find((f) => f.key)!;
    const held = fnv1a(`${seed}|${k.subject} ${k.event}|${facts[0].subject} ${facts[0].event}|${facts[1].subject}`) % 5 === 0;
    const doc: SourceDoc = { facts, text };
    const task = (split: "train" | "test", i: number): Task<SourceDoc> => ({ id: `summarize:${split}:${i}`, question: text, answers: [summaryOf(keyFacts(doc))], kind: "summarize", data: doc, meta: { facts: String(n), key: String(nKey) } });
    return { held, signature: text, task };
  });
}
