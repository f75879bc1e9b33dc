/**
 * Issue 12, the reward computations an outside tester found super-linear on adversarial input to `arl serve reward`
 * (the end-to-end timings are in test/serve-reward-adversarial.test.ts): their linear-time replacements must give
 * exactly what the direct definitions give.
 * - D1: `containsNormalized` per passage and per gold (`grounded`, `unsupported_answer`, `evidence_recall`), and the
 *   per-gold re-normalisation of `f1` / `cover_em`, are now one normalisation per text and one Aho–Corasick scan
 *   (`SequenceMatcher`, `wholeWordMatcher`, `firstContainedGold`); `normalizeAnswer` is a few native regex passes.
 * - D2: `format_sm` strips content with a scan from both ends, not a `[ws]+$` regex.
 * - D3: the OTC-GRPO group optimum (`needless_search`, `otc`) is computed once per group and recomputed when the
 *   group changes.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { searchAction, type Passage, type Task, type Trajectory, type Turn } from "../src/core/types.ts";
import { computeReward } from "../src/reward/compose.ts";
import { emCheck, firstContainedGold, normalizeAnswer, subEmCheck, tokenF1 } from "../src/reward/em.ts";
import { answerGrounded, containsNormalized, firstGoldPassage, goldRetrieved, groundingPassage, normalizedPassageWords, wholeWordMatcher } from "../src/reward/evidence.ts";
import { isValidSequence } from "../src/reward/format.ts";
import { SequenceMatcher } from "../src/reward/match.ts";
import { groupOptimalCalls } from "../src/reward/terms/necessity.ts";
import { handTrajectory } from "./trajectory-helpers.ts";

// ───────────── references: the direct definitions the fast versions replaced ─────────────

const PY_WS = "\t\n\v\f\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000";
const PUNCT = new Set("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~");

/** qa_em.py `normalize_answer`, step by step (a character loop and split/join, as before). */
function refNormalize(s: string): string {
  let noPunct = "";
  for (const ch of s.toLowerCase()) if (!PUNCT.has(ch)) noPunct += ch;
  const noArticles = noPunct.replace(/(?<![\p{L}\p{N}_])(?:a|an|the)(?![\p{L}\p{N}_])/gu, " ");
  return refSplit(noArticles).join(" ");
}
function refSplit(s: string): string[] {
  const out: string[] = [];
  let word = "";
  for (const ch of s) {
    if (PY_WS.includes(ch)) {
      if (word !== "") out.push(word);
      word = "";
    } else word += ch;
  }
  if (word !== "") out.push(word);
  return out;
}
/** SQuAD v1.1 `f1_score` maximised over golds, the prediction normalised per gold. */
function refF1(prediction: string, golds: readonly string[]): number {
  let best = 0;
  for (const g of golds) {
    const p = refSplit(refNormalize(prediction));
    const gt = refSplit(refNormalize(g));
    const counts = new Map<string, number>();
    for (const t of gt) counts.set(t, (counts.get(t) ?? 0) + 1);
    let same = 0;
    for (const t of p) {
      const c = counts.get(t) ?? 0;
      if (c > 0) {
        same++;
        counts.set(t, c - 1);
      }
    }
    if (same === 0) continue;
    const precision = same / p.length;
    const recall = same / gt.length;
    best = Math.max(best, (2 * precision * recall) / (precision + recall));
  }
  return best;
}
/** Whole words: ` needle ` in ` text `, both normalised; an empty needle never matches. */
function refContains(text: string, needle: string): boolean {
  const n = refNormalize(needle);
  return n !== "" && ` ${refNormalize(text)} `.includes(` ${n} `);
}
/** The first pattern (in order) that is a contiguous run of `text`, or −1. */
function refFirst(patterns: readonly (readonly string[] | null)[], text: readonly string[]): number {
  return patterns.findIndex((p) => p !== null && Array.from({ length: text.length - p.length + 1 }, (_, i) => i).some((i) => p.every((c, j) => text[i + j] === c)));
}

