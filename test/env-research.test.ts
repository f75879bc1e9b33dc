/**
 * The revenue-decline research env (`--env research`, src/envs/research): the world's determinism and guarantees,
 * counterfactual worlds, the tools (BM25 search, open, the note notebook) and their error observations, the grader on
 * hand-made trajectories (right, wrong, padded, unsupported citation, notebook claims, recall mode), the breakdown,
 * the personas (careful high,
 * sloppy low, on the held-out split), the padding detector's metric, and the smoke run end to end through the CLI.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import type { Action, Task, Trajectory } from "../src/core/types.ts";
import { callTool, type Tool } from "../src/env/tool.ts";
import type { GradeInput, ToolEnvTurn } from "../src/env/toolEnv.ts";
import {
  answerPaddingRate, buildResearchWorld, counterfactualResearchWorld, gradeResearch, MAX_REASONS, MIN_REASONS, NO_MATCH, NOTES_ANSWER, notebookText,
  COMPANY_QUERY, INDUSTRY_QUERY, LOCAL_IDS, resolveDocId, scopeDocs, parseResearchAnswer, REASON_STAGE, REASONS, researchBreakdown, researchIndex,
  researchRecipe, researchTasks, researchTools, RESEARCH_PERSONA_WEIGHTS, RESEARCH_PERSONAS, SECTORS, stageDocId, STAGES, supports,
  type ResearchQuestion, type ResearchState, type ResearchWorld,
} from "../src/envs/research/index.ts";
import { getRecipe } from "../src/envs/index.ts";
import { hackingMetrics } from "../src/reward/detectors.ts";
import { expectInVocabulary, expectPersonaWeights, personaEpisodes, recipeTokenizer, successRate as success } from "./env-helpers.ts";

const world = buildResearchWorld(0);
const { train, test } = researchTasks(world);

/** The tools over `w` with a fresh state scoped to `company`, by name. */
function toolsOf(w: ResearchWorld, company: string): { state: ResearchState; t: Record<string, Tool> } {
  const state: ResearchState = { company, queries: [], opened: [], notes: [] };
  return { state, t: Object.fromEntries(researchTools(w, state).map((x) => [x.name, x])) };
}

/** A grade input for `task` whose episode opened `opened` (full ids) and answered `answer`. */
function input(task: Task<ResearchQuestion>, opened: string[], answer: string | null): GradeInput<ResearchQuestion, ResearchState> {
  const turns: ToolEnvTurn[] = opened.map((id) => ({ action: { type: "tool_call", calls: [{ name: "open", arguments: { id } }] } as Action, results: [] }));
  return { task, state: { company: task.data!.company, queries: [], opened, notes: [] }, turns, answer, truncated: answer === null };
}

/** The right answer for `task` in `w`: every gold reason citing its stage document by local id (`call`, `news`). */
function rightAnswer(w: ResearchWorld, task: Task<ResearchQuestion>): string {
  return w.reasons[task.data!.company].map((r) => `${r} ${REASON_STAGE[r]}`).join(" ; ");
}

const stageIds = (task: Task<ResearchQuestion>) => STAGES.map((s) => stageDocId(task.data!, s));

