/**
 * `arl view` reads every file within bounds and follows a growing file incrementally (src/view/tail.ts,
 * src/view/metricsTable.ts, src/view/limits.ts): a huge line is skipped unread and counted, keys and lines past the
 * limits are dropped and counted, answers keep a bounded size, a run's appended lines are parsed once, a rewritten
 * file is read again from its start. Files are generated here; the folders start as copies of test/fixtures/view.
 */
import { execFileSync } from "node:child_process";
import { appendFileSync, cpSync, mkdtempSync, readFileSync, renameSync, rmSync, statSync, truncateSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it, vi } from "vitest";
import { SourceReader } from "../src/view/sourceReader.ts";
import { discoverSources } from "../src/view/sources.ts";
import { DEFAULT_VIEW_LIMITS } from "../src/view/limits.ts";
import { createViewApp, ViewCatalog } from "../src/view/server.ts";
import { JsonlTail, readCapped, type TailStats } from "../src/view/tail.ts";

const FIXTURES = join(import.meta.dirname, "fixtures", "view");
const tmp = mkdtempSync(join(tmpdir(), "arl-view-limits-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
afterEach(() => vi.restoreAllMocks());

let folders = 0;
/** A copy of a fixture run folder. */
const copyOf = (fixture: string): string => {
  const dir = join(tmp, `${fixture}-${folders++}`);
  cpSync(join(FIXTURES, fixture), dir, { recursive: true });
  return dir;
};
const jsonl = (path: string): Record<string, unknown>[] =>
  readFileSync(path, "utf8")
    .split("\n")
    .filter((l) => l.trim() !== "")
    .map((l) => JSON.parse(l) as Record<string, unknown>);
/** A metrics line of `n` keys `<prefix>0 … <prefix>n-1`. */
const wideLine = (n: number, prefix = "k"): string => `{"stage":"rl","step":99,${Array.from({ length: n }, (_, i) => `"${prefix}${i}":${i % 7}`).join(",")}}\n`;
/** Lengths of the texts given to JSON.parse from now on. */
const parsedLengths = (): number[] => {
  const lengths: number[] = [];
  const parse = JSON.parse.bind(JSON);
  vi.spyOn(JSON, "parse").mockImplementation((text: string, reviver?: (this: unknown, key: string, value: unknown) => unknown) => {
    lengths.push(text.length);
    return parse(text, reviver) as unknown;
  });
  return lengths;
};

describe("JsonlTail", () => {
  it("parses lines across chunk borders (UTF-8 too), skips an over-long line as it streams past, keeps a partial last line aside", () => {
    const file = join(tmp, "tail.jsonl");
    const stats: TailStats = { bytesRead: 0, linesParsed: 0 };
    const tail = new JsonlTail(file, { maxLineBytes: 40, chunkBytes: 7, stats });
    expect(tail.update()).toBeNull(); // missing: nothing
    const long = JSON.stringify({ x: "y".repeat(200) });
    writeFileSync(file, `{"a":"é🙂"}\n\n${long}\nnot json\r\n{"b":2}\r\n{"c":`);
    const first = tail.update()!;
    expect(first).toEqual({ reset: true, rows: [{ a: "é🙂" }, { b: 2 }] });
    expect(tail.damaged).toBe(2); // the over-long line (never parsed) and "not json"
    expect(stats.linesParsed).toBe(3); // the blank line is ignored, the long one never reaches JSON.parse
    expect(tail.update()).toBeNull(); // unchanged
    appendFileSync(file, "3}\n");
    expect(tail.update()).toEqual({ reset: false, rows: [{ c: 3 }] });
    expect(stats.linesParsed).toBe(4);
    // an over-long line still being written is counted once, as soon as it passes the limit
    appendFileSync(file, `{"d":"${"z".repeat(100)}`);
    expect(tail.update()!.rows).toEqual([]);
    expect(tail.damaged).toBe(3);
    appendFileSync(file, `${"z".repeat(100)}"}\n{"e":5}\n`);
    expect(tail.update()!.rows).toEqual([{ e: 5 }]);
    expect(tail.damaged).toBe(3);
    rmSync(file);
    expect(tail.update()).toEqual({ reset: true, rows: [] });
    expect(tail.damaged).toBe(0);
  });

  it("reads a long file over several calls of at most maxReadBytes each", () => {
    const file = join(tmp, "long.jsonl");
    const rows = Array.from({ length: 100 }, (_, i) => ({ i, pad: "p".repeat(i % 13) }));
    writeFileSync(file, rows.map((r) => JSON.stringify(r)).join("\n") + "\n");
    const stats: TailStats = { bytesRead: 0, linesParsed: 0 };
    const tail = new JsonlTail(file, { maxLineBytes: 100, maxReadBytes: 500, stats });
    const got: Record<string, unknown>[] = [];
    let calls = 0;
    for (let u = tail.update(); u !== null; u = tail.update()) {
      calls++;
      got.push(...u.rows);
      expect(stats.bytesRead).toBeLessThanOrEqual(calls * (500 + 3 * 32)); // each call: its share and the fingerprints
    }
    expect(got).toEqual(rows);
    expect(calls).toBe(Math.ceil(statSync(file).size / 500));
    expect(tail.behind).toBe(false);
    // the same in lines: 30 a call (a blank or damaged line counts too)
    appendFileSync(file, "\n" + "junk\n".repeat(9));
    const byLines = new JsonlTail(file, { maxLineBytes: 100, maxReadLines: 30, chunkBytes: 64 });
    const all: Record<string, unknown>[] = [];
    let n = 0;
    for (let u = byLines.update(); u !== null; u = byLines.update(), n++) all.push(...u.rows);
    expect(all).toEqual(rows);
    expect(byLines.damaged).toBe(9);
    expect(n).toBe(Math.ceil(110 / 30));
  });

  it("reads a whole file only under its size limit", () => {
    const file = join(tmp, "capped.json");
    writeFileSync(file, '{"a":1}');
    expect(readCapped(file, 7)).toEqual({ text: '{"a":1}' });
    expect(readCapped(file, 6)).toEqual({ tooBig: 7 });
    expect(readCapped(join(tmp, "missing.json"), 6)).toBeNull();
    expect(readCapped(tmp, 6)).toBeNull(); // a folder
  });
});

describe("arl view's reads are bounded", () => {
  it("a metrics line of megabytes is skipped unread and counted; a wide one keeps its first keys; /api/index stays small", async () => {
    const dir = copyOf("smoke-a");
    const catalog = new ViewCatalog([dir]);
    const app = createViewApp(catalog);
    const small = (await app.inject({ method: "GET", url: "/api/index" })).body.length;
    const huge = wideLine(300_000); // ~3.6 MB, 300 k keys: over the 1 MiB line limit
    const wide = wideLine(20_000, "w"); // ~200 KB, 20 k keys: read, its first maxKeysPerLine keys kept
    expect(huge.length).toBeGreaterThan(3 * DEFAULT_VIEW_LIMITS.maxLineBytes);
    appendFileSync(join(dir, "metrics.jsonl"), huge + wide);
    const lengths = parsedLengths();
    const res = await app.inject({ method: "GET", url: "/api/index" });
    expect(res.statusCode).toBe(200);
    expect(Math.max(0, ...lengths)).toBeLessThanOrEqual(DEFAULT_VIEW_LIMITS.maxLineBytes); // the huge line never materialised
    // grows by the kept keys' names only (≤ maxKeysPerLine short names, listed in metricKeys and in the rl stage's list)
    expect(res.body.length).toBeLessThan(small + 2 * DEFAULT_VIEW_LIMITS.maxKeysPerLine * 12 + 2_000);
    const info = (JSON.parse(res.body) as { sources: { damagedLines: Record<string, number>; cutLines?: Record<string, number>; metricKeys: string[]; stepsByStage: Record<string, number> }[] }).sources[0];
    expect(info.damagedLines).toEqual({ "metrics.jsonl": 1 });
    expect(info.cutLines).toEqual({ "metrics.jsonl": 1 });
    expect(info.metricKeys.filter((k) => k.startsWith("w"))).toHaveLength(DEFAULT_VIEW_LIMITS.maxKeysPerLine);
    expect(info.metricKeys).toContain("w0");
    expect(info.metricKeys.some((k) => /^k\d/.test(k))).toBe(false);
    const metrics = await app.inject({ method: "GET", url: `/api/metrics?id=${encodeURIComponent(discoverSources([dir])[0].id)}` });
    expect(metrics.statusCode).toBe(200);
    expect(metrics.body.length).toBeLessThan(200_000);
    const m = JSON.parse(metrics.body) as { step: number[]; columns: Record<string, (number | null)[]> };
    expect(m.step.at(-1)).toBe(99);
    expect(m.columns.w5.at(-1)).toBe(5);
    await app.close();
  });

  it("keys, stages and lines past the limits are dropped and counted; /api/metrics thins lines to maxCells, each stage's last kept", () => {
    const dir = copyOf("smoke-b");
    const lines: string[] = [];
    for (let i = 0; i < 20; i++) lines.push(JSON.stringify({ stage: "sft", step: i, loss: 1 / (i + 1) }));
    for (let i = 0; i < 2000; i++) lines.push(JSON.stringify({ stage: "rl", step: i, "reward/mean": i / 2000, [`extra/${i}`]: i }));
    lines.push(JSON.stringify({ stage: "x".repeat(500), step: 0, loss: 9 }));
    for (let i = 0; i < 5; i++) lines.push(JSON.stringify({ stage: `s${i}`, step: 0, loss: 9 }));
    writeFileSync(join(dir, "metrics.jsonl"), lines.join("\n") + "\n");
    const limits = { maxMetricKeys: 20, maxStages: 4, maxCells: 4_000, maxRows: 2_020 };
    const r = new SourceReader({ id: "b", label: "b", kind: "run", path: dir }, { limits });
    const info = r.info();
    expect(info.metricKeys).toHaveLength(20); // loss, reward/mean and the first 18 extra/ keys
    expect(info.stages).toEqual(["sft", "rl"]); // lines past maxRows are dropped: the odd stages never came
    expect(info.stepsByStage).toEqual({ sft: 20, rl: 2000 });
    expect(info.cutLines).toEqual({ "metrics.jsonl": 2000 - 18 + 6 }); // rl lines whose new key was dropped, lines past maxRows
    const m = r.metrics();
    expect(m.thinned).toEqual({ rows: 2020, sent: m.step.length });
    expect(m.step.length * Object.keys(m.columns).length).toBeLessThanOrEqual(limits.maxCells + 2 * 20);
    expect(m.stage.filter((s) => s === "sft").length).toBeGreaterThan(1); // the small stage is thinned, not lost
    const rlSteps = m.step.filter((_, i) => m.stage[i] === "rl");
    expect(rlSteps.at(-1)).toBe(1999); // the newest step is always sent
    expect(m.columns["reward/mean"][m.step.length - 1]).toBe(1999 / 2000);
    // stages: a long name or one past maxStages reads "?"
    const s = new SourceReader({ id: "b", label: "b", kind: "run", path: dir }, { limits: { maxStages: 4 } }).info();
    expect(s.stages).toEqual(["sft", "rl", "?", "s0"]);
    expect(s.stepsByStage["?"]).toBe(5); // the long name and s1 … s4
  });

  it("a growing metrics.jsonl is parsed incrementally: only the appended bytes are read, a torn last line waits", () => {
    const dir = copyOf("smoke-a");
    const file = join(dir, "metrics.jsonl");
    const rows = jsonl(file);
    const base = rows.find((x) => x.stage === "rl")!;
    const body = Array.from({ length: 5000 }, (_, i) => JSON.stringify({ ...base, step: 100 + i })).join("\n") + "\n";
    appendFileSync(file, body);
    const stats: TailStats = { bytesRead: 0, linesParsed: 0 };
    const r = new SourceReader({ id: "a", label: "a", kind: "run", path: dir }, { stats });
    const detectorLines = jsonl(join(dir, "detectors.jsonl")).length;
    const lengths = parsedLengths();
    expect(r.info().stepsByStage.rl).toBe(rows.filter((x) => x.stage === "rl").length + 5000);
    const firstParse = lengths.length;
    const first = { ...stats };
    const before = { ...stats };
    const added = JSON.stringify({ ...base, step: 9000 }) + "\n";
    appendFileSync(file, added.slice(0, 25)); // the trainer is mid-append
    r.info();
    appendFileSync(file, added.slice(25));
    const info = r.info();
    expect(info.stepsByStage.rl).toBe(rows.filter((x) => x.stage === "rl").length + 5001);
    expect(lengths.length - firstParse).toBe(1); // JSON.parse saw the new line only
    expect(first.linesParsed).toBe(rows.length + 5000 + detectorLines); // each line once
    expect(stats.linesParsed - before.linesParsed).toBe(1);
    expect(stats.bytesRead - before.bytesRead).toBeLessThan(added.length + 8 * 32); // the new bytes and a few fingerprint bytes
    expect(r.metrics().step.at(-1)).toBe(9000);
    const m = r.metrics();
    expect(m.columns["reward/mean"].at(-1)).toBe(base["reward/mean"]);
    // a reader with a small read budget catches up over several polls; the version moves as it does
    const slow = new SourceReader({ id: "a", label: "a", kind: "run", path: dir }, { limits: { maxReadBytes: 200_000 } });
    const versions: string[] = [];
    for (let poll = 0; poll < 50; poll++) {
      const v = slow.info().version;
      if (versions.at(-1) === v) break; // caught up
      versions.push(v);
    }
    expect(statSync(file).size).toBeGreaterThan(2 * 200_000);
    expect(versions.length).toBeGreaterThan(2); // one version per 200 KB read
    expect(slow.metrics().step).toEqual(r.metrics().step);
  });

  it("a file of more lines than one request reads is read over several polls (the page is told to poll); an export reads it all", async () => {
    const dir = copyOf("smoke-b");
    const n = DEFAULT_VIEW_LIMITS.maxReadLines + 50_000;
    writeFileSync(join(dir, "metrics.jsonl"), '{"stage":"rl","x":1}\n'.repeat(n));
    const catalog = new ViewCatalog([dir]);
    const first = catalog.index(0);
    expect(first.sources[0].stepsByStage.rl).toBe(DEFAULT_VIEW_LIMITS.maxReadLines);
    expect(first.pollMs).toBeGreaterThan(0); // polling is off, but the rest is still to come
    const second = catalog.index(0);
    expect(second.sources[0].stepsByStage.rl).toBe(n);
    expect(second.pollMs).toBe(0);
    expect(second.sources[0].version).not.toBe(first.sources[0].version);
    const exported = new ViewCatalog([dir]).exportData();
    expect(exported.index.sources[0].stepsByStage.rl).toBe(n);
  });

  it("a truncated, rewritten, replaced or removed file is read again from its start", () => {
    const dir = copyOf("smoke-b");
    const file = join(dir, "metrics.jsonl");
    const write = (n: number, seed: number): string => {
      const text = Array.from({ length: n }, (_, i) => JSON.stringify({ stage: "rl", step: i, "reward/mean": seed + i })).join("\n") + "\n";
      writeFileSync(file, text);
      return text;
    };
    const r = new SourceReader({ id: "b", label: "b", kind: "run", path: dir });
    const values = (): (number | null)[] => r.metrics().columns["reward/mean"] ?? [];
    write(10, 0);
    appendFileSync(file, "garbage\n");
    expect(values()).toEqual(Array.from({ length: 10 }, (_, i) => i));
    expect(r.info().damagedLines).toEqual({ "metrics.jsonl": 1 });
    const ino = statSync(file).ino;
    write(30, 1000); // the same inode, longer: not an append
    expect(statSync(file).ino).toBe(ino);
    expect(values()).toEqual(Array.from({ length: 30 }, (_, i) => 1000 + i));
    expect(r.info().damagedLines).toEqual({});
    truncateSync(file, 0);
    appendFileSync(file, Array.from({ length: 3 }, (_, i) => JSON.stringify({ stage: "rl", step: i, "reward/mean": 7 })).join("\n") + "\n");
    expect(values()).toEqual([7, 7, 7]);
    // a rewrite of the same size (the mtime moved on): read again
    const same = readFileSync(file, "utf8").replaceAll('"reward/mean":7', '"reward/mean":8');
    writeFileSync(file, same);
    utimesSync(file, new Date(), new Date(Date.now() + 5_000));
    expect(values()).toEqual([8, 8, 8]);
    // replaced by a rename (a new inode), as a writer that writes a temp file would
    writeFileSync(join(dir, "next.jsonl"), JSON.stringify({ stage: "sft", step: 0, loss: 2 }) + "\n");
    renameSync(join(dir, "next.jsonl"), file);
    expect(r.info().stages).toEqual(["sft"]);
    expect(r.metrics().columns.loss).toEqual([2]);
    rmSync(file);
    expect(r.info().stages).toEqual([]);
  });

  it("samples, summary, config, tokenizer, detectors and rollouts are bounded too; what is left out is counted", () => {
    const dir = copyOf("smoke-a");
    const step = join(dir, "samples", "step-1.jsonl");
    const lines = readFileSync(step, "utf8").split("\n").filter((l) => l !== "");
    const longest = Math.max(...lines.map((l) => Buffer.byteLength(l)));
    // one episode made longer than the samples line limit, and the file longer than its size limit
    const fat = JSON.stringify({ ...(JSON.parse(lines[1]) as object), question: "q".repeat(longest) });
    writeFileSync(step, [lines[0], fat, ...lines.slice(2)].join("\n") + "\n");
    writeFileSync(join(dir, "summary.json"), JSON.stringify({ pad: "s".repeat(5_000) }));
    const firings = readFileSync(join(dir, "detectors.jsonl"), "utf8");
    appendFileSync(join(dir, "detectors.jsonl"), firings.repeat(4));
    const limits = { maxSampleLineBytes: longest + 10, maxSampleFileBytes: statSync(step).size - 100, maxJsonFileBytes: 4_000, maxFirings: 3, maxTokenizerBytes: 1_000 };
    const r = new SourceReader({ id: "a", label: "a", kind: "run", path: dir }, { limits });
    const p = r.samplesOf("step-1");
    expect(p.damagedLines).toBe(1);
    expect(p.unreadBytes).toBeGreaterThanOrEqual(100);
    expect(p.episodes.map((e) => e.question)).toEqual([lines[0], ...lines.slice(2, -1)].map((l) => (JSON.parse(l) as { question: string }).question));
    expect(Object.keys(p.vocab)).toEqual([]); // tokenizer.json over its limit: ids shown, not read
    const m = r.metrics();
    expect(m.summary).toBeNull();
    expect(m.detectors).toHaveLength(3);
    const info = r.info();
    expect(info.damagedLines).toEqual({ "samples/step-1.jsonl": 1, "summary.json": 1 });
    expect(info.cutLines).toEqual({ "detectors.jsonl": jsonl(join(dir, "detectors.jsonl")).length - 3 });
    // a config over its limit is not read (counted): no detector replay, only the firings' onsets
    writeFileSync(join(dir, "config.yaml"), readFileSync(join(dir, "config.yaml"), "utf8") + `# ${"c".repeat(DEFAULT_VIEW_LIMITS.maxConfigBytes)}\n`);
    expect(r.detectorSteps().answer_avoidance).toEqual([2]);
    expect(r.info().damagedLines["config.yaml"]).toBe(1);
    // a .lock that is not a pid is not a live run
    writeFileSync(join(dir, ".lock"), `${process.ppid}${" ".repeat(100)}`);
    expect(r.info().live).toBe(false);
  });

  it("a FIFO in place of a run file or the .lock, and JSON nested two million deep, are refused without blocking or a 500", async () => {
    // Issue 29's outside probe: a FIFO put where metrics.jsonl was hung every request (a plain open waits for a
    // writer); a summary.json of '{"a":' × 2 M answered 500 "Maximum call stack size exceeded".
    const dir = copyOf("smoke-a");
    renameSync(join(dir, "metrics.jsonl"), join(dir, "metrics.moved"));
    execFileSync("mkfifo", [join(dir, "metrics.jsonl")]);
    rmSync(join(dir, ".lock"), { force: true });
    execFileSync("mkfifo", [join(dir, ".lock")]);
    const deep = 2_000_000;
    writeFileSync(join(dir, "summary.json"), `${'{"a":'.repeat(deep)}1${"}".repeat(deep)}`);
    appendFileSync(join(dir, "detectors.jsonl"), `${"[".repeat(300_000)}${"]".repeat(300_000)}\n`);
    const app = createViewApp(new ViewCatalog([dir]));
    try {
      const index = await app.inject({ method: "GET", url: "/api/index" });
      expect(index.statusCode).toBe(200);
      const id = (index.json() as { sources: { id: string }[] }).sources[0].id;
      const metrics = await app.inject({ method: "GET", url: `/api/metrics?id=${encodeURIComponent(id)}` });
      expect(metrics.statusCode).toBe(200);
      expect((metrics.json() as { summary: unknown }).summary).toBeNull();
      const again = await app.inject({ method: "GET", url: "/api/index" });
      expect(again.statusCode).toBe(200);
      expect((again.json() as { sources: { live?: boolean }[] }).sources[0].live ?? false).toBe(false);
    } finally {
      await app.close();
    }
  });

  it("an --agent run's rollouts.jsonl is read incrementally: a new evaluation stage appears, texts are cut", () => {
    const dir = copyOf("smoke-agent");
    const stats: TailStats = { bytesRead: 0, linesParsed: 0 };
    const r = new SourceReader({ id: "g", label: "g", kind: "run", path: dir }, { stats, limits: { maxTextChars: 50 } });
    const stages = r.sampleFiles().filter((f) => f.from === "rollouts").map((f) => f.name);
    const parsed = stats.linesParsed;
    appendFileSync(join(dir, "rollouts.jsonl"), JSON.stringify({ stage: "eval-extra", step: 0, task: `t:${"x".repeat(500)}`, status: "rewarded", reward: 1, calls: 2 }) + "\n");
    expect(r.sampleFiles().filter((f) => f.from === "rollouts").map((f) => f.name)).toEqual([...stages, "eval-extra"]);
    expect(stats.linesParsed - parsed).toBe(1);
    const e = r.samplesOf("eval-extra").episodes;
    expect(e).toHaveLength(1);
    expect(e[0].task.length).toBeLessThanOrEqual(51);
    expect(e[0].outcome).toBe("success");
  });
});
