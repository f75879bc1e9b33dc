/**
 * `arl view`'s reading of run folders (src/view/sourceReader.ts) and its HTTP server (src/view/server.ts), without a
 * browser (test/view-browser.test.ts drives the page). Fixtures: real `arl train --smoke` / `arl lab --quick`
 * folders (test/fixtures/view/README.md).
 */
import { spawnSync } from "node:child_process";
import { appendFileSync, cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it, vi } from "vitest";
import { grpoAdvantages } from "../src/algo/advantages.ts";
import { emCheck } from "../src/reward/em.ts";
import { joinTokenTexts } from "../src/view/agentEpisodes.ts";
import { parseJsonLines } from "../src/view/files.ts";
import { SourceReader } from "../src/view/sourceReader.ts";
import { discoverSources } from "../src/view/sources.ts";
import { WordTokenizer, type TokenizerJson } from "../src/policy/tokenizer.ts";
import { compile } from "vega-lite";
import { createViewApp, ViewCatalog } from "../src/view/server.ts";
import { scriptJson } from "../src/view/page.ts";
import { exportView } from "../src/view/export.ts";
import { openHostWarning, serveOptions } from "../src/cli/serveFlags.ts";
import { cachedClientBundle } from "../src/view/bundle.ts";
import { curveTemplates } from "../src/view/curveTemplates.ts";
import { curveRaw, curveSpec, emaSmooth, smoothedPoints, vegaSpecOf } from "../src/view/client/charts.ts";

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
      ["smoke-agent", "run"],
      ["smoke-b", "run"],
      ["smoke-travel", "run"],
    ]);
    const lab = JSON.parse(readFileSync(join(FIXTURES, "lab", "lab.json"), "utf8")) as { designs: { name: string; description: string }[] };
    expect(refs.find((r) => r.id === "lab/composite")!.description).toBe(lab.designs.find((d) => d.name === "composite")!.description);
  });

  it("names a folder that holds no run, and a file given for a folder", () => {
    const empty = mkdtempSync(join(tmp, "empty-"));
    expect(() => discoverSources([empty])).toThrow(/holds no run or lab/);
    expect(() => discoverSources([join(tmp, "missing")])).toThrow(/no such folder/);
    expect(() => discoverSources([join(FIXTURES, "smoke-a", "metrics.jsonl")])).toThrow(/metrics\.jsonl: a file, not a folder \(its run folder is .*smoke-a\)/);
  });

  it("gives a folder named twice (or a run and the folder holding it) once", () => {
    const a = join(FIXTURES, "smoke-a");
    expect(discoverSources([a, a, `${a}/`]).map((r) => r.id)).toEqual(["smoke-a"]);
    const ids = discoverSources([a, FIXTURES]).map((r) => r.id);
    expect(ids.filter((id) => id.startsWith("smoke-a~"))).toEqual([]); // not smoke-a and smoke-a~2
    expect(ids).toHaveLength(discoverSources([FIXTURES]).length);
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
    const counter = { damaged: -1 };
    expect(parseJsonLines('{"a":1}\nnot json\n[1]\n{"b":2}\n{"c":', counter)).toEqual([{ a: 1 }, { b: 2 }]);
    expect(counter.damaged).toBe(2); // "not json" and "[1]"; the unterminated last line is still being written
    expect(parseJsonLines(null, counter)).toEqual([]);
    expect(counter.damaged).toBe(0);
  });

  it("lists each stage's metric keys, and counts the lines it skipped per file", () => {
    const dir = join(tmp, "damaged");
    cpSync(join(FIXTURES, "smoke-a"), dir, { recursive: true });
    const r = new SourceReader(discoverSources([dir])[0]);
    const rows = jsonl(join(dir, "metrics.jsonl"));
    const keysIn = (stage: string) => [...new Set(rows.filter((x) => x.stage === stage).flatMap((x) => Object.keys(x).filter((k) => k !== "step" && typeof x[k] === "number")))].sort();
    const info = r.info();
    expect(Object.keys(info.metricKeysByStage)).toEqual(info.stages);
    expect(info.metricKeysByStage.sft).toEqual(keysIn("sft"));
    expect(info.metricKeysByStage.rl).toEqual(keysIn("rl"));
    expect(info.metricKeysByStage.sft).not.toContain("reward/mean");
    expect(info.damagedLines).toEqual({});
    appendFileSync(join(dir, "metrics.jsonl"), 'garbage\n{"stage":"rl","step":99,\n');
    appendFileSync(join(dir, "samples", "step-0.jsonl"), "\u0000\u0000\n");
    expect(r.info().damagedLines).toEqual({ "metrics.jsonl": 2 });
    expect(r.samplesOf("step-0").damagedLines).toBe(1);
    expect(r.info().damagedLines).toEqual({ "metrics.jsonl": 2, "samples/step-0.jsonl": 1 });
    expect(r.samplesOf("step-1").damagedLines).toBeUndefined();
    // a line whose token books disagree in length (logprobs cut short, no loss mask past the prompt): each is [seq]
    const lines = readFileSync(join(dir, "samples", "step-1.jsonl"), "utf8").split("\n").filter((l) => l !== "");
    const first = JSON.parse(lines[0]) as { tokens: number[]; lossMask: number[]; logprobs: number[] };
    lines[0] = JSON.stringify({ ...first, logprobs: first.logprobs.slice(0, 3), lossMask: first.lossMask.slice(0, 5) });
    writeFileSync(join(dir, "samples", "step-1.jsonl"), lines.join("\n") + "\n");
    const t = r.samplesOf("step-1").episodes[0].tokens!;
    expect([t.lossMask.length, t.logprobs.length]).toEqual([first.tokens.length, first.tokens.length]);
    expect(t.logprobs.slice(3).every((x) => x === 0) && t.lossMask.slice(5).every((x) => x === 0)).toBe(true);
  });
});