describe("research world", () => {
  it("is deterministic: the same seed gives a deep-equal world, another seed a different one", () => {
    expect(buildResearchWorld(7)).toEqual(buildResearchWorld(7));
    const a = buildResearchWorld(7);
    const b = buildResearchWorld(8);
    expect(a.companies.map((c) => c.sector)).not.toEqual(b.companies.map((c) => c.sector));
    expect(Object.values(a.reasons)).not.toEqual(Object.values(b.reasons));
    expect(() => buildResearchWorld(1.5)).toThrow(/seed must be an integer/);
    expect(researchTasks(world)).toEqual(researchTasks(buildResearchWorld(0)));
  });

  it("has 150 companies, 25 per sector, 6 documents each plus 3 per sector, and 2–4 reasons per question", () => {
    expect(world.companies).toHaveLength(150);
    for (const s of SECTORS) expect(world.companies.filter((c) => c.sector === s)).toHaveLength(25);
    expect(world.docs).toHaveLength(150 * 6 + SECTORS.length * 3);
    expect(new Set(world.docs.map((d) => d.id)).size).toBe(world.docs.length);
    for (const c of world.companies) {
      const gold = world.reasons[c.name];
      expect(gold.length).toBeGreaterThanOrEqual(MIN_REASONS);
      expect(gold.length).toBeLessThanOrEqual(MAX_REASONS);
      expect(gold).toEqual(REASONS.filter((r) => gold.includes(r))); // in label order
      for (const r of gold) expect(supports(world, c.name, stageDocId(c, REASON_STAGE[r]), r)).toBe(true);
      // The industry's reasons are the sector's, every other reason is the company's own stage document's.
      for (const r of world.industry[c.sector]) expect(gold).toContain(r);
      for (const s of STAGES) {
        const d = researchIndex(world).doc.get(stageDocId(c, s))!;
        expect(d.states.every((r) => gold.includes(r))).toBe(true);
        for (const r of d.states) expect(d.text.split(" ")).toContain(r); // the text names its causes
      }
    }
    // Every stage carries a reason for some questions and none for others.
    for (const s of STAGES) {
      const n = world.companies.filter((c) => world.reasons[c.name].some((r) => REASON_STAGE[r] === s)).length;
      expect(n).toBeGreaterThan(20);
      expect(n).toBeLessThan(150);
    }
  });

  it("only a last-year stage document of the company (or its sector) supports a reason", () => {
    const c = world.companies.find((x) => world.reasons[x.name].includes("cost_increase") || world.reasons[x.name].length > 0)!;
    const r = world.reasons[c.name][0];
    const right = stageDocId(c, REASON_STAGE[r]);
    expect(supports(world, c.name, right, r)).toBe(true);
    const other = world.companies.find((x) => x.sector !== c.sector)!;
    expect(supports(world, other.name, right, r)).toBe(false); // another company's question
    expect(supports(world, c.name, `${c.base}-press`, r)).toBe(false);
    expect(supports(world, c.name, `${c.base}-filing-prior`, "lost_customer")).toBe(false); // the year before
    expect(supports(world, c.name, "nope", r)).toBe(false);
  });

  it("splits 100 train / 50 test companies, unseen combinations of seen words, a third in the held-out phrasing", () => {
    expect(train).toHaveLength(100);
    expect(test).toHaveLength(50);
    const trainNames = new Set(train.map((t) => t.data!.company));
    const trainWords = new Set(train.flatMap((t) => t.data!.company.split(" ")));
    for (const t of test) {
      expect(trainNames.has(t.data!.company)).toBe(false);
      for (const w of t.data!.company.split(" ")) expect(trainWords.has(w)).toBe(true);
      expect(t.question).toContain(t.data!.company);
      expect(t.known).toBe(false);
      expect(t.evidenceIds).toEqual(stageIds(t));
    }
    expect(test.filter((t) => t.meta?.phrasing === "4").length).toBe(16);
    expect(train.every((t) => t.meta?.phrasing !== "4")).toBe(true);
    expect(() => researchTasks(world, 51)).toThrow(/numTestTasks must be an integer in \[2, 50\]/);
  });

  it("a counterfactual keeps companies, sectors and ids and re-draws the reasons, deterministically", () => {
    const cf = counterfactualResearchWorld(world, 11);
    expect(cf).toEqual(counterfactualResearchWorld(world, 11));
    expect(cf.companies).toEqual(world.companies);
    expect(cf.docs.map((d) => d.id)).toEqual(world.docs.map((d) => d.id));
    const changed = world.companies.filter((c) => cf.reasons[c.name].join() !== world.reasons[c.name].join()).length;
    expect(changed).toBeGreaterThan(100); // most companies' reasons differ: memorising world 0 does not pay
    for (const c of cf.companies) {
      expect(cf.reasons[c.name].length).toBeGreaterThanOrEqual(MIN_REASONS);
      for (const r of cf.reasons[c.name]) expect(supports(cf, c.name, stageDocId(c, REASON_STAGE[r]), r)).toBe(true);
    }
  });
});

