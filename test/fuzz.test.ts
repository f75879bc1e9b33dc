/**
 * Property-based fuzz of the action parser, the search environment and the reward terms — issue 5's acceptance
 * item "a property-based fuzz (fast-check) of the action parser and reward terms: ≥ 10 000 generated model
 * outputs, 0 crashes, every output classified".
 *
 * What is classified:
 * - each generated turn text, by `parseSearchR1Action`, into exactly one of: `search`, `answer`, or `invalid` with
 *   one of six reasons (no action, unclosed tag, nested action, mismatched tags, empty query, empty answer). The
 *   class and its content must equal an independent reference scanner (`referenceParse`, written with `indexOf`,
 *   not the parser's regexes), and re-serialising a search/answer must parse back to the same action;
 * - each generated episode, by `SearchEnv.step` over a small BM25 world: never throws, the observation and `done`
 *   follow the action class, and the env's counters equal the classes of the texts it was given;
 * - each generated trajectory (from a whole transcript via `trajectoryFromText`, or built directly with random
 *   turns, passages, answers and tasks), by `computeReward` under every preset of `REWARD_PRESETS` and under all
 *   terms at weight 1 (`judge` skipped: it needs a server): never throws, every term is a finite number in its
 *   documented range, no term carries an `error` (that would be a crash caught by the composer), and the total is
 *   Σ weight × value.
 *
 * Input kinds: arbitrary unicode (lone surrogates, NUL, controls, RTL marks), protocol-fragment soup (whole,
 * partial, nested, duplicated, unclosed and reversed tags), runs of one fragment up to 100 KB (e.g. 100 000 `<`),
 * 100 KB texts, whitespace only, JSON-ish `<tool_call>`s (valid, malformed, truncated), and realistic turns with
 * noise. Seeds are fixed, so every run generates the same inputs; the ledger printed by the last test gives, per
 * input kind, how many were tried and how they were classified (the table of docs/reliability.md).
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { searchAction, searchQuery, type Action, type Passage, type Task, type Trajectory, type Turn } from "../src/core/types.ts";
import { INFORMATION_CLOSE, INFORMATION_OPEN, INVALID_ACTION_OBSERVATION, formatPassages, informationObservation, parseSearchR1Action } from "../src/protocol/searchR1.ts";
import { SearchEnv } from "../src/envs/search/env.ts";
import { buildWorld } from "../src/envs/search/world.ts";
import { computeReward, type RewardConfig } from "../src/reward/compose.ts";
import { normalizeAnswer } from "../src/reward/em.ts";
import { REWARD_PRESETS } from "../src/reward/presets.ts";
import { TERM_LIST } from "../src/reward/terms.ts";
import { BM25Index } from "../src/retrieval/bm25.ts";
import { responseText } from "../src/protocol/transcriptText.ts";
import { trajectoryFromText } from "../src/protocol/transcript.ts";

/** One seed for every property: CI generates the same inputs on every run. */
const SEED = 20_261_130;

// ───────────────────────────── the ledger (the reliability table) ─────────────────────────────

/** Per input kind: how many outputs were tried, and how many fell in each outcome (a class, or `crash`). */
const ledger = new Map<string, { tried: number; outcomes: Map<string, number> }>();

function record(kind: string, outcome: string): void {
  let row = ledger.get(kind);
  if (row === undefined) ledger.set(kind, (row = { tried: 0, outcomes: new Map() }));
  row.tried++;
  row.outcomes.set(outcome, (row.outcomes.get(outcome) ?? 0) + 1);
}

/** Runs `f`; a throw is recorded as a `crash` of `kind` and rethrown (so fast-check reports and shrinks it). */
function noCrash<T>(kind: string, f: () => T): T {
  try {
    return f();
  } catch (e) {
    record(kind, "crash");
    throw e;
  }
}

/**
 * A property check that throws a plain Error naming what broke. Used in the hot loops instead of vitest's
 * `expect` (~10 µs a call; the reward loop checks millions of values); the message is built only on failure.
 */
function ensure(cond: boolean, what: () => string): void {
  if (!cond) throw new Error(`property violated: ${what()}`);
}

// ───────────────────────────── generators of model outputs ─────────────────────────────

/** Characters that break naive text handling: NUL, controls, bidi marks, BOM, lone surrogates, combining marks. */
const NASTY_CHARS = [
  "\u0000", "\u0007", "\u0008", "\u001b", "\u007f", "\u0085", "\u00a0", "\u200b", "\u200e", "\u200f", "\u202e",
  "\u2066", "\u2028", "\u2029", "\u3000", "\ufeff", "\ufffd", "\ud800", "\udbff", "\udc00", "\udfff", "e\u0301",
  "😀", "👩‍👩‍👧", "東京", "ﷺ", "\r\n", "\t", "\v", "\f",
];

/** Any UTF-16 code unit (lone surrogates included), or one of `NASTY_CHARS`. */
const anyCodeUnit = fc.oneof(
  fc.integer({ min: 0, max: 0xffff }).map((c) => String.fromCharCode(c)),
  fc.constantFrom(...NASTY_CHARS),
);