/** The fields of a trajectory the reward terms here do not read. */
const BARE = { tokens: [], lossMask: [], logprobs: [], promptLength: 0, turns: [], invalidActions: 0, truncated: false };

/** Text over pieces that exercise every step: articles, punctuation, Python-only and JS-only whitespace, Unicode. */
const PIECES = ["a", "an", "the", "The", "A", "x", "paris", "new", "york", "1", "é", "É", "ǅ", "İ", "ß", "«", "»", "\u{1F600}", "\ud800", "the-end", "U.S.A.", "'", "-", "_", ".", " ", "  ", "\t", "\n", "\x1c", "\x85", "\xa0", "\u3000", "\ufeff", "\u200b"];
const text = (maxLength: number) => fc.array(fc.constantFrom(...PIECES), { maxLength }).map((p) => p.join(""));

describe("D1: one normalisation per text, one scan per text", () => {
  it("normalizeAnswer is qa_em.py's normalize_answer, step by step", () => {
    fc.assert(fc.property(text(24), (s) => {
        expect(normalizeAnswer(s)).toBe(refNormalize(s));
      }), { seed: 12_01, numRuns: 5000 });
    // Runs of whitespace of every kind at either end and inside, and long ones.
    for (const s of [" ", "  ", "\t \n", " x ", "  x\u3000 y\x85", "\ufeffx", `a${" ".repeat(10_000)}b`, "the the", " \t".repeat(1000)]) expect(normalizeAnswer(s)).toBe(refNormalize(s));
  });

  it("emCheck, subEmCheck, firstContainedGold and tokenF1 equal their definitions", () => {
    fc.assert(
      fc.property(text(12), fc.array(text(5), { maxLength: 5 }), (prediction, golds) => {
        const p = refNormalize(prediction);
        expect(emCheck(prediction, golds)).toBe(golds.some((g) => refNormalize(g) === p) ? 1 : 0);
        const first = golds.findIndex((g) => p.includes(refNormalize(g)));
        expect(firstContainedGold(normalizeAnswer(prediction), golds)).toBe(first);
        expect(subEmCheck(prediction, golds)).toBe(first >= 0 ? 1 : 0);
        expect(Object.is(tokenF1(prediction, golds), refF1(prediction, golds))).toBe(true);
      }),
      { seed: 12_02, numRuns: 5000 },
    );
    expect(tokenF1("a b", [])).toBe(0);
    expect(subEmCheck("anything", ["", "x"])).toBe(1); // an empty gold is a substring of anything
  });

  it("SequenceMatcher.first is the first pattern occurring in the text, for tokens and for characters", () => {
    const sym = fc.constantFrom("a", "b", "c");
    const pattern = fc.option(fc.array(sym, { maxLength: 4 }), { nil: null, freq: 6 });
    fc.assert(
      fc.property(fc.array(pattern, { maxLength: 6 }), fc.array(sym, { maxLength: 14 }), (patterns, t) => {
        expect(new SequenceMatcher(patterns).first(t)).toBe(refFirst(patterns, t));
        // The same over code units: strings as patterns and text.
        const strings = patterns.map((p) => (p === null ? null : p.join("")));
        expect(new SequenceMatcher(strings).first(t.join(""))).toBe(refFirst(patterns, t));
      }),
      { seed: 12_03, numRuns: 5000 },
    );
    // Periodic patterns (the KMP worst case) and a pattern whose failure link crosses into another.
    expect(new SequenceMatcher(["aab", "abaa", "b"]).first("aaaaab")).toBe(0);
    expect(new SequenceMatcher(["xyz", "abcabd"]).first("abcabcabd")).toBe(1);
    expect(new SequenceMatcher([null, []]).first([])).toBe(1);
    expect(new SequenceMatcher([]).empty).toBe(true);
  });

  it("wholeWordMatcher over normalised passage words is containsNormalized, needle by needle", () => {
    fc.assert(
      fc.property(fc.array(text(6), { maxLength: 5 }), text(30), (needles, t) => {
        const p: Passage = { id: "p", title: "p", text: t };
        const expected = needles.findIndex((n) => refContains(t, n));
        expect(wholeWordMatcher(needles).first(normalizedPassageWords(p))).toBe(expected);
        expect(needles.findIndex((n) => containsNormalized(t, n))).toBe(expected);
      }),
      { seed: 12_04, numRuns: 5000 },
    );
  });

  const search = (passages: Passage[]): Turn => ({
    actionText: "<search> q </search>",
    action: searchAction("q"),
    observation: "\n\n<information>…</information>\n\n",
    passages,
    sampledTokens: 3,
    observationTokens: 5,
    stopReason: "stop",
  });
  const episode = (task: Task, answer: string | null, turns: Turn[]): Trajectory => ({ ...BARE, task, turns, answer, searches: turns.length });

  it("grounding and gold retrieval: the first passage in turn and rank order, the first gold in task order", () => {
    const passages = [
      { id: "p1", title: "One", text: "The river flows east." },
      { id: "p2", title: "Two", text: "Dublin, the capital; a port (Dublin Bay)." },
      { id: "p3", title: "Three", text: "dublin bay and cork" },
    ];
    const task: Task = { id: "t", question: "q", answers: ["Cork", "Dublin Bay", "the river"], kind: "k", evidenceIds: [] };
    const traj = episode(task, "Dublin bay", [search(passages.slice(0, 1)), search(passages.slice(1))]);
    expect(groundingPassage(traj)?.id).toBe("p2");
    expect(answerGrounded(traj)).toBe(true);
    // p1 holds "river" but "the river" normalises to "river": the first passage with a gold, and its first gold.
    expect(firstGoldPassage(traj)).toEqual({ passage: passages[0], gold: "the river" });
    expect(goldRetrieved({ ...traj, task: { ...task, answers: ["Cork"] } })).toBe(true);
    expect(firstGoldPassage({ ...traj, task: { ...task, answers: ["Cork", "dublin"] } })).toEqual({ passage: passages[1], gold: "dublin" });
    // Whole words only; an answer that normalises to nothing is grounded nowhere; no passages, no grounding.
    expect(answerGrounded({ ...traj, answer: "dub" })).toBe(false);
    expect(answerGrounded({ ...traj, answer: "the !" })).toBe(false);
    expect(answerGrounded(episode(task, "dublin", []))).toBe(false);
    expect(goldRetrieved({ ...traj, task: { ...task, answers: ["a", "."] } })).toBe(false);
    // A passage whose text changed is normalised again (the cache is by passage object and text).
    const p: Passage = { id: "x", title: "X", text: "galway" };
    const single = episode(task, "galway", [search([p])]);
    expect(answerGrounded(single)).toBe(true);
    p.text = "limerick";
    expect(answerGrounded(single)).toBe(false);
  });

  it("a thousand golds against a long transcript cost one scan (f1, cover_em, evidence_recall, grounded)", async () => {
    const golds = Array.from({ length: 1000 }, (_, i) => `gold ${i}`);
    const words = "dublin ".repeat(30_000);
    const passages = Array.from({ length: 2000 }, (_, i) => ({ id: `p${i}`, title: `P${i}`, text: `passage ${i} of dublin` }));
    passages.push({ id: "last", title: "Last", text: `gold 999 and ${words}` });
    const task: Task = { id: "t", question: "q", answers: golds, kind: "k", evidenceIds: [], risk: "high" };
    const traj = episode(task, words, [search(passages)]);
    const t0 = performance.now();
    const r = await computeReward(traj, { weights: { em: 1, f1: 1, cover_em: 1, evidence_recall: 1, grounded: 1, unsupported_answer: 1, ignored_evidence: 1 } });
    const ms = performance.now() - t0;
    const terms = Object.fromEntries(r.terms.map((t) => [t.name, t.value]));
    expect(terms).toEqual({ em: 0, f1: 0, cover_em: 0, evidence_recall: 1, grounded: 1, unsupported_answer: 0, ignored_evidence: -1 });
    expect(r.terms.find((t) => t.name === "evidence_recall")?.explanation).toBe('gold "gold 999" retrieved in passage last');
    expect(ms, `${ms.toFixed(0)} ms`).toBeLessThan(1000); // was ~30 s: every gold × every passage, the answer per passage
  });
});

