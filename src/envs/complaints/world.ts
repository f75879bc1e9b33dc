/**
 * The product-complaint world: a seeded, generated company with its own products (in its complaints and sales
 * databases) and its competitors' products (known only through third-party reports), for the question *"how many
 * complaints did product A get last year, and is that more serious than product B?"*.
 *
 * - Complaints database: per own product, year (2024, 2025, and 2026 to date) and *caliber* — `contacts` (every
 *   customer contact about the product) or `defects` (confirmed defects) — a count.
 * - Sales database: per own product and year, units sold; with a caliber, the complaint rate per 1000 units sold
 *   (`count / units × 1000`, one decimal): the normalisation a comparison needs.
 * - Reports: per competitor product, year and caliber, two or three sources (names and reliability `high` /
 *   `medium` / `low`) each stating a complaint count and a rate per 1000 units sold. A seeded `CONFLICT_RATE` of the
 *   competitor figures conflict: either a less reliable source states a wrong figure (resolved by the more reliable
 *   one), or two equally reliable sources disagree and a third, less reliable, agrees with one of them (resolved by
 *   the third: the figure two sources agree on). `resolveReports` is the rule; it always yields the true figure.
 *
 * Volume and rate are anti-correlated (big sellers have more complaints and a lower rate), so comparing raw counts
 * often gives the opposite verdict of comparing rates. Every text is lowercase ASCII (single-word product names,
 * two-word source names) so the embedded word tokenizer covers it exactly.
 *
 * Counterfactual copies keep every name, the own/competitor split and the source list, and re-draw every value
 * (units, rates, counts, which figures conflict, the wrong figures and the order sources are listed in), so a tiny
 * policy cannot memorise a verdict: it has to read the tool results.
 */
import { Rng } from "../../core/rng.ts";
import type { Task } from "../../core/types.ts";
import { worldStream } from "../../env/world.ts";

/** The world's current year; "last year" is `THIS_YEAR - 1`. 2026's figures are year-to-date. */
export const THIS_YEAR = 2026;
/** Years with figures in every database and report. */
export const YEARS = [2024, 2025, 2026] as const;
/** Years a question asks about (full years). */
export const ASKED_YEARS = [2024, 2025] as const;
/** The calibers: `contacts` (every customer contact) and `defects` (confirmed defects). */
export const CALIBERS = ["contacts", "defects"] as const;
/** A caliber. */
export type Caliber = (typeof CALIBERS)[number];

/** The company's own products (in its complaints and sales databases). */
export const OWN_PRODUCTS = ["aria", "bolt", "cedar", "delta", "echo", "flint", "gala", "halo", "iris", "juno"] as const;
/** Competitors' products (only in third-party reports). */
export const COMPETITOR_PRODUCTS = ["kite", "lumen", "mako", "nova", "onyx", "pico", "quill", "rho"] as const;

/** A source's reliability, most reliable first. */
export const RELIABILITIES = ["high", "medium", "low"] as const;
/** A reliability. */
export type Reliability = (typeof RELIABILITIES)[number];

/** A report source: its name and reliability (the same in every world). */
export interface Source {
  name: string;
  reliability: Reliability;
}

/** The report sources. */
export const SOURCES: readonly Source[] = [
  { name: "consumer watch", reliability: "high" },
  { name: "safety board", reliability: "high" },
  { name: "retail panel", reliability: "medium" },
  { name: "trade journal", reliability: "medium" },
  { name: "forum digest", reliability: "low" },
  { name: "social pulse", reliability: "low" },
];

/** Share of competitor figures (product, year, caliber) whose sources conflict, in every world. */
export const CONFLICT_RATE = 0.4;
/** Share of conflicts resolved by reliability (the rest need the third source). */
export const RELIABILITY_CONFLICT_SHARE = 0.5;
/** Probability that a conflict lists its wrong figure first (tempting a reader who stops at the first number). */
export const WRONG_FIRST = 0.7;