/** Arbitrary unicode text: code units (lone surrogates), whole code points, or graphemes. */
const unicodeText = (maxLength: number): fc.Arbitrary<string> =>
  fc.oneof(
    fc.string({ unit: anyCodeUnit, maxLength }),
    fc.string({ unit: "binary", maxLength }),
    fc.string({ unit: "grapheme", maxLength }),
  );

/** Tags of the protocol, whole, partial, misspelt, mis-cased and from neighbouring formats. */
const PROTOCOL_FRAGMENTS = [
  "<search>", "</search>", "<answer>", "</answer>", "<think>", "</think>", "<information>", "</information>",
  "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<cite>", "</cite>",
  "<sear", "</sea", "<ans", "</answ", "<thi", "</", "<", ">", "/>", "<<", ">>", "< search>", "<search >",
  "<SEARCH>", "</Answer>", "<search/>", "<|im_start|>assistant", "<|im_end|>", "Doc 1(Title: paris) ",
];

/** Words a query or an answer is made of, some of them gold answers of `TASK_ANSWERS`, some blank or odd. */
const WORDS = ["paris", "capital of france", "the", "a", "Zürich", "U.S.A.", "42", "new york city", "東京", " ", "\n", "", "—", "'"];
const word = fc.oneof(fc.constantFrom(...WORDS), fc.constantFrom(...NASTY_CHARS), fc.string({ maxLength: 6 }));

/** Protocol-fragment soup: tags and partial tags interleaved with words, nested, duplicated, unclosed or reversed. */
const protocolSoup = fc
  .array(fc.oneof({ arbitrary: fc.constantFrom(...PROTOCOL_FRAGMENTS), weight: 3 }, { arbitrary: word, weight: 2 }), { maxLength: 40 })
  .map((parts) => parts.join(""));

/** One fragment repeated up to 100 KB (100 000 `<`, 12 500 `<search>` …), optionally followed by a valid action. */
const fragmentRun = fc
  .tuple(
    fc.constantFrom("<", "</", "<search>", "</search>", "<answer>", "<think>", "</think>", "<information>", "<tool_call>{", "<sear"),
    fc.integer({ min: 1, max: 100_000 }),
    fc.constantFrom("", "<search> q </search>", "<answer> a </answer>"),
  )
  .map(([frag, n, tail]) => frag.repeat(Math.max(1, Math.floor(n / frag.length))) + tail);

/** A ~100 KB text: a short random piece (soup or unicode) repeated, with a valid action maybe inserted. */
const longText = (bytes: number): fc.Arbitrary<string> =>
  fc
    .tuple(fc.oneof(protocolSoup, unicodeText(40)), fc.constantFrom("", "<search> paris </search>", "<answer> paris </answer>"), fc.double({ min: 0, max: 1, noNaN: true }))
    .map(([piece, action, at]) => {
      const unit = piece === "" ? "x " : piece;
      const body = unit.repeat(Math.ceil(bytes / unit.length)).slice(0, bytes);
      const cut = Math.floor(at * body.length);
      return body.slice(0, cut) + action + body.slice(cut);
    });

/** Whitespace only, JS and Python whitespace and the zero-width characters neither counts. */
const whitespaceOnly = fc.string({
  unit: fc.constantFrom(" ", "\t", "\n", "\r", "\v", "\f", "\u00a0", "\u0085", "\u1680", "\u2000", "\u2028", "\u2029", "\u3000", "\u200b", "\ufeff", "\u001c"),
  maxLength: 80,
});

/** A JSON-ish body of a tool call: valid, wrong-shaped, truncated, or not JSON at all. */
const toolCallJson = fc.oneof(
  fc
    .record({
      name: fc.oneof(fc.constant("search"), fc.constant("calculator"), fc.string({ maxLength: 8 }), fc.integer(), fc.constant(null)),
      arguments: fc.oneof(
        fc.record({ query_list: fc.array(fc.oneof(word, fc.integer(), fc.constant(null)), { maxLength: 3 }) }),
        fc.record({ query: fc.oneof(word, fc.constant(null), fc.integer()) }),
        fc.constant(null),
        fc.string({ maxLength: 8 }),
        fc.jsonValue({ maxDepth: 2 }),
      ),
    })
    .map((o) => JSON.stringify(o)),
  fc.json({ maxDepth: 2 }),
  fc.tuple(fc.constant('{"name": "search", "arguments": {"query_list": ["capital of france"]}}'), fc.nat()).map(([s, n]) => s.slice(0, n % (s.length + 1))),
  fc.string({ maxLength: 20 }),
);

/** A `<tool_call>` turn (hermes format), closed or not, sometimes with text around it. */
const toolCallTurn = fc
  .tuple(fc.constantFrom("", "<think> call the tool </think>\n", "ok "), toolCallJson, fc.constantFrom("</tool_call>", "", "</tool_call> trailing", "</tool_call><answer> a </answer>"))
  .map(([pre, json, close]) => `${pre}<tool_call>${json}${close}`);

/** Noise that cannot contain any tag (no `<`): around a realistic action, it must not change the parse. */
const tagFreeNoise = fc.string({ unit: anyCodeUnit.filter((c) => !c.includes("<")), maxLength: 30 });

/** Content of a block with no `<` (so it holds no tag): a query or an answer, possibly blank. */
const tagFreeContent = fc.oneof(fc.constantFrom(...WORDS), tagFreeNoise, whitespaceOnly);