/** A `writeAgentSamples` line (src/train/agentExperiment.ts). */
interface AgentLine {
  task: string;
  status: string;
  reward: { value: number; parts?: Record<string, number> } | null;
  advantage: number | null;
  answer: string | null;
  calls: { content: string; toolCalls: { name: string; arguments: unknown }[]; finishReason: string; invalid: boolean }[];
  segments: { tokens: number[]; text: string[]; lossMask: number[]; logprobs: number[] }[];
}

describe("an arl train --agent run (test/fixtures/view/smoke-agent)", () => {
  const AGENT = join(FIXTURES, "smoke-agent");
  const reader = () => new SourceReader(discoverSources([AGENT])[0]);
  const lines = (step: number) => jsonl(join(AGENT, "samples", `step-${step}.jsonl`)) as unknown as AgentLine[];

  it("lists its RL steps, and its evaluations from rollouts.jsonl; the summary is agent-summary.json", () => {
    const r = reader();
    const files = r.sampleFiles();
    expect(files.filter((f) => f.type === "step").map((f) => f.step)).toEqual([0, 1, 2, 3]);
    expect(files.filter((f) => f.type === "eval").map((f) => [f.name, f.from])).toEqual([
      ["eval-warm", "rollouts"],
      ["eval-after", "rollouts"],
    ]);
    expect(r.metrics().summary).toEqual(JSON.parse(readFileSync(join(AGENT, "agent-summary.json"), "utf8")));
    expect(r.info().stepsByStage).toEqual({ sft: 500, rl: 4 });
    expect(r.detectorSteps().guess_unknown).toContain(2); // detectors.jsonl: guess_unknown since step 2
  });

  it("shows each rollout with the trainer's advantage, its group, its calls as turns and the tool results", () => {
    const p = reader().samplesOf("step-0");
    const raw = lines(0);
    expect(p.episodes).toHaveLength(raw.length);
    // rl.tasksPerStep 4 × rl.groupSize 4, all written (run.samplesPerStep 16): 4 groups of one task each
    expect([...new Set(p.episodes.map((e) => e.group))]).toEqual([0, 1, 2, 3]);
    let results = 0;
    p.episodes.forEach((e, i) => {
      const l = raw[i];
      expect(e.task).toBe(l.task);
      expect(e.group).toBe(Math.floor(i / 4));
      expect(e.member).toBe(i % 4);
      expect(e.reward?.total).toBe(l.reward!.value);
      expect(e.advantage).toBe(l.advantage);
      expect(e.advantageSource).toBe("file");
      expect(e.answer).toBe(l.answer);
      expect(e.agent?.status).toBe(l.status);
      expect(e.turns.map((t) => t.action)).toEqual(l.calls.map((c) => c.content));
      expect(e.turns.map((t) => t.toolCalls!.map((c) => c.name))).toEqual(l.calls.map((c) => c.toolCalls.map((t) => t.name)));
      expect(e.question).toMatch(/\?$/); // the user message of the first prompt: the task's question
      // the tool results of call k: the <tool_response> blocks between completion k and k+1, read here by hand
      const seg = l.segments[0];
      const completions: [number, number][] = [];
      seg.lossMask.forEach((m, j) => {
        if (m === 1 && seg.lossMask[j - 1] !== 1) completions.push([j, j]);
        if (m === 1) completions.at(-1)![1] = j + 1;
      });
      expect(completions).toHaveLength(l.calls.length); // one segment, one run of trained tokens per call
      e.turns.forEach((t, k) => {
        const obs = seg.text.slice(completions[k][1], completions[k + 1]?.[0] ?? seg.text.length);
        const blocks: string[] = [];
        let cur: string[] | null = null;
        for (const w of obs) {
          if (w === "<tool_response>") cur = [];
          else if (w === "</tool_response>") {
            blocks.push(cur!.join(" "));
            cur = null;
          } else cur?.push(w);
        }
        const words = (x: string) => x.split(/\s+/).filter((w) => w !== "").join(" ");
        expect((t.toolResults ?? []).map(words)).toEqual(blocks.map(words));
        results += blocks.length;
      });
    });
    expect(results).toBeGreaterThan(0); // the fixture's agent searched and got passages back
  });

  it("gives every segment's tokens with the loss mask, and locates the tool results: never trained", () => {
    const p = reader().samplesOf("step-0");
    const raw = lines(0);
    let located = 0;
    p.episodes.forEach((e, i) => {
      expect(e.segments).toHaveLength(raw[i].segments.length);
      e.segments!.forEach((t, k) => {
        const seg = raw[i].segments[k];
        expect(t.ids).toEqual(seg.tokens);
        expect(t.lossMask).toEqual(seg.lossMask);
        expect(t.logprobs).toEqual(seg.logprobs);
        expect(t.promptLength).toBe(seg.lossMask.indexOf(1));
        seg.tokens.forEach((id, j) => expect(p.vocab[id]).toBe(seg.text[j]));
        for (const [a, b] of t.toolResults ?? []) {
          expect(seg.text[a]).toBe("<tool_response>");
          expect(seg.text[b - 1]).toBe("</tool_response>");
          expect(seg.lossMask.slice(a, b).every((m) => m === 0)).toBe(true);
          located++;
        }
        // every <tool_response> token of the segment is inside a located range
        seg.text.forEach((w, j) => {
          if (w === "<tool_response>") expect((t.toolResults ?? []).some(([a]) => a === j)).toBe(true);
        });
      });
    });
    expect(located).toBeGreaterThan(0);
  });

  it("joins word tokens as the run's tokenizer decodes them", () => {
    // the run's own tokenizer: the embedded WordTokenizer, as loadPolicy reads it back (src/train/checkpoint.ts)
    const tok = new WordTokenizer(JSON.parse(readFileSync(join(AGENT, "checkpoints", "sft", "tokenizer.json"), "utf8")) as TokenizerJson);
    for (const l of lines(1)) for (const seg of l.segments) expect(joinTokenTexts(seg.text, true).text).toBe(tok.decode(seg.tokens));
    expect(joinTokenTexts(["Hello", ",", " world", "\n"]).text).toBe("Hello, world\n"); // a byte-level BPE's pieces: as they are
  });

  it("reads an evaluation's transcripts (samples/eval-<label>.jsonl): the question and gold answers, the held-out EM note", () => {
    const dir = join(tmp, "agent-eval-samples");
    cpSync(AGENT, dir, { recursive: true });
    // An evaluation samples file as writeAgentSamples writes it with the held-out tasks: question + answers on each line.
    const raw = lines(0).map((l, i) => ({ ...l, question: `what is question ${i} ?`, answers: [`gold${i}`] }));
    writeFileSync(join(dir, "samples", "eval-after.jsonl"), raw.map((l) => JSON.stringify(l)).join("\n") + "\n");
    const r = new SourceReader(discoverSources([dir])[0]);
    expect(r.sampleFiles().find((f) => f.name === "eval-after")?.from).not.toBe("rollouts");
    const p = r.samplesOf("eval-after");
    expect(p.episodes.map((e) => [e.question, e.gold])).toEqual(raw.map((l) => [l.question, l.answers]));
    const summary = JSON.parse(readFileSync(join(dir, "agent-summary.json"), "utf8")) as { after: { success: number; n: number } };
    expect(p.note).toContain(`held-out EM ${summary.after.success.toFixed(1)} % of ${summary.after.n} tasks`);
  });

  it("pairs warm start and after-RL evaluation rollouts by task, outcome from the trainer's EM reward", () => {
    const r = reader();
    const rows = jsonl(join(AGENT, "rollouts.jsonl"));
    for (const stage of ["eval-warm", "eval-after"]) {
      const p = r.samplesOf(stage);
      const mine = rows.filter((x) => x.stage === stage);
      expect(p.episodes.map((e) => [e.task, e.reward?.total, e.outcome])).toEqual(mine.map((x) => [x.task, x.reward, x.status !== "rewarded" ? "no-answer" : x.reward === 1 ? "success" : "fail"]));
      const summary = JSON.parse(readFileSync(join(AGENT, "agent-summary.json"), "utf8")) as Record<string, { success: number; n: number }>;
      const part = summary[stage === "eval-warm" ? "before" : "after"];
      expect(p.note).toContain(`held-out EM ${part.success.toFixed(1)} % of ${part.n} tasks`);
      expect((100 * p.episodes.filter((e) => e.outcome === "success").length) / p.episodes.length).toBe(part.success);
    }
  });
});

