/**
 * The pretraining corpus of the embedded base model (issue 32 part 3, first piece): seeded multi-turn tool-use
 * episodes over *random* tool schemas and *random* worlds of records, rendered in any protocol (`hermes`, `react`)
 * exactly as a recipe's episodes are — `protocol.prompt(protocol.system(tools, …), request)`, then each turn's
 * `protocol.format(action)` (trained: loss mask 1) and `protocol.observation(results).text` (not trained). Every
 * name, field, id format and value is drawn from the seed, so no built-in env's tools or worlds appear in it and a
 * built-in env is as new to the base as a user's.
 *
 * Skills, one episode each (`SKILLS`):
 * - `copy_request`: the request names an id; the call must copy it; the answer copies a field of the response;
 * - `copy_response`: the request names a record by its name; the first call finds it, the second copies its id from
 *   that response, the answer copies a field;
 * - `select`: a list of 2–8 records comes back; the action copies the id of the one the request asks for (lowest,
 *   highest, the first with a field ≥ k, the first of a category, the first with a yes/no flag set) and the answer
 *   copies the confirmation;
 * - `chain`: find → read details → act on the id found two turns back;
 * - `args`: a request phrased in words ("… from Kafelu to Zibeh after 2027-03-04") and a tool whose parameters are named
 *   by those words (`from`, `to`, `after`): the call copies each value after its word into the parameter of that name;
 * - `compare`: "which has the higher / lower F, A or B?" — find A, find B, answer the one whose F wins: two numbers read
 *   from two responses and compared (the weather question of the own-env example is one of these, in its own words);
 * - `recall`: find a record by name, then 0–3 searches by category whose lists hold other records, then act on the
 *   first record — its id copied from the response 1–4 turns back, past lists of distractor ids;
 * - `retry`: the first call fails (rate limit or timeout), the same call again succeeds;
 * - `empty`: the search comes back empty and the answer says so — stopping instead of calling again.
 * Sources: the skills issue 32 lists; the formats are this project's protocols (src/protocol).
 */
import { Rng } from "../core/rng.ts";
import type { Action, ToolCall, ToolCallResult } from "../core/types.ts";
import { CALL_FAILURES } from "../env/failureTexts.ts";
import type { Protocol, ToolJsonSchema } from "../protocol/types.ts";

/** The skills an episode drills (see the file comment). */
export const SKILLS = ["copy_request", "copy_response", "args", "select", "chain", "compare", "recall", "retry", "empty"] as const;
/** One of {@link SKILLS}. */
export type Skill = (typeof SKILLS)[number];

/**
 * How often each skill is drawn (relative). Reading a response several turns back (`recall`) and choosing from a
 * list (`select`) are the skills the first base lacked most (copy 2–13 % at distance 4, select 0–25 % at 8 records),
 * so they come more often than the one-turn skills. `compare` (corpus v4): the third base chose the warmer of two
 * looked-up cities in 8 of 14 weather episodes (chance) and selected 13–88 % by list length; comparing numbers is
 * the step both lacked. `args` (v4): warm-started on travel, the third base wrote `"from": "lrom"` for requests
 * phrased "fly me from X to Y" (2.1–2.4 failed calls per episode) — every earlier tool took one id, name or category.
 */
export const SKILL_WEIGHTS: Readonly<Record<Skill, number>> = { copy_request: 1, copy_response: 1, args: 1.5, select: 4, chain: 1, compare: 2, recall: 4, retry: 0.5, empty: 0.5 };

/** One of `keys`, drawn with probability proportional to `weights` (one `rng.next()`). */
export function weightedDraw<K extends string>(rng: Rng, keys: readonly K[], weights: Readonly<Record<K, number>>): K {
  const total = keys.reduce((a, k) => a + weights[k], 0);
  let u = rng.next() * total;
  for (const k of keys) if ((u -= weights[k]) < 0) return k;
  return keys[keys.length - 1];
}

/** A span of an episode's text: `train` spans are the policy's turns (loss mask 1), the rest its context. */
export interface CorpusSegment {
  text: string;
  train: boolean;
}

/** One generated episode. */
export interface CorpusEpisode {
  skill: Skill;
  /** Prompt, then alternating turns (train) and observations (not trained). */
  segments: CorpusSegment[];
  /** The actions of the turns, in order (what a grader or a probe checks). */
  actions: Action[];
  /** The final answer. */
  answer: string;
  /** The tools declared in the system prompt. */
  tools: ToolJsonSchema[];
  /** For `select` and `recall`: the index (in `actions`) of the turn a reading probe checks. */
  probeTurn?: number;
}