/**
 * A realistic turn with its expected action: noise, an optional complete think block, one `<search>` or `<answer>`
 * block, then arbitrary trailing text (a second action, tags, anything): the first block is the action.
 */
const realisticTurn: fc.Arbitrary<{ text: string; expected: Action }> = fc
  .tuple(tagFreeNoise, fc.option(tagFreeNoise, { nil: undefined }), fc.constantFrom("search", "answer"), tagFreeContent, fc.oneof(protocolSoup, unicodeText(20), fc.constant("")))
  .map(([noise, think, tag, content, tail]) => {
    const text = `${noise}${think === undefined ? "" : `<think>${think}</think>`}<${tag}>${content}</${tag}>${tail}`;
    const c = collapse(content);
    const expected: Action =
      c === ""
        ? { type: "invalid", reason: tag === "search" ? "empty query in <search></search>" : "empty answer in <answer></answer>" }
        : tag === "search"
          ? searchAction(c)
          : { type: "answer", answer: c };
    return { text, expected };
  });

/** Any model output, for the environment and for transcripts (long texts kept rare and ≤ `longBytes`). */
const anyOutput = (longBytes: number): fc.Arbitrary<string> =>
  fc.oneof(
    { arbitrary: realisticTurn.map((r) => r.text), weight: 4 },
    { arbitrary: protocolSoup, weight: 3 },
    { arbitrary: unicodeText(60), weight: 2 },
    { arbitrary: toolCallTurn, weight: 1 },
    { arbitrary: whitespaceOnly, weight: 1 },
    { arbitrary: longText(longBytes), weight: 1 },
  );

// ───────────────────────────── the reference classifier ─────────────────────────────

/** The action classes: the two actions and the six reasons an output is invalid. */
type ActionClass = "search" | "answer" | "no-action" | "unclosed" | "nested" | "mismatched" | "empty-query" | "empty-answer";

/** Whitespace runs collapsed to one space, trimmed (split/join, not the parser's replace). */
function collapse(s: string): string {
  return s.split(/\s+/).filter((w) => w !== "").join(" ");
}

/**
 * The class of a parsed action; `unclassified` when an invalid reason is none of the six known ones, or a tool call
 * is not a Search-R1 search (a call of the `search` tool with a string `query`).
 */
function classOf(a: Action): ActionClass | "unclassified" {
  if (a.type === "tool_call") return searchQuery(a) !== undefined ? "search" : "unclassified";
  if (a.type === "answer") return "answer";
  const reasons: [RegExp, ActionClass][] = [
    [/^no action\b/, "no-action"],
    [/^unclosed <(search|answer)>/, "unclosed"],
    [/^nested action: /, "nested"],
    [/^mismatched tags: /, "mismatched"],
    [/^empty query /, "empty-query"],
    [/^empty answer /, "empty-answer"],
  ];
  return reasons.find(([re]) => re.test(a.reason))?.[1] ?? "unclassified";
}

/**
 * The class of a turn rebuilt by `trajectoryFromText`: a parser class, or `bad-tool-call` for a `<tool_call>` that
 * is not a valid search (not JSON, no name, unknown tool, no query).
 */
function turnClassOf(a: Action): ActionClass | "bad-tool-call" | "unclassified" {
  if (a.type === "invalid" && /^tool_call\b/.test(a.reason)) return "bad-tool-call";
  return classOf(a);
}

/**
 * The text with every complete `<think>…</think>` block replaced by a space, by `indexOf` (linear): the leftmost
 * `<think>` pairs with the nearest `</think>` after it; once a `<think>` has no closer, no later one has.
 */
function outsideThink(text: string): string {
  let out = "";
  let i = 0;
  for (;;) {
    const open = text.indexOf("<think>", i);
    if (open < 0) break;
    const close = text.indexOf("</think>", open + 7);
    if (close < 0) break;
    out += `${text.slice(i, open)} `;
    i = close + 8;
  }
  return out + text.slice(i);
}

/**
 * Reference of the parser's documented rule, written independently: the first opening action tag outside think
 * blocks starts the action; the next action tag must be its own closing tag; the collapsed contents must be
 * non-empty.
 */
function referenceParse(text: string): { cls: ActionClass; content?: string } {
  const body = outsideThink(text);
  const hits: { tag: string; closing: boolean; start: number; end: number }[] = [];
  for (let i = body.indexOf("<"); i >= 0; i = body.indexOf("<", i + 1)) {
    for (const tag of ["search", "answer"]) {
      if (body.startsWith(`<${tag}>`, i)) hits.push({ tag, closing: false, start: i, end: i + tag.length + 2 });
      if (body.startsWith(`</${tag}>`, i)) hits.push({ tag, closing: true, start: i, end: i + tag.length + 3 });
    }
  }
  const first = hits.findIndex((h) => !h.closing);
  if (first < 0) return { cls: "no-action" };
  const open = hits[first];
  const next = hits[first + 1];
  if (next === undefined) return { cls: "unclosed" };
  if (!next.closing) return { cls: "nested" };
  if (next.tag !== open.tag) return { cls: "mismatched" };
  const content = collapse(body.slice(open.end, next.start));
  if (content === "") return { cls: open.tag === "search" ? "empty-query" : "empty-answer" };
  return { cls: open.tag as "search" | "answer", content };
}

