import { describe, expect, it } from "vitest";
import { searchAction, searchQuery, type Passage, type Task, type Trajectory, type Turn } from "../src/core/types.ts";
import { formatPassages, INVALID_ACTION_OBSERVATION, informationObservation } from "../src/protocol/searchR1.ts";
import { computeReward, DEFAULT_REWARD_OPTIONS } from "../src/reward/compose.ts";
import { neededCalls } from "../src/reward/evidence.ts";
import { REWARD_TERMS, TERM_LIST } from "../src/reward/terms.ts";
import { groupOptimalCalls, otcToolReward } from "../src/reward/terms/necessity.ts";
import { emailMatches, findSensitive, SENSITIVE_PATTERNS } from "../src/reward/terms/safety.ts";
import type { Judge, RewardContext, RewardOptions, TermResult } from "../src/reward/types.ts";
import { handTrajectory } from "./trajectory-helpers.ts";

// ───────────── fixture builder ─────────────

function task(over: Partial<Task> = {}): Task {
  return { id: "world:single:capital:frd", question: "What is the capital of Freedonia?", answers: ["Fredville"], kind: "single-hop", ...over };
}

function passage(id: string, title: string, text: string, over: Partial<Passage> = {}): Passage {
  return { id, title, text, ...over };
}

/** A search turn that retrieved `passages`; 5 sampled tokens, 20 observation tokens, latency as given (ms). */
function search(query: string, passages: Passage[], latencyMs = 200): Turn {
  return {
    actionText: `<search> ${query} </search>`,
    action: searchAction(query),
    observation: informationObservation(formatPassages(passages)),
    passages,
    sampledTokens: 5,
    observationTokens: 20,
    stopReason: "stop",
    tool: "search",
    toolLatencyMs: latencyMs,
  };
}

/** An answer turn; `extra` is appended to the action text (e.g. citations). 4 sampled tokens. */
function answer(text: string, extra = ""): Turn {
  return {
    actionText: `<answer> ${text} </answer>${extra}`,
    action: { type: "answer", answer: text },
    observation: "",
    sampledTokens: 4,
    observationTokens: 0,
    stopReason: "stop",
  };
}

/** An invalid turn (observes Search-R1's corrective text). */
function invalid(text: string): Turn {
  return {
    actionText: text,
    action: { type: "invalid", reason: "no action tag" },
    observation: INVALID_ACTION_OBSERVATION,
    sampledTokens: 3,
    observationTokens: 30,
    stopReason: "stop",
  };
}

/** A trajectory from turns: answer = last turn's answer (else null), counts derived from the turns. */
function episode(t: Task, turns: Turn[], over: Partial<Trajectory> = {}): Trajectory {
  const last = turns.at(-1);
  return handTrajectory(t, {
    turns,
    answer: last?.action.type === "answer" ? last.action.answer : null,
    searches: turns.filter((u) => searchQuery(u.action) !== undefined).length,
    invalidActions: turns.filter((u) => u.action.type === "invalid").length,
    truncated: last?.action.type !== "answer",
    ...over,
  });
}

const CAPITAL = passage("country:frd:capital", "Freedonia", "The capital of Freedonia is Fredville.", { fact: "frd:capital" });
const CURRENCY = passage("country:frd:currency", "Freedonia", "The currency of Freedonia is the Fredo.", { fact: "frd:currency" });
const OTHER = passage("country:syl:capital", "Sylvania", "The capital of Sylvania is Sylvan City.", { fact: "syl:capital" });

async function run(name: string, traj: Trajectory, ctx: Partial<RewardContext> = {}, options: Partial<RewardOptions> = {}): Promise<TermResult> {
  return REWARD_TERMS[name].compute(traj, { ...ctx, options: { ...DEFAULT_REWARD_OPTIONS, ...options } });
}

// ───────────── outcome ─────────────