/** One record of a world: id, name, and its drawn fields. */
export type Rec = Record<string, string | number>;

/** A random world: one kind of record, its fields, its tools. */
export interface World {
  noun: string;
  plural: string;
  verb: string;
  /** Numeric fields (name, range, step). */
  nums: { name: string; lo: number; hi: number; step: number }[];
  /** A categorical field and its values. */
  cat: { name: string; values: string[] };
  /** A yes/no field. */
  flag: string;
  id: (rng: Rng) => string;
  tools: { find: string; get: string; act: string };
}

const CONSONANTS = "bcdfghjklmnprstvz";
const VOWELS = "aeiou";

/** A pronounceable random word of 2–3 syllables (lowercase). */
export function word(rng: Rng, syllables = 2 + rng.int(2)): string {
  let w = "";
  for (let i = 0; i < syllables; i++) w += CONSONANTS[rng.int(CONSONANTS.length)] + VOWELS[rng.int(VOWELS.length)];
  return rng.next() < 0.3 ? w + CONSONANTS[rng.int(CONSONANTS.length)] : w;
}

export const pick = <T>(rng: Rng, xs: readonly T[]): T => xs[rng.int(xs.length)];

/** A random date 2026-01-01 … 2029-12-28 (`YYYY-MM-DD`). */
export function date(rng: Rng): string {
  return `20${26 + rng.int(4)}-${String(1 + rng.int(12)).padStart(2, "0")}-${String(1 + rng.int(28)).padStart(2, "0")}`;
}
export const capital = (w: string) => w[0].toUpperCase() + w.slice(1);

/**
 * An id format, drawn per world so that ids of every shape and length (1 to ~16 tokens under a digit-splitting
 * tokenizer) occur: the reading probes ask for 1–12-token ids, and a model that only ever saw `ab1234` keeps writing
 * digits after a one-token id (measured on the first base: `at` copied as `atat`, 0 % at one token and at 10–12).
 * Families: letters + optional separator + 1–10 digits (`mu5101`, `p-4821`, `QX07`); digits only, 1–12 (`7`,
 * `902113457`); letters only, 1–6 (`qx`, `KZV`); letters, digits, letters (`ab12cd`, `X9_77Q`). Lower or upper case.
 */
export function idFormat(rng: Rng): (rng: Rng) => string {
  const family = rng.int(4);
  const letters = family === 1 ? 0 : 1 + rng.int(family === 2 ? 6 : 4);
  const digits = family === 2 ? 0 : 1 + rng.int(family === 1 ? 12 : 10);
  const tail = family === 3 ? 1 + rng.int(3) : 0;
  const sep = family === 0 || family === 3 ? pick(rng, ["", "", "-", "_"]) : "";
  const upper = rng.next() < 0.3;
  const run = (r: Rng, n: number, chars: string) => Array.from({ length: n }, () => chars[r.int(chars.length)]).join("");
  const LETTERS = "abcdefghijklmnopqrstuvwxyz";
  return (r) => {
    const s = run(r, letters, LETTERS) + sep + run(r, digits, "0123456789") + run(r, tail, LETTERS);
    return upper ? s.toUpperCase() : s;
  };
}

/**
 * The id generator of one world: half the worlds use one {@link idFormat}, half mix 2–4 (each record draws one). With a
 * single format per world the second base wrote a foreign-format id in the world's shape (measured on its reading
 * probes, distance ≥ 2: `Z734` copied as `2734`, `V-43` as `143`, `B5836` as `b5836`, `16576` as `1657`; 31 of 34
 * misses garbled the id, 2 named another record): it predicted the format instead of reading the id. Mixed worlds make
 * the context, not the world's habit, the only source of an id's shape.
 */
export function idMix(rng: Rng): (rng: Rng) => string {
  const formats = Array.from({ length: rng.next() < 0.5 ? 1 : 2 + rng.int(3) }, () => idFormat(rng));
  return formats.length === 1 ? formats[0] : (r) => pick(r, formats)(r);
}

/** Keys every record or response has: a drawn field of the same name would overwrite them. */
export const RESERVED_KEYS = ["id", "name", "confirmation"] as const;