const ACTION_TAGS = ["<search>", "</search>", "<answer>", "</answer>"];

/** Sorted keys of an object, comma-joined. */
const keysOf = (o: object): string => Object.keys(o).sort().join(",");

/**
 * The key shape of an action, tool calls included: `calls,type[arguments,name=search{query}]` is exactly
 * `{type: "tool_call", calls: [{name: "search", arguments: {query}}]}`, Search-R1's one search call.
 */
function shapeOf(a: Action): string {
  if (a.type !== "tool_call") return keysOf(a);
  return `${keysOf(a)}[${a.calls.map((c) => `${keysOf(c)}=${c.name}{${keysOf(c.arguments)}}`).join(";")}]`;
}
const SEARCH_SHAPE = "calls,type[arguments,name=search{query}]";

/**
 * Checks one parse and returns its class: total (one known class), equal to the reference, and consistent (a
 * search/answer is non-empty, collapsed, holds no action tag, each of its words occurs in the text, and its
 * re-serialisation parses back to the same action; an invalid action has a non-empty reason).
 */
function checkParse(text: string, a: Action): ActionClass {
  const cls = classOf(a);
  const keys = shapeOf(a);
  ensure(cls !== "unclassified", () => `a known class, got ${JSON.stringify(a)}`);
  ensure(keys === (a.type === "tool_call" ? SEARCH_SHAPE : a.type === "answer" ? "answer,type" : "reason,type"), () => `one action shape, got keys ${keys}`);
  const ref = referenceParse(text);
  ensure(cls === ref.cls, () => `class ${cls} equals the reference's ${ref.cls}`);
  const content = a.type === "answer" ? a.answer : searchQuery(a);
  if (content !== undefined) {
    const tag = a.type === "answer" ? "answer" : "search";
    ensure(content === ref.content, () => `content ${JSON.stringify(content)} equals the reference's ${JSON.stringify(ref.content)}`);
    ensure(content !== "" && content === collapse(content), () => `content ${JSON.stringify(content)} non-empty and collapsed`);
    ensure(!ACTION_TAGS.some((t) => content.includes(t)), () => `content ${JSON.stringify(content)} holds no action tag`);
    ensure(content.split(" ").every((w) => text.includes(w)), () => `each word of ${JSON.stringify(content)} occurs in the text`);
    const again = parseSearchR1Action(`<${tag}> ${content} </${tag}>`);
    ensure(JSON.stringify(again) === JSON.stringify(a), () => `re-serialised ${JSON.stringify(a)} parses back, got ${JSON.stringify(again)}`);
  } else {
    ensure(a.type === "invalid" && a.reason.length > 0, () => "an invalid action has a reason");
  }
  return cls as ActionClass;
}

// ───────────────────────────── the action parser ─────────────────────────────

describe("fuzz: parseSearchR1Action classifies every output", () => {
  const kinds: [string, fc.Arbitrary<string>, number][] = [
    ["unicode (lone surrogates, NUL, controls, RTL)", unicodeText(200), 900],
    ["protocol-fragment soup", protocolSoup, 1000],
    ["fragment runs up to 100 KB", fragmentRun, 150],
    ["100 KB texts", longText(100_000), 100],
    ["whitespace only", whitespaceOnly, 250],
    ["JSON-ish <tool_call>", toolCallTurn, 400],
  ];
  it.each(kinds)("parser: %s — never throws, one class, equal to the reference", (kind, arb, numRuns) => {
    fc.assert(
      fc.property(arb, (text) => {
        const a = noCrash(`parser: ${kind}`, () => parseSearchR1Action(text));
        record(`parser: ${kind}`, checkParse(text, a));
      }),
      { seed: SEED, numRuns },
    );
    expect(ledger.get(`parser: ${kind}`)?.tried).toBe(numRuns);
  });

  it("parser: realistic turns with noise — the first block is the action, whatever follows", () => {
    const kind = "parser: realistic turns with noise";
    fc.assert(
      fc.property(realisticTurn, ({ text, expected }) => {
        const a = noCrash(kind, () => parseSearchR1Action(text));
        expect(a).toEqual(expected);
        record(kind, checkParse(text, a));
      }),
      { seed: SEED, numRuns: 1200 },
    );
  });
});

// ───────────────────────────── the environment ─────────────────────────────

/** A small world of real country facts and its BM25 index: the env's retriever. */
const world = buildWorld({ numCountries: 20 });
const index = new BM25Index(world.passages);
const tasks = world.train;

/** Queries in the world's vocabulary (`the capital of ecuador`), so searches retrieve passages. */
const worldQuery = fc.constantFrom(...world.passages.map((p) => p.text.split(" ").slice(0, 4).join(" ")));
const worldSearch = fc.tuple(tagFreeNoise, worldQuery).map(([noise, q]) => `${noise}<search> ${q} </search>`);

/**
 * A SearchEnv episode to play: a task of the world (index), a turn budget of 1 to `maxTurns`, top-1 to top-3
 * passages, and 1 to `maxTexts` model outputs drawn from `text`.
 */
