/**
 * The research world: a seeded, generated corpus about 150 companies whose revenue fell last year (2025) — per
 * company an annual filing, earnings-call notes, a cost report and a press release, plus last year's versions of the
 * filing and the call (2024, distractors); per sector industry news (2025 and 2024) and an outlook (2026, a
 * distractor) — and the research questions (tasks) asked about it: "what were the main reasons company X's revenue
 * fell last year?". The answer is a set of reasons from a fixed label set (`REASONS`), each supported by one
 * document of the company's last year:
 * - the filing (`<co>-filing`) says the revenue change, and `lost_customer` when the company lost its largest customer;
 * - the call notes (`<co>-call`) carry management's commentary: `price_cut`, `product_recall`, `competition`;
 * - the sector's industry news (`<sector>-news`) the industry's causes: `demand_drop`, `supply_disruption`, `currency`;
 * - the cost report (`<co>-costs`) says `cost_increase` (input costs rose and price rises lost volume).
 * That is the seed's sequence — revenue change → management commentary → industry → cost structure — and a policy
 * that skips a stage misses that stage's reasons whenever it has one.
 *
 * Documents name their causes with the label words, one sentence per cause with words of that cause alone
 * (`management cited : cause price_cut : deep discounts shrank margins .`, `REASON_CUES`), and say so when there is
 * none (`management cited no company issue .`): the corpus is tagged, so a tiny word-level policy learns to read and
 * cite rather than to paraphrase. Titles name the kind and the year (`earnings call 2025`), not the company: the
 * episode is scoped to one company, and the context window is the policy's cost. Every document has a full id (`red-falcon-call`, `retail-news`), but an
 * episode is scoped to its question's company: the tools and the answer name a document by its kind (`call`,
 * `news`, `filing-prior`: `scopeDocs`, `resolveDocId`), so no action copies the company's name — the 2 × 96 policy
 * measured not copying it from the question (README, run m2), as it had not copied ids out of tool results in the
 * travel env (`src/envs/travel/README.md`). Company names are two words (`red falcon`); the test split's companies are
 * combinations never seen in training, of words that are.
 *
 * Counterfactual copies keep every name, sector and document id and re-draw every reason (and the revenue change),
 * so a policy cannot memorise a company's reasons: it has to read its documents.
 *
 * Every text is lowercase ASCII; the labels are single word tokens (`\w+`), numbers appear only as the revenue change
 * and the years.
 */
import { Rng } from "../../core/rng.ts";
import type { Task } from "../../core/types.ts";
import { worldStream } from "../../env/world.ts";

/** The reason labels, in answer order (the order the careful persona lists them). */
export const REASONS = [
  "lost_customer",
  "price_cut",
  "product_recall",
  "competition",
  "demand_drop",
  "supply_disruption",
  "currency",
  "cost_increase",
] as const;
/** A reason label. */
export type Reason = (typeof REASONS)[number];

/** The kinds of a last-year (2025) stage document, in the seed's order. */
export const STAGES = ["filing", "call", "news", "costs"] as const;
/** A stage: revenue change (filing), management commentary (call), industry (news), cost structure (costs). */
export type Stage = (typeof STAGES)[number];

/** Which stage document supports each reason. */
export const REASON_STAGE: Readonly<Record<Reason, Stage>> = {
  lost_customer: "filing",
  price_cut: "call",
  product_recall: "call",
  competition: "call",
  demand_drop: "news",
  supply_disruption: "news",
  currency: "news",
  cost_increase: "costs",
};

/** The sectors (one word each). */
export const SECTORS = ["retail", "steel", "chips", "airline", "pharma", "autos"] as const;
/** A sector. */
export type Sector = (typeof SECTORS)[number];

/** First words of company names. */
export const FIRST_WORDS = ["red", "blue", "north", "south", "iron", "silver", "green", "swift", "bright", "grand", "prime", "atlas", "delta", "summit", "coral"] as const;
/** Second words of company names. */
export const SECOND_WORDS = ["falcon", "harbor", "peak", "river", "stone", "oak", "bridge", "crest", "field", "forge"] as const;

/** Last year (the year the question asks about) and the year before (distractor documents). */
export const LAST_YEAR = 2025;
export const PRIOR_YEAR = 2024;

/** Probability, per world, that a sector's news names each industry reason (at most `MAX_PER_DOC` per document). */
export const P_INDUSTRY = 0.35;
/** Probability that a company's filing says it lost a customer. */
export const P_LOST_CUSTOMER = 0.35;
/** Probability that the call notes name each company reason (at most `MAX_PER_DOC`). */
export const P_CALL = 0.3;
/** Probability that the cost report says costs rose. */
export const P_COST = 0.45;
/** Most reasons one document names. */
export const MAX_PER_DOC = 2;
/** Gold reasons per question: at least this many… */
export const MIN_REASONS = 2;
/** …and at most this many. */
export const MAX_REASONS = 4;

