import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { Trajectory } from "../src/core/types.ts";
import { computeReward } from "../src/reward/compose.ts";
import { judgeUserMessage, makeJudge, OpenAIJudge, parseJudgeScore } from "../src/reward/judge.ts";
import type { JudgeOptions } from "../src/reward/types.ts";
import { handTrajectory } from "./trajectory-helpers.ts";

/** One request the fake endpoint received. */
interface Seen {
  path: string;
  authorization: string | undefined;
  body: unknown;
}

/**
 * A fake OpenAI-compatible endpoint. The mode is the first path segment of the base URL:
 * `ok` (content "Score: 0.8", usage 100 prompt + 10 completion tokens), `flaky<N>` (HTTP 500 for its first N
 * requests, then as `ok`), `fail` (always HTTP 500 "boom"), `garbage` (200 with a reply holding no number in
 * [0, 1]), `hang` (never answers).
 */
let server: Server;
let port = 0;
const seen: Seen[] = [];
const served = new Map<string, number>();

function reply(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(typeof body === "string" ? body : JSON.stringify(body));
}

function completion(content: string): unknown {
  return { choices: [{ index: 0, message: { role: "assistant", content } }], usage: { prompt_tokens: 100, completion_tokens: 10 } };
}

function handle(req: IncomingMessage, res: ServerResponse): void {
  let raw = "";
  req.on("data", (c: Buffer) => (raw += c.toString()));
  req.on("end", () => {
    const path = req.url ?? "";
    seen.push({ path, authorization: req.headers.authorization, body: JSON.parse(raw) as unknown });
    const mode = path.split("/")[1];
    const n = (served.get(mode) ?? 0) + 1;
    served.set(mode, n);
    if (!path.endsWith("/v1/chat/completions")) return reply(res, 404, { error: "not found" });
    const flaky = /^flaky(\d+)$/.exec(mode);
    if (mode === "ok" || (flaky !== null && n > Number(flaky[1]))) return reply(res, 200, completion("Score: 0.8"));
    if (mode === "fail" || flaky !== null) return reply(res, 500, "boom");
    if (mode === "garbage") return reply(res, 200, completion("an excellent answer, 10 out of 10!"));
    if (mode === "hang") return; // never answers
    reply(res, 400, { error: `unknown mode ${mode}` });
  });
}

beforeAll(async () => {
  server = createServer(handle);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  port = (server.address() as AddressInfo).port;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});
beforeEach(() => {
  seen.length = 0;
  served.clear();
});

function opts(mode: string, over: Partial<JudgeOptions> = {}): JudgeOptions {
  return {
    baseUrl: `http://127.0.0.1:${port}/${mode}/v1`,
    model: "judge-model",
    rubric: "Score the prediction from 0 to 1.",
    pricePerInputToken: 0.001,
    pricePerOutputToken: 0.002,
    ...over,
  };
}

function traj(answer: string | null): Trajectory {
  return handTrajectory({ id: "t", question: "Capital of France?", answers: ["Paris"], kind: "single-hop" }, { answer });
}

describe("parseJudgeScore: the first number in [0, 1]", () => {
  const table: [string, number][] = [
    ["0.8", 0.8],
    ["Score: 1", 1],
    ["1.0", 1],
    [".5", 0.5],
    ["0", 0],
    ["7/10, i.e. 0.7", 0.7], // 7 and 10 are out of range, 0.7 is the first in [0, 1]
    ["-0.5 then 0.25", 0.25],
    ["score = 0.75.", 0.75],
  ];
  it.each(table)("%j → %d", (text, score) => expect(parseJudgeScore(text)).toBe(score));
  it("a reply with no number in [0, 1] is an error", () => {
    expect(() => parseJudgeScore("excellent")).toThrow('judge reply has no number in [0, 1]: "excellent"');
    expect(() => parseJudgeScore("8 out of 10")).toThrow(/no number in \[0, 1\]/);
  });
});

