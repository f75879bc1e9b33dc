import { spawn } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Passage } from "../src/core/types.ts";
import { BM25Index } from "../src/retrieval/bm25.ts";
import { loadCorpus, splitContents } from "../src/retrieval/corpus.ts";
import { listen, type RunningServer } from "../src/http/server.ts";
import { MAX_QUERIES, createRetrievalApp, passageContents } from "../src/serve/retrieval.ts";

const passages: Passage[] = [
  { id: "0", title: "Paris", text: "Paris is the capital of France." },
  { id: "1", title: "Berlin", text: "Berlin is the capital of Germany." },
  { id: "2", title: "Rhine", text: "The Rhine flows through Germany and the Netherlands." },
  { id: "3", title: "Loire", text: "The Loire is the longest river in France." },
];
const index = new BM25Index(passages);
let server: RunningServer;

/** POSTs JSON (or a raw string) to the server; returns status and parsed body. */
async function post(path: string, body: unknown, raw = false): Promise<{ status: number; body: any }> {
  const res = await fetch(`${server.url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: raw ? (body as string) : JSON.stringify(body),
  });
  return { status: res.status, body: await res.json() };
}

beforeAll(async () => {
  server = await listen(createRetrievalApp(index, { defaultTopk: 3 }), { host: "127.0.0.1", port: 0 });
});
afterAll(async () => server?.close());

describe("POST /retrieve (Search-R1 retrieval_server.py shapes)", () => {
  it("return_scores: true → [[{document: {id, contents}, score}]] per query, BM25 order", async () => {
    const r = await post("/retrieve", { queries: ["capital of France", "river Germany"], topk: 2, return_scores: true });
    expect(r.status).toBe(200);
    const expected = ["capital of France", "river Germany"].map((q) =>
      index.search(q, 2).map((p) => ({ document: { id: p.id, contents: `"${p.title}"\n${p.text}` }, score: p.score })),
    );
    expect(r.body).toEqual({ result: expected });
    expect(r.body.result[0][0].document).toEqual({ id: "0", contents: '"Paris"\nParis is the capital of France.' });
    expect(r.body.result[0][0].score).toBeGreaterThan(r.body.result[0][1].score);
    expect(r.body.result[1]).toHaveLength(2);
  });

  it("return_scores false or absent → bare documents [[{id, contents}]]", async () => {
    const r = await post("/retrieve", { queries: ["capital of Germany"], topk: 1, return_scores: false });
    expect(r.body).toEqual({ result: [[{ id: "1", contents: '"Berlin"\nBerlin is the capital of Germany.' }]] });
    const absent = await post("/retrieve", { queries: ["capital of Germany"], topk: 1 });
    expect(absent.body).toEqual(r.body);
  });

  it("topk missing, null or 0 → the server default (Search-R1 `if not request.topk`); no-hit queries → []", async () => {
    for (const topk of [undefined, null, 0]) {
      const r = await post("/retrieve", { queries: ["capital France Germany river"], topk });
      expect(r.body.result[0]).toHaveLength(3);
    }
    const none = await post("/retrieve", { queries: ["zebra", "", "?!"] });
    expect(none.body).toEqual({ result: [[], [], []] });
  });

  it("contents round-trips through the wiki-18 loader's splitContents", () => {
    for (const p of passages) expect(splitContents(passageContents(p))).toEqual({ title: p.title, text: p.text });
  });

  it("malformed requests → 400 {error} naming the field, never 500", async () => {
    const cases: [unknown, RegExp][] = [
      [{ topk: 3 }, /^queries: expected a list of query strings/],
      [{ queries: "capital" }, /^queries: expected a list of query strings/],
      [{ queries: [] }, /^queries: expected at least one query/],
      [{ queries: ["a", 3] }, /^queries\.1: /],
      [{ queries: ["a"], topk: -1 }, /^topk: expected an integer ≥ 1/],
      [{ queries: ["a"], topk: 2.5 }, /^topk: expected an integer ≥ 1/],
      [{ queries: ["a"], topk: "3" }, /^topk: expected an integer ≥ 1/],
      [{ queries: ["a"], topk: 101 }, /^topk: expected an integer ≤ 100/],
      [{ queries: ["a"], return_scores: "yes" }, /^return_scores: expected true or false/],
      [{ queries: Array(MAX_QUERIES + 1).fill("a") }, /^queries: at most 1024 queries/],
      [[1, 2], /^body: /],
    ];
    for (const [body, reason] of cases) {
      const r = await post("/retrieve", body);
      expect(r.status, JSON.stringify(body).slice(0, 60)).toBe(400);
      expect(r.body.error).toMatch(reason);
    }
    const broken = await post("/retrieve", "{queries: [", true);
    expect(broken.status).toBe(400);
    expect(broken.body.error).toMatch(/not valid JSON/);
    const res = await fetch(`${server.url}/retrieve`, { method: "POST", headers: { "content-type": "text/plain" }, body: "hello" });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: string }).error).toMatch(/^body: .*expected object/);
    const health = await fetch(`${server.url}/healthz`);
    expect(await health.json()).toEqual({ status: "ok", passages: 4 });
  });

  it("rejects a bad default topk", () => {
    expect(() => createRetrievalApp(index, { defaultTopk: 0 })).toThrow(/defaultTopk must be an integer in \[1, 100\]/);
  });
});

describe("arl serve retrieval (CLI smoke)", () => {
  it("prints its URL, answers /retrieve over a --corpus file, stops on SIGTERM", async () => {
    const dir = mkdtempSync(join(tmpdir(), "arl-retrieval-"));
    const corpus = join(dir, "corpus.jsonl");
    writeFileSync(corpus, passages.map((p) => JSON.stringify({ id: p.id, contents: passageContents(p) })).join("\n") + "\n");
    expect(await loadCorpus(corpus)).toEqual(passages);
    const child = spawn(process.execPath, ["bin/arl.mjs", "serve", "retrieval", "--port", "0", "--corpus", corpus], { stdio: ["ignore", "pipe", "pipe"] });
    try {
      const url = await new Promise<string>((resolve, reject) => {
        let out = "";
        const timer = setTimeout(() => reject(new Error(`no URL printed: ${out}`)), 15_000);
        child.stdout.on("data", (d: Buffer) => {
          out += d.toString();
          const m = /(http:\/\/127\.0\.0\.1:\d+)\/retrieve/.exec(out);
          if (m) {
            clearTimeout(timer);
            resolve(m[1]);
          }
        });
        child.stderr.on("data", (d: Buffer) => (out += d.toString()));
        child.on("exit", (code) => reject(new Error(`exited ${code}: ${out}`)));
      });
      const res = await fetch(`${url}/retrieve`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ queries: ["longest river"], topk: 1 }) });
      expect(await res.json()).toEqual({ result: [[{ id: "3", contents: '"Loire"\nThe Loire is the longest river in France.' }]] });
      const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
      child.kill("SIGTERM");
      expect(await exited).toBe(0);
    } finally {
      if (child.exitCode === null) child.kill("SIGKILL");
    }
  }, 20_000);
});
