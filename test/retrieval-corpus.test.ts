import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { loadCorpus, loadQA, splitContents } from "../src/retrieval/corpus.ts";

const tmp = mkdtempSync(join(tmpdir(), "arl-corpus-"));
function file(name: string, text: string): string {
  const p = join(tmp, name);
  writeFileSync(p, text);
  return p;
}

describe("loadCorpus", () => {
  it("loads wiki-18 passages with unquoted titles", async () => {
    const ps = await loadCorpus("data/wiki18-sample-1000.jsonl", { limit: 2 });
    expect(ps).toHaveLength(2);
    expect(ps[0].id).toBe("0");
    expect(ps[0].title).toBe("Evan Morris");
    expect(ps[0].text.startsWith("Evan Morris Evan L. Morris")).toBe(true);
    expect(splitContents('"A"\nb\nc')).toEqual({ title: "A", text: "b\nc" });
  });
  it("errors name the file, line and field", async () => {
    const bad = file("bad.jsonl", '{"id": "1", "contents": "\\"T\\"\\nx"}\n\n{not json}\n');
    await expect(loadCorpus(bad)).rejects.toThrow(`${bad}:3: invalid JSON`);
    const missing = file("missing.jsonl", '{"id": "1", "text": "x"}\n');
    await expect(loadCorpus(missing)).rejects.toThrow(`${missing}:1: missing field "contents"`);
    await expect(loadCorpus("/no/such/corpus.jsonl")).rejects.toThrow("/no/such/corpus.jsonl: no such file");
  });
});

describe("loadQA", () => {
  it("NQ-open", async () => {
    const ts = await loadQA("data/nq-open-dev.jsonl");
    expect(ts).toHaveLength(3610);
    expect(ts[0]).toMatchObject({ id: "nq:0", kind: "nq", question: "when was the last time anyone was on the moon" });
    expect(ts[0].answers).toEqual(["14 December 1972 UTC", "December 1972"]);
    expect(ts[0].known).toBeUndefined();
  });
  it("Bamboogle", async () => {
    const ts = await loadQA("data/bamboogle.jsonl");
    expect(ts).toHaveLength(125);
    expect(ts[0]).toMatchObject({ id: "bamboogle:1", kind: "bamboogle", answers: ["james madison"] });
  });
  it("FlashRAG and limit", async () => {
    const f = file("flash.jsonl", '{"id": "test_0", "question": "q0 ?", "golden_answers": ["a", "b"]}\n{"id": "test_1", "question": "q1 ?", "golden_answers": ["c"]}\n');
    const ts = await loadQA(f, { limit: 1 });
    expect(ts).toEqual([{ id: "qa:test_0", question: "q0 ?", answers: ["a", "b"], kind: "qa", evidenceIds: [], meta: { source: "flash.jsonl" } }]);
    expect((await loadQA(f, { kind: "nq" }))[1].id).toBe("nq:test_1");
  });
  it("errors name the field", async () => {
    const f = file("noq.jsonl", '{"answer": ["x"]}\n');
    await expect(loadQA(f)).rejects.toThrow(`${f}:1: missing field "question"`);
    const g = file("noa.jsonl", '{"question": "q"}\n');
    await expect(loadQA(g)).rejects.toThrow(/missing field "golden_answers" or "answer"/);
    const h = file("emptya.jsonl", '{"question": "q", "answer": []}\n');
    await expect(loadQA(h)).rejects.toThrow(/field "answer" must be/);
  });
});