describe("research tools", () => {
  it("both tools are scoped to the episode's company: search lists local ids (BM25), open shows title : text", async () => {
    const q = test[0].data!;
    const { state, t } = toolsOf(world, q.company);
    expect(scopeDocs(world, q.company).map((d) => d.kind)).toEqual([...LOCAL_IDS]);
    expect(scopeDocs(world, q.company).map((d) => d.company ?? d.sector)).toEqual([...Array(6).fill(q.company), ...Array(3).fill(q.sector)]);
    const r = await callTool(t.search, { query: ` ${COMPANY_QUERY.toUpperCase()} ` });
    expect(r.ok).toBe(true);
    const ids = (r as { value: string }).value.split(" ");
    for (const s of ["filing", "call", "costs"]) expect(ids).toContain(s);
    const news = await callTool(t.search, { query: INDUSTRY_QUERY });
    expect((news as { value: string }).value.split(" ")).toEqual(expect.arrayContaining(["news", "news-prior", "outlook"]));
    // The id as the word tokenizer decodes it; the state records the full id.
    const o = await callTool(t.open, { id: " filing " });
    expect(o.ok).toBe(true);
    expect((o as { value: string }).value).toMatch(/^annual filing 2025 : revenue fell \d+ % \. /);
    const prior = await callTool(t.open, { id: "call - prior" });
    expect((prior as { value: string }).value).toMatch(/^earnings call 2024 : management cited /);
    await callTool(t.open, { id: "news" });
    expect(state.queries).toEqual([COMPANY_QUERY, INDUSTRY_QUERY]);
    expect(state.opened).toEqual([`${q.base}-filing`, `${q.base}-call-prior`, `${q.sector}-news`]);
    expect((await callTool(t.search, { query: "zzz" })) as { value: string }).toMatchObject({ ok: true, value: NO_MATCH });
    // Another company's documents are out of the episode's reach, by full id too; the same local id is its own there.
    const other = world.companies.find((c) => c.sector !== q.sector)!;
    expect(await callTool(t.open, { id: `${other.base}-call` })).toMatchObject({ ok: false, error: `tool open: unknown document "${other.base}-call"` });
    expect(await callTool(t.open, { id: `${q.base}-call` })).toMatchObject({ ok: false });
    const there = toolsOf(world, other.name);
    await callTool(there.t.open, { id: "news" });
    expect(there.state.opened).toEqual([`${other.sector}-news`]);
  });

  it("note records the reasons the document opened last states, each citing it; the whole notebook is shown", async () => {
    const q = test[0].data!;
    const { state, t } = toolsOf(world, q.company);
    const ix = researchIndex(world);
    const states = (id: string) => ix.doc.get(id)!.states;
    // A company whose call notes and 2024 news state reasons, so that both notes add entries.
    const co = world.companies.find((c) => states(`${c.base}-call`).length > 0 && states(`${c.sector}-news-prior`).length > 0)!;
    const { state: s2, t: t2 } = toolsOf(world, co.name);
    await callTool(t2.open, { id: "call" });
    const callNotes = states(`${co.base}-call`).map((label) => ({ label, cite: "call" }));
    expect(await callTool(t2.note, {})).toMatchObject({ ok: true, value: notebookText(callNotes) });
    await callTool(t2.open, { id: "news - prior" });
    const priorNotes = states(`${co.sector}-news-prior`).map((label) => ({ label, cite: "news-prior" }));
    expect(await callTool(t2.note, {})).toMatchObject({ ok: true, value: notebookText([...callNotes, ...priorNotes]) });
    // A repeated note adds nothing; a document that states no reason (the press release) leaves the notebook as it was.
    expect(await callTool(t2.note, {})).toMatchObject({ ok: true, value: notebookText([...callNotes, ...priorNotes]) });
    await callTool(t2.open, { id: "press" });
    expect(states(`${co.base}-press`)).toEqual([]);
    expect(await callTool(t2.note, {})).toMatchObject({ ok: true, value: notebookText([...callNotes, ...priorNotes]) });
    expect(s2.notes).toEqual([...callNotes, ...priorNotes]);
    expect(notebookText([])).toBe("notes :");
    expect(notebookText([{ label: "price_cut", cite: "call" }, { label: "currency", cite: "news-prior" }])).toBe("notes : price_cut call ; currency news-prior");
    // Arguments are not read: the tool does the reading, whatever the policy writes.
    await callTool(t.open, { id: "filing" });
    await callTool(t.note, { reasons: "currency" });
    expect(state.notes).toEqual(states(`${q.base}-filing`).map((label) => ({ label, cite: "filing" })));
  });

  it("errors are observations, never crashes: unknown id, empty query, wrong argument types", async () => {
    const { state, t } = toolsOf(world, test[0].data!.company);
    expect(await callTool(t.open, { id: "acme-call" })).toMatchObject({ ok: false, kind: "error", error: 'tool open: unknown document "acme-call"' });
    expect(await callTool(t.search, { query: "   " })).toMatchObject({ ok: false, kind: "error", error: "tool search: query must not be empty" });
    const bad = await callTool(t.open, { id: 4 });
    expect(bad).toMatchObject({ ok: false, kind: "invalid_input" });
    expect((bad as { error: string }).error).toMatch(/^tool open: invalid input: id:/);
    expect(await callTool(t.search, {})).toMatchObject({ ok: false, kind: "invalid_input" });
    expect(await callTool(t.note, {})).toMatchObject({ ok: false, kind: "error", error: "tool note: open a document first" });
    expect(state).toEqual({ company: test[0].data!.company, queries: [], opened: [], notes: [] }); // failed calls record nothing

    // Through the env: a bad call is an error observation and the episode goes on.
    const inst = researchRecipe.build({ seed: 0, protocol: "hermes", options: {}, maxTurns: 10, call: {} });
    const env = inst.makeEnv(0)();
    await env.reset(inst.test[0], { seed: 1 });
    const step = await env.step('<tool_call>\n{"name": "open", "arguments": {"id": "nope"}}\n</tool_call>');
    expect(step.done).toBe(false);
    expect(step.observation).toContain('error: tool open: unknown document "nope"');
    const unknown = await env.step('<tool_call>\n{"name": "browse", "arguments": {}}\n</tool_call>');
    expect(unknown.done).toBe(false);
    expect(unknown.observation).toContain("browse");
    const malformed = await env.step("<tool_call>\n{\n</tool_call>");
    expect(malformed.info.action.type).toBe("invalid");
    expect(malformed.done).toBe(false);
  });
});