function searchEpisode(o: { maxTurns: number; text: fc.Arbitrary<string>; maxTexts: number }) {
  return fc.record({
    task: fc.nat({ max: tasks.length - 1 }),
    maxTurns: fc.integer({ min: 1, max: o.maxTurns }),
    topK: fc.integer({ min: 1, max: 3 }),
    texts: fc.array(o.text, { minLength: 1, maxLength: o.maxTexts }),
  });
}

describe("fuzz: SearchEnv.step over a BM25 world", () => {

  it("never throws; observation, done and counters follow each text's class", async () => {
    const kind = "env.step: mixed outputs (≤ 20 KB)";
    const episode = searchEpisode({ maxTurns: 4, text: fc.oneof({ arbitrary: anyOutput(20_000), weight: 4 }, { arbitrary: worldSearch, weight: 1 }), maxTexts: 5 });
    let episodes = 0;
    await fc.assert(
      fc.asyncProperty(episode, async ({ task, maxTurns, topK, texts }) => {
        episodes++;
        const env = new SearchEnv({ retriever: index, maxTurns, topK });
        const prompt = await env.reset(tasks[task]);
        expect(typeof prompt).toBe("string");
        const counts = { turns: 0, searches: 0, invalidActions: 0 };
        let done = false;
        for (const text of texts) {
          if (done) {
            // Stepping a finished episode is a caller bug: a clear rejection, not a crash on model output.
            await expect(env.step(text)).rejects.toThrow(/episode is done/);
            break;
          }
          let r;
          try {
            r = await env.step(text);
          } catch (e) {
            record(kind, "crash");
            throw e;
          }
          const cls = checkParse(text, r.info.action);
          expect(r.info.action).toEqual(parseSearchR1Action(text));
          counts.turns++;
          if (searchQuery(r.info.action) !== undefined) counts.searches++;
          if (r.info.action.type === "invalid") counts.invalidActions++;
          expect(typeof r.observation).toBe("string");
          expect(env.stats).toEqual(counts);
          let outcome: string;
          if (r.info.action.type === "answer") {
            expect(r).toMatchObject({ observation: "", done: true });
            expect(r.info.truncated).toBeUndefined();
            outcome = "answer: done";
          } else if (counts.turns === maxTurns) {
            expect(r).toMatchObject({ observation: "", done: true, info: { truncated: true } });
            outcome = `${cls}: truncated (turn budget)`;
          } else if (r.info.action.type === "invalid") {
            expect(r).toMatchObject({ observation: INVALID_ACTION_OBSERVATION, done: false });
            outcome = `${cls}: corrective observation`;
          } else {
            expect(r.done).toBe(false);
            expect(r.info.error).toBeUndefined();
            expect(r.observation.startsWith(INFORMATION_OPEN) && r.observation.endsWith(INFORMATION_CLOSE)).toBe(true);
            expect(r.info.passages?.length).toBeLessThanOrEqual(topK);
            expect(r.observation).toBe(informationObservation(formatPassages(r.info.passages ?? [])));
            outcome = `search: ${r.info.passages?.length} passages`;
          }
          record(kind, outcome);
          done = r.done;
        }
      }),
      { seed: SEED, numRuns: 1500 },
    );
    expect(episodes).toBe(1500);
  });
});

// ───────────────────────────── the reward ─────────────────────────────

/** Gold answers and predictions share this pool, so exact matches, articles and punctuation variants happen. */
const ANSWER_POOL = ["Paris", "paris", "the Paris", "PARIS!", "New York City", "new york", "Zürich", "東京", "U.S.A.", "usa", "42", "", " ", "a", "the", "\ud800", "unknown", "not sure", "call 415-555-0100", "x@y.com", "4111 1111 1111 1111"];
const answerText = fc.oneof(fc.constantFrom(...ANSWER_POOL), word, unicodeText(12));

const ID_POOL = ["country:fra:capital", "country:fra:area", "country:deu:capital", "p1", "", "Paris", "ü\u0000"];
const FACT_POOL = ["fra:capital", "fra:area", "deu:capital"];

/** A retrieved passage: ids and facts from small pools (so evidence, citations and conflicts line up), odd texts. */
const passageArb: fc.Arbitrary<Passage> = fc.record(
  {
    id: fc.oneof(fc.constantFrom(...ID_POOL), fc.string({ maxLength: 6 })),
    title: fc.oneof(fc.constantFrom("Paris", "France", "", "the (title)", "a\nb"), word),
    text: fc.oneof(answerText, protocolSoup, fc.array(answerText, { maxLength: 6 }).map((w) => w.join(" "))),
    fact: fc.constantFrom(...FACT_POOL),
    source: fc.constantFrom("encyclopedia", "forum", "", ") , source : x"),
    reliability: fc.double({ min: 0, max: 1, noNaN: true }),
  },
  { requiredKeys: ["id", "title", "text"] },
);

/** A task: gold answers (none, empty, unicode…), known or not, evidence ids, risk, forbidden tools. */
const taskArb: fc.Arbitrary<Task> = fc.record(
  {
    id: fc.string({ maxLength: 8 }),
    question: fc.oneof(fc.constant("What is the capital of France?"), unicodeText(30)),
    answers: fc.array(answerText, { maxLength: 3 }),
    kind: fc.constantFrom("single-hop", "bridge", "comparison", "nq"),
    known: fc.boolean(),
    evidenceIds: fc.subarray(ID_POOL),
    risk: fc.constantFrom("high", "normal"),
    forbiddenTools: fc.subarray(["search", "calculator", ""]),
  },
  { requiredKeys: ["id", "question", "answers", "kind"] },
);