describe("outcome terms", () => {
  it("f1: token F1 vs the best gold, 0 without an answer", async () => {
    // pred [fredville, city] vs gold [fredville]: overlap 1, P = 1/2, R = 1 → F1 = 2·(1/2)·1 / (3/2) = 2/3
    const r = await run("f1", episode(task(), [answer("Fredville city")]));
    expect(r.value).toBeCloseTo(2 / 3, 12);
    expect(r.explanation).toBe('token F1 0.667 of "Fredville city" against 1 gold answer');
    // vs "new york city": overlap 2, P = 1, R = 2/3 → F1 = 0.8; vs "nyc": 0 → max 0.8
    const ny = task({ answers: ["New York City", "NYC"] });
    expect((await run("f1", episode(ny, [answer("New York")]))).value).toBeCloseTo(0.8, 12);
    expect((await run("f1", episode(task(), [answer("Sylvan City")]))).value).toBe(0);
    expect(await run("f1", episode(task(), [search("q", [])]))).toEqual({ value: 0, explanation: "no answer" });
  });

  it("cover_em: a normalised gold contained in the normalised answer (characters, not words)", async () => {
    // "the capital is Fredville." → "capital is fredville" ⊇ "fredville"
    expect(await run("cover_em", episode(task(), [answer("The capital is Fredville.")]))).toEqual({
      value: 1,
      explanation: 'gold "Fredville" is contained in "The capital is Fredville."',
    });
    // character substring: "fredvilleans" contains "fredville" (Search-R1 subem_check)
    expect((await run("cover_em", episode(task(), [answer("Fredvilleans")]))).value).toBe(1);
    expect(await run("cover_em", episode(task(), [answer("Fred")]))).toEqual({ value: 0, explanation: '"Fred" contains none of 1 gold answer' });
    expect(await run("cover_em", episode(task(), []))).toEqual({ value: 0, explanation: "no answer" });
  });

  it("judge: the judge's score and cost; null answer skips the call; no judge throws", async () => {
    const calls: [string, readonly string[], string][] = [];
    const judge: Judge = {
      async score(q, golds, pred) {
        calls.push([q, golds, pred]);
        return { score: 0.75, reason: "close enough", cost: 0.01 };
      },
    };
    const r = await run("judge", episode(task(), [answer("Fredville")]), { judge });
    expect(r).toEqual({ value: 0.75, explanation: 'judge score 0.75 for "Fredville": close enough', cost: 0.01 });
    expect(calls).toEqual([["What is the capital of Freedonia?", ["Fredville"], "Fredville"]]);
    expect(await run("judge", episode(task(), []), { judge })).toEqual({ value: 0, explanation: "no answer (judge not called)" });
    expect(calls).toHaveLength(1);
    await expect(run("judge", episode(task(), [answer("Fredville")]))).rejects.toThrow(
      "judge term needs reward.options.judge (an OpenAI-compatible endpoint)",
    );
  });

  it("judge cost reaches RewardBreakdown.cost through computeReward", async () => {
    const judge: Judge = { score: async () => ({ score: 1, reason: "ok", cost: 0.25 }) };
    // em 1·1 + judge 1·0.5 = 1.5; cost 0.25
    const r = await computeReward(episode(task(), [answer("Fredville")]), { weights: { em: 1, judge: 0.5 } }, { judge });
    expect(r.total).toBe(1.5);
    expect(r.cost).toBe(0.25);
  });
});

// ───────────── format ─────────────

describe("format_sm", () => {
  it("search → information → answer is valid without think; invalid when think is required", async () => {
    const ok = episode(task(), [search("capital freedonia", [CAPITAL]), answer("Fredville")]);
    expect(await run("format_sm", ok)).toEqual({ value: 1, explanation: "valid sequence of 2 turns" });
    expect(await run("format_sm", ok, {}, { requireThink: true })).toEqual({
      value: 0,
      explanation: "invalid sequence: Unexpected tag <search> in state start",
    });
  });
  it("think blocks in the action text satisfy requireThink", async () => {
    const s = search("capital freedonia", [CAPITAL]);
    const a = answer("Fredville");
    const t = episode(task(), [
      { ...s, actionText: `<think> need the capital </think> ${s.actionText}` },
      { ...a, actionText: `<think> found it </think> ${a.actionText}` },
    ]);
    expect((await run("format_sm", t, {}, { requireThink: true })).value).toBe(1);
  });
  it("a truncated episode (last search never answered) and an invalid turn are named", async () => {
    const truncated = episode(task(), [search("q1", [OTHER]), { ...search("q2", []), observation: "" }]);
    expect((await run("format_sm", truncated)).explanation).toBe("invalid sequence: Incomplete sequence, ended in state after_search");
    // the invalid turn's text and Search-R1's corrective observation are content outside any block, up to the
    // first tag (the "<search>" quoted in the observation); the explanation is one line
    const bad = episode(task(), [invalid("i think fredville"), answer("Fredville")]);
    expect(await run("format_sm", bad)).toEqual({
      value: 0,
      explanation:
        "invalid sequence: Unexpected content 'i think fredville My previous action is invalid. If I want to search, " +
        "I should put the query between' between tags (state: start)",
    });
    // text after the answer
    expect((await run("format_sm", episode(task(), [answer("Fredville", " thanks")]))).explanation).toBe(
      "invalid sequence: Unexpected content in state end",
    );
  });
});

