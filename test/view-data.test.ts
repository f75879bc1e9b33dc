/**
 * `arl view`'s reading of run folders (src/view/data.ts) and its HTTP server (src/view/server.ts), without a
 * browser (test/view-browser.test.ts drives the page). Fixtures: real `arl train --smoke` / `arl lab --quick`
 * folders (test/fixtures/view/README.md).
 */
import { spawnSync } from "node:child_process";
import { appendFileSync, cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { grpoAdvantages } from "../src/algo/advantages.ts";
import { emCheck } from "../src/reward/em.ts";
import { SourceReader, discoverSources, parseJsonLines } from "../src/view/data.ts";
import { createViewApp, ViewCatalog } from "../src/view/server.ts";
import { scriptJson } from "../src/view/page.ts";
import { curveRaw, emaSmooth, smoothedPoints } from "../src/view/client/charts.ts";

const FIXTURES = join(import.meta.dirname, "fixtures", "view");
const tmp = mkdtempSync(join(tmpdir(), "arl-view-data-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const jsonl = (path: string) =>
  readFileSync(path, "utf8")
    .split("\n")
    .filter((l) => l.trim() !== "")
    .map((l) => JSON.parse(l) as Record<string, unknown>);

describe("discoverSources", () => {
  it("finds runs, a lab's warm start and its designs in a folder of them", () => {
    const refs = discoverSources([FIXTURES]);
    expect(refs.map((r) => [r.id, r.kind])).toEqual([
      ["lab", "warm-start"],
      ["lab/composite", "design"],
      ["lab/outcome-only", "design"],
      ["smoke-a", "run"],
      ["smoke-b", "run"],
      ["smoke-travel", "run"],
    ]);
    const lab = JSON.parse(readFileSync(join(FIXTURES, "lab", "lab.json"), "utf8")) as { designs: { name: string; description: string }[] };
    expect(refs.find((r) => r.id === "lab/composite")!.description).toBe(lab.designs.find((d) => d.name === "composite")!.description);
  });

  it("names a folder that holds no run", () => {
    const empty = mkdtempSync(join(tmp, "empty-"));
    expect(() => discoverSources([empty])).toThrow(/holds no run or lab/);
    expect(() => discoverSources([join(tmp, "missing")])).toThrow(/no such folder/);
  });
});

describe("SourceReader", () => {
  const reader = (id: string) => new SourceReader(discoverSources([FIXTURES]).find((r) => r.id === id)!);

  it("gives metrics.jsonl column-wise, every value as written", () => {
    const m = reader("smoke-a").metrics();
    const rows = jsonl(join(FIXTURES, "smoke-a", "metrics.jsonl"));
    expect(m.stage).toEqual(rows.map((r) => r.stage));
    expect(m.step).toEqual(rows.map((r) => r.step));
    rows.forEach((r, i) => {
      for (const [k, v] of Object.entries(r)) if (typeof v === "number" && k !== "step") expect(m.columns[k][i], `${k}[${i}]`).toBe(v);
    });
    expect(m.detectors.map((d) => d.detector)).toEqual(jsonl(join(FIXTURES, "smoke-a", "detectors.jsonl")).map((d) => d.detector));
  });

  it("replays the trainer's detector monitor: each firing's onset is inside its streak", () => {
    const r = reader("smoke-a");
    const steps = r.detectorSteps();
    for (const f of r.metrics().detectors) expect(steps[f.detector]).toContain(f.since ?? f.step);
    // answer_avoidance fires at step 2 and, with the fixture's window, keeps firing to the last step
    expect(steps.answer_avoidance).toEqual([2, 3, 4]);
  });

  it("groups a step's episodes, recomputes GRPO advantages of whole groups, decodes tokens", () => {
    const r = reader("smoke-a");
    const p = r.samplesOf("step-2");
    const lines = jsonl(join(FIXTURES, "smoke-a", "samples", "step-2.jsonl"));
    expect(p.episodes).toHaveLength(lines.length);
    const groups = [...new Set(p.episodes.map((e) => e.group))];
    expect(groups).toEqual([0, 1]); // run.samplesPerStep 8 = 2 whole groups of rl.groupSize 4
    for (const g of groups) {
      const members = p.episodes.filter((e) => e.group === g);
      const expected = grpoAdvantages(members.map((e) => e.reward!.total), { normalizeStd: true });
      members.forEach((e, i) => {
        expect(e.advantageSource).toBe("recomputed");
        expect(e.advantage).toBe(expected[i]);
      });
    }
    const tok = JSON.parse(readFileSync(join(FIXTURES, "smoke-a", "checkpoints", "final", "tokenizer.json"), "utf8")) as { model: { vocab: Record<string, number> }; added_tokens: { id: number; content: string }[] };
    const byId: Record<number, string> = Object.fromEntries(Object.entries(tok.model.vocab).map(([t, id]) => [id, t]));
    for (const a of tok.added_tokens) byId[a.id] = a.content;
    expect(Object.keys(p.vocab).length).toBe(new Set(p.episodes.flatMap((e) => e.tokens!.ids)).size); // only the ids used
    p.episodes.forEach((e, i) => {
      expect(e.tokens!.ids).toEqual(lines[i].tokens);
      expect(e.tokens!.lossMask).toEqual(lines[i].lossMask);
      for (const id of e.tokens!.ids) expect(p.vocab[id], `token ${id}`).toBe(byId[id]); // every id's text, as the tokenizer has it
    });
  });

  it("says an advantage is unknown when run.samplesPerStep cut the last group", () => {
    const dir = join(tmp, "cut");
    cpSync(join(FIXTURES, "smoke-a"), dir, { recursive: true });
    writeFileSync(join(dir, "config.yaml"), readFileSync(join(dir, "config.yaml"), "utf8").replace("samplesPerStep: 8", "samplesPerStep: 6"));
    const lines = readFileSync(join(dir, "samples", "step-0.jsonl"), "utf8").split("\n").slice(0, 6);
    writeFileSync(join(dir, "samples", "step-0.jsonl"), lines.join("\n") + "\n");
    const r = new SourceReader({ id: "cut", label: "cut", kind: "run", path: dir });
    const eps = r.samplesOf("step-0").episodes;
    expect(eps.filter((e) => e.group === 0).every((e) => e.advantageSource === "recomputed")).toBe(true);
    const last = eps.filter((e) => e.group === 1);
    expect(last).toHaveLength(2);
    for (const e of last) {
      expect(e.advantage).toBeNull();
      expect(e.advantageNote).toMatch(/cut by run.samplesPerStep \(2 of its members in the file of 4\)/);
    }
  });

  it("shows the trainer's own per-turn advantages when the samples carry them (reward.turnAdvantages)", () => {
    const dir = join(tmp, "turn-adv");
    cpSync(join(FIXTURES, "smoke-a"), dir, { recursive: true });
    const file = join(dir, "samples", "step-1.jsonl");
    const lines = jsonl(file).map((l, i) => {
      const turns = (l.turns as unknown[]).length;
      return { ...l, reward: { ...(l.reward as object), turnAdvantages: Array.from({ length: turns }, (_, k) => i * 0.5 - k), turnRewards: Array.from({ length: turns }, () => 0.1) } };
    });
    writeFileSync(file, lines.map((l) => JSON.stringify(l) + "\n").join(""));
    const eps = new SourceReader({ id: "t", label: "t", kind: "run", path: dir }).samplesOf("step-1").episodes;
    eps.forEach((e, i) => {
      const per = (lines[i].reward as { turnAdvantages: number[] }).turnAdvantages;
      expect(e.advantageSource).toBe("file");
      expect(e.turnAdvantages).toEqual(per);
      expect(e.turnRewards).toEqual(per.map(() => 0.1));
      expect(e.advantage).toBeCloseTo(per.reduce((a, b) => a + b, 0) / per.length, 12);
    });
  });

  it("judges evaluation episodes (no reward on them) by EM against the gold answers", () => {
    const p = reader("smoke-a").samplesOf("eval-rl-grpo");
    const lines = jsonl(join(FIXTURES, "smoke-a", "samples", "eval-rl-grpo.jsonl"));
    p.episodes.forEach((e, i) => {
      const answer = lines[i].answer as string | null;
      expect(e.outcome).toBe(answer === null ? "no-answer" : emCheck(answer, lines[i].gold as string[]) === 1 ? "success" : "fail");
      expect(e.advantage).toBeNull();
    });
  });

  it("follows a run that is writing: new lines appear, a torn last line waits until it is whole", () => {
    const dir = join(tmp, "live");
    cpSync(join(FIXTURES, "smoke-b"), dir, { recursive: true });
    const r = new SourceReader({ id: "live", label: "live", kind: "run", path: dir });
    expect(r.info().live).toBe(false);
    writeFileSync(join(dir, ".lock"), String(process.ppid)); // a live process other than this one holds the folder
    expect(r.info().live).toBe(true);
    const before = r.info();
    const n = r.metrics().stage.length;
    const line = JSON.stringify({ stage: "rl", step: 5, "reward/mean": 0.25 });
    appendFileSync(join(dir, "metrics.jsonl"), line.slice(0, 20)); // the trainer is mid-append
    expect(r.metrics().stage).toHaveLength(n);
    appendFileSync(join(dir, "metrics.jsonl"), line.slice(20) + "\n");
    const after = r.info();
    expect(after.version).not.toBe(before.version);
    expect(after.stepsByStage.rl).toBe(before.stepsByStage.rl + 1);
    expect(r.metrics().columns["reward/mean"].at(-1)).toBe(0.25);
    writeFileSync(join(dir, "samples", "step-5.jsonl"), readFileSync(join(dir, "samples", "step-4.jsonl")));
    expect(r.info().sampleFiles.filter((f) => f.type === "step").map((f) => f.step)).toEqual([0, 1, 2, 3, 4, 5]);
  });

  it("parses JSON lines skipping junk and the unterminated last line", () => {
    expect(parseJsonLines('{"a":1}\nnot json\n[1]\n{"b":2}\n{"c":')).toEqual([{ a: 1 }, { b: 2 }]);
    expect(parseJsonLines(null)).toEqual([]);
  });
});

describe("curve smoothing (TensorBoard's debiased EMA)", () => {
  it("debiases the start, passes non-finite values, keeps a constant series exact", () => {
    // s1 = 0.5·1 / (1 − 0.5) = 1; s2 = (0.25 + 0.5·3) / (1 − 0.25) = 7/3; NaN passes; s3 = (0.875 + 0.5·2) / (1 − 0.125) = 15/7
    const s = emaSmooth([1, 3, NaN, 2], 0.5);
    expect(s[0]).toBeCloseTo(1, 12);
    expect(s[1]).toBeCloseTo(7 / 3, 12);
    expect(s[2]).toBeNaN();
    expect(s[3]).toBeCloseTo(15 / 7, 12);
    expect(emaSmooth([0.1, 0.1, 0.1], 0.9)).toEqual([0.1, 0.1, 0.1]);
    expect(emaSmooth([1, 2], 0)).toEqual([1, 2]);
  });

  it("smooths each source's series on its own, inside the raw values' range", () => {
    const points = [0, 1, 2].flatMap((step) => ["a", "b"].map((source) => ({ source, step, value: source === "a" ? step : 10 - step, desc: "" })));
    points.sort((x, y) => (x.source < y.source ? -1 : x.source > y.source ? 1 : x.step - y.step));
    const raw = curveRaw(points, [], []);
    const sm = smoothedPoints(raw, 0.6);
    expect(sm.filter((p) => p.source === "a").map((p) => p.smoothed)).toEqual(emaSmooth([0, 1, 2], 0.6));
    expect(sm.filter((p) => p.source === "b").map((p) => p.smoothed)).toEqual(emaSmooth([10, 9, 8], 0.6));
    for (const p of sm) expect(p.smoothed >= raw.yDomain![0] && p.smoothed <= raw.yDomain![1]).toBe(true);
  });
});

describe("view server", () => {
  const catalog = new ViewCatalog([FIXTURES]);

  it("serves the index, metrics and samples; 4xx for bad requests", async () => {
    const app = createViewApp(catalog, { pollMs: 0 });
    const index = await app.inject({ url: "/api/index" });
    expect(index.statusCode).toBe(200);
    expect((index.json() as { sources: { id: string }[] }).sources.map((s) => s.id)).toContain("lab/composite");
    const m = await app.inject({ url: "/api/metrics?id=lab%2Fcomposite" });
    expect(m.statusCode).toBe(200);
    expect((m.json() as { columns: Record<string, unknown[]> }).columns["reward/mean"]).toHaveLength(5);
    expect((await app.inject({ url: "/api/samples?id=smoke-a&file=step-0" })).statusCode).toBe(200);
    expect((await app.inject({ url: "/api/samples?id=smoke-a&file=../../etc/passwd" })).statusCode).toBe(404);
    expect((await app.inject({ url: "/api/metrics?id=nope" })).statusCode).toBe(404);
    expect((await app.inject({ url: "/api/metrics" })).statusCode).toBe(400);
    await app.close();
  });

  it("with a token, /api/* needs it; the page and its script (no data) do not", async () => {
    const app = createViewApp(catalog, { apiKey: "s3cret", pollMs: 0 });
    expect((await app.inject({ url: "/api/index" })).statusCode).toBe(401);
    expect((await app.inject({ url: "/api/index", headers: { authorization: "Bearer wrong" } })).statusCode).toBe(401);
    expect((await app.inject({ url: "/api/index", headers: { authorization: "Bearer s3cret" } })).statusCode).toBe(200);
    expect((await app.inject({ url: "/api/index", headers: { "x-api-key": "s3cret" } })).statusCode).toBe(200);
    const page = await app.inject({ url: "/?token=s3cret" });
    expect(page.statusCode).toBe(200);
    expect(page.body).not.toContain("s3cret");
    const script = await app.inject({ url: "/app.js" });
    expect(script.statusCode).toBe(200);
    expect(script.body.length).toBeGreaterThan(100_000); // lit-html + vega + vega-lite, bundled
    await app.close();
  });

  it("embeds JSON in a script element safely", () => {
    const s = scriptJson({ x: "</script><!-- \u2028" });
    expect(s).not.toMatch(/<\/script|<!--|\u2028/);
    expect(JSON.parse(s)).toEqual({ x: "</script><!-- \u2028" });
  });
});

describe("arl view (CLI)", () => {
  const arl = (args: string[]) => spawnSync(process.execPath, [join(import.meta.dirname, "..", "bin", "arl.mjs"), "view", ...args], { encoding: "utf8", timeout: 60_000 });

  it("--export writes one self-contained page: script and data inline, nothing loaded from elsewhere", () => {
    const file = join(tmp, "cli-export.html");
    const r = arl([FIXTURES, "--export", file]);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/wrote .*cli-export\.html \([\d.]+ MiB, 6 source\(s\)/);
    const html = readFileSync(file, "utf8");
    expect(html).toContain("window.__ARL_VIEW_DATA__=");
    expect(html).not.toMatch(/<script[^>]+src=|<link[^>]+href=/); // no external script or stylesheet
    const data = JSON.parse(/window\.__ARL_VIEW_DATA__=(.*?)<\/script>/s.exec(html)![1]) as { index: { static: boolean }; samples: Record<string, Record<string, unknown>> };
    expect(data.index.static).toBe(true);
    expect(Object.keys(data.samples["smoke-a"]).sort()).toEqual(readdirSync(join(FIXTURES, "smoke-a", "samples")).map((f) => f.replace(/\.jsonl$/, "")).sort());
  });

  it("names a folder that is not there, and a bad --poll", () => {
    const r = arl([join(tmp, "nope")]);
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/arl view: .*nope: no such folder/);
    const p = arl([FIXTURES, "--poll", "soon"]);
    expect(p.status).toBe(2);
    expect(p.stderr).toMatch(/--poll: expected an integer/);
  });
});