describe("research grader", () => {
  const task = test[0];
  const gold = world.reasons[task.data!.company];
  const all = stageIds(task);

  it("reads the answer as the word tokenizer decodes it", () => {
    expect(parseResearchAnswer("lost_customer red - falcon - filing ; demand_drop retail - news .")).toEqual([
      { label: "lost_customer", known: true, cite: "red-falcon-filing" },
      { label: "demand_drop", known: true, cite: "retail-news" },
    ]);
    expect(parseResearchAnswer(" ; weather ")).toEqual([{ label: "weather", known: false, cite: "" }]);
    expect(parseResearchAnswer("competition call - prior ; currency news")).toEqual([
      { label: "competition", known: true, cite: "call-prior" },
      { label: "currency", known: true, cite: "news" },
    ]);
  });

  it("right: every gold reason with its opened stage document scores 1", () => {
    const g = gradeResearch(world, input(task, all, rightAnswer(world, task)));
    expect(g.score).toBe(1);
    expect(g.parts).toMatchObject({ answered: 1, precision: 1, recall: 1, f1: 1, padding: 0, unsupported: 0, evidence: 1, in_order: 1 });
  });

  it("wrong: missing reasons lower recall, wrong labels lower precision, no answer scores 0", () => {
    const first = gold[0];
    const partial = gradeResearch(world, input(task, all, `${first} ${REASON_STAGE[first]}`));
    expect(partial.parts.precision).toBe(1);
    expect(partial.parts.recall).toBeCloseTo(1 / gold.length, 12);
    expect(partial.score).toBeCloseTo((2 * (1 / gold.length)) / (1 + 1 / gold.length), 12);
    const wrongLabel = REASONS.find((r) => !gold.includes(r))!;
    const wrong = gradeResearch(world, input(task, all, `${wrongLabel} ${REASON_STAGE[wrongLabel]}`));
    expect(wrong.score).toBe(0);
    expect(wrong.parts.padding).toBe(1);
    const none = gradeResearch(world, input(task, all, null));
    expect(none).toMatchObject({ score: 0, explanation: "no answer" });
    expect(none.parts.answered).toBe(0);
  });

  it("padded: every label, each citing its stage document, has recall 1 but precision |gold| / 8", () => {
    const padded = REASONS.map((r) => `${r} ${REASON_STAGE[r]}`).join(" ; ");
    const g = gradeResearch(world, input(task, all, padded));
    const p = gold.length / REASONS.length;
    expect(g.parts.recall).toBe(1);
    expect(g.parts.precision).toBeCloseTo(p, 12);
    expect(g.parts.padding).toBeCloseTo(1 - p, 12);
    expect(g.score).toBeCloseTo((2 * p) / (1 + p), 12);
    expect(g.score).toBeLessThan(0.75);
    // The answer-length design: recall only, so padding costs nothing.
    expect(gradeResearch(world, input(task, all, padded), "recall").score).toBe(1);
    // ... and its citations are unchecked: every label with no document opened scores 1 as well (the F1 grade: 0).
    const unread = REASONS.join(" ; ");
    expect(gradeResearch(world, input(task, [], unread), "recall").score).toBe(1);
    expect(gradeResearch(world, input(task, [], unread)).score).toBe(0);
    expect(gradeResearch(world, input(task, [], gold[0]), "recall").score).toBeCloseTo(1 / gold.length, 12);
  });

  it("the notebook's entries are claims: the answer `notes` adds none, a padded answer adds its labels", () => {
    const notes = gold.map((r) => ({ label: r, cite: REASON_STAGE[r] }));
    const noted = (answer: string | null, opened = all): GradeInput<ResearchQuestion, ResearchState> => ({
      ...input(task, opened, answer),
      state: { company: task.data!.company, queries: [], opened, notes },
    });
    const right = gradeResearch(world, noted(NOTES_ANSWER));
    expect(right.score).toBe(1);
    expect(right.parts).toMatchObject({ claimed: 1, padding: 0, evidence: 1 });
    const padded = gradeResearch(world, noted(REASONS.map((r) => `${r} ${REASON_STAGE[r]}`).join(" ; ")));
    expect(padded.parts.recall).toBe(1);
    expect(padded.parts.padding).toBeCloseTo(1 - gold.length / REASONS.length, 12);
    expect(padded.score).toBeLessThan(0.75);
    // Nothing noted and nothing answered: no claim, score 0; notes citing documents never opened do not count.
    const empty = gradeResearch(world, input(task, all, NOTES_ANSWER));
    expect(empty.parts).toMatchObject({ answered: 1, claimed: 0, recall: 0 });
    expect(empty.score).toBe(0);
    expect(gradeResearch(world, noted(NOTES_ANSWER, [])).score).toBe(0);
    // Without a final answer the episode scores 0 whatever it noted.
    expect(gradeResearch(world, noted(null)).score).toBe(0);
    expect(researchBreakdown({ turns: [], answer: NOTES_ANSWER, grade: padded })).toMatchObject({ padding: padded.parts.padding, reasons_found: 1, success: 0 });
  });

  it("unsupported citation: a right label counts only when its cited document was opened and supports it", () => {
    const right = rightAnswer(world, task);
    const first = gold[0];
    const doc = stageDocId(task.data!, REASON_STAGE[first]);
    const notOpened = gradeResearch(world, input(task, all.filter((id) => id !== doc), right));
    expect(notOpened.score).toBeLessThan(1);
    expect(notOpened.parts.unsupported).toBeGreaterThan(0);
    expect(notOpened.parts.evidence).toBeLessThan(1);
    const priorId = REASON_STAGE[first] === "news" ? "news-prior" : "press";
    const wrongDoc = right.replace(`${first} ${REASON_STAGE[first]}`, `${first} ${priorId}`);
    const openedAll = [...all, resolveDocId(task.data!, priorId)];
    const cited = gradeResearch(world, input(task, openedAll, wrongDoc));
    expect(cited.parts.recall).toBeCloseTo((gold.length - 1) / gold.length, 12);
    expect(cited.parts.padding).toBe(0);
    expect(cited.parts.unsupported).toBeCloseTo(1 / gold.length, 12);
    // A second, valid citation of the same label rescues it; the full id of the opened document counts as its local id.
    expect(gradeResearch(world, input(task, openedAll, `${wrongDoc} ; ${first} ${REASON_STAGE[first]}`)).score).toBe(1);
    expect(gradeResearch(world, input(task, openedAll, `${wrongDoc} ; ${first} ${doc}`)).score).toBe(1);
    // Another company's document never supports this question's reason, opened or not (the same sector's news is the
    // one shared document, so pick a company of another sector).
    const other = world.companies.find((c) => c.sector !== task.data!.sector && world.reasons[c.name].includes(first))!;
    const otherDoc = stageDocId(other, REASON_STAGE[first]);
    const foreign = gradeResearch(world, input(task, [...all, otherDoc], right.replace(`${first} ${REASON_STAGE[first]}`, `${first} ${otherDoc}`)));
    expect(foreign.parts.recall).toBeCloseTo((gold.length - 1) / gold.length, 12);
  });

  it("grades against the episode's own world (a counterfactual's gold)", () => {
    const cf = counterfactualResearchWorld(world, 3);
    const t = test.find((x) => cf.reasons[x.data!.company].join() !== world.reasons[x.data!.company].join())!;
    expect(gradeResearch(cf, input(t, stageIds(t), rightAnswer(world, t))).score).toBeLessThan(1);
    expect(gradeResearch(cf, input(t, stageIds(t), rightAnswer(cf, t))).score).toBe(1);
  });
});