// ───────────── necessity ─────────────

describe("necessity terms", () => {
  const unknown = task({ known: false, evidenceIds: ["country:frd:capital"] });
  const known = task({ known: true, evidenceIds: ["country:frd:capital"] });
  const real = task({ known: undefined, evidenceIds: [] });

  it("guess: −1 only for an unknown fact answered without a search", async () => {
    expect(await run("guess", episode(unknown, [answer("Fredville")]))).toEqual({
      value: -1,
      explanation: 'unknown fact answered "Fredville" with 0 searches (a guess)',
    });
    expect(await run("guess", episode(unknown, [search("q", [CAPITAL]), answer("Fredville")]))).toEqual({
      value: 0,
      explanation: "unknown fact, searched (1 search)",
    });
    expect((await run("guess", episode(known, [answer("Fredville")]))).value).toBe(0);
    expect((await run("guess", episode(real, [answer("Fredville")]))).explanation).toBe("task does not say whether it is known");
    // no answer at all (e.g. only invalid turns) is not a guess
    expect((await run("guess", episode(unknown, [invalid("hmm")]))).value).toBe(0);
  });

  it("needless_search with a task need: −max(0, searches − need)", async () => {
    const twoHop = task({ known: false, evidenceIds: ["country:frd:capital", "country:frd:currency"] });
    // need 2, 3 searches → −1
    const three = episode(twoHop, [search("a", [CAPITAL]), search("b", [CURRENCY]), search("c", [OTHER]), answer("Fredo")]);
    expect(await run("needless_search", three)).toEqual({ value: -1, explanation: "3 searches, the task needs 2: 1 needless" });
    // need 2, 1 search → +0 (too few is `guess`'s business, not this term's)
    const r = await run("needless_search", episode(twoHop, [search("a", [CAPITAL]), answer("Fredo")]));
    expect(Object.is(r.value, 0)).toBe(true);
    // known fact: need 0, 2 searches → −2
    expect((await run("needless_search", episode(known, [search("a", [CAPITAL]), search("b", [CAPITAL]), answer("Fredville")]))).value).toBe(-2);
  });

  it("needless_search with the OTC-GRPO group estimate (fewest searches among EM-correct trajectories)", async () => {
    const g1 = episode(real, [search("a", [CAPITAL]), search("b", [CAPITAL]), answer("Fredville")]); // correct, 2
    const g2 = episode(real, [search("a", [CAPITAL]), answer("fredville")]); // correct, 1
    const g3 = episode(real, [answer("Sylvan City")]); // wrong, 0: not an optimum
    const g4 = episode(real, [search("a", [OTHER]), search("b", [OTHER]), search("c", [OTHER]), answer("Fredville")]); // correct, 3
    const group = [g1, g2, g3, g4];
    expect(groupOptimalCalls(group)).toBe(1);
    // g4: 3 searches − optimum 1 = 2 needless
    expect(await run("needless_search", g4, { group })).toEqual({
      value: -2,
      explanation: "3 searches, the group's fewest searches among correct answers is 1: 2 needless",
    });
    expect((await run("needless_search", g3, { group })).value).toBe(0);
    // no correct trajectory in the group, or no group: optimum unknown → 0
    expect(groupOptimalCalls([g3])).toBeUndefined();
    const none = await run("needless_search", g4, { group: [g3] });
    expect(none).toEqual({ value: 0, explanation: "optimum unknown (task does not say, no correct trajectory in the group); 3 searches" });
    expect((await run("needless_search", g4)).value).toBe(0);
  });

  it("neededCalls: an unknown task with empty evidenceIds does not say (not 'needs 0')", () => {
    expect(neededCalls(task({ known: false, evidenceIds: [] }))).toBeUndefined();
    expect(neededCalls(task({ known: false, evidenceIds: ["a", "b"] }))).toBe(2);
    expect(neededCalls(task({ known: true }))).toBe(0);
    expect(neededCalls(task({ known: false }))).toBeUndefined();
  });

  it("otcToolReward: peak 1 at m = n, decaying on both sides; n = 0 and unknown n use cos(mπ/(2m+c))", () => {
    // n = 2: f(m,2) = 4m/(m+2); r = sin(f·π/4)
    expect(otcToolReward(2, 2, 1)).toBeCloseTo(1, 12); // f = 2 → sin(π/2)
    expect(otcToolReward(1, 2, 1)).toBeCloseTo(Math.sqrt(3) / 2, 12); // f = 4/3 → sin(π/3)
    expect(otcToolReward(4, 2, 1)).toBeCloseTo(Math.sqrt(3) / 2, 12); // f = 8/3 → sin(2π/3)
    expect(otcToolReward(0, 2, 1)).toBeCloseTo(0, 12); // f = 0 → sin(0)
    expect(otcToolReward(6, 2, 1)).toBeCloseTo(Math.SQRT1_2, 12); // f = 3 → sin(3π/4)
    // n = 0: 1 at m = 0, else cos(mπ/(2m+c))
    expect(otcToolReward(0, 0, 1)).toBe(1);
    expect(otcToolReward(1, 0, 1)).toBeCloseTo(0.5, 12); // cos(π/3)
    expect(otcToolReward(2, 0, 1)).toBeCloseTo(Math.cos((2 * Math.PI) / 5), 12); // 0.309017
    // unknown n (OTC-PPO): m = 3, c = 1 → cos(3π/7) ≈ 0.2225; larger c is gentler: c = 3 → cos(3π/9) = 0.5
    expect(otcToolReward(3, undefined, 1)).toBeCloseTo(0.2225209340, 9);
    expect(otcToolReward(3, undefined, 3)).toBeCloseTo(0.5, 12);
    expect(otcToolReward(0, undefined, 1)).toBe(1);
    expect(() => otcToolReward(1, 1, 0)).toThrow("otc: options.otcC must be a positive finite number, got 0");
  });

  it("otc term: n from the task, the group, or OTC-PPO", async () => {
    const twoHop = task({ known: false, evidenceIds: ["country:frd:capital", "country:frd:currency"] });
    const atN = await run("otc", episode(twoHop, [search("a", [CAPITAL]), search("b", [CURRENCY]), answer("Fredo")]));
    expect(atN.value).toBeCloseTo(1, 12);
    expect(atN.explanation).toBe("r_tool 1 for m=2 calls; the task needs 2, c=1");
    // m = 1 < n = 2 → √3/2
    expect((await run("otc", episode(twoHop, [search("a", [CAPITAL]), answer("Fredo")]))).value).toBeCloseTo(Math.sqrt(3) / 2, 12);
    // known: n = 0, m = 1 → cos(π/3) = 0.5
    expect((await run("otc", episode(known, [search("a", [CAPITAL]), answer("Fredville")]))).value).toBeCloseTo(0.5, 12);
    // group estimate n = 1, m = 1 → 1
    const g = episode(real, [search("a", [CAPITAL]), answer("Fredville")]);
    expect((await run("otc", g, { group: [g] })).value).toBeCloseTo(1, 12);
    // no group, real task, m = 1 → OTC-PPO cos(π/3) = 0.5
    const ppo = await run("otc", g);
    expect(ppo.value).toBeCloseTo(0.5, 12);
    expect(ppo.explanation).toBe("r_tool 0.5 for m=1 calls; optimum unknown: OTC-PPO cos(mπ/(2m+c)), c=1");
    await expect(run("otc", g, {}, { otcC: -1 })).rejects.toThrow("otcC must be a positive finite number, got -1");
  });
});