/** An own product's figures of one year: units sold, and per caliber the count and the rate per 1000 units. */
export interface OwnYear {
  units: number;
  count: Record<Caliber, number>;
  /** `count / units × 1000`, one decimal (what `sales` shows). */
  rate: Record<Caliber, number>;
}

/** One source's entry in a report: its count and rate per 1000 units sold. */
export interface ReportEntry {
  source: string;
  reliability: Reliability;
  complaints: number;
  rate: number;
}

/**
 * A competitor's figures of one year and caliber: the true count and rate, the entries `reports` lists (in order),
 * and how they conflict (`none`, `reliability`: a less reliable source is wrong; `third`: two equally reliable
 * sources disagree and a third agrees with the true one).
 */
export interface CompetitorFigure {
  count: number;
  rate: number;
  entries: ReportEntry[];
  conflict: "none" | "reliability" | "third";
}

/** A built world. Plain data: equal seeds give deep-equal worlds. */
export interface ComplaintWorld {
  seed: number;
  own: Record<string, Record<number, OwnYear>>;
  /** `competitor[product][year][caliber]`. */
  competitor: Record<string, Record<number, Record<Caliber, CompetitorFigure>>>;
}

/**
 * The structured question behind a task (`Task.data`), never shown to the policy as such: products `a` (own) and `b`
 * (own or a competitor's), the `year` and `caliber` asked, how the question said the year (`when`), `competitor`
 * (b is a competitor's) and `conflict` (b's reports conflict, in world 0; an episode's grade has its own world's).
 */
export interface ComplaintQuestion {
  a: string;
  b: string;
  year: number;
  caliber: Caliber;
  when: string;
  competitor: boolean;
  conflict: boolean;
}

const uniform = (rng: Rng, lo: number, hi: number) => lo + (hi - lo) * rng.next();
const round1 = (x: number) => Math.round(x * 10) / 10;

/** True when `p` is an own product. */
export function isOwn(p: string): boolean {
  return (OWN_PRODUCTS as readonly string[]).includes(p);
}

/** True when `p` is a competitor's product. */
export function isCompetitor(p: string): boolean {
  return (COMPETITOR_PRODUCTS as readonly string[]).includes(p);
}

/**
 * One product-year's volume and rates: units log-uniform in [2 000, 80 000] (rounded to 100; 2026 to date a quarter
 * to a half of it), the defect rate per 1000 units `≈ 3 × (units / 10 000)^-0.6` times noise in [0.6, 1.6] (so big
 * sellers have more complaints but a lower rate), contacts 3–7 times the defects.
 */
function drawVolume(rng: Rng, ytd: boolean): { units: number; rates: Record<Caliber, number> } {
  const full = Math.exp(uniform(rng, Math.log(2000), Math.log(80000)));
  const units = Math.max(500, Math.round((ytd ? full * uniform(rng, 0.25, 0.5) : full) / 100) * 100);
  const defects = Math.min(19.9, Math.max(0.5, 3 * (full / 10000) ** -0.6 * uniform(rng, 0.6, 1.6)));
  return { units, rates: { defects, contacts: defects * uniform(rng, 3, 7) } };
}

/** Counts and shown rates from units and true rates: `count = round(rate × units / 1000)` (≥ 1). */
function ownYear(units: number, rates: Record<Caliber, number>): OwnYear {
  const count = { contacts: 0, defects: 0 } as Record<Caliber, number>;
  const rate = { contacts: 0, defects: 0 } as Record<Caliber, number>;
  for (const c of CALIBERS) {
    count[c] = Math.max(1, Math.round((rates[c] * units) / 1000));
    rate[c] = round1((count[c] / units) * 1000);
  }
  return { units, count, rate };
}

/** A wrong figure for a conflicting source: the true rate scaled by 0.3–0.6 or 1.8–3 (count scaled alike). */
function wrongFigure(rng: Rng, count: number, rate: number): { complaints: number; rate: number } {
  const f = rng.next() < 0.5 ? uniform(rng, 0.3, 0.6) : uniform(rng, 1.8, 3);
  const per = Math.max(0.1, round1(rate * f));
  return { complaints: Math.max(1, Math.round((count * per) / rate)), rate: per === rate ? round1(rate + 0.5) : per };
}