/** A company: its two-word `name`, the id prefix of its documents (`red-falcon`) and its sector. */
export interface Company {
  name: string;
  base: string;
  sector: Sector;
}

/**
 * One document of the corpus: `id` (`red-falcon-call`, `retail-news-prior`), `title` and `text` (what `open`
 * shows: `title : text`), its `kind` (a stage, or `filing-prior` / `call-prior` / `news-prior` / `press` /
 * `outlook`), the `year` it is about, the company (`company`, the name) or sector it belongs to, and the reasons it
 * `states` (label words in its text). Only a last-year stage document of the question's company (or its sector's
 * news) supports a reason of that question.
 */
export interface ResearchDoc {
  id: string;
  title: string;
  text: string;
  kind: Stage | "filing-prior" | "call-prior" | "news-prior" | "press" | "outlook";
  year: number;
  company?: string;
  sector: Sector;
  states: Reason[];
}

/**
 * A built world: its `seed`, the companies (structural: the same in every world), each company's revenue change
 * last year (`revenueChange`, percent, negative) and gold reasons (`reasons`, in `REASONS` order), each sector's
 * industry reasons (`industry`), and the corpus (`docs`, in a fixed order). Plain data: equal seeds give deep-equal
 * worlds.
 */
export interface ResearchWorld {
  seed: number;
  companies: Company[];
  revenueChange: Record<string, number>;
  reasons: Record<string, Reason[]>;
  industry: Record<Sector, Reason[]>;
  docs: ResearchDoc[];
}

/**
 * The research question behind a task (`Task.data`), never shown to the policy as such: the company, its document
 * id prefix and sector (structural, the same in every world), and the gold reasons and their supporting document
 * ids in the real world (world 0) — a counterfactual world's gold is in the episode's grade parts.
 */
export interface ResearchQuestion {
  company: string;
  base: string;
  sector: Sector;
  reasons: Reason[];
  evidence: Record<string, string>;
}

/** The id of a company's (or sector's) document of `kind` (`red-falcon-call`, `retail-news`, `red-falcon-filing-prior`). */
export function docId(base: string, kind: ResearchDoc["kind"]): string {
  return `${base}-${kind}`;
}

/** The id of the document that supports reasons of `stage` for company `c`. */
export function stageDocId(c: Pick<Company, "base" | "sector">, stage: Stage): string {
  return stage === "news" ? docId(c.sector, "news") : docId(c.base, stage);
}

/** The document kinds an episode can name (its local ids), company documents first, then the sector's. */
export const LOCAL_IDS = ["filing", "call", "costs", "press", "filing-prior", "call-prior", "news", "news-prior", "outlook"] as const satisfies ReadonlyArray<ResearchDoc["kind"]>;

/** Kinds that belong to the sector (the rest belong to the company). */
const SECTOR_KINDS: ReadonlySet<string> = new Set(["news", "news-prior", "outlook"]);

/**
 * The full id of the document that `id` names in an episode about company `c`: a local id (a document kind, `call`,
 * `news`, `filing-prior`) resolves to the company's (or its sector's) document; anything else — a full id included —
 * is returned unchanged (it is checked against the corpus by the caller).
 */
export function resolveDocId(c: Pick<Company, "base" | "sector">, id: string): string {
  if (!(LOCAL_IDS as readonly string[]).includes(id)) return id;
  return docId(SECTOR_KINDS.has(id) ? c.sector : c.base, id as ResearchDoc["kind"]);
}

/**
 * The documents an episode about company `company` can see (`open`, `search`): its 6 documents and its sector's 3, in
 * `LOCAL_IDS` order (cached per world object).
 * @throws Error when `company` is not in the world
 */
export function scopeDocs(world: ResearchWorld, company: string): ResearchDoc[] {
  const ix = researchIndex(world);
  let docs = ix.scope.get(company);
  if (docs === undefined) {
    const c = ix.company.get(company);
    if (c === undefined) throw new Error(`research: unknown company "${company}"`);
    docs = LOCAL_IDS.map((k) => ix.doc.get(resolveDocId(c, k))!);
    ix.scope.set(company, docs);
  }
  return docs;
}