describe("page script cache", () => {
  it("reads the bundle back from disk while its inputs are unchanged, rebuilds when one changed", async () => {
    const dir = join(tmp, "bundle-cache");
    const first = await cachedClientBundle({ cacheDir: dir });
    expect(first.from).toBe("build");
    const again = await cachedClientBundle({ cacheDir: dir });
    expect(again.from).toBe("cache");
    expect(again.text).toBe(first.text);
    const manifest = JSON.parse(readFileSync(join(dir, "client.json"), "utf8")) as { inputs: Record<string, string> };
    const ours = Object.keys(manifest.inputs).filter((p) => p.includes(join("src", "view")));
    expect(ours).toContain(join(import.meta.dirname, "..", "src", "view", "client", "main.ts"));
    expect(Object.keys(manifest.inputs).some((p) => p.includes(join("node_modules", "vega-lite")))).toBe(true); // the libraries too
    // an input that changed (its recorded size and mtime no longer match) → bundled again
    manifest.inputs[ours[0]] = "0:0";
    writeFileSync(join(dir, "client.json"), JSON.stringify(manifest));
    expect((await cachedClientBundle({ cacheDir: dir })).from).toBe("build");
  }, 60_000);
});

describe("chart specs", () => {
  it("the bundled templates give each chart exactly the spec Vega-Lite's own compile gives", () => {
    const templates = curveTemplates();
    const sourceLists = [["run-a"], ["run-a", "lab/x", 'a "quoted" run'], Array.from({ length: 12 }, (_, i) => `lab/design-${i}`)];
    for (const m of ["reward/mean", "hack/guess_rate_unknown", "tool_calls/search", "it's", 'a "quoted" key', "back\\slash", "tab\there"]) {
      for (const sources of sourceLists) {
        for (const [width, labelled] of [[420, true], [260, false], [1337, true]] as const) {
          expect(vegaSpecOf(m, sources, width, labelled, templates), `${m} ${sources.length} ${width}`).toEqual(compile(curveSpec(m, sources, width, labelled)).spec);
        }
      }
    }
  });

  it("the page script ships no Vega-Lite: its templates are compiled at bundle time", async () => {
    const script = (await cachedClientBundle({ cacheDir: join(tmp, "bundle-cache") })).text;
    expect(script).toContain("arl-metric"); // the templates' stand-in metric: they are in the script
    expect(script).not.toMatch(/vega-lite|normalizeEncoding|compositeMark/i); // and Vega-Lite's code is not
  }, 60_000);
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
    // a metrics payload carries the version the index gives (the page takes one fetched before the index only then)
    const version = (index.json() as { sources: { id: string; version: string }[] }).sources.find((s) => s.id === "lab/composite")!.version;
    expect((m.json() as { version: string }).version).toBe(version);
    await app.close();
  });

  it("with a token, /api/* needs it; the page and its script (no data) do not", async () => {
    const app = createViewApp(catalog, { apiKey: "s3cret", pollMs: 0 });
    expect((await app.inject({ url: "/api/index" })).statusCode).toBe(401);
    expect((await app.inject({ url: "/api/index", headers: { authorization: "Bearer wrong" } })).statusCode).toBe(401);
    expect((await app.inject({ url: "/api/index", headers: { authorization: "Bearer s3cret" } })).statusCode).toBe(200);
    expect((await app.inject({ url: "/api/index", headers: { "x-api-key": "s3cret" } })).statusCode).toBe(200);
    // the route decides, not the raw URL: a percent-encoded /api/ reaches the same handlers and needs the key too
    for (const url of ["/%61pi/index", "/%61pi/metrics?id=smoke-a", "/api/%69ndex", "/api/index?x=/healthz", "/nothing-here"]) {
      expect((await app.inject({ url })).statusCode, url).toBe(401);
    }
    expect((await app.inject({ url: "/%61pi/index", headers: { authorization: "Bearer s3cret" } })).statusCode).toBe(200);
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
    expect(r.stdout).toMatch(/wrote .*cli-export\.html \([\d.]+ MiB, 7 source\(s\)/);
    const html = readFileSync(file, "utf8");
    expect(html).toContain("window.__ARL_VIEW_DATA__=");
    expect(html).not.toMatch(/<script[^>]+src=|<link[^>]+href=/); // no external script or stylesheet
    const data = JSON.parse(/window\.__ARL_VIEW_DATA__=(.*?)<\/script>/s.exec(html)![1]) as { index: { static: boolean }; samples: Record<string, Record<string, unknown>> };
    expect(data.index.static).toBe(true);
    expect(Object.keys(data.samples["smoke-a"]).sort()).toEqual(readdirSync(join(FIXTURES, "smoke-a", "samples")).map((f) => f.replace(/\.jsonl$/, "")).sort());
  });

  it("--export keeps this machine's paths out, and overwrites only an earlier export (or with --force)", async () => {
    const run = join(tmp, "export-run");
    cpSync(join(FIXTURES, "smoke-a"), run, { recursive: true });
    const file = join(tmp, "one-run.html");
    // summary.json names the run folder as written (another machine's here); and a file naming this folder itself
    const summary = JSON.parse(readFileSync(join(run, "summary.json"), "utf8")) as { run: string; note?: string };
    expect(summary.run).toBe("/tmp/vfix/runs/smoke-a");
    writeFileSync(join(run, "summary.json"), JSON.stringify({ ...summary, note: `${run}/checkpoints/final` }));
    await exportView([run], file);
    const exported = readFileSync(file, "utf8");
    expect(exported).not.toContain(tmp); // a source's path is its id, not this machine's folder
    expect(exported).not.toContain("/tmp/vfix");
    expect(exported).toContain('"note":"export-run/checkpoints/final"');
    await exportView([run], file); // an earlier export: overwritten
    const notes = join(tmp, "notes.html");
    writeFileSync(notes, "<p>my notes</p>");
    await expect(exportView([run], notes)).rejects.toThrow(/--export .*notes\.html: the file exists and is not an earlier arl view export; .*--force/);
    expect(readFileSync(notes, "utf8")).toBe("<p>my notes</p>");
    const refused = arl([run, "--export", notes]); // the CLI: a usage error (exit 2), the file untouched
    expect(refused.status).toBe(2);
    expect(refused.stderr).toMatch(/not an earlier arl view export/);
    expect(readFileSync(notes, "utf8")).toBe("<p>my notes</p>");
    await exportView([run], notes, { force: true });
    expect(readFileSync(notes, "utf8")).toContain("window.__ARL_VIEW_DATA__=");
    await expect(exportView([run], join(run, "metrics.jsonl"), { force: true })).rejects.toThrow(/is inside the viewed folder/);
    expect(readFileSync(join(run, "metrics.jsonl"), "utf8")).toBe(readFileSync(join(FIXTURES, "smoke-a", "metrics.jsonl"), "utf8"));
  });

  it("warns when --host reaches other machines and no key is set (every arl serve and arl view)", () => {
    for (const host of ["127.0.0.1", "localhost", "::1", "127.0.0.2"]) expect(openHostWarning(host, undefined), host).toBeUndefined();
    expect(openHostWarning("0.0.0.0", "k")).toBeUndefined();
    expect(openHostWarning("0.0.0.0", undefined)).toMatch(/--host 0\.0\.0\.0 serves other machines and no --api-key .* anyone who can reach this port/);
    expect(openHostWarning("192.168.1.5", undefined)).toMatch(/--api-key <key>, or bind 127\.0\.0\.1/);
    const warn = vi.spyOn(console, "warn").mockImplementation(() => {});
    const key = process.env.ARL_API_KEY;
    delete process.env.ARL_API_KEY;
    try {
      serveOptions({ host: "0.0.0.0", port: "0", maxBody: "1000", requestTimeout: "1000" });
      expect(warn).toHaveBeenCalledWith(openHostWarning("0.0.0.0", undefined));
      warn.mockClear();
      serveOptions({ host: "127.0.0.1", port: "0", maxBody: "1000", requestTimeout: "1000" });
      expect(warn).not.toHaveBeenCalled();
    } finally {
      warn.mockRestore();
      if (key !== undefined) process.env.ARL_API_KEY = key;
    }
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
