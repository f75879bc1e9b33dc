/**
 * Plain copy and lookup drills for the base model's pretraining corpus (issue 32 part 3): short texts dense in the
 * one skill every later step needs — reproducing a string seen earlier in the context, exactly. A tool-use episode
 * holds a few copied tokens among hundreds; a drill holds dozens, so the attention pattern that copies (an
 * "induction head": attend to the token after the previous occurrence of the current one, Olsson et al. 2022,
 * "In-context Learning and Induction Heads" §2) forms early in pretraining and the episodes then teach *what* to copy.
 *
 * Kinds (`DRILLS`), each a list of segments like an episode's (`train` = loss mask 1):
 * - `repeat`: a line of 1–8 random items (ids, names, numbers, dates, words), then the same line again;
 * - `lookup`: a JSON list of 2–8 random records (some with a nested object), then 3–6 questions, each answered by
 *   copying one value: a record's id by its name, a field by its id, a nested field, the id of the lowest / highest;
 * - `compare`: 4–8 questions "higher: 2745 or 3005?" / "lowest of 13.5, 31, 8?" over 2–5 values of one drawn numeric
 *   field, each answered by copying the winning value — the comparison a select or a compare episode makes, alone;
 * - `select`: a tool-style list of 2–8 records of a random world (as a `find` tool returns them), then 3–6 requests
 *   phrased as the corpus's `select` episodes (lowest, highest, first with a field ≥ k, first flagged yes), each
 *   answered by the chosen record's id.
 * Random throughout (seeded); no built-in env's names or worlds.
 */
import { Rng } from "../core/rng.ts";
import { capital, date, idFormat, idMix, makeWorld, numValue, pick, records, RESERVED_KEYS, selection, weightedDraw, word, type CorpusSegment } from "./corpus.ts";

/** The drill kinds (see the file comment). */
export const DRILLS = ["repeat", "lookup", "compare", "select"] as const;
/** One of {@link DRILLS}. */
export type DrillKind = (typeof DRILLS)[number];

/**
 * How often each kind is drawn (relative). `select` twice: the second base chose the asked-for record in 13–75 % of
 * lists (lowest 27 %, highest 19 %, first ≥ k 42 %, first flagged 55 %, 8 cases per list length and protocol), the
 * skill it lacked most; a drill asks 3–6 selections of one list where an episode asks one. `compare` (corpus v4): the
 * third base still selected 13–88 % by list length and compared two looked-up numbers at chance.
 */
export const DRILL_WEIGHTS: Readonly<Record<DrillKind, number>> = { repeat: 1, lookup: 1, compare: 2, select: 2 };

/** One generated drill. */
export interface Drill {
  kind: DrillKind;
  segments: CorpusSegment[];
}

/** A random item: an id, a two-word name, an integer, a decimal, a date or a word. */
function item(rng: Rng): string {
  switch (rng.int(6)) {
    case 0:
      return idFormat(rng)(rng);
    case 1:
      return `${capital(word(rng))} ${capital(word(rng, 1 + rng.int(2)))}`;
    case 2:
      return String(rng.int(10 ** (1 + rng.int(5))));
    case 3:
      return (rng.int(100000) / 100).toFixed(2);
    case 4:
      return date(rng);
    default:
      return word(rng);
  }
}

function repeat(rng: Rng): CorpusSegment[] {
  const items = Array.from({ length: 1 + rng.int(8) }, () => item(rng));
  const sep = pick(rng, [", ", " | ", "; ", " "]);
  const line = items.join(sep);
  const cue = pick(rng, ["Repeat exactly:", "Copy this:", "Say it back:", "Echo:"]);
  return [
    { text: `${cue} ${line}\n`, train: false },
    { text: `${line}\n`, train: true },
  ];
}