/** The companies: every first word × second word (150), each with a seeded sector (25 per sector). */
function companies(seed: number): Company[] {
  const names = FIRST_WORDS.flatMap((a) => SECOND_WORDS.map((b) => `${a} ${b}`));
  const sectors = worldStream(seed, "sectors").shuffle(names.map((_, i) => SECTORS[i % SECTORS.length]));
  return names.map((name, i) => ({ name, base: name.replace(/ /g, "-"), sector: sectors[i] }));
}

/** Each of `options` with probability `p`, at most `max`, in `options` order. */
function drawSome<T>(rng: Rng, options: readonly T[], p: number, max: number): T[] {
  const out = options.filter(() => rng.next() < p);
  while (out.length > max) out.splice(rng.int(out.length), 1);
  return out;
}

/**
 * The words each reason's sentence adds after its label (`cause price_cut : deep discounts shrank margins .`): words
 * of that reason alone (no cue word is another reason's, a title word, or a persona query word), so each stated reason
 * puts several tokens of its own into the observation. Why: with the label word alone (`management cited price_cut ,
 * competition .`) the 2 × 96 policy never learnt which of the call's or the news' three possible labels a document
 * states (README, probe p0: each was claimed about as often when its document did not state it); a several-word
 * presence cue is what the `classify` env's policy reads, and it is read best right after the document (`note`).
 */
export const REASON_CUES: Readonly<Record<Reason, string>> = {
  lost_customer: "its largest customer left",
  price_cut: "deep discounts shrank margins",
  product_recall: "faulty units got recalled",
  competition: "rivals undercut every bid",
  demand_drop: "buyers ordered far less",
  supply_disruption: "suppliers stalled shipments",
  currency: "strong dollar hurt exports",
  cost_increase: "input costs rose sharply",
};

/** The sentences of `reasons` in a document: `cause a : cues of a . cause b : cues of b .` */
function causes(reasons: readonly Reason[]): string {
  return reasons.map((r) => `cause ${r} : ${REASON_CUES[r]} .`).join(" ");
}

/** A company's last-year and prior-year documents and its press release. */
function companyDocs(c: Company, change: number, reasons: readonly Reason[], rng: Rng): ResearchDoc[] {
  const has = (r: Reason) => reasons.includes(r);
  const call = reasons.filter((r) => REASON_STAGE[r] === "call");
  // Last year's documents state other causes (drawn afresh): citing them is citing the wrong year.
  const priorCall = drawSome(rng, ["price_cut", "product_recall", "competition"] as const, 0.5, 1);
  const priorLost = rng.next() < 0.5;
  const prior = 1 + rng.int(9);
  const co = { company: c.name, sector: c.sector };
  return [
    {
      id: docId(c.base, "filing"),
      title: `annual filing ${LAST_YEAR}`,
      text: `revenue fell ${-change} % . ${has("lost_customer") ? causes(["lost_customer"]) : "no customer was lost ."}`,
      kind: "filing",
      year: LAST_YEAR,
      ...co,
      states: has("lost_customer") ? ["lost_customer"] : [],
    },
    {
      id: docId(c.base, "call"),
      title: `earnings call ${LAST_YEAR}`,
      text: call.length > 0 ? `management cited : ${causes(call)}` : "management cited no company issue .",
      kind: "call",
      year: LAST_YEAR,
      ...co,
      states: call,
    },
    {
      id: docId(c.base, "costs"),
      title: `cost report ${LAST_YEAR}`,
      text: has("cost_increase") ? causes(["cost_increase"]) : "costs were flat .",
      kind: "costs",
      year: LAST_YEAR,
      ...co,
      states: has("cost_increase") ? ["cost_increase"] : [],
    },
    {
      id: docId(c.base, "press"),
      title: `${c.name} press release ${LAST_YEAR}`,
      text: `${c.name} launched a new product line .`,
      kind: "press",
      year: LAST_YEAR,
      ...co,
      states: [],
    },
    {
      id: docId(c.base, "filing-prior"),
      title: `annual filing ${PRIOR_YEAR}`,
      text: `revenue rose ${prior} % . ${priorLost ? causes(["lost_customer"]) : "no customer was lost ."}`,
      kind: "filing-prior",
      year: PRIOR_YEAR,
      ...co,
      states: priorLost ? ["lost_customer"] : [],
    },
    {
      id: docId(c.base, "call-prior"),
      title: `earnings call ${PRIOR_YEAR}`,
      text: priorCall.length > 0 ? `management cited : ${causes(priorCall)}` : "management cited no company issue .",
      kind: "call-prior",
      year: PRIOR_YEAR,
      ...co,
      states: [...priorCall],
    },
  ];
}