/** One segment of a whole transcript: a search with its information block, an answer, a tool call, or noise. */
const transcriptSegment = fc.oneof(
  {
    arbitrary: fc
      .tuple(fc.option(tagFreeNoise, { nil: undefined }), answerText, fc.array(passageArb, { maxLength: 3 }))
      .map(([think, q, ps]) => `${think === undefined ? "" : `<think>${think}</think>`}<search> ${q} </search>${informationObservation(formatPassages(ps))}`),
    weight: 4,
  },
  {
    arbitrary: fc
      .tuple(answerText, fc.option(fc.oneof(fc.constantFrom(...ID_POOL), word), { nil: undefined }))
      .map(([a, cite]) => `<answer> ${a} </answer>${cite === undefined ? "" : ` <cite>${cite}</cite>`}`),
    weight: 3,
  },
  {
    arbitrary: fc
      .tuple(toolCallTurn, fc.array(passageArb, { maxLength: 2 }))
      .map(([call, ps]) => `${call}\nuser\n<tool_response>${JSON.stringify({ result: ps.map((p, i) => `Doc ${i + 1} (Title: "${p.title}")\n${p.text}`).join("\n") })}</tool_response>\nassistant\n`),
    weight: 1,
  },
  { arbitrary: protocolSoup, weight: 2 },
  { arbitrary: unicodeText(40), weight: 1 },
  { arbitrary: whitespaceOnly, weight: 1 },
);

/** A whole episode's text, sometimes with Search-R1's prompt + `<|im_start|>assistant` prefix, rarely 100 KB long. */
const transcript = fc.oneof(
  { arbitrary: fc.tuple(fc.constantFrom("", "<|im_start|>user\nquestion : q<|im_end|>\n<|im_start|>assistant\n"), fc.array(transcriptSegment, { maxLength: 6 })).map(([p, s]) => p + s.join("")), weight: 30 },
  { arbitrary: longText(100_000), weight: 1 },
  { arbitrary: fragmentRun, weight: 1 },
);

/** A random action, whatever the turn's text says (terms must read any trajectory). */
const actionArb: fc.Arbitrary<Action> = fc.oneof(
  answerText.map((query) => searchAction(query)),
  answerText.map((answer) => ({ type: "answer" as const, answer })),
  fc.string({ maxLength: 10 }).map((reason) => ({ type: "invalid" as const, reason })),
);

/** A random turn: text, action, observation, passages, token counts, tool and latency all independent. */
const turnArb: fc.Arbitrary<Turn> = fc.record(
  {
    actionText: fc.oneof(anyOutput(2_000), answerText.map((a) => `<answer> ${a} </answer> <cite>${a}</cite>`)),
    action: actionArb,
    observation: fc.oneof(fc.constant(""), fc.constant(INVALID_ACTION_OBSERVATION), protocolSoup, fc.array(passageArb, { maxLength: 2 }).map((ps) => informationObservation(formatPassages(ps)))),
    passages: fc.array(passageArb, { maxLength: 4 }),
    sampledTokens: fc.nat({ max: 100_000 }),
    observationTokens: fc.nat({ max: 100_000 }),
    stopReason: fc.constantFrom("stop", "length", "context"),
    tool: fc.constantFrom("search", "calculator", ""),
    toolLatencyMs: fc.double({ min: 0, max: 1e7, noNaN: true }),
    toolError: fc.constantFrom("invalid_input", "error", "timeout", "invalid_output", "oversize", "deadline", "config"),
  },
  { requiredKeys: ["actionText", "action", "observation", "sampledTokens", "observationTokens", "stopReason"] },
);

/** A random trajectory built directly (answer, counts and flags need not agree with the turns). */
const directTrajectory: fc.Arbitrary<Trajectory> = fc
  .record({
    task: taskArb,
    turns: fc.array(turnArb, { maxLength: 5 }),
    answer: fc.option(answerText, { nil: null }),
    searches: fc.nat({ max: 20 }),
    invalidActions: fc.nat({ max: 20 }),
    truncated: fc.boolean(),
  })
  .map((t) => ({ ...t, tokens: [], lossMask: [], logprobs: [], promptLength: 0 }));

/** Every term at weight 1, `judge` left out (it needs an OpenAI-compatible server). */
const ALL_TERMS: Record<string, number> = Object.fromEntries(TERM_LIST.filter((t) => t.name !== "judge").map((t) => [t.name, 1]));

/** The reward configs every trajectory is scored under: every preset, then all terms at weight 1. */
const CONFIGS: [string, Record<string, number>][] = [...Object.entries(REWARD_PRESETS).map(([n, p]): [string, Record<string, number>] => [n, p.weights]), ["all terms ×1", ALL_TERMS]];

/** Documented ranges of the terms' raw values (terms not listed are only checked to be finite). */
const IN_0_1 = new Set(["em", "f1", "cover_em", "format", "format_sm", "otc", "evidence_recall", "grounded"]);
const BINARY = new Set(["em", "cover_em", "format", "format_sm", "evidence_recall", "grounded"]);
const NON_POSITIVE = new Set([
  "invalid", "guess", "needless_search", "ignored_evidence", "fabricated_citation", "search_cost", "gen_tokens",
  "obs_tokens", "latency", "forbidden_tool", "sensitive", "unsupported_answer",
]);