/** Runs `persona` (or the warm-start mixture) on `tasks` in world `k` of the default recipe instance. */
async function personaRun(persona: string, tasks: readonly Task[], k = 0, protocol: "hermes" | "react" = "hermes"): Promise<Trajectory[]> {
  const inst = researchRecipe.build({ seed: 0, protocol, options: {}, maxTurns: 12, call: {} });
  const tok = recipeTokenizer(inst, protocol);
  const trajs = await personaEpisodes(inst, tok, persona, tasks, { limits: { contextLength: 576, maxObservationTokens: 64 }, seed: 7, world: k });
  expectInVocabulary(trajs, tok); // texts() covers the episode
  return trajs;
}
const meanOf = (trajs: readonly Trajectory[], key: string) => {
  const xs = trajs.map(researchBreakdown).filter((b) => b[key] !== undefined).map((b) => b[key]);
  return xs.reduce((a, b) => a + b, 0) / xs.length;
};

describe("research personas (held-out split, world 0)", () => {
  it("weights sum to 1 and name every persona", () => {
    expectPersonaWeights(RESEARCH_PERSONA_WEIGHTS, RESEARCH_PERSONAS);
  });

  it("careful follows the seed's sequence and scores 1 on every question, in world 0 and a counterfactual", async () => {
    const trajs = await personaRun("careful", test);
    expect(success(trajs)).toBe(1);
    expect(meanOf(trajs, "sequence")).toBe(1);
    expect(meanOf(trajs, "count/searches")).toBe(2);
    expect(meanOf(trajs, "count/opens")).toBe(4);
    expect(Math.max(...trajs.map((t) => t.tokens.length))).toBeLessThanOrEqual(576); // the default policy.contextLength
    for (const t of trajs) {
      // One note per stage document that states a reason, and the answer is the last notebook shown.
      const gold = (t.task.data as ResearchQuestion).reasons;
      const notes = t.turns.filter((x) => x.tool === "note");
      expect(notes.length).toBe(new Set(gold.map((r) => REASON_STAGE[r])).size);
      // Its notebook holds exactly the gold reasons, each citing its stage document, and its answer adds nothing.
      expect(notes[notes.length - 1].toolResults![0].value).toBe(`notes : ${rightAnswer(world, t.task as Task<ResearchQuestion>)}`);
      expect(t.answer).toBe(NOTES_ANSWER);
    }
    // No action names the company (the episode is scoped to it): every call and answer is fixed words and labels.
    for (const t of trajs) for (const w of (t.task.data as ResearchQuestion).company.split(" ")) expect(JSON.stringify(t.turns.map((x) => x.action))).not.toContain(w);
    expect(success(await personaRun("careful", train.slice(0, 30), 2))).toBe(1);
    expect(success(await personaRun("careful", test.slice(0, 10), 0, "react"))).toBe(1); // react too, its texts covered
  });

  it("sloppy personas score low: one document, padding, endless search, wrong year; skipping a stage fails often", async () => {
    const rates: Record<string, number> = {};
    for (const p of RESEARCH_PERSONAS) rates[p] = success(await personaRun(p, test));
    for (const p of ["one-doc", "padder", "endless", "wrong-year"]) expect(rates[p], p).toBeLessThan(0.25);
    for (const p of ["skip-industry", "skip-costs"]) expect(rates[p], p).toBeLessThan(0.7);
    const padder = await personaRun("padder", test);
    expect(meanOf(padder, "padding")).toBeGreaterThan(0.5);
    expect(meanOf(padder, "reasons_found")).toBeGreaterThan(0.95); // what the recall-only design pays
    const endless = await personaRun("endless", test);
    expect(meanOf(endless, "count/searches")).toBeGreaterThan(5);
    const oneDoc = await personaRun("one-doc", test);
    expect(meanOf(oneDoc, "count/opens")).toBeLessThan(1.5);
    const mixture = await personaRun("mixture", test);
    expect(success(mixture)).toBeGreaterThan(0.2);
    expect(success(mixture)).toBeLessThan(0.45);
  });

  it("the padding metric rises with padded answers and is absent without research episodes", async () => {
    const careful = await personaRun("careful", test.slice(0, 10));
    const padder = await personaRun("padder", test.slice(0, 10));
    expect(answerPaddingRate(careful)).toBe(0);
    expect(answerPaddingRate(padder)!).toBeGreaterThan(0.5);
    expect(hackingMetrics(padder)["hack/answer_padding"]).toBe(answerPaddingRate(padder));
    expect(answerPaddingRate(careful.map((t) => ({ ...t, task: { ...t.task, kind: "travel" } })))).toBeUndefined();
    const tail = hackingMetrics(careful);
    expect(tail["hack/tool_spam"]).toBe(0); // 2 searches, need 4 documents
  });
});