/** A sector's news (last year, the year before) and outlook. */
function sectorDocs(s: Sector, reasons: readonly Reason[], rng: Rng): ResearchDoc[] {
  const prior = drawSome(rng, ["demand_drop", "supply_disruption", "currency"] as const, 0.4, 1);
  return [
    {
      id: docId(s, "news"),
      title: `${s} industry news ${LAST_YEAR}`,
      text: reasons.length > 0 ? `the ${s} sector saw : ${causes(reasons)}` : `the ${s} sector was calm .`,
      kind: "news",
      year: LAST_YEAR,
      sector: s,
      states: [...reasons],
    },
    {
      id: docId(s, "news-prior"),
      title: `${s} industry news ${PRIOR_YEAR}`,
      text: prior.length > 0 ? `the ${s} sector saw : ${causes(prior)}` : `the ${s} sector was calm .`,
      kind: "news-prior",
      year: PRIOR_YEAR,
      sector: s,
      states: [...prior],
    },
    {
      id: docId(s, "outlook"),
      title: `${s} industry outlook ${LAST_YEAR + 1}`,
      text: `analysts expect the ${s} sector to grow .`,
      kind: "outlook",
      year: LAST_YEAR + 1,
      sector: s,
      states: [],
    },
  ];
}

/** Draws every value of a world over the fixed companies. */
function drawWorld(seed: number, purpose: string, cos: Company[]): ResearchWorld {
  const rng = worldStream(seed, `${purpose}:values`);
  const industry = {} as Record<Sector, Reason[]>;
  for (const s of SECTORS) industry[s] = drawSome(rng, ["demand_drop", "supply_disruption", "currency"] as const, P_INDUSTRY, MAX_PER_DOC);
  const revenueChange: Record<string, number> = {};
  const reasons: Record<string, Reason[]> = {};
  const docs: ResearchDoc[] = [];
  for (const c of cos) {
    let own: Reason[] = [];
    // Re-draw the company's own causes until the question has MIN_REASONS..MAX_REASONS reasons in all.
    for (let tries = 0; ; tries++) {
      own = [
        ...(rng.next() < P_LOST_CUSTOMER ? (["lost_customer"] as const) : []),
        ...drawSome(rng, ["price_cut", "product_recall", "competition"] as const, P_CALL, MAX_PER_DOC),
        ...(rng.next() < P_COST ? (["cost_increase"] as const) : []),
      ];
      const n = own.length + industry[c.sector].length;
      if (n >= MIN_REASONS && n <= MAX_REASONS) break;
      if (tries > 1000) throw new Error(`research world: cannot draw ${MIN_REASONS}–${MAX_REASONS} reasons for ${c.name}`);
    }
    const all = new Set<Reason>([...own, ...industry[c.sector]]);
    reasons[c.name] = REASONS.filter((r) => all.has(r));
    revenueChange[c.name] = -(3 + rng.int(23));
    docs.push(...companyDocs(c, revenueChange[c.name], reasons[c.name], rng));
  }
  for (const s of SECTORS) docs.push(...sectorDocs(s, industry[s], rng));
  return { seed, companies: cos.map((c) => ({ ...c })), revenueChange, reasons, industry, docs };
}

/**
 * Builds the real world of `seed`. Deterministic: equal seeds give deep-equal worlds.
 * @throws Error when `seed` is not an integer
 */
export function buildResearchWorld(seed: number): ResearchWorld {
  if (!Number.isInteger(seed)) throw new Error(`buildResearchWorld: seed must be an integer, got ${seed}`);
  return drawWorld(seed, "real", companies(seed));
}

/**
 * A counterfactual copy of `world`: the same companies, sectors and document ids (in the same order); every reason,
 * revenue change and distractor re-drawn from `seed`. Deterministic in (world, seed).
 * @throws Error when `seed` is not an integer
 */
export function counterfactualResearchWorld(world: ResearchWorld, seed: number): ResearchWorld {
  if (!Number.isInteger(seed)) throw new Error(`counterfactualResearchWorld: seed must be an integer, got ${seed}`);
  return { ...drawWorld(seed, `counterfactual:${world.seed}`, world.companies), seed };
}

/** Lookup tables of a world: documents by id, companies by name, and each episode scope's documents (filled lazily by `scopeDocs`). */
export interface ResearchIndex {
  doc: Map<string, ResearchDoc>;
  company: Map<string, Company>;
  scope: Map<string, ResearchDoc[]>;
}

const indexes = new WeakMap<ResearchWorld, ResearchIndex>();

/** The world's lookup tables (cached per world object; the world must not be mutated after its first lookup). */
export function researchIndex(world: ResearchWorld): ResearchIndex {
  let ix = indexes.get(world);
  if (ix === undefined) {
    ix = { doc: new Map(world.docs.map((d) => [d.id, d])), company: new Map(world.companies.map((c) => [c.name, c])), scope: new Map() };
    indexes.set(world, ix);
  }
  return ix;
}

