/**
 * The built-in world of real facts: countries from the `world-countries` package (mledoze/countries, ODbL-1.0)
 * turned into a tiny wiki (one passage per country) and templated questions whose answers are in it.
 *
 * Why this design: to show that RL teaches *when to search*, each question is either "known" (about a popular
 * country, whose facts the policy can be taught without search) or "unknown" (answerable only by retrieving the
 * country's passage). Every text is lowercase ASCII with punctuation as separate words, so a tiny word-level
 * tokenizer covers it exactly (see `worldTexts`).
 */
import { createRequire } from "node:module";
import type { Countries } from "world-countries";
import { Rng } from "../../core/rng.ts";
import type { Passage, Task } from "../../core/types.ts";

/**
 * Knobs of the world. All optional in `buildWorld`'s argument.
 * - `seed`: integer seed of every random choice (default 0);
 * - `numCountries`: countries in the world (integer ≥ 2, ≤ the number eligible; default 80);
 * - `knownFraction`: fraction of countries that are "popular" (in [0, 1]; default 0.4);
 * - `testFraction`: fraction of questions held out, per stratum (in [0, 1]; default 0.3);
 * - `comparisonsPerCountry`: area-comparison questions generated per country (integer ≥ 0; default 1);
 * - `noiseFraction`: share of the unknown countries' facts that also get an unreliable passage contradicting the
 *   true fact (in [0, 1]; default 0 = no conflicts). With noise on, every passage shows its source: true ones
 *   `encyclopedia` (reliability 1), contradicting ones `forum` (reliability `noiseReliability`);
 * - `noiseReliability`: the `reliability` recorded on contradicting passages (in [0, 1]; default 0.3).
 */
export interface WorldConfig {
  seed: number;
  numCountries: number;
  knownFraction: number;
  testFraction: number;
  comparisonsPerCountry: number;
  noiseFraction: number;
  noiseReliability: number;
}

/** Defaults of `WorldConfig`. */
export const DEFAULT_WORLD_CONFIG: Readonly<WorldConfig> = {
  seed: 0,
  numCountries: 80,
  knownFraction: 0.4,
  testFraction: 0.3,
  comparisonsPerCountry: 1,
  noiseFraction: 0,
  noiseReliability: 0.3,
};

/**
 * The structured facts of one country, normalised (lowercase ASCII, see `normalizeName`).
 * `area` is in square kilometres, rounded to an integer (at least 1). `currency` is the first listed currency's
 * name, `currencyCode` its ISO 4217 code. `popular`: the country's facts count as known to the policy.
 */
export interface Country {
  cca3: string;
  name: string;
  capital: string;
  currency: string;
  currencyCode: string;
  region: string;
  subregion: string;
  area: number;
  popular: boolean;
}

/** Attributes of a country that questions ask about, or that `valuesOf` lists. */
export type CountryAttribute = "name" | "capital" | "currency" | "region" | "subregion" | "area";

/** Question families of the world (`Task.kind`). */
export type WorldKind = "single-hop" | "bridge" | "comparison";

/**
 * A built world: its config (defaults filled in), passages (one per country and fact, id
 * `country:<cca3 lowercase>:<fact>`),
 * the countries (structured facts, in selection order) and the question split. Plain data: deep-equal for equal
 * configs.
 */
export interface World {
  config: WorldConfig;
  passages: Passage[];
  countries: Country[];
  train: Task[];
  test: Task[];
}

// The package is CommonJS with ESM-style typings; loading its JSON through require avoids default-import interop.
const countriesData = createRequire(import.meta.url)("world-countries/countries.json") as Countries;

/** Letters that NFD does not decompose, transliterated; modifier letters (ʻ ʼ) and dots are dropped. */
const TRANSLIT: Record<string, string> = { "ł": "l", "đ": "d", "ø": "o", "æ": "ae", "œ": "oe", "ß": "ss", "ı": "i" };

/**
 * Normalises a name or value to lowercase ASCII words: NFD and strip combining marks, transliterate the few
 * letters NFD keeps (ł đ ø æ œ ß ı), drop `.` and the modifier letters ʻ ʼ, map ’ to `'`, replace `'` and `-` by a
 * space, collapse spaces. Returns null when characters other than [a-z0-9 ] remain.
 * Examples: `São Tomé` → `sao tome`; `Polish złoty` → `polish zloty`; `Washington D.C.` → `washington dc`;
 * `St. George's` → `st george s`.
 */