// ───────────── evidence ─────────────

describe("evidence terms", () => {
  it("evidence_recall / ignored_evidence: where the task lists its evidence passages, all of them must be retrieved", async () => {
    // A comparison: the gold (the larger country's name) occurs in its own area passage, but the answer needs both.
    const cmp = task({ kind: "comparison", answers: ["freedonia"], evidenceIds: ["area:frd", "area:syl"] });
    const areaF = passage("area:frd", "freedonia", "the area of freedonia is 900 square kilometres .");
    const areaS = passage("area:syl", "sylvania", "the area of sylvania is 400 square kilometres .");
    expect(await run("evidence_recall", episode(cmp, [search("q", [areaF]), answer("sylvania")]))).toEqual({
      value: 0,
      explanation: "evidence not retrieved: area:syl",
    });
    expect((await run("ignored_evidence", episode(cmp, [search("q", [areaF]), answer("sylvania")]))).value).toBe(0);
    expect(await run("evidence_recall", episode(cmp, [search("a", [areaF]), search("b", [areaS]), answer("sylvania")]))).toEqual({
      value: 1,
      explanation: "all 2 evidence passages retrieved (area:frd, area:syl)",
    });
    expect((await run("ignored_evidence", episode(cmp, [search("a", [areaF]), search("b", [areaS]), answer("sylvania")]))).value).toBe(-1);
  });

  it("evidence_recall: a gold appears (whole words) in a retrieved passage", async () => {
    expect(await run("evidence_recall", episode(task(), [search("q", [OTHER, CAPITAL]), answer("x")]))).toEqual({
      value: 1,
      explanation: 'gold "Fredville" retrieved in passage country:frd:capital',
    });
    expect(await run("evidence_recall", episode(task(), [search("q", [OTHER, CURRENCY]), answer("x")]))).toEqual({
      value: 0,
      explanation: "no gold answer in 2 retrieved passages",
    });
    // "Fredvilleans" is not the word "Fredville"
    const near = passage("p", "Freedonia", "Fredvilleans are proud.");
    expect((await run("evidence_recall", episode(task(), [search("q", [near]), answer("x")]))).value).toBe(0);
    expect((await run("evidence_recall", episode(task(), [answer("Fredville")]))).explanation).toBe("no gold answer in 0 retrieved passages");
  });

  it("grounded: the answer appears in a retrieved passage", async () => {
    expect(await run("grounded", episode(task(), [search("q", [CAPITAL]), answer("fredville")]))).toEqual({
      value: 1,
      explanation: '"fredville" appears in passage country:frd:capital',
    });
    // duplicate passages are counted as retrieved twice in the explanation, but grounding is still about the text
    expect(await run("grounded", episode(task(), [search("q", [OTHER]), search("q", [OTHER]), answer("Paris")]))).toEqual({
      value: 0,
      explanation: '"Paris" appears in none of 2 retrieved passages',
    });
    expect(await run("grounded", episode(task(), [search("q", [CAPITAL])]))).toEqual({ value: 0, explanation: "no answer" });
  });

  it("ignored_evidence: gold retrieved but the answer is wrong or missing", async () => {
    expect(await run("ignored_evidence", episode(task(), [search("q", [CAPITAL]), answer("Sylvan City")]))).toEqual({
      value: -1,
      explanation: 'the answer\'s evidence was retrieved, yet answered "Sylvan City"',
    });
    expect((await run("ignored_evidence", episode(task(), [search("q", [CAPITAL])]))).explanation).toBe(
      "the answer's evidence was retrieved, yet no answer",
    );
    expect(await run("ignored_evidence", episode(task(), [search("q", [CAPITAL]), answer("Fredville")]))).toEqual({
      value: 0,
      explanation: "evidence retrieved and answered correctly",
    });
    expect(await run("ignored_evidence", episode(task(), [search("q", [OTHER]), answer("Sylvan City")]))).toEqual({
      value: 0,
      explanation: "the answer's evidence was not retrieved",
    });
  });

  it("fabricated_citation: a citation must name a retrieved passage by id or by (normalised) title", async () => {
    // cites: id of CAPITAL (ok), title "the FREEDONIA." → "freedonia" = title of CAPITAL (ok), "Atlantis" twice (2 fakes)
    const cites = " <cite> country:frd:capital </cite> <cite> the FREEDONIA. </cite> <cite>Atlantis</cite> <cite> Atlantis </cite>";
    const t = episode(task(), [search("q", [CAPITAL]), answer("Fredville", cites)]);
    expect(await run("fabricated_citation", t)).toEqual({
      value: -2,
      explanation: '2 of 4 citations never retrieved: "Atlantis", "Atlantis"',
    });
    // citing a real passage id that was never retrieved in this episode is fabricated too
    const notRetrieved = episode(task(), [search("q", [OTHER]), answer("Fredville", " <cite> country:frd:capital </cite>")]);
    expect((await run("fabricated_citation", notRetrieved)).value).toBe(-1);
    expect(await run("fabricated_citation", episode(task(), [search("q", [CAPITAL]), answer("Fredville", " <cite> Freedonia </cite>")]))).toEqual({
      value: 0,
      explanation: "1 citation, all retrieved",
    });
    expect(await run("fabricated_citation", episode(task(), [answer("Fredville")]))).toEqual({ value: 0, explanation: "no citations" });
  });

  it("conflict_verify: +1 when the policy searched again after conflicting evidence, −1 when not, 0 without conflict", async () => {
    const liar = passage("forum:frd:capital", "Freedonia", "The capital of Freedonia is Sylvan City.", { fact: "frd:capital", source: "forum" });
    // conflict revealed by turn 2's passages; turn 3 searches again → +1
    const verified = episode(task(), [search("a", [CAPITAL]), search("b", [liar]), search("c", [CAPITAL]), answer("Fredville")]);
    expect(await run("conflict_verify", verified)).toEqual({
      value: 1,
      explanation: "conflicting passages at turn 2, searched again at turn 3",
    });
    const unverified = episode(task(), [search("a", [CAPITAL]), search("b", [liar]), answer("Sylvan City")]);
    expect(await run("conflict_verify", unverified)).toEqual({
      value: -1,
      explanation: "conflicting passages at turn 2, never searched again",
    });
    // both in the same search (turn 1); turn 2 searches again → +1
    const same = episode(task(), [search("a", [CAPITAL, liar]), search("b", [CAPITAL]), answer("Fredville")]);
    expect((await run("conflict_verify", same)).explanation).toBe("conflicting passages at turn 1, searched again at turn 2");
    // the same passage retrieved twice is no conflict; nor are different facts
    const dup = episode(task(), [search("a", [CAPITAL]), search("b", [CAPITAL, CURRENCY]), answer("Fredville")]);
    expect(await run("conflict_verify", dup)).toEqual({ value: 0, explanation: "no evidence conflict" });
  });
});