/** A random world (noun, numeric / categorical / yes-no fields, id generator, tool names), all drawn from `rng`. */
export function makeWorld(rng: Rng): World {
  const noun = word(rng);
  // Field names are drawn like words; the record keys the generator itself writes are never drawn ("name" is a word).
  const names = new Set<string>([noun, ...RESERVED_KEYS]);
  const fresh = () => {
    let w = word(rng);
    while (names.has(w)) w = word(rng);
    names.add(w);
    return w;
  };
  const nums = Array.from({ length: 1 + rng.int(3) }, () => {
    const scale = pick(rng, [1, 10, 100]);
    const lo = rng.int(5) * scale;
    return { name: fresh(), lo, hi: lo + (5 + rng.int(50)) * scale, step: pick(rng, [1, 1, 5, 0.5]) };
  });
  const cat = { name: fresh(), values: Array.from({ length: 2 + rng.int(3) }, fresh) };
  const verb = fresh();
  const flag = fresh();
  return { noun, plural: `${noun}s`, verb, nums, cat, flag, id: idMix(rng), tools: { find: `find_${noun}s`, get: `get_${noun}`, act: `${verb}_${noun}` } };
}

function toolSchemas(w: World): ToolJsonSchema[] {
  const str = (description: string) => ({ type: "string", description });
  return [
    {
      name: w.tools.find,
      description: `Find ${w.plural} by ${w.cat.name} or by name. Returns a list of {id, name, ${w.nums.map((n) => n.name).join(", ")}}.`,
      parameters: { type: "object", properties: { [w.cat.name]: { type: "string", enum: w.cat.values }, name: str(`The ${w.noun}'s name.`) } },
    },
    {
      name: w.tools.get,
      description: `All fields of one ${w.noun}.`,
      parameters: { type: "object", properties: { id: str(`The ${w.noun} id, as returned by ${w.tools.find}.`) }, required: ["id"] },
    },
    {
      name: w.tools.act,
      description: `${capital(w.verb)} one ${w.noun}. Returns a confirmation code.`,
      parameters: { type: "object", properties: { id: str(`The ${w.noun} id.`) }, required: ["id"] },
    },
  ];
}

/** A value of numeric field `n`: lo…hi on its step (integers, or halves when the step is 0.5). */
export function numValue(n: World["nums"][number], rng: Rng): number {
  return n.lo + Math.round((rng.next() * (n.hi - n.lo)) / n.step) * n.step;
}

function record(w: World, rng: Rng, cat?: string): Rec {
  const r: Rec = { id: w.id(rng), name: `${capital(word(rng))} ${capital(word(rng, 1 + rng.int(2)))}` };
  for (const n of w.nums) r[n.name] = numValue(n, rng);
  r[w.cat.name] = cat ?? pick(rng, w.cat.values);
  r[w.flag] = rng.next() < 0.5 ? "yes" : "no";
  return r;
}

/**
 * `n` records of world `w` (of category `cat` when given) with pairwise different ids and names, none equal to one in `avoid`.
 * @throws Error when 10 000 draws do not give `n` distinct records
 */
export function records(w: World, rng: Rng, n: number, cat?: string, avoid: Rec[] = []): Rec[] {
  const out: Rec[] = [];
  for (let attempt = 0; out.length < n; attempt++) {
    if (attempt === 10_000) throw new Error(`corpus: no ${n} distinct ${w.plural} after 10 000 draws (world of ${w.noun})`);
    const r = record(w, rng, cat);
    if (![...out, ...avoid].some((o) => o.id === r.id || o.name === r.name)) out.push(r);
  }
  return out;
}

/**
 * Picks what a select request asks for in `list` (mode drawn from `rng`): the lowest or highest `num`, the first with
 * `num` ≥ k (k one of the listed values), or the first with the world's flag `yes` (set on one record when none has
 * it). Ties go to the first record listed, as a reader scanning it would take. `what` completes "… with {what}".
 */
export function selection(w: World, rng: Rng, list: Rec[], num: World["nums"][number]): { chosen: Rec; what: string } {
  const values = list.map((r) => r[num.name] as number);
  const mode = pick(rng, ["lowest", "highest", "atLeast", "flag"] as const);
  if (mode === "flag" && !list.some((r) => r[w.flag] === "yes")) list[rng.int(list.length)][w.flag] = "yes";
  const k = pick(rng, values);
  // Ties go to the first record in the list, as a reader scanning it would take.
  const chosen =
    mode === "lowest"
      ? list[values.indexOf(Math.min(...values))]
      : mode === "highest"
        ? list[values.indexOf(Math.max(...values))]
        : mode === "atLeast"
          ? list[values.findIndex((v) => v >= k)]
          : list.find((r) => r[w.flag] === "yes")!;
  const what =
    mode === "lowest"
      ? `the lowest ${num.name}`
      : mode === "highest"
        ? `the highest ${num.name}`
        : mode === "atLeast"
          ? `a ${num.name} of at least ${k} (the first one listed)`
          : `${w.flag} yes (the first one listed)`;
  return { chosen, what };
}