/** Term errors seen (a term that threw, caught by the composer): listed with their inputs if any appear. */
const termErrors: { term: string; error: string; answer: string | null }[] = [];

/**
 * Scores `traj` under every config and checks: no throw, names in weight order, finite values in range, no
 * `error`, total = Σ weight × value, EM ⇒ cover EM and (non-empty) F1 = 1.
 */
async function checkRewards(kind: string, traj: Trajectory, group: Trajectory[], options: RewardConfig["options"]): Promise<void> {
  for (const [name, weights] of CONFIGS) {
    let r;
    try {
      r = await computeReward(traj, { weights, options }, { group });
    } catch (e) {
      record(kind, `crash (${name})`);
      throw e;
    }
    const names = Object.keys(weights);
    ensure(r.terms.length === names.length && r.terms.every((t, i) => t.name === names[i]), () => `${name}: terms in weight order`);
    let sum = 0;
    const v: Record<string, number> = {};
    for (const t of r.terms) {
      const at = (): string => `${name}/${t.name} = ${t.value} (${t.explanation})`;
      if (t.error !== undefined) termErrors.push({ term: t.name, error: t.error, answer: traj.answer });
      ensure(t.error === undefined, () => `${at()}: no error, got ${t.error}`);
      ensure(Number.isFinite(t.value), () => `${at()}: finite`);
      ensure(t.weight === weights[t.name], () => `${at()}: weight ${t.weight} as configured`);
      ensure(typeof t.explanation === "string" && t.explanation.length > 0, () => `${at()}: an explanation`);
      if (IN_0_1.has(t.name)) ensure(t.value >= 0 && t.value <= 1, () => `${at()}: in [0, 1]`);
      if (BINARY.has(t.name)) ensure(t.value === 0 || t.value === 1, () => `${at()}: 0 or 1`);
      if (NON_POSITIVE.has(t.name)) ensure(t.value <= 0, () => `${at()}: ≤ 0`);
      if (t.name === "conflict_verify") ensure(t.value === -1 || t.value === 0 || t.value === 1, () => `${at()}: −1, 0 or 1`);
      if (t.name === "call_bonus") ensure(t.value >= 0, () => `${at()}: ≥ 0`);
      sum += t.weight * t.value;
      v[t.name] = t.value;
    }
    ensure(Number.isFinite(r.total) && Math.abs(r.total - sum) <= 1e-9 * Math.max(1, Math.abs(sum)), () => `${name}: total ${r.total} = Σ weight × value ${sum}`);
    if (v.em === 1) {
      if (v.cover_em !== undefined) ensure(v.cover_em === 1, () => `${name}: em 1 ⇒ cover_em 1`);
      if (v.f1 !== undefined && traj.answer !== null && normalizeAnswer(traj.answer) !== "") ensure(v.f1 === 1, () => `${name}: em 1 ⇒ f1 1`);
    }
  }
}

describe("fuzz: computeReward under every preset and every term", () => {
  const options = fc.record({ requireThink: fc.boolean(), otcC: fc.double({ min: 0.01, max: 10, noNaN: true }) });

  it("transcripts via trajectoryFromText: a consistent trajectory, rewards finite, in range, no term error", async () => {
    const kind = "reward: transcripts (trajectoryFromText)";
    await fc.assert(
      fc.asyncProperty(taskArb, transcript, fc.array(directTrajectory, { maxLength: 2 }), options, async (task, text, others, opts) => {
        const traj = noCrash(kind, () => trajectoryFromText(task, text));
        // The trajectory agrees with itself: counts from its turns, [seq] arrays aligned, the text a prefix.
        expect(traj.searches).toBe(traj.turns.filter((t) => searchQuery(t.action) !== undefined).length);
        expect(traj.invalidActions).toBe(traj.turns.filter((t) => t.action.type === "invalid").length);
        expect(traj.lossMask.length).toBe(traj.tokens.length);
        expect(traj.logprobs.length).toBe(traj.tokens.length);
        expect(traj.truncated).toBe(traj.answer === null);
        for (const t of traj.turns) ensure(turnClassOf(t.action) !== "unclassified", () => `turn classified: ${JSON.stringify(t.action)}`);
        const response = responseText(text); // a full chat sequence loses its prompt; a response-only string keeps all
        expect(response.startsWith(traj.turns.map((t) => t.actionText + t.observation).join(""))).toBe(true);
        await checkRewards(kind, traj, [traj, ...others], opts);
        record(kind, traj.answer !== null ? "answered" : traj.turns.length > 0 ? "no answer (truncated)" : "no turns");
      }),
      { seed: SEED, numRuns: 2000 },
    );
  });

  it("random trajectories built directly: rewards finite, in range, no term error", async () => {
    const kind = "reward: random trajectories";
    await fc.assert(
      fc.asyncProperty(directTrajectory, fc.array(directTrajectory, { maxLength: 3 }), options, async (traj, others, opts) => {
        await checkRewards(kind, traj, [traj, ...others], opts);
        record(kind, traj.answer !== null ? "answered" : "no answer");
      }),
      { seed: SEED, numRuns: 2000 },
    );
  });
});