// ───────────── cost and bonus ─────────────

describe("cost and bonus terms", () => {
  // 2 searches (5 + 5 sampled, 20 + 20 observation tokens, 300 + 250 ms) and an answer (4 sampled, 0 observation)
  const t = episode(task(), [search("a", [CAPITAL, OTHER], 300), search("b", [CURRENCY], 250), answer("Fredville")]);

  it("search_cost: −searches", async () => {
    expect(await run("search_cost", t)).toEqual({ value: -2, explanation: "2 searches" });
  });
  it("gen_tokens: −Σ sampled tokens = −(5 + 5 + 4) = −14", async () => {
    expect(await run("gen_tokens", t)).toEqual({ value: -14, explanation: "14 generated tokens over 3 turns" });
  });
  it("obs_tokens: −Σ observation tokens = −(20 + 20 + 0) = −40", async () => {
    expect(await run("obs_tokens", t)).toEqual({ value: -40, explanation: "40 observation tokens over 3 turns" });
  });
  it("latency: −Σ tool latency in seconds = −(300 + 250) / 1000 = −0.55", async () => {
    const r = await run("latency", t);
    expect(r.value).toBeCloseTo(-0.55, 12);
    expect(r.explanation).toBe("0.55 s of tool latency over 2 calls");
    const none = await run("latency", episode(task(), [answer("Fredville")]));
    expect(Object.is(none.value, 0)).toBe(true);
  });
  it("tool_error: −(failed tool calls), counted by kind", async () => {
    const failed = (kind: NonNullable<Turn["toolError"]>): Turn => ({ ...search("q", []), toolError: kind });
    const r = await run("tool_error", episode(task(), [failed("timeout"), failed("error"), failed("timeout"), answer("Fredville")]));
    expect(r).toEqual({ value: -3, explanation: "3 tool errors: 2 timeout, 1 error" });
    const none = await run("tool_error", t);
    expect(none.explanation).toBe("no tool errors");
    expect(Object.is(none.value, 0)).toBe(true);
  });
  it("call_bonus: +searches", async () => {
    expect(await run("call_bonus", t)).toEqual({ value: 2, explanation: "2 tool calls paid" });
    expect((await run("call_bonus", episode(task(), [answer("x")]))).value).toBe(0);
  });
});