const call = (name: string, args: Record<string, unknown>): Action => ({ type: "tool_call", calls: [{ name, arguments: args } satisfies ToolCall] });
const ok = (name: string, value: unknown): ToolCallResult => ({ name, ok: true, content: JSON.stringify(value), value });
const fail = (name: string, text: string): ToolCallResult => ({ name, ok: false, content: `error: tool ${name}: ${text}`, errorKind: "error" });

/** A scripted episode: the request and its turns (an action, with the tool results that answer it). */
interface Script {
  request: string;
  turns: { action: Action; results?: ToolCallResult[] }[];
  answer: string;
  /** The turn a reading probe asks the model to write (select: the act after the list; recall: the act). */
  probe?: number;
  /** Tools of this episode beyond the world's three (`args`). */
  tools?: ToolJsonSchema[];
}

/** Parameter names of the `args` skill, each the word that precedes its value in the request; place or time values. */
const PLACE_ROLES = ["from", "to", "near", "via", "in", "at"] as const;
const TIME_ROLES = ["after", "before", "on", "by"] as const;

/** Controls for reading probes (`./probes.ts`); the corpus draws each of them. */
export interface EpisodeOptions {
  /** `recall`: turns between the response holding the id and the call that copies it (1–4). */
  distance?: number;
  /** `select`, `chain`: records in the list (≥ 2). */
  listLength?: number;
  /** `recall`: the id to copy (otherwise one of the world's format). */
  id?: string;
}