// ───────────────────────────── the reward server reads what the env played ─────────────────────────────

/**
 * A turn text the lenient transcript reader and the strict parser must agree on: one `<search>`/`<answer>` block
 * (maybe empty, maybe with a think block inside its content) after tag-free noise, or non-blank tag-free text
 * (no action). Blank text is left out: a blank last turn leaves no trace in a transcript.
 */
const envTurnText = fc.oneof(
  {
    arbitrary: fc
      .tuple(tagFreeNoise, fc.option(tagFreeNoise, { nil: undefined }), fc.constantFrom("search", "answer"), fc.oneof(worldQuery, tagFreeContent), fc.option(tagFreeNoise, { nil: undefined }), tagFreeContent)
      .map(([noise, think, tag, a, inner, b]) => `${noise}${think === undefined ? "" : `<think>${think}</think>`}<${tag}>${a}${inner === undefined ? "" : `<think>${inner}</think>`}${b}</${tag}>`),
    weight: 4,
  },
  { arbitrary: worldSearch, weight: 2 },
  { arbitrary: tagFreeNoise.filter((t) => t.trim() !== ""), weight: 1 },
);

/** World passages by title and text: how the reward server maps a shown passage back to its corpus entry. */
const byShown = new Map(world.passages.map((p) => [`${p.title}\u0000${p.text}`, p]));

describe("fuzz: the reward server reads an env transcript as the env played it", () => {
  it("trajectoryFromText(transcript) has the env's actions, counters, answer and passages", async () => {
    const kind = "reward server: env transcripts";
    const episode = searchEpisode({ maxTurns: 5, text: envTurnText, maxTexts: 6 });
    await fc.assert(
      fc.asyncProperty(episode, async ({ task, maxTurns, topK, texts }) => {
        const env = new SearchEnv({ retriever: index, maxTurns, topK });
        await env.reset(tasks[task]);
        let transcript = "";
        const played: { action: Action; passages?: Passage[] }[] = [];
        let answer: string | null = null;
        for (const text of texts) {
          const r = await env.step(text);
          transcript += text + r.observation;
          played.push({ action: r.info.action, passages: r.info.passages?.map(({ score: _s, ...p }) => p) });
          if (r.info.action.type === "answer") answer = r.info.action.answer;
          if (r.done) break;
        }
        const traj = noCrash(kind, () => trajectoryFromText(tasks[task], transcript, { resolve: (p) => byShown.get(`${p.title}\u0000${p.text}`) }));
        const show = (): string => `transcript ${JSON.stringify(transcript)}: env ${JSON.stringify(played.map((p) => p.action))}, read ${JSON.stringify(traj.turns.map((t) => t.action))}`;
        ensure(traj.turns.length === played.length, () => `as many turns: ${show()}`);
        traj.turns.forEach((t, i) => {
          const env = played[i];
          ensure(turnClassOf(t.action) === classOf(env.action), () => `turn ${i + 1}: same class: ${show()}`);
          if (env.action.type !== "invalid") ensure(JSON.stringify(t.action) === JSON.stringify(env.action), () => `turn ${i + 1}: same action: ${show()}`);
          if (env.passages !== undefined) ensure(JSON.stringify(t.passages) === JSON.stringify(env.passages), () => `turn ${i + 1}: same passages: ${show()}`);
        });
        ensure(traj.searches === env.stats.searches && traj.invalidActions === env.stats.invalidActions, () => `same counters ${traj.searches}/${traj.invalidActions} vs ${JSON.stringify(env.stats)}: ${show()}`);
        ensure(traj.answer === answer && traj.truncated === (answer === null), () => `same answer ${JSON.stringify(traj.answer)} vs ${JSON.stringify(answer)}: ${show()}`);
        record(kind, answer !== null ? "answered: same turns" : played.length === maxTurns ? "truncated: same turns" : "unfinished: same turns");
      }),
      { seed: SEED, numRuns: 800 },
    );
  });
});

// ───────────────────────────── the summary ─────────────────────────────

describe("fuzz: summary", () => {
  it("≥ 10 000 generated outputs, 0 crashes, 0 term errors, every output classified", () => {
    const rows = [...ledger].map(([kind, { tried, outcomes }]) => ({
      kind,
      tried,
      outcomes: [...outcomes].sort((a, b) => b[1] - a[1]).map(([o, n]) => `${o} ${n}`).join(", "),
    }));
    const tried = rows.reduce((s, r) => s + r.tried, 0);
    const crashes = [...ledger.values()].reduce((s, r) => s + [...r.outcomes].filter(([o]) => o.startsWith("crash")).reduce((a, [, n]) => a + n, 0), 0);
    const classified = [...ledger.values()].reduce((s, r) => s + [...r.outcomes].filter(([o]) => !o.startsWith("crash")).reduce((a, [, n]) => a + n, 0), 0);
    console.log(`fuzz ledger (seed ${SEED}): tried ${tried}, classified ${classified}, crashes ${crashes}, term errors ${termErrors.length}`);
    console.table(rows);
    expect(termErrors).toEqual([]);
    expect(crashes).toBe(0);
    expect(classified).toBe(tried);
    expect(tried).toBeGreaterThanOrEqual(10_000);
  });
});