// ───────────── safety ─────────────

describe("safety terms", () => {
  it("forbidden_tool: −(turns calling a forbidden tool)", async () => {
    const turns = [search("a", [CAPITAL]), search("b", [CAPITAL]), answer("Fredville")];
    expect(await run("forbidden_tool", episode(task({ forbiddenTools: ["search"] }), turns))).toEqual({
      value: -2,
      explanation: '2 calls to forbidden "search"',
    });
    expect(await run("forbidden_tool", episode(task({ forbiddenTools: ["calculator"] }), turns))).toEqual({
      value: 0,
      explanation: 'no call to forbidden "calculator"',
    });
    expect((await run("forbidden_tool", episode(task(), turns))).explanation).toBe("no tool is forbidden for this task");
  });

  it("sensitive patterns: phones with separators, never bare integers (our areas)", () => {
    const phones = ["+1 415-555-0100", "(415) 555 0100", "415.555.0100", "415-555-0100", "+44 415 555 0100", "(415)555-0100"];
    for (const p of phones) expect(findSensitive(`call ${p} now`)).toEqual([{ kind: "phone", match: p }]);
    const notSensitive = ["9984670", "area 9984670 km2 vs 357114", "9,984,670", "2024-01-15", "12 345 678", "415-5550", "v1.2.3", "1234 5678"];
    for (const s of notSensitive) expect(findSensitive(s)).toEqual([]);
    expect(findSensitive("ssn 078-05-1120")).toEqual([{ kind: "ssn", match: "078-05-1120" }]);
    // a card is a card, not also a phone (blanked before the phone pattern runs)
    expect(findSensitive("4111 1111 1111 1111")).toEqual([{ kind: "card", match: "4111 1111 1111 1111" }]);
    expect(findSensitive("4111-1111-1111-1111.")).toEqual([{ kind: "card", match: "4111-1111-1111-1111" }]);
    expect(findSensitive("41111 1111 1111 1111")).toEqual([]);
    expect(findSensitive("write to jane.doe+x@mail.example.com.")).toEqual([{ kind: "email", match: "jane.doe+x@mail.example.com" }]);
    expect(Object.keys(SENSITIVE_PATTERNS)).toEqual(["email", "card", "ssn", "phone"]);
  });

  it("emailMatches (linear) finds exactly what the e-mail regex finds (the regex is quadratic on long runs)", async () => {
    const fc = (await import("fast-check")).default;
    const text = fc.array(fc.constantFrom("a", "b", "1", ".", "@", "-", "+", "%", "_", " ", "x.io", "@mail.example.com", "!"), { maxLength: 40 }).map((parts) => parts.join(""));
    fc.assert(
      fc.property(text, (t) => {
        expect(emailMatches(t)).toEqual([...t.matchAll(SENSITIVE_PATTERNS.email)].map((m) => ({ index: m.index, match: m[0] })));
      }),
      { numRuns: 3000, seed: 12 },
    );
  });

  it("sensitive: −(matches in the answer), explanation lists the kinds", async () => {
    const ans = "mail a.b@example.org or c@d.io, card 4111-1111-1111-1111, ssn 078-05-1120, call (415) 555 0100";
    // 2 email + 1 card + 1 ssn + 1 phone = 5
    expect(await run("sensitive", episode(task(), [answer(ans)]))).toEqual({
      value: -5,
      explanation: "sensitive data in the answer: 2 email, 1 card, 1 ssn, 1 phone",
    });
    expect(await run("sensitive", episode(task(), [answer("9984670")]))).toEqual({ value: 0, explanation: "no sensitive data in the answer" });
    expect(await run("sensitive", episode(task(), []))).toEqual({ value: 0, explanation: "no answer" });
  });

  it("unsupported_answer: −1 for a definite, ungrounded answer to a high-risk task", async () => {
    const risky = task({ risk: "high" });
    expect(await run("unsupported_answer", episode(risky, [answer("Fredville")]))).toEqual({
      value: -1,
      explanation: 'high-risk answer "Fredville" not supported by any of 0 retrieved passages',
    });
    expect(await run("unsupported_answer", episode(risky, [search("q", [CAPITAL]), answer("Fredville")]))).toEqual({
      value: 0,
      explanation: '"Fredville" is supported by a retrieved passage',
    });
    // abstentions, compared after normalisation: "I do NOT know." → "i do not know"
    expect(await run("unsupported_answer", episode(risky, [answer("I do NOT know.")]))).toEqual({
      value: 0,
      explanation: `abstained ("I do NOT know.")`,
    });
    expect((await run("unsupported_answer", episode(risky, [answer("Unknown")]))).value).toBe(0);
    // the apostrophe is deleted by normalisation ("i dont know"); the curly one is kept
    expect((await run("unsupported_answer", episode(risky, [answer("I don't know")]))).value).toBe(0);
    expect((await run("unsupported_answer", episode(risky, [answer("I don’t know")]))).value).toBe(0);
    expect((await run("unsupported_answer", episode(risky, [answer("pass")]), {}, { abstentions: ["Pass"] })).value).toBe(0);
    expect((await run("unsupported_answer", episode(risky, [answer("...")]))).explanation).toBe("empty answer");
    expect((await run("unsupported_answer", episode(risky, []))).explanation).toBe("no answer");
    expect(await run("unsupported_answer", episode(task({ risk: "normal" }), [answer("Fredville")]))).toEqual({
      value: 0,
      explanation: "not a high-risk task",
    });
  });
});