describe("D2: format_sm strips content in linear time", () => {
  it("the reason quotes the content stripped of Python whitespace, however long the run inside it", () => {
    expect(isValidSequence("\u3000\x85 x  y \t\n\x1c")).toEqual({ valid: false, reason: "Unexpected content 'x  y' between tags (state: start)" });
    // U+FEFF is not Python whitespace (str.strip keeps it); U+200B neither.
    expect(isValidSequence("\ufeffx\u200b ").reason).toBe("Unexpected content '\ufeffx\u200b' between tags (state: start)");
    expect(isValidSequence("<answer> a </answer> tail ").reason).toBe("Unexpected content in state end");
    const run = " ".repeat(200_000);
    const t0 = performance.now();
    const v = isValidSequence(`x${run}y`);
    const ms = performance.now() - t0;
    expect(v).toEqual({ valid: false, reason: `Unexpected content 'x${run}y' between tags (state: start)` });
    expect(isValidSequence(`<search> q </search>${run}\n\t${run}z${run}`).reason).toBe(`Unexpected content 'z' between tags (state: after_search)`);
    expect(ms, `${ms.toFixed(0)} ms`).toBeLessThan(500); // was ~17 s (2.8 s at 80 000)
  });
});

describe("D3: the group optimum is computed once per group", () => {
  const task: Task = { id: "t", question: "q", answers: ["Dublin"], kind: "k" };
  // One object shape, as the trajectories the rollout and the server build.
  const member = (answer: string | null, searches: number): Trajectory => handTrajectory(task, { answer, searches });

  it("is recomputed whenever the group changes: members, answers, searches, tasks, gold lists", () => {
    const group = [member("dublin", 3), member("Dublin", 1), member("cork", 0)];
    expect(groupOptimalCalls(group)).toBe(1);
    expect(groupOptimalCalls(group)).toBe(1);
    group[1].answer = "cork";
    expect(groupOptimalCalls(group)).toBe(3);
    group[0].searches = 2;
    expect(groupOptimalCalls(group)).toBe(2);
    group.push(member("dublin", 0));
    expect(groupOptimalCalls(group)).toBe(0);
    group[3] = member("dublin", 5);
    expect(groupOptimalCalls(group)).toBe(2);
    group[0].task = { ...task, answers: ["Cork"] };
    expect(groupOptimalCalls(group)).toBe(5);
    group[2].task = { ...task, answers: ["Cork"] }; // "cork", 0 searches, now correct
    expect(groupOptimalCalls(group)).toBe(0);
    group[2].task.answers = ["Galway"];
    expect(groupOptimalCalls(group)).toBe(5);
    (group[2].task.answers as string[]).push("cork");
    expect(groupOptimalCalls(group)).toBe(0);
    group.length = 0;
    expect(groupOptimalCalls(group)).toBeUndefined();
    expect(groupOptimalCalls(undefined)).toBeUndefined();
  });

  it("a group of 4096 long answers is rewarded in linear time, each member against the group's optimum", async () => {
    const long = "dublin ".repeat(400);
    const group = Array.from({ length: 4096 }, (_, k) => (k % 2 === 1 ? member("Dublin", 2 + (k % 3)) : member(long, 1)));
    const t0 = performance.now();
    const rewards = await Promise.all(group.map((t) => computeReward(t, { weights: { needless_search: 1, otc: 1 } }, { group })));
    const ms = performance.now() - t0;
    rewards.forEach((r, k) => expect(r.terms[0].value).toBe(0 - Math.max(0, group[k].searches - 2)));
    expect(ms, `${ms.toFixed(0)} ms`).toBeLessThan(3000); // was minutes: the group EM-checked for every member, twice
  });
});