function lookup(rng: Rng): CorpusSegment[] {
  const id = idMix(rng);
  // Distinct keys, none of the record's own (a drawn "name" would overwrite the names).
  const keys = new Set<string>(RESERVED_KEYS);
  const key = (): string => {
    let k = word(rng);
    while (keys.has(k)) k = word(rng);
    keys.add(k);
    return k;
  };
  const num = key();
  const cat = key();
  const nest = rng.next() < 0.5 ? { outer: key(), inner: word(rng) } : undefined;
  const n = 2 + rng.int(7);
  const recs: Record<string, unknown>[] = [];
  const seen = new Set<string>();
  for (let attempt = 0; recs.length < n; attempt++) {
    if (attempt === 10_000) throw new Error(`drills: no ${n} distinct records after 10 000 draws`);
    const r: Record<string, unknown> = { id: id(rng), name: `${capital(word(rng))} ${capital(word(rng, 1 + rng.int(2)))}` };
    if (seen.has(r.id as string) || seen.has(r.name as string)) continue;
    seen.add(r.id as string).add(r.name as string);
    r[num] = rng.int(1000);
    r[cat] = word(rng);
    if (nest) r[nest.outer] = { [nest.inner]: item(rng) };
    recs.push(r);
  }
  const segments: CorpusSegment[] = [{ text: `${JSON.stringify(recs)}\n`, train: false }];
  const vals = recs.map((r) => r[num] as number);
  for (let q = 3 + rng.int(4); q > 0; q--) {
    const r = pick(rng, recs);
    let question: string, answer: string;
    switch (rng.int(nest ? 5 : 4)) {
      case 0:
        [question, answer] = [`id of ${r.name as string}?`, r.id as string];
        break;
      case 1:
        [question, answer] = [`${num} of ${r.id as string}?`, String(r[num])];
        break;
      case 2:
        [question, answer] = [`${cat} of ${r.id as string}?`, r[cat] as string];
        break;
      case 3: {
        const low = rng.next() < 0.5;
        const best = recs[vals.indexOf(low ? Math.min(...vals) : Math.max(...vals))];
        [question, answer] = [`id with the ${low ? "lowest" : "highest"} ${num}?`, best.id as string];
        break;
      }
      default:
        [question, answer] = [`${nest!.outer}.${nest!.inner} of ${r.id as string}?`, (r[nest!.outer] as Record<string, string>)[nest!.inner]];
    }
    segments.push({ text: `${question} `, train: false }, { text: `${answer}\n`, train: true });
  }
  return segments;
}

function compare(rng: Rng): CorpusSegment[] {
  const num = pick(rng, makeWorld(rng).nums);
  const segments: CorpusSegment[] = [];
  for (let q = 4 + rng.int(5); q > 0; q--) {
    const n = rng.next() < 0.5 ? 2 : 2 + rng.int(4);
    const values = new Set<number>();
    for (let i = 0; values.size < n; i++) {
      if (i === 1000) break; // a narrow field: ask about the distinct values drawn
      values.add(numValue(num, rng));
    }
    const vs = rng.shuffle([...values]);
    const high = rng.next() < 0.5;
    const best = high ? Math.max(...vs) : Math.min(...vs);
    const question = vs.length === 2 ? `${high ? "higher" : "lower"}: ${vs[0]} or ${vs[1]}?` : `${high ? "highest" : "lowest"} of ${vs.join(", ")}?`;
    segments.push({ text: `${question} `, train: false }, { text: `${best}\n`, train: true });
  }
  return segments;
}

function select(rng: Rng): CorpusSegment[] {
  const w = makeWorld(rng);
  const list = records(w, rng, 2 + rng.int(7));
  const header = pick(rng, ["Results:", "Found:", `${capital(w.plural)}:`]);
  const questions: CorpusSegment[] = [];
  for (let q = 3 + rng.int(4); q > 0; q--) {
    const { chosen, what } = selection(w, rng, list, pick(rng, w.nums));
    questions.push({ text: `id of the ${w.noun} with ${what}? `, train: false }, { text: `${chosen.id}\n`, train: true });
  }
  // Rendered last: the flag mode may set a record's flag, and the list must show it as the questions saw it.
  return [{ text: `${header} ${JSON.stringify(list)}\n`, train: false }, ...questions];
}

/** One drill, the kind given or drawn from the seed ({@link DRILL_WEIGHTS}). Pure and deterministic. */
export function generateDrill(seed: number, kind?: DrillKind): Drill {
  const rng = new Rng(seed);
  const k = kind ?? weightedDraw(rng, DRILLS, DRILL_WEIGHTS);
  const make = { repeat, lookup, compare, select }[k];
  return { kind: k, segments: make(rng) };
}