/** The report entries of one competitor figure, with the conflict kind drawn (see the file doc). */
function drawReports(rng: Rng, count: number, rate: number, conflicting: boolean): { entries: ReportEntry[]; conflict: CompetitorFigure["conflict"] } {
  const entry = (s: Source, fig: { complaints: number; rate: number }): ReportEntry => ({ source: s.name, reliability: s.reliability, ...fig });
  const truth = { complaints: count, rate: rate };
  const rank = (s: Source) => RELIABILITIES.indexOf(s.reliability);
  if (!conflicting) {
    const [x, y] = rng.shuffle(SOURCES).slice(0, 2);
    return { entries: [entry(x, truth), entry(y, truth)], conflict: "none" };
  }
  const wrong = wrongFigure(rng, count, rate);
  if (rng.next() < RELIABILITY_CONFLICT_SHARE) {
    // Two sources of different reliability: the less reliable one is wrong.
    let x: Source;
    let y: Source;
    do [x, y] = rng.shuffle(SOURCES).slice(0, 2);
    while (rank(x) === rank(y));
    const [good, bad] = rank(x) < rank(y) ? [x, y] : [y, x];
    const pair = [entry(good, truth), entry(bad, wrong)];
    return { entries: rng.next() < WRONG_FIRST ? [pair[1], pair[0]] : pair, conflict: "reliability" };
  }
  // Two equally reliable sources disagree; a third, less reliable, agrees with the true one.
  const level = rng.pick(["high", "medium"] as const);
  const peers = rng.shuffle(SOURCES.filter((s) => s.reliability === level));
  const third = rng.pick(SOURCES.filter((s) => rank(s) > RELIABILITIES.indexOf(level)));
  const pair = [entry(peers[0], truth), entry(peers[1], wrong)];
  const first = rng.next() < WRONG_FIRST ? [pair[1], pair[0]] : pair;
  return { entries: [...first, entry(third, truth)], conflict: "third" };
}

/** Draws every value of a world (see the file doc). */
function drawWorld(seed: number, purpose: string): ComplaintWorld {
  const rng = worldStream(seed, `${purpose}:values`);
  const own: ComplaintWorld["own"] = {};
  for (const p of OWN_PRODUCTS) {
    own[p] = {};
    for (const y of YEARS) {
      const v = drawVolume(rng, y === THIS_YEAR);
      own[p][y] = ownYear(v.units, v.rates);
    }
  }
  const keys: Array<[string, number, Caliber]> = [];
  for (const p of COMPETITOR_PRODUCTS) for (const y of YEARS) for (const c of CALIBERS) keys.push([p, y, c]);
  const conflictSet = new Set(worldStream(seed, `${purpose}:conflicts`).shuffle(keys.map((_, i) => i)).slice(0, Math.round(CONFLICT_RATE * keys.length)));
  const competitor: ComplaintWorld["competitor"] = {};
  const volumes = new Map<string, { units: number; rates: Record<Caliber, number> }>();
  keys.forEach(([p, y, c], i) => {
    const k = `${p}|${y}`;
    if (!volumes.has(k)) volumes.set(k, drawVolume(rng, y === THIS_YEAR));
    const v = volumes.get(k)!;
    const fig = ownYear(v.units, v.rates);
    const { entries, conflict } = drawReports(rng, fig.count[c], fig.rate[c], conflictSet.has(i));
    ((competitor[p] ??= {})[y] ??= {} as Record<Caliber, CompetitorFigure>)[c] = { count: fig.count[c], rate: fig.rate[c], entries, conflict };
  });
  return { seed, own, competitor };
}

/**
 * Builds the real world of `seed`. Deterministic: equal seeds give deep-equal worlds.
 * @throws Error when `seed` is not an integer
 */
