import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { searchAction, type Task, type Trajectory, type Turn } from "../src/core/types.ts";
import { SearchEnv } from "../src/envs/search/env.ts";
import { buildWorld } from "../src/envs/search/world.ts";
import { BM25Index } from "../src/retrieval/bm25.ts";
import { computeReward, type RewardConfig } from "../src/reward/compose.ts";
import { presetWeights } from "../src/reward/presets.ts";
import { listen, type RunningServer } from "../src/http/server.ts";
import { createRewardApp } from "../src/serve/reward.ts";
import { parsePassages } from "../src/protocol/passages.ts";
import { trajectoryFromText } from "../src/protocol/transcript.ts";

const world = buildWorld();
const index = new BM25Index(world.passages);
const task = world.train.find((t) => t.id.startsWith("capital:")) as Task;
const country = world.countries.find((c) => `capital:${c.cca3}` === task.id)!;
const DEFAULT: RewardConfig = { weights: presetWeights("default") };
const COMPOSITE: RewardConfig = { weights: presetWeights("composite") };

let plain: RunningServer;
let composite: RunningServer;
let grouped: RunningServer;

/** POSTs JSON to a server; returns status and parsed body. */
async function post(server: RunningServer, path: string, body: unknown, raw = false): Promise<{ status: number; body: any }> {
  const res = await fetch(`${server.url}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: raw ? (body as string) : JSON.stringify(body) });
  return { status: res.status, body: await res.json() };
}

/** Runs a real SearchEnv episode with the given turns; returns the transcript text and the trajectory our rollout would score. */
async function episode(t: Task, actions: string[]): Promise<{ text: string; traj: Trajectory }> {
  const env = new SearchEnv({ retriever: index });
  await env.reset(t);
  const turns: Turn[] = [];
  let text = "";
  let answer: string | null = null;
  for (const a of actions) {
    const s = await env.step(a);
    text += a + s.observation;
    if (s.info.action.type === "answer") answer = s.info.action.answer;
    turns.push({ actionText: a, action: s.info.action, observation: s.observation, passages: s.info.passages, sampledTokens: 0, observationTokens: 0, stopReason: "stop" });
  }
  const st = env.stats;
  return { text, traj: { task: t, tokens: [], lossMask: [], logprobs: [], promptLength: 0, turns, answer, searches: st.searches, invalidActions: st.invalidActions, truncated: false } };
}

/** extra_info as the exported parquet carries it. */
function extraOf(t: Task, index = 7): Record<string, unknown> {
  return { index, split: "train", question: t.question, task_id: t.id, kind: t.kind, known: t.known ?? null, evidence_ids: t.evidenceIds ?? [] };
}

beforeAll(async () => {
  plain = await listen(createRewardApp({ reward: DEFAULT, passages: world.passages }), { host: "127.0.0.1", port: 0 });
  composite = await listen(createRewardApp({ reward: COMPOSITE, passages: world.passages }), { host: "127.0.0.1", port: 0 });
  grouped = await listen(createRewardApp({ reward: { weights: { em: 1, needless_search: 1 } } }), { host: "127.0.0.1", port: 0 });
});
afterAll(async () => {
  await Promise.all([plain, composite, grouped].map((s) => s?.close()));
});

describe("POST /reward (veRL compute_score arguments)", () => {
  it("scores a Search-R1 transcript exactly as our rollout's trajectory is scored", async () => {
    const { text, traj } = await episode(task, [`<search> capital of ${country.name} </search>`, `<answer> ${country.capital} </answer>`]);
    for (const [server, reward] of [[plain, DEFAULT], [composite, COMPOSITE]] as const) {
      const r = await post(server, "/reward", { data_source: "arl_world", solution_str: text, ground_truth: { target: task.answers }, extra_info: extraOf(task) });
      expect(r.status).toBe(200);
      const expected = await computeReward({ ...traj, task: { ...task, meta: undefined } }, reward);
      expect(Object.keys(r.body).sort()).toEqual(["answer", "breakdown", "score", "searches", "terms"]);
      expect(r.body.breakdown).toEqual(expected);
      expect(r.body.score).toBe(expected.total);
      expect(r.body.terms).toEqual(Object.fromEntries(expected.terms.map((x) => [x.name, x.value])));
      expect(r.body.answer).toBe(country.capital);
      expect(r.body.searches).toBe(1);
    }
    const d = await post(plain, "/reward", { data_source: "arl_world", solution_str: text, ground_truth: { target: task.answers } });
    expect(d.body.terms).toEqual({ em: 1, format: 1, search_cost: -1, invalid: 0 });
    expect(d.body.score).toBeCloseTo(1 + 0.1 - 0.1, 12);
  });

  it("evidence terms see passage ids: retrieved evidence then a wrong answer is ignored_evidence", async () => {
    const { text } = await episode(task, [`<search> capital of ${country.name} </search>`, "<answer> atlantis </answer>"]);
    const r = await post(composite, "/reward", { data_source: "arl_world", solution_str: text, ground_truth: { target: task.answers }, extra_info: extraOf(task) });
    expect(r.body.terms.em).toBe(0);
    expect(r.body.terms.ignored_evidence).toBe(-1);
    const noIds = await post(composite, "/reward", { data_source: "arl_world", solution_str: text, ground_truth: { target: task.answers } });
    expect(noIds.body.terms.ignored_evidence).toBe(-1); // without evidence_ids: the gold string is in a retrieved passage
  });

  it("reads veRL multi-turn transcripts (<tool_call> / <tool_response>, roles as words)", async () => {
    const result = `Doc 1 (Title: "${country.name}")\nthe capital of ${country.name} is ${country.capital} .\n\nDoc 2 (Title: "${country.name}")\nthe region of ${country.name} is somewhere .`;
    const solution =
      `<think>I should look it up.</think>\n<tool_call>\n{"name": "search", "arguments": {"query_list": ["capital of ${country.name}"]}}\n</tool_call>user\n` +
      `<tool_response>\n${JSON.stringify({ result })}\n</tool_response>\nassistant\n<think>Found it.</think>\n<answer> ${country.capital.toUpperCase()} </answer>`;
    const r = await post(plain, "/reward", { data_source: "searchR1_nq", solution_str: solution, ground_truth: { target: task.answers } });
    expect(r.body).toMatchObject({ answer: country.capital.toUpperCase(), searches: 1, terms: { em: 1, format: 1, search_cost: -1, invalid: 0 } });
    const traj = trajectoryFromText(task, solution);
    expect(traj.turns.map((t) => t.action)).toEqual([searchAction(`capital of ${country.name}`), { type: "answer", answer: country.capital.toUpperCase() }]);
    expect(traj.turns[0].passages?.map((p) => [p.title, p.text])).toEqual([
      [country.name, `the capital of ${country.name} is ${country.capital} .`],
      [country.name, `the region of ${country.name} is somewhere .`],
    ]);
    expect(traj.turns[0].observation.endsWith("</tool_response>\nassistant\n")).toBe(true);
    expect(traj.turns[1].actionText).toBe(`<think>Found it.</think>\n<answer> ${country.capital.toUpperCase()} </answer>`);
    // A tool call that is not a valid search is an invalid action.
    const bad = await post(plain, "/reward", { data_source: "x", solution_str: '<tool_call>{"name": "calc"}</tool_call><answer>no</answer>', ground_truth: "yes" });
    expect(bad.body.terms).toMatchObject({ em: 0, invalid: -1, format: 0, search_cost: 0 });
  });

  it("drops the prompt before <|im_start|>assistant and takes the last <answer>", async () => {
    const prompt = "<|im_start|>user\nAnswer inside <answer> and </answer>. For example, <answer> Beijing </answer>. Question: q<|im_end|>\n";
    const r = await post(plain, "/reward", { data_source: "nq", solution_str: `${prompt}<|im_start|>assistant\n<answer> Beijing </answer> wait <answer> ${country.capital} </answer>`, ground_truth: { target: [country.capital] } });
    expect(r.body.answer).toBe(country.capital);
    expect(r.body.terms.em).toBe(1);
    const none = await post(plain, "/reward", { data_source: "nq", solution_str: "I think it is Paris", ground_truth: ["Paris"] });
    expect(none.body).toMatchObject({ answer: null, searches: 0, terms: { em: 0, format: 0, invalid: -1 } });
  });

  it("accepts ground_truth as {target: [...]}, {target: str}, a string or a list (numbers too)", async () => {
    for (const gt of [{ target: ["Paris", "paris city"] }, { target: "Paris" }, "Paris", ["x", "Paris"], { target: [1, "Paris"] }]) {
      const r = await post(plain, "/reward", { data_source: "d", solution_str: "<answer>paris</answer>", ground_truth: gt, extra_info: null });
      expect(r.status, JSON.stringify(gt)).toBe(200);
      expect(r.body.terms.em).toBe(1);
    }
    const n = await post(plain, "/reward", { data_source: "d", solution_str: "<answer>1945</answer>", ground_truth: { target: [1945] } });
    expect(n.body.terms.em).toBe(1);
  });

  it("malformed requests → 400 {error} naming the field, never 500", async () => {
    const ok = { data_source: "d", solution_str: "<answer>a</answer>", ground_truth: { target: ["a"] } };
    const cases: [unknown, RegExp][] = [
      [{ ...ok, data_source: undefined }, /^data_source: expected a string/],
      [{ ...ok, solution_str: 5 }, /^solution_str: expected a string/],
      [{ ...ok, ground_truth: undefined }, /^ground_truth: expected \{"target": \[answers\]\}/],
      [{ ...ok, ground_truth: { target: [] } }, /^ground_truth: expected/],
      [{ ...ok, ground_truth: { target: [""] } }, /^ground_truth: expected/],
      [{ ...ok, ground_truth: { answers: ["a"] } }, /^ground_truth: expected/],
      [{ ...ok, extra_info: { known: "yes" } }, /^extra_info\.known: expected true, false or null/],
      [{ ...ok, extra_info: { evidence_ids: "a" } }, /^extra_info\.evidence_ids: expected a list of passage ids/],
      [{ ...ok, extra_info: { risk: "extreme" } }, /^extra_info\.risk: expected "high" or "normal"/],
      [{ ...ok, extra_info: [1] }, /^extra_info: /],
      [{ ...ok, surprise: 1 }, /^body: Unrecognized key: "surprise"/],
      ["just a string", /^body: /],
    ];
    for (const [body, reason] of cases) {
      const r = await post(plain, "/reward", body);
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.body.error).toMatch(reason);
    }
    const broken = await post(plain, "/reward", '{"data_source": ', true);
    expect(broken.status).toBe(400);
    expect(broken.body.error).toMatch(/not valid JSON/);
    const batch = await post(plain, "/reward/batch", ok);
    expect(batch).toEqual({ status: 400, body: { error: "body: expected a list of {data_source, solution_str, ground_truth, extra_info}" } });
    const batchItem = await post(plain, "/reward/batch", [ok, { ...ok, solution_str: null }]);
    expect(batchItem.status).toBe(400);
    expect(batchItem.body.error).toMatch(/^1\.solution_str: expected a string/);
    expect(() => createRewardApp({ reward: { weights: { nope: 1 } } })).toThrow(/unknown reward term "nope"/);
  });
});

describe("POST /reward/batch", () => {
  it("scores a list in order; items of the same prompt form the GRPO group of group-relative terms", async () => {
    const one = "<search> a </search>\n\n<information>Doc 1(Title: t) x\n</information>\n\n<answer> Paris </answer>";
    const two = "<search> a </search>\n\n<information></information>\n\n<search> b </search>\n\n<information></information>\n\n<answer> Paris </answer>";
    const gt = { target: ["Paris"] };
    const items = [
      { data_source: "nq", solution_str: one, ground_truth: gt, extra_info: { index: 3, split: "train" } },
      { data_source: "nq", solution_str: two, ground_truth: gt, extra_info: { index: 3, split: "train" } },
      { data_source: "nq", solution_str: two, ground_truth: gt, extra_info: { index: 4, split: "train" } },
    ];
    const r = await post(grouped, "/reward/batch", items);
    expect(r.status).toBe(200);
    expect(r.body.map((x: { searches: number }) => x.searches)).toEqual([1, 2, 2]);
    expect(r.body.map((x: { terms: Record<string, number> }) => x.terms)).toEqual([
      { em: 1, needless_search: 0 },
      { em: 1, needless_search: -1 }, // the group's fewest searches among correct answers is 1
      { em: 1, needless_search: 0 }, // alone in its group: optimum 2
    ]);
    const single = await post(grouped, "/reward", items[1]);
    expect(single.body.terms).toEqual({ em: 1, needless_search: 0 });
    expect(single.body.breakdown.terms[1].explanation).toMatch(/optimum unknown/);
  });
});

describe("parsePassages", () => {
  it("reads Search-R1 and veRL passage lists, with sources and multi-query separators", () => {
    expect(parsePassages("Doc 1(Title: a b) text one\nDoc 2(Title: c , source : forum) text two\n")).toEqual([
      { id: "a b", title: "a b", text: "text one" },
      { id: "c", title: "c", text: "text two", source: "forum" },
    ]);
    expect(parsePassages(JSON.stringify({ result: 'Doc 1 (Title: "X (band)")\nline one\n\nDoc 2 (Title: "Y")\nline two\n---\nDoc 1 (Title: "Z")\nline three' }))).toEqual([
      { id: "X (band)", title: "X (band)", text: "line one" },
      { id: "Y", title: "Y", text: "line two" },
      { id: "Z", title: "Z", text: "line three" },
    ]);
    expect(parsePassages("error: tool search: index offline")).toEqual([]);
  });
});