export function normalizeName(s: string): string | null {
  let t = s.normalize("NFD").replace(/[\u0300-\u036f]/g, "").toLowerCase();
  t = t.replace(/[łđøæœßı]/g, (c) => TRANSLIT[c] ?? c);
  t = t.replace(/[.\u02bb\u02bc]/g, "").replace(/\u2019/g, "'");
  if (/[^a-z0-9 '-]/.test(t)) return null;
  t = t.replace(/['-]/g, " ").replace(/\s+/g, " ").trim();
  return t === "" ? null : t;
}

/** A stream of the world's randomness, independent per purpose so that changing one knob keeps the others' draws. */
function stream(seed: number, purpose: string): Rng {
  let h = 0x811c9dc5; // FNV-1a of the purpose, mixed with the seed.
  for (const ch of purpose) h = Math.imul(h ^ ch.charCodeAt(0), 0x01000193) >>> 0;
  return new Rng((h ^ Math.imul(Math.trunc(seed) >>> 0, 0x9e3779b1)) >>> 0);
}

/**
 * All countries usable in a world, in `cca3` order, `popular` false: independent, with a capital, a currency, a
 * region and a positive area, every value normalisable (`normalizeName`), names unique after normalisation.
 * First capital and first currency are used where several are listed.
 */
export function eligibleCountries(): Country[] {
  const out: Country[] = [];
  const names = new Set<string>();
  const sorted = [...countriesData].sort((a, b) => (a.cca3 < b.cca3 ? -1 : a.cca3 > b.cca3 ? 1 : 0));
  for (const c of sorted) {
    const currencyCode = Object.keys(c.currencies ?? {})[0];
    if (!c.independent || !c.capital?.[0] || currencyCode === undefined || !c.region || !(c.area > 0)) continue;
    const name = normalizeName(c.name.common);
    const capital = normalizeName(c.capital[0]);
    const currency = normalizeName(c.currencies[currencyCode].name);
    const region = normalizeName(c.region);
    const subregion = normalizeName(c.subregion || c.region);
    if (!name || !capital || !currency || !region || !subregion || names.has(name)) continue;
    names.add(name);
    out.push({
      cca3: c.cca3.toLowerCase(),
      name,
      capital,
      currency,
      currencyCode,
      region,
      subregion,
      area: Math.max(1, Math.round(c.area)),
      popular: false,
    });
  }
  return out;
}

/** The facts each country has a passage for, in passage order. */
export const PASSAGE_FACTS = ["capital", "currency", "region", "area"] as const;
export type PassageFact = (typeof PASSAGE_FACTS)[number];

/** Id of the passage that states one fact of a country: `country:<cca3>:<fact>`. */
export function passageId(cca3: string, fact: PassageFact): string {
  return `country:${cca3}:${fact}`;
}

/**
 * The passages of a country: one short sentence per fact (capital, currency, region, area), titled by the
 * country. One fact per passage makes the bridge question a true two-hop search (the capital's passage names the
 * country, whose currency passage must then be searched for) and keeps observations short for a tiny policy.
 */
function countryPassages(c: Country): Passage[] {
  const text = factTexts(c);
  return PASSAGE_FACTS.map((f) => ({ id: passageId(c.cca3, f), title: c.name, text: text[f], fact: passageId(c.cca3, f) }));
}

/** The sentence stating each fact of a country. */
function factTexts(c: Pick<Country, "name" | "capital" | "currency" | "region" | "area">): Record<PassageFact, string> {
  return {
    capital: `the capital of ${c.name} is ${c.capital} .`,
    currency: `the currency of ${c.name} is the ${c.currency} .`,
    region: `the region of ${c.name} is ${c.region} .`,
    area: `the area of ${c.name} is ${c.area} square kilometres .`,
  };
}

/** Source names shown on passages when a world has noise. */
export const RELIABLE_SOURCE = "encyclopedia";
export const UNRELIABLE_SOURCE = "forum";

/**
 * All passages of a world: each country's true passages, plus — when `noiseFraction > 0` — an unreliable passage
 * (id `<fact id>:noise`, same `fact` key, another country's value for that fact) for a seeded `noiseFraction` of the
 * non-popular countries' facts. With noise, every passage carries `source` and `reliability`.
 */
function worldPassages(countries: Country[], cfg: WorldConfig, seed: number): Passage[] {
  const passages = countries.flatMap(countryPassages);
  if (!(cfg.noiseFraction > 0)) return passages;
  const out: Passage[] = [];
  const rng = stream(seed, "noise");
  const byFact = new Map(passages.map((p) => [p.id, p]));
  for (const c of countries) {
    for (const f of PASSAGE_FACTS) {
      out.push({ ...byFact.get(passageId(c.cca3, f))!, source: RELIABLE_SOURCE, reliability: 1 });
      if (c.popular || rng.next() >= cfg.noiseFraction) continue;
      const others = countries.filter((o) => String(o[f]) !== String(c[f]));
      if (others.length === 0) continue;
      const wrong = rng.pick(others)[f];
      out.push({
        id: `${passageId(c.cca3, f)}:noise`,
        title: c.name,
        text: factTexts({ ...c, [f]: wrong })[f],
        fact: passageId(c.cca3, f),
        source: UNRELIABLE_SOURCE,
        reliability: cfg.noiseReliability,
      });
    }
  }
  return out;
}

/** Validates a config, naming the field and its allowed values. @throws Error */
function checkConfig(cfg: WorldConfig, eligible: number): void {
  const frac = (k: "knownFraction" | "testFraction" | "noiseFraction" | "noiseReliability") => {
    if (!(cfg[k] >= 0 && cfg[k] <= 1)) throw new Error(`WorldConfig.${k} must be in [0, 1], got ${cfg[k]}`);
  };
  if (!Number.isInteger(cfg.seed)) throw new Error(`WorldConfig.seed must be an integer, got ${cfg.seed}`);
  if (!Number.isInteger(cfg.numCountries) || cfg.numCountries < 2 || cfg.numCountries > eligible) {
    throw new Error(`WorldConfig.numCountries must be an integer in [2, ${eligible}], got ${cfg.numCountries}`);
  }
  frac("knownFraction");
  frac("testFraction");
  frac("noiseFraction");
  frac("noiseReliability");
  if (!Number.isInteger(cfg.comparisonsPerCountry) || cfg.comparisonsPerCountry < 0) {
    throw new Error(`WorldConfig.comparisonsPerCountry must be a non-negative integer, got ${cfg.comparisonsPerCountry}`);
  }
}

/** The three single-hop question templates, by attribute. */
const SINGLE_HOP: Record<"capital" | "currency" | "region", (c: string) => string> = {
  capital: (c) => `what is the capital of ${c} ?`,
  currency: (c) => `what is the currency of ${c} ?`,
  region: (c) => `in which region is ${c} ?`,
};

/** Generates every question of the world, in country order (single-hop ×3, bridge), then comparisons. */
function makeQuestions(countries: Country[], cfg: WorldConfig): Task[] {
  const tasks: Task[] = [];
  for (const c of countries) {
    for (const attribute of ["capital", "currency", "region"] as const) {
      tasks.push({
        id: `${attribute}:${c.cca3}`,
        question: SINGLE_HOP[attribute](c.name),
        answers: [c[attribute]],
        kind: "single-hop",
        known: c.popular,
        evidenceIds: [passageId(c.cca3, attribute)],
        meta: { attribute, entity: c.name, cca3: c.cca3 },
      });
    }
    tasks.push({
      id: `bridge:${c.cca3}`,
      question: `what is the currency of the country whose capital is ${c.capital} ?`,
      answers: [c.currency],
      kind: "bridge",
      known: c.popular,
      // Two hops: the capital's passage names the country; the country's currency passage answers.
      evidenceIds: [passageId(c.cca3, "capital"), passageId(c.cca3, "currency")],
      meta: { attribute: "currency", entity: c.name, cca3: c.cca3, bridgeAttribute: "capital", bridgeValue: c.capital },
    });
  }
  // Comparisons: each country is paired with `comparisonsPerCountry` random partners of a different area, no pair twice.
  const rng = stream(cfg.seed, "comparison");
  const used = new Set<string>();
  for (const c of countries) {
    for (let r = 0; r < cfg.comparisonsPerCountry; r++) {
      const partner = rng
        .shuffle(countries)
        .find((o) => o.cca3 !== c.cca3 && o.area !== c.area && !used.has([c.cca3, o.cca3].sort().join(":")));
      if (partner === undefined) break;
      used.add([c.cca3, partner.cca3].sort().join(":"));
      const [a, b] = rng.next() < 0.5 ? [c, partner] : [partner, c];
      const larger = a.area > b.area ? a : b;
      tasks.push({
        id: `comparison:${a.cca3}:${b.cca3}`,
        question: `which country is larger by area , ${a.name} or ${b.name} ?`,
        answers: [larger.name],
        kind: "comparison",
        known: a.popular && b.popular,
        evidenceIds: [passageId(a.cca3, "area"), passageId(b.cca3, "area")],
        meta: { attribute: "area", entity: a.name, entity2: b.name, cca3: a.cca3, cca3_2: b.cca3 },
      });
    }
  }
  return tasks;
}

/**
 * Splits questions into train/test: within each stratum (kind × attribute × known), a seeded `testFraction`
 * (rounded) is held out, at least one on each side when the stratum has ≥ 2 questions and 0 < testFraction < 1.
 * Both sides keep generation order.
 */
function split(tasks: Task[], cfg: WorldConfig): { train: Task[]; test: Task[] } {
  const rng = stream(cfg.seed, "split");
  const strata = new Map<string, number[]>();
  tasks.forEach((t, i) => {
    const key = `${t.kind}/${t.meta?.attribute}/${t.known}`;
    strata.set(key, [...(strata.get(key) ?? []), i]);
  });
  const isTest = new Set<number>();
  for (const key of [...strata.keys()].sort()) {
    const idx = strata.get(key) ?? [];
    let n = Math.round(cfg.testFraction * idx.length);
    if (idx.length >= 2 && cfg.testFraction > 0 && cfg.testFraction < 1) n = Math.min(idx.length - 1, Math.max(1, n));
    for (const i of rng.shuffle(idx).slice(0, n)) isTest.add(i);
  }
  return { train: tasks.filter((_, i) => !isTest.has(i)), test: tasks.filter((_, i) => isTest.has(i)) };
}

/**
 * Builds the world. Deterministic: equal configs give deep-equal worlds; the country selection depends only on
 * `seed` (a larger `numCountries` extends a smaller one's list), popularity only on `seed` and `knownFraction`.
 * Selection: seeded shuffle of `eligibleCountries()`, names of ≤ 3 words first, first `numCountries` kept.
 * Popular: a seeded `round(knownFraction × numCountries)` of them. Questions per country: capital, currency,
 * region (single-hop), currency via capital (bridge), plus `comparisonsPerCountry` area comparisons.
 * A question is `known` iff every country it involves is popular.
 * @throws Error when a config field is out of range (naming it and the allowed values)
 */
export function buildWorld(config: Partial<WorldConfig> = {}): World {
  const cfg: WorldConfig = { ...DEFAULT_WORLD_CONFIG, ...config };
  const eligible = eligibleCountries();
  checkConfig(cfg, eligible.length);
  const shuffled = stream(cfg.seed, "select").shuffle(eligible);
  const words = (c: Country) => c.name.split(" ").length;
  // Short names are easier for a tiny policy to copy; longer ones only fill in when numCountries needs them.
  const ordered = [...shuffled.filter((c) => words(c) <= 3), ...shuffled.filter((c) => words(c) > 3)];
  const countries = ordered.slice(0, cfg.numCountries).map((c) => ({ ...c }));
  const numPopular = Math.round(cfg.knownFraction * countries.length);
  for (const c of stream(cfg.seed, "known").shuffle(countries).slice(0, numPopular)) c.popular = true;
  const { train, test } = split(makeQuestions(countries, cfg), cfg);
  return { config: cfg, passages: worldPassages(countries, cfg, cfg.seed), countries, train, test };
}

/**
 * All distinct values of an attribute among the world's countries, sorted (numbers for `area` as strings).
 * Scripted agents use it to make plausible wrong guesses.
 */
export function valuesOf(world: World, attribute: CountryAttribute): string[] {
  return [...new Set(world.countries.map((c) => String(c[attribute])))].sort();
}

/**
 * Every text a tokenizer built for this world must cover: passage titles and texts, questions and answers of
 * train and test, in that order.
 */
export function worldTexts(world: World): string[] {
  const tasks = [...world.train, ...world.test];
  return [
    ...world.passages.flatMap((p) => [p.title, p.text]),
    ...tasks.map((t) => t.question),
    ...tasks.flatMap((t) => t.answers),
  ];
}

/**
 * A counterfactual copy of a world for warm-start demonstrations: the facts of the non-popular countries are
 * permuted among them (each of capital, currency, region and area independently, seeded), passages and questions
 * are rewritten to match, and the train/test membership of every question id is kept. Popular countries are
 * untouched, so the policy's parametric knowledge stays consistent.
 *
 * Why: a tiny policy trained on a few hundred demonstrations memorises question → answer instead of learning to
 * read the retrieved passage. When the same unknown question has a different answer in each world, only reading
 * the evidence fits the demonstrations (counterfactual augmentation, as in knowledge-conflict training).
 * Never used for RL or evaluation, which run in the real world.
 * @throws Error when `seed` is not an integer
 */
export function counterfactualWorld(world: World, seed: number): World {
  if (!Number.isInteger(seed)) throw new Error(`counterfactualWorld: seed must be an integer, got ${seed}`);
  const rng = stream(seed, "counterfactual");
  const countries = world.countries.map((c) => ({ ...c }));
  const unknown = countries.filter((c) => !c.popular);
  for (const key of ["capital", "currency", "region", "area"] as const) {
    const values = rng.shuffle(unknown.map((c) => c[key]));
    unknown.forEach((c, i) => ((c as Record<typeof key, string | number>)[key] = values[i]));
  }
  for (const c of unknown) c.currencyCode = "";
  const byId = new Map(makeQuestions(countries, world.config).map((t) => [t.id, t]));
  const keep = (tasks: Task[]) => tasks.flatMap((t) => (byId.has(t.id) ? [byId.get(t.id)!] : []));
  return { config: world.config, passages: worldPassages(countries, world.config, seed), countries, train: keep(world.train), test: keep(world.test) };
}