export function buildComplaintWorld(seed: number): ComplaintWorld {
  if (!Number.isInteger(seed)) throw new Error(`buildComplaintWorld: seed must be an integer, got ${seed}`);
  return drawWorld(seed, "real");
}

/**
 * A counterfactual copy of `world`: the same products, split and sources; every value re-drawn from `seed` (see the
 * file doc). Deterministic in (world, seed).
 * @throws Error when `seed` is not an integer
 */
export function counterfactualComplaintWorld(world: ComplaintWorld, seed: number): ComplaintWorld {
  if (!Number.isInteger(seed)) throw new Error(`counterfactualComplaintWorld: seed must be an integer, got ${seed}`);
  return { ...drawWorld(seed, `counterfactual:${world.seed}`), seed };
}

/**
 * The figure a careful reader takes from report entries: all agree → it; else the figure at least two sources state;
 * else the most reliable source's (the first listed of the most reliable). `undefined` for no entries.
 * @returns the entry whose figure is taken (its `rate` and `complaints`)
 */
export function resolveReports(entries: readonly ReportEntry[]): ReportEntry | undefined {
  if (entries.length === 0) return undefined;
  const votes = new Map<number, ReportEntry[]>();
  for (const e of entries) votes.set(e.rate, [...(votes.get(e.rate) ?? []), e]);
  const agreed = [...votes.values()].find((v) => v.length >= 2);
  if (agreed !== undefined) return [...agreed].sort((x, y) => RELIABILITIES.indexOf(x.reliability) - RELIABILITIES.indexOf(y.reliability))[0];
  return [...entries].sort((x, y) => RELIABILITIES.indexOf(x.reliability) - RELIABILITIES.indexOf(y.reliability))[0];
}

/** The complaint figures a question compares, in `world`: A's count and rate, B's (true) count and rate. */
export interface Truth {
  countA: number;
  rateA: number;
  countB: number;
  rateB: number;
  /** The product with the higher rate (the more serious), or null on a tie. */
  verdict: string | null;
  /** The product with more complaints (the raw-count verdict), or null on a tie. */
  rawVerdict: string | null;
  /** B's reports conflict (competitor only). */
  conflict: boolean;
}

/**
 * The figures of question `q` in `world`. @throws Error when a product is unknown or `a` is not an own product
 */
export function truthOf(world: ComplaintWorld, q: Pick<ComplaintQuestion, "a" | "b" | "year" | "caliber">): Truth {
  const a = world.own[q.a]?.[q.year];
  if (a === undefined) throw new Error(`complaints: ${q.a} is not an own product (or ${q.year} has no figures)`);
  let countB: number;
  let rateB: number;
  let conflict = false;
  if (isOwn(q.b)) {
    const b = world.own[q.b][q.year];
    countB = b.count[q.caliber];
    rateB = b.rate[q.caliber];
  } else {
    const f = world.competitor[q.b]?.[q.year]?.[q.caliber];
    if (f === undefined) throw new Error(`complaints: unknown product ${q.b}`);
    countB = f.count;
    rateB = f.rate;
    conflict = f.conflict !== "none";
  }
  const countA = a.count[q.caliber];
  const rateA = a.rate[q.caliber];
  const pick = (x: number, y: number) => (x > y ? q.a : y > x ? q.b : null);
  return { countA, rateA, countB, rateB, verdict: pick(rateA, rateB), rawVerdict: pick(countA, countB), conflict };
}

/** The words a question uses for a caliber (each contains the caliber's argument word). */
export const CALIBER_PHRASES: Readonly<Record<Caliber, string>> = { contacts: "customer contacts", defects: "confirmed defects" };