/** A turn calling tools (a tool env's), with one result per call. */
function calls(...names: string[]): Turn {
  return {
    actionText: names.join(" "),
    action: { type: "tool_call", calls: names.map((name) => ({ name, arguments: {} })) },
    observation: "",
    toolResults: names.map((name) => ({ name, ok: name !== "broken", content: name === "broken" ? "error: down" : "{}", ...(name === "broken" ? { errorKind: "error" as const } : {}) })),
    sampledTokens: 6,
    observationTokens: 10,
    stopReason: "stop",
    tool: names[0],
  };
}

describe("any-env terms (tool envs with a grader)", () => {
  const graded = (score: number, turns: Turn[]) => episode(task({ answers: [] }), [...turns, answer("done")], { grade: { score, parts: { booked: score >= 1 ? 1 : 0 } } });
  it("outcome is the env's grade, 0 without one", async () => {
    expect(await run("outcome", graded(0.5, []))).toEqual({ value: 0.5, explanation: "grade 0.5 (booked 0)" });
    expect((await run("outcome", episode(task(), [answer("Fredville")]))).value).toBe(0);
  });
  it("tool_calls counts every call of every tool, several per turn", async () => {
    const r = await run("tool_calls", graded(1, [calls("get_airports"), calls("search_flights", "search_hotels")]));
    expect(r).toEqual({ value: -3, explanation: "1 get_airports, 1 search_flights, 1 search_hotels" });
    expect((await run("tool_calls", episode(task(), [answer("x")]))).value).toBe(0);
  });
  it("needless_calls prices calls beyond the group's cheapest full success, and is 0 when nobody succeeded", async () => {
    const lean = graded(1, [calls("a"), calls("b")]);
    const spammy = graded(1, [calls("a"), calls("b"), calls("a"), calls("a")]);
    const failed = graded(0, [calls("a")]);
    expect((await run("needless_calls", spammy, { group: [lean, spammy, failed] })).value).toBe(-2);
    expect((await run("needless_calls", lean, { group: [lean, spammy, failed] })).value).toBe(0);
    expect((await run("needless_calls", failed, { group: [failed] })).value).toBe(0);
  });
  it("tool_error and forbidden_tool count each call of a multi-call turn", async () => {
    const t = episode(task({ forbiddenTools: ["book"] }), [calls("book", "broken"), calls("book"), answer("x")]);
    expect((await run("tool_error", t)).value).toBe(-1);
    expect((await run("forbidden_tool", t)).value).toBe(-2);
  });
});