/**
 * True when document `id` (a full id) supports reason `r` for the question about `company` in `world`: it is the
 * last-year stage document of the company (or of its sector's news) that carries `r` and its text states `r`.
 */
export function supports(world: ResearchWorld, company: string, id: string, r: Reason): boolean {
  const ix = researchIndex(world);
  const c = ix.company.get(company);
  const d = ix.doc.get(id);
  if (c === undefined || d === undefined) return false;
  return d.id === stageDocId(c, REASON_STAGE[r]) && d.states.includes(r);
}

/**
 * The question phrasings (company `c`, sector `s`); the last is held out (test tasks only). The question names the
 * company and its sector, as a user would ("red falcon , a retail company"); the episode is scoped to that company,
 * so no action has to copy either (`scopeDocs`).
 */
const PHRASINGS: ReadonlyArray<(c: string, s: string) => string> = [
  (c, s) => `what were the main reasons ${c} , a ${s} company , saw revenue fall last year ?`,
  (c, s) => `why did revenue at ${c} ( ${s} ) decline last year ? list the main reasons`,
  (c, s) => `explain the main causes of the drop in revenue at the ${s} company ${c} last year`,
  (c, s) => `research ${c} , in ${s} : what drove its revenue decline last year ?`,
  (c, s) => `${c} , a ${s} firm , sold less last year . find the main reasons , with sources`,
];

/** Number of phrasings used by training tasks (the rest are held out for the test split). */
export const TRAIN_PHRASINGS = PHRASINGS.length - 1;

/**
 * The tasks of a world: one per company (150), split into train and test. The test split holds `numTestTasks`
 * companies never asked about in training, chosen so that every name word still appears in a training company (the
 * policy has seen every word, never the combination); a third of the test tasks use the held-out phrasing. Each task:
 * id `research:<split>:<n>`, kind `research`, `answers` the gold labels of world 0, `known: false` and `evidenceIds`
 * the four stage documents (so `neededCalls` is 4 and the `tool_spam` detector measures searches beyond it), `data` a
 * `ResearchQuestion`.
 * @throws Error when `numTestTasks` is not an integer in [2, 50]
 */
export function researchTasks(world: ResearchWorld, numTestTasks = 50): { train: Task<ResearchQuestion>[]; test: Task<ResearchQuestion>[] } {
  const max = 50;
  if (!Number.isInteger(numTestTasks) || numTestTasks < 2 || numTestTasks > max) throw new Error(`numTestTasks must be an integer in [2, ${max}], got ${numTestTasks}`);
  const rng = worldStream(world.seed, "tasks");
  const order = rng.shuffle(world.companies.map((_, i) => i));
  // Greedy: a company goes to test only while each of its words keeps ≥ 2 training companies.
  const trainUses = new Map<string, number>();
  for (const c of world.companies) for (const w of c.name.split(" ")) trainUses.set(w, (trainUses.get(w) ?? 0) + 1);
  const testSet = new Set<number>();
  for (const i of order) {
    if (testSet.size >= numTestTasks) break;
    const words = world.companies[i].name.split(" ");
    if (words.some((w) => (trainUses.get(w) ?? 0) <= 2)) continue;
    testSet.add(i);
    for (const w of words) trainUses.set(w, trainUses.get(w)! - 1);
  }
  const make = (split: "train" | "test", i: number, n: number): Task<ResearchQuestion> => {
    const c = world.companies[i];
    const p = split === "test" && n % 3 === 2 ? PHRASINGS.length - 1 : rng.int(TRAIN_PHRASINGS);
    const gold = world.reasons[c.name];
    return {
      id: `research:${split}:${n}`,
      question: PHRASINGS[p](c.name, c.sector),
      answers: [...gold],
      kind: "research",
      known: false,
      evidenceIds: STAGES.map((s) => stageDocId(c, s)),
      data: {
        company: c.name,
        base: c.base,
        sector: c.sector,
        reasons: [...gold],
        evidence: Object.fromEntries(gold.map((r) => [r, stageDocId(c, REASON_STAGE[r])])),
      },
      meta: { company: c.name, sector: c.sector, phrasing: String(p) },
    };
  };
  const train: Task<ResearchQuestion>[] = [];
  const test: Task<ResearchQuestion>[] = [];
  world.companies.forEach((_, i) => {
    if (testSet.has(i)) test.push(make("test", i, test.length));
    else train.push(make("train", i, train.length));
  });
  return { train, test };
}