function script(skill: Skill, w: World, rng: Rng, opts: EpisodeOptions): Script {
  const { find, get, act } = w.tools;
  const num = pick(rng, w.nums);
  const confirmation = () => w.id(rng).toUpperCase();
  const answerTurn = (answer: string) => ({ action: { type: "answer", answer } as Action });
  switch (skill) {
    case "copy_request":
    case "retry": {
      const r = record(w, rng);
      const get1 = call(get, { id: r.id });
      const failure = rng.next() < 0.5 ? "rate limited (429): retry later" : CALL_FAILURES.timeout;
      const answer = `The ${num.name} of ${w.noun} ${r.id} is ${r[num.name]}.`;
      const first = skill === "retry" ? [{ action: get1, results: [fail(get, failure)] }] : [];
      return { request: `What is the ${num.name} of ${w.noun} ${r.id}?`, turns: [...first, { action: get1, results: [ok(get, r)] }, answerTurn(answer)], answer };
    }
    case "copy_response": {
      const r = record(w, rng);
      const answer = `${r.name} has ${num.name} ${r[num.name]}.`;
      const turns = [
        { action: call(find, { name: r.name }), results: [ok(find, [{ id: r.id, name: r.name }])] },
        { action: call(get, { id: r.id }), results: [ok(get, r)] },
        answerTurn(answer),
      ];
      return { request: `Look up the ${w.noun} named ${r.name} and tell me its ${num.name}.`, turns, answer };
    }
    case "select":
    case "chain": {
      const cat = pick(rng, w.cat.values);
      const list = records(w, rng, opts.listLength ?? 2 + rng.int(7), cat);
      const { chosen, what } = selection(w, rng, list, num);
      const code = confirmation();
      const answer = `Done: ${chosen.name} (${chosen.id}), confirmation ${code}.`;
      const found = { action: call(find, { [w.cat.name]: cat }), results: [ok(find, list)] };
      const detail = skill === "chain" ? [{ action: call(get, { id: chosen.id }), results: [ok(get, chosen)] }] : [];
      const done = { action: call(act, { id: chosen.id }), results: [ok(act, { confirmation: code })] };
      return { request: `${capital(w.verb)} the ${cat} ${w.noun} with ${what}.`, turns: [found, ...detail, done, answerTurn(answer)], answer, probe: skill === "select" ? 1 : undefined };
    }
    case "args": {
      const roles = [...rng.shuffle(PLACE_ROLES).slice(0, 1 + rng.int(2)), ...rng.shuffle(TIME_ROLES).slice(0, rng.int(2))];
      const place = () => (rng.next() < 0.7 ? capital(word(rng)) : `${capital(word(rng))} ${capital(word(rng))}`);
      const args = Object.fromEntries(roles.map((r) => [r, (TIME_ROLES as readonly string[]).includes(r) ? date(rng) : place()]));
      let verb = word(rng);
      while (verb === w.verb) verb = word(rng); // the world's act tool is `${w.verb}_${w.noun}`
      const name = `${verb}_${w.noun}`;
      const tool = { name, description: `${capital(verb)} a ${w.noun}. Returns a confirmation code.`, parameters: { type: "object", properties: Object.fromEntries(roles.map((r) => [r, { type: "string" }])), required: roles } };
      const code = confirmation();
      const answer = rng.next() < 0.5 ? `Done, confirmation ${code}.` : `Done: ${roles.map((r) => `${r} ${args[r]}`).join(", ")}; confirmation ${code}.`;
      const phrase = rng.shuffle(roles).map((r) => `${r} ${args[r]}`).join(" ");
      return { request: `${capital(verb)} a ${w.noun} ${phrase}.`, turns: [{ action: call(name, args), results: [ok(name, { confirmation: code })] }, answerTurn(answer)], answer, tools: [tool] };
    }
    case "compare": {
      const [a, b] = records(w, rng, 2);
      for (let i = 0; b[num.name] === a[num.name]; i++) {
        if (i === 1000) throw new Error(`corpus: no two different ${num.name} values after 1 000 draws`);
        b[num.name] = numValue(num, rng);
      }
      const higher = rng.next() < 0.5;
      const [win, lose] = (a[num.name] > b[num.name]) === higher ? [a, b] : [b, a];
      const answer = rng.next() < 0.5 ? String(win.name) : `${win.name}: ${num.name} ${win[num.name]} against ${lose[num.name]}.`;
      const turns = [a, b].map((r) => ({ action: call(find, { name: r.name }), results: [ok(find, [r])] }));
      return { request: `Which ${w.noun} has the ${higher ? "higher" : "lower"} ${num.name}, ${a.name} or ${b.name}?`, turns: [...turns, answerTurn(answer)], answer };
    }
    case "recall": {
      const distance = opts.distance ?? 1 + rng.int(4);
      const r = record(w, rng);
      if (opts.id !== undefined) r.id = opts.id;
      const cats = Array.from({ length: distance - 1 }, () => pick(rng, w.cat.values));
      const lists = cats.map((c) => records(w, rng, 1 + rng.int(2), c, [r])); // short lists: a distance-4 episode fits 1 024 tokens
      const code = confirmation();
      const answer = `Done: ${r.name} (${r.id}), confirmation ${code}.`;
      const shown = cats.length === 0 ? "" : ` and show me the ${cats.join(", then the ")} ${w.plural}`;
      const turns = [
        { action: call(find, { name: r.name }), results: [ok(find, [{ id: r.id, name: r.name }])] },
        ...cats.map((c, i) => ({ action: call(find, { [w.cat.name]: c }), results: [ok(find, lists[i])] })),
        { action: call(act, { id: r.id }), results: [ok(act, { confirmation: code })] },
        answerTurn(answer),
      ];
      return { request: `Find the ${w.noun} named ${r.name}${shown}; then ${w.verb} ${r.name}.`, turns, answer, probe: distance };
    }
    case "empty": {
      const name = `${capital(word(rng))} ${capital(word(rng))}`;
      const answer = `There is no ${w.noun} named ${name}.`;
      return { request: `${capital(w.verb)} the ${w.noun} named ${name}.`, turns: [{ action: call(find, { name }), results: [ok(find, [])] }, answerTurn(answer)], answer };
    }
  }
}

/**
 * One episode of the corpus: a fresh random world (seeded by `seed`) and the skill given or one drawn from the seed,
 * rendered in `protocol`. Pure and deterministic: the same arguments give the same episode.
 */
export function generateEpisode(seed: number, protocol: Protocol, skill?: Skill, options: EpisodeOptions = {}): CorpusEpisode {
  const rng = new Rng(seed);
  const w = makeWorld(rng);
  const s = skill ?? weightedDraw(rng, SKILLS, SKILL_WEIGHTS);
  const sc = script(s, w, rng, options);
  const tools = [...toolSchemas(w), ...(sc.tools ?? [])];
  const instructions = `You help with ${w.plural}. Call a tool when you need a fact you do not have; answer when done.`;
  const segments: CorpusSegment[] = [{ text: protocol.prompt(protocol.system(tools, instructions), sc.request), train: false }];
  for (const t of sc.turns) {
    segments.push({ text: protocol.format(t.action), train: true });
    if (t.results !== undefined) segments.push({ text: protocol.observation(t.results).text, train: false });
  }
  return { skill: s, segments, actions: sc.turns.map((t) => t.action), answer: sc.answer, tools, probeTurn: sc.probe };
}