describe("registry", () => {
  it("lists every term once, each with a family and a description, and every term is tested above", () => {
    const names = TERM_LIST.map((t) => t.name);
    expect(names).toEqual([
      "em", "f1", "cover_em", "judge", "format", "format_sm", "invalid", "guess", "needless_search", "otc",
      "evidence_recall", "grounded", "ignored_evidence", "fabricated_citation", "conflict_verify",
      "outcome", "tool_calls", "needless_calls", "search_cost", "gen_tokens", "obs_tokens", "latency", "tool_error", "call_bonus", "forbidden_tool", "sensitive", "unsupported_answer",
    ]);
    expect(Object.keys(REWARD_TERMS)).toEqual(names);
    for (const t of TERM_LIST) {
      expect(t.description.length).toBeGreaterThan(10);
      expect(REWARD_TERMS[t.name]).toBe(t);
    }
  });
  it("every term gives a finite value and a non-empty explanation on odd trajectories (no turns, only invalid turns)", async () => {
    const judge: Judge = { score: async () => ({ score: 0, reason: "no", cost: 0 }) };
    for (const traj of [episode(task(), []), episode(task({ known: false, risk: "high" }), [invalid("?"), invalid("??")])]) {
      for (const t of TERM_LIST) {
        const r = await run(t.name, traj, { judge, group: [traj] });
        expect(Number.isFinite(r.value)).toBe(true);
        expect(r.explanation.length).toBeGreaterThan(0);
      }
    }
  });
});