/** The question phrasings; the last is held out (test tasks only). */
const PHRASINGS: ReadonlyArray<(a: string, b: string, cal: string, when: string) => string> = [
  (a, b, cal, when) => `how many ${cal} did ${a} get ${when} , and is that more serious than ${b} ?`,
  (a, b, cal, when) => `${when} , how many ${cal} did ${a} have ? is it more serious than ${b} ?`,
  (a, b, cal, when) => `count the ${cal} of ${a} ${when} and tell me whether it is more serious than ${b}`,
  (a, b, cal, when) => `${a} : how many ${cal} ${when} , and is it worse than ${b} ?`,
  (a, b, cal, when) => `compare ${a} with ${b} on ${cal} ${when} : how many did ${a} get , and which is more serious ?`,
];

/** Number of phrasings used by training tasks (the rest are held out for the test split). */
export const TRAIN_PHRASINGS = PHRASINGS.length - 1;

/** How a question says year `y`. */
export function whenOf(y: number): string {
  return y === THIS_YEAR - 1 ? "last year" : `in ${y}`;
}

/**
 * The tasks of a world, split into train and test. One task per (a own, b ≠ a, asked year, caliber): 10 × 17 × 2 × 2
 * = 680. The test split holds `ceil(numTestTasks / 4)` ordered pairs (a, b) never seen in training — about half with
 * a competitor's b — each with its four (year, caliber) tasks, cut to `numTestTasks`; a third of the test tasks use
 * the held-out phrasing. Each task: id `complaints:<split>:<n>`, kind `complaints`, `answers: []`, `data` a
 * `ComplaintQuestion` whose flags are computed in `world`.
 * @throws Error when `numTestTasks` is not an integer in [4, 340]
 */
export function complaintTasks(world: ComplaintWorld, numTestTasks = 60): { train: Task<ComplaintQuestion>[]; test: Task<ComplaintQuestion>[] } {
  if (!Number.isInteger(numTestTasks) || numTestTasks < 4 || numTestTasks > 340) {
    throw new Error(`numTestTasks must be an integer in [4, 340], got ${numTestTasks}`);
  }
  const rng = worldStream(world.seed, "tasks");
  const pairs: Array<[string, string]> = [];
  for (const a of OWN_PRODUCTS) for (const b of [...OWN_PRODUCTS, ...COMPETITOR_PRODUCTS]) if (a !== b) pairs.push([a, b]);
  const shuffled = rng.shuffle(pairs.map((_, i) => i));
  const nTest = Math.ceil(numTestTasks / 4);
  const comp = shuffled.filter((i) => isCompetitor(pairs[i][1]));
  const owns = shuffled.filter((i) => isOwn(pairs[i][1]));
  const nComp = Math.floor(nTest / 2);
  const testPairs = new Set([...comp.slice(0, nComp), ...owns.slice(0, nTest - nComp)]);
  const make = (split: "train" | "test", [a, b]: [string, string], year: number, caliber: Caliber, n: number): Task<ComplaintQuestion> => {
    const p = split === "test" && n % 3 === 2 ? PHRASINGS.length - 1 : rng.int(TRAIN_PHRASINGS);
    const when = whenOf(year);
    const t = truthOf(world, { a, b, year, caliber });
    return {
      id: `complaints:${split}:${n}`,
      question: PHRASINGS[p](a, b, CALIBER_PHRASES[caliber], when),
      answers: [],
      kind: "complaints",
      data: { a, b, year, caliber, when, competitor: isCompetitor(b), conflict: t.conflict },
      meta: { a, b, year: String(year), caliber, phrasing: String(p) },
    };
  };
  const train: Task<ComplaintQuestion>[] = [];
  const test: Task<ComplaintQuestion>[] = [];
  pairs.forEach((pair, i) => {
    for (const year of ASKED_YEARS) {
      for (const caliber of CALIBERS) {
        if (testPairs.has(i)) {
          if (test.length < numTestTasks) test.push(make("test", pair, year, caliber, test.length));
        } else train.push(make("train", pair, year, caliber, train.length));
      }
    }
  });
  return { train, test };
}

/** The first user message of a task: the year context line, then the question. */
export function complaintUserMessage(task: Task<ComplaintQuestion>): string {
  return `this year is ${THIS_YEAR} .\n${task.question}`;
}