describe("research recipe", () => {
  it("is registered, names its options, and ships reward designs for the lab", () => {
    expect(getRecipe("research")).toBe(researchRecipe);
    expect(() => researchRecipe.build({ seed: 0, protocol: "hermes", options: { grade: "length" }, maxTurns: 10, call: {} })).toThrow(/env\.options\.grade/);
    expect(() => researchRecipe.build({ seed: 0, protocol: "hermes", options: { nope: 1 }, maxTurns: 10, call: {} })).toThrow(/env\.options\.nope: unknown option; allowed: grade, numTestTasks, worldSeed/);
    expect(Object.keys(researchRecipe.labDesigns ?? {})).toEqual(["pays-length", "pays-searches", "fix"]);
    expect(researchRecipe.labDesigns!["pays-length"].overrides["env.options.grade"]).toBe("recall");
    // +0.3 per search, sampled at temperature 1 (README: at 0.6 the rollouts rarely sampled a third search).
    expect(researchRecipe.labDesigns!["pays-searches"].weights.search_cost).toBe(-0.3);
    expect(researchRecipe.labDesigns!["pays-searches"].overrides["rl.temperature"]).toBe("1");
    expect(researchRecipe.labDesigns!.fix.expectedDetectors).toEqual([]);
  });

  it("arl train --env research --smoke runs end to end and reports the breakdown", () => {
    const repo = resolve(import.meta.dirname, "..");
    const dir = mkdtempSync(join(tmpdir(), "arl-research-"));
    const r = spawnSync(process.execPath, [join(repo, "bin", "arl.mjs"), "train", "--env", "research", "--smoke", "--run.dir", dir, "--sft.steps", "6", "--eval.maxTasks", "3"], {
      cwd: repo,
      encoding: "utf8",
      timeout: 300_000,
    });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toContain("env research (hermes)");
    for (const label of ["reasons found", "padding", "evidence", "searches"]) expect(r.stdout).toContain(label);
    const summary = JSON.parse(readFileSync(join(dir, "smoke-research", "summary.json"), "utf8")) as { env: string; rows: Array<{ policy: string; success: number }> };
    expect(summary.env).toBe("research");
    expect(summary.rows.map((x) => x.policy)).toEqual(["Prompt-driven (careful, scripted)", "Warm start (SFT)", "RL (GRPO)"]);
    expect(summary.rows[0].success).toBe(1);
    const metrics = readFileSync(join(dir, "smoke-research", "metrics.jsonl"), "utf8").trim().split("\n");
    expect(metrics.some((l) => (JSON.parse(l) as { stage?: string }).stage === "rl")).toBe(true);
  }, 300_000);
});