describe("OpenAIJudge", () => {
  it("posts the OpenAI chat request, parses the score and prices the usage", async () => {
    const judge = new OpenAIJudge(opts("ok"));
    const r = await judge.score("Capital of France?", ["Paris", "City of Paris"], "paris");
    // cost = 100 × 0.001 + 10 × 0.002 = 0.12
    expect(r.score).toBe(0.8);
    expect(r.reason).toBe("Score: 0.8");
    expect(r.cost).toBeCloseTo(0.12, 12);
    expect(seen).toHaveLength(1);
    expect(seen[0].path).toBe("/ok/v1/chat/completions");
    expect(seen[0].authorization).toBeUndefined();
    expect(seen[0].body).toEqual({
      model: "judge-model",
      messages: [
        { role: "system", content: "Score the prediction from 0 to 1." },
        { role: "user", content: "question: Capital of France?\ngold answers: Paris | City of Paris\nprediction: paris" },
      ],
      temperature: 0,
    });
    expect(judgeUserMessage("q", ["a"], "p")).toBe("question: q\ngold answers: a\nprediction: p");
    expect({ calls: judge.calls, cacheHits: judge.cacheHits, failures: judge.failures, retries: judge.retries }).toEqual({
      calls: 1,
      cacheHits: 0,
      failures: 0,
      retries: 0,
    });
    expect(judge.totalCost).toBeCloseTo(0.12, 12);
  });

  it("cost is 0 without prices", async () => {
    const judge = new OpenAIJudge(opts("ok", { pricePerInputToken: undefined, pricePerOutputToken: undefined }));
    expect((await judge.score("q", ["a"], "p")).cost).toBe(0);
  });

  it("caches: a repeated call makes no HTTP request and costs 0; a different prediction does call", async () => {
    const judge = new OpenAIJudge(opts("ok"));
    await judge.score("q", ["a"], "p");
    const again = await judge.score("q", ["a"], "p");
    expect(again).toEqual({ score: 0.8, reason: "Score: 0.8", cost: 0 });
    expect(seen).toHaveLength(1);
    expect(judge.cacheHits).toBe(1);
    await judge.score("q", ["a"], "other");
    expect(seen).toHaveLength(2);
    expect(judge.calls).toBe(2);
    // 2 paid calls × 0.12
    expect(judge.totalCost).toBeCloseTo(0.24, 12);
  });

  it("concurrent identical calls share one request", async () => {
    const judge = new OpenAIJudge(opts("ok"));
    const [a, b] = await Promise.all([judge.score("q", ["a"], "p"), judge.score("q", ["a"], "p")]);
    expect(seen).toHaveLength(1);
    expect(a.cost + b.cost).toBeCloseTo(0.12, 12);
    expect(judge.cacheHits).toBe(1);
  });

  it("persists the cache to a JSON file and loads it at construction (no HTTP call, cost 0)", async () => {
    const dir = mkdtempSync(join(tmpdir(), "arl-judge-"));
    try {
      const file = join(dir, "sub", "judge-cache.json");
      const first = new OpenAIJudge(opts("ok"), file);
      await first.score("q", ["a"], "p");
      const stored = JSON.parse(readFileSync(file, "utf8")) as Record<string, { score: number; reason: string }>;
      expect(Object.values(stored)).toEqual([{ score: 0.8, reason: "Score: 0.8" }]);
      expect(Object.keys(stored)[0]).toMatch(/^[0-9a-f]{64}$/);

      const second = new OpenAIJudge(opts("ok"), file);
      expect(second.cacheSize).toBe(1);
      expect(await second.score("q", ["a"], "p")).toEqual({ score: 0.8, reason: "Score: 0.8", cost: 0 });
      expect(seen).toHaveLength(1);
      expect(second.calls).toBe(0);
      // another model or rubric is another key
      await new OpenAIJudge(opts("ok", { model: "other-model" }), file).score("q", ["a"], "p");
      expect(seen).toHaveLength(2);

      const bad = join(dir, "bad.json");
      writeFileSync(bad, "{not json");
      expect(() => new OpenAIJudge(opts("ok"), bad)).toThrow(`judge cache ${bad}: not valid JSON`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("retries failed calls: 2 failures then success with maxRetries 2", async () => {
    const judge = new OpenAIJudge(opts("flaky2"));
    const r = await judge.score("q", ["a"], "p");
    expect(r.score).toBe(0.8);
    expect(seen).toHaveLength(3);
    expect({ calls: judge.calls, retries: judge.retries, failures: judge.failures }).toEqual({ calls: 3, retries: 2, failures: 0 });
    // failed attempts cost nothing: one paid call
    expect(r.cost).toBeCloseTo(0.12, 12);
  });

  it("throws the last error after the retries are spent", async () => {
    const judge = new OpenAIJudge(opts("flaky3"));
    await expect(judge.score("q", ["a"], "p")).rejects.toThrow("judge failed after 3 attempts: HTTP 500: boom");
    expect(seen).toHaveLength(3);
    expect({ calls: judge.calls, retries: judge.retries, failures: judge.failures }).toEqual({ calls: 3, retries: 2, failures: 1 });
    const once = new OpenAIJudge(opts("fail", { maxRetries: 0 }));
    await expect(once.score("q", ["a"], "p")).rejects.toThrow("judge failed after 1 attempts: HTTP 500: boom");
    expect(seen).toHaveLength(4);
  });

  it("an unparseable reply is retried, then an error", async () => {
    const judge = new OpenAIJudge(opts("garbage", { maxRetries: 1 }));
    await expect(judge.score("q", ["a"], "p")).rejects.toThrow(
      'judge failed after 2 attempts: judge reply has no number in [0, 1]: "an excellent answer, 10 out of 10!"',
    );
    expect(seen).toHaveLength(2);
    expect(judge.cacheSize).toBe(0);
  });

  it("a call past timeoutMs is aborted and retried", async () => {
    const judge = new OpenAIJudge(opts("hang", { timeoutMs: 100, maxRetries: 1 }));
    await expect(judge.score("q", ["a"], "p")).rejects.toThrow("judge failed after 2 attempts: timeout after 100 ms");
    expect(judge.calls).toBe(2);
  });

  it("sends Authorization: Bearer from apiKeyEnv", async () => {
    const name = "ARL_TEST_JUDGE_KEY";
    process.env[name] = "sk-test-123";
    try {
      await new OpenAIJudge(opts("ok", { apiKeyEnv: name })).score("q", ["a"], "p");
      expect(seen[0].authorization).toBe("Bearer sk-test-123");
    } finally {
      delete process.env[name];
    }
    // unset variable → no header
    await new OpenAIJudge(opts("ok", { apiKeyEnv: name })).score("q", ["a"], "p2");
    expect(seen[1].authorization).toBeUndefined();
  });

  it("rejects invalid options, naming the field", () => {
    expect(() => new OpenAIJudge(opts("ok", { model: " " }))).toThrow("judge.model must be a non-empty string");
    expect(() => new OpenAIJudge(opts("ok", { maxRetries: -1 }))).toThrow("judge.maxRetries must be an integer ≥ 0, got -1");
    expect(() => new OpenAIJudge(opts("ok", { timeoutMs: 0 }))).toThrow("judge.timeoutMs must be a positive number of ms, got 0");
    expect(() => new OpenAIJudge(opts("ok", { pricePerInputToken: -1 }))).toThrow("judge.pricePerInputToken must be a finite number ≥ 0");
    expect(makeJudge({})).toBeUndefined();
    expect(makeJudge({ judge: opts("ok") })).toBeInstanceOf(OpenAIJudge);
  });
});

describe("judge term through computeReward", () => {
  it("a judge failing after its retries is recorded as term.error (value 0); the trajectory is still rewarded", async () => {
    const judge = new OpenAIJudge(opts("fail"));
    const r = await computeReward(traj("Paris"), { weights: { em: 1, judge: 1 } }, { judge });
    // em 1·1 + judge 0·1 = 1
    expect(r.total).toBe(1);
    expect(r.terms[1]).toMatchObject({ name: "judge", value: 0, weight: 1, error: "judge failed after 3 attempts: HTTP 500: boom" });
    expect(r.cost).toBeUndefined();
    expect(judge.failures).toBe(1);
  });

  it("the judge's cost is counted on RewardBreakdown.cost, and 0 on a cache hit", async () => {
    const judge = new OpenAIJudge(opts("ok"));
    // em 1·1 + judge 0.8·0.5 = 1.4; cost 0.12
    const r = await computeReward(traj("Paris"), { weights: { em: 1, judge: 0.5 } }, { judge });
    expect(r.total).toBeCloseTo(1.4, 12);
    expect(r.cost).toBeCloseTo(0.12, 12);
    expect(r.terms[1].explanation).toBe('judge score 0.8 for "Paris": Score: 0.8');
    const again = await computeReward(traj("Paris"), { weights: { em: 1, judge: 0.5 } }, { judge });
    expect(again.total).toBeCloseTo(1.4, 12);
    expect(again.cost).toBeUndefined();
    // a null answer never reaches the endpoint
    const none = await computeReward(traj(null), { weights: { judge: 1 } }, { judge });
    expect(none.total).toBe(0);
    expect(seen).toHaveLength(1);
  });
});
