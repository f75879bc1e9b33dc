/**
 * `arl view` in a real browser: Debian's Chromium (`/usr/bin/chromium`, or `ARL_CHROMIUM`) driven by playwright-core
 * (no `playwright install`: the system browser only). Opens a run and reads a curve's values from the chart, overlays
 * a lab's designs with detector firings marked, opens a trajectory and checks its token view (observation tokens
 * not trained), filters, compares two runs, and opens an export with every network request refused.
 *
 * Skipped, with the reason shown as the skipped test's name, when no Chromium is installed (`apt-get install -y
 * chromium`; `.ci/run` installs it). Screenshots of each view are written to a temp folder, or to `docs/viewer/`
 * with `ARL_VIEW_SCREENSHOTS=1` (then `ARL_VIEW_SCREENSHOT_RUNS=runs/a,runs/lab` points them at other folders; the
 * assertions always use the fixtures).
 */
import { appendFileSync, cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { Browser, Page } from "playwright-core";
import { exportView } from "../src/view/export.ts";
import { startViewServer } from "../src/view/server.ts";
import type { RunningServer } from "../src/http/server.ts";

const CHROMIUM = process.env.ARL_CHROMIUM ?? "/usr/bin/chromium";
const HAVE_CHROMIUM = existsSync(CHROMIUM);
const FIXTURES = join(import.meta.dirname, "fixtures", "view");
const ROOT = join(import.meta.dirname, "..");
const SHOTS = process.env.ARL_VIEW_SCREENSHOTS === "1" ? join(ROOT, "docs", "viewer") : mkdtempSync(join(tmpdir(), "arl-view-shots-"));

const jsonl = (path: string) =>
  readFileSync(path, "utf8")
    .split("\n")
    .filter((l) => l.trim() !== "")
    .map((l) => JSON.parse(l) as Record<string, unknown>);

if (!HAVE_CHROMIUM) {
  console.warn(`view-browser: SKIPPED — no Chromium at ${CHROMIUM} (apt-get install -y chromium, or set ARL_CHROMIUM)`);
  it.skip(`browser tests SKIPPED: no Chromium at ${CHROMIUM} (apt-get install -y chromium, or set ARL_CHROMIUM)`, () => {});
}

describe.runIf(HAVE_CHROMIUM)("arl view in Chromium", () => {
  let browser: Browser;
  let page: Page;
  let server: RunningServer;
  const pageErrors: string[] = [];
  const tmp = mkdtempSync(join(tmpdir(), "arl-view-browser-"));

  beforeAll(async () => {
    const { chromium } = await import("playwright-core");
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"],
    });
    server = await startViewServer([FIXTURES], { port: 0, pollMs: 300 });
    page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
    page.on("pageerror", (e) => pageErrors.push(e.message));
  });
  afterEach(() => {
    expect(pageErrors.splice(0)).toEqual([]); // no uncaught error in the page during the test
  });
  afterAll(async () => {
    await browser?.close();
    await server?.close();
    rmSync(tmp, { recursive: true, force: true });
    if (process.env.ARL_VIEW_SCREENSHOTS !== "1") rmSync(SHOTS, { recursive: true, force: true });
  });

  /** Opens the page at a state and waits until it has drawn (charts included). */
  const open = async (hash: string, base = server.url + "/"): Promise<void> => {
    await page.goto(`${base}#${hash}`);
    await page.waitForFunction(() => document.body.dataset.ready !== undefined && document.body.dataset.ready !== "", null, { timeout: 45_000 });
  };
  /** Waits for the next completed draw after an interaction. */
  const settled = async (): Promise<void> => {
    await page.waitForFunction(() => document.body.dataset.ready !== "", null, { timeout: 45_000 });
  };
  /** The `<source> step <n>: <value>` labels of a chart's points, as a screen reader gets them. */
  const curve = async (metric: string, label: string): Promise<Map<number, number>> => {
    const labels = await page.locator(`[data-vega="${metric}"] svg [aria-label]`).evaluateAll((els) => els.map((e) => e.getAttribute("aria-label") ?? ""));
    const out = new Map<number, number>();
    for (const l of labels) {
      const m = /^(.*) step (\d+): (.*)$/.exec(l);
      if (m && m[1] === label) out.set(Number(m[2]), Number(m[3]));
    }
    return out;
  };

  it("opens a run and reads a curve's values", async () => {
    await open("view=curves&src=smoke-a&m=reward/mean,hack/no_answer&stage=rl");
    const rl = jsonl(join(FIXTURES, "smoke-a", "metrics.jsonl")).filter((r) => r.stage === "rl");
    const values = await curve("reward/mean", "smoke-a");
    expect([...values.keys()]).toEqual(rl.map((r) => r.step));
    for (const r of rl) expect(values.get(r.step as number)).toBe(r["reward/mean"]);
    // the detector that fired is marked on the chart (its onset rule, labelled with its message)
    const firing = jsonl(join(FIXTURES, "smoke-a", "detectors.jsonl"))[0];
    const marks = await page.locator(`[data-vega="hack/no_answer"] svg [aria-label]`).evaluateAll((els) => els.map((e) => e.getAttribute("aria-label") ?? ""));
    expect(marks.some((m) => m.includes(firing.message as string))).toBe(true);
    // smoothing redraws in place: the raw values stay readable
    await page.locator("#smoothing").fill("0.6");
    await settled();
    expect(await page.locator("#smooth-value").textContent()).toBe("0.60");
    expect((await curve("reward/mean", "smoke-a")).get(rl[0].step as number)).toBe(rl[0]["reward/mean"]);
    await page.screenshot({ path: join(SHOTS, "curves.png") });
    // another stage shows that stage's metrics (SFT lines have the loss), never empty charts
    await page.locator("#stage").selectOption("sft");
    await settled();
    const sft = jsonl(join(FIXTURES, "smoke-a", "metrics.jsonl")).filter((r) => r.stage === "sft");
    expect(await page.locator("[data-chart]").evaluateAll((els) => els.map((e) => e.getAttribute("data-chart")))).toEqual(["loss", "grad_norm"]);
    expect([...(await curve("loss", "smoke-a")).entries()]).toEqual(sft.map((r) => [r.step, r.loss]));
    expect(await page.locator("input[data-metric]").evaluateAll((els) => els.map((e) => e.getAttribute("data-metric")))).not.toContain("reward/mean");
  });

  it("overlays a lab's designs and another run on one chart", async () => {
    await open("view=curves&src=lab/composite,lab/outcome-only,smoke-b&m=reward/mean,tool_calls,train/entropy,hack/no_answer&stage=rl&smooth=0.3");
    for (const id of ["lab/composite", "lab/outcome-only", "smoke-b"]) {
      const dir = id === "smoke-b" ? join(FIXTURES, "smoke-b") : join(FIXTURES, "lab", "designs", id.split("/")[1]);
      const rl = jsonl(join(dir, "metrics.jsonl")).filter((r) => r.stage === "rl");
      const values = await curve("tool_calls", id);
      expect(values.size, id).toBe(rl.length);
      for (const r of rl) expect(values.get(r.step as number), `${id} step ${r.step}`).toBe(r.tool_calls);
    }
    await page.screenshot({ path: join(SHOTS, "lab-overlay.png") });
    // hide one design and show it again (its points leave the charts and come back; the others are untouched)
    const before = await curve("tool_calls", "lab/composite");
    await page.locator('input[data-source="lab/outcome-only"]').uncheck();
    await settled();
    expect((await curve("tool_calls", "lab/outcome-only")).size).toBe(0);
    expect(await curve("tool_calls", "lab/composite")).toEqual(before);
    await page.locator('input[data-source="lab/outcome-only"]').check();
    await settled();
    const back = jsonl(join(FIXTURES, "lab", "designs", "outcome-only", "metrics.jsonl")).filter((r) => r.stage === "rl");
    expect([...(await curve("tool_calls", "lab/outcome-only")).entries()]).toEqual(back.map((r) => [r.step, r.tool_calls]));
    // the smoothed lines follow the slider (updated in place) and end up as a fresh page draws them at that weight
    const smoothPaths = () => page.locator('[data-vega="train/entropy"] svg g.layer_2_marks path').evaluateAll((els) => els.map((e) => e.getAttribute("d") ?? ""));
    const at03 = await smoothPaths();
    const withEntropy = [join(FIXTURES, "lab", "designs", "composite"), join(FIXTURES, "lab", "designs", "outcome-only"), join(FIXTURES, "smoke-b")].filter((d) => jsonl(join(d, "metrics.jsonl")).some((r) => r.stage === "rl" && typeof r["train/entropy"] === "number"));
    expect(at03).toHaveLength(withEntropy.length); // one smoothed line per source that has the metric
    expect(at03.length).toBeGreaterThan(1);
    await page.locator("#smoothing").fill("0.9");
    await settled();
    expect(await smoothPaths()).not.toEqual(at03);
    await page.locator("#smoothing").fill("0.2");
    await settled();
    const moved = await smoothPaths();
    expect(await curve("tool_calls", "lab/composite")).toEqual(before);
    await open("view=curves&src=lab/composite,lab/outcome-only,smoke-b&m=reward/mean,tool_calls,train/entropy,hack/no_answer&stage=rl&smooth=0.2");
    expect(moved).toEqual(await smoothPaths());
    // a hash change that reorders the charts: each chart still draws its own metric in its own element
    await open("view=curves&src=lab/composite,lab/outcome-only,smoke-b&m=hack/no_answer,train/entropy,tool_calls,reward/mean&stage=rl&smooth=0.3");
    for (const m of ["reward/mean", "tool_calls", "train/entropy", "hack/no_answer"]) {
      const axes = await page.locator(`[data-vega="${m}"] svg [aria-label^="Y-axis"]`).evaluateAll((els) => els.map((e) => e.getAttribute("aria-label") ?? ""));
      expect(axes, m).toHaveLength(1);
      expect(axes[0]).toContain(`'${m}'`);
    }
  });

  it("opens a trajectory: groups with reward and advantage, reward terms, tokens with observation tokens not trained", async () => {
    const lines = jsonl(join(FIXTURES, "smoke-a", "samples", "step-2.jsonl"));
    await open("view=trajectories&tsrc=smoke-a&file=step-1");
    await page.locator("#next-step").click(); // the scrubber moves to step 2
    await settled();
    expect(await page.locator("section.content h2").first().textContent()).toContain("RL step 2");
    expect(await page.locator("tr.episode").count()).toBe(lines.length);
    // the episode with an answer (or the first one) opens
    const pick = Math.max(0, lines.findIndex((l) => l.answer !== null));
    await page.locator(`tr.episode[data-episode="${pick}"]`).click();
    await settled();
    const reward = lines[pick].reward as { total: number; terms: { name: string }[] };
    expect(Number(await page.locator("[data-total]").textContent())).toBeCloseTo(reward.total, 3);
    expect(await page.locator("table.reward-breakdown tr[data-term]").evaluateAll((els) => els.map((e) => e.getAttribute("data-term")))).toEqual(reward.terms.map((t) => t.name));
    const turns = lines[pick].turns as { action: string; observation: string }[];
    expect(await page.locator(".turn[data-turn]").count()).toBe(turns.length);
    await page.screenshot({ path: join(SHOTS, "trajectory-turns.png") });

    await page.locator('button[data-tab="tokens"]').click();
    await settled();
    const tokens = lines[pick].tokens as number[];
    const mask = lines[pick].lossMask as number[];
    const promptLength = lines[pick].promptLength as number;
    const spans = await page.locator(".tokens .tok").evaluateAll((els) => els.map((e) => ({ i: Number(e.getAttribute("data-i")), mask: e.getAttribute("data-mask"), role: e.getAttribute("data-role"), cls: e.className, text: e.textContent ?? "" })));
    expect(spans).toHaveLength(tokens.length - promptLength); // the prompt is folded away by default
    for (const s of spans) expect(s.mask, `token ${s.i}`).toBe(String(mask[s.i]));
    const obs = spans.filter((s) => s.role === "observation");
    const acted = spans.filter((s) => s.role === "action");
    expect(obs.length).toBeGreaterThan(0);
    expect(acted.length).toBeGreaterThan(0);
    for (const s of obs) {
      expect(s.mask).toBe("0");
      expect(s.cls).toContain("masked");
    }
    for (const s of acted) expect(s.cls).toContain("trained");
    // the observation the env returned after turn 1 is exactly what is shown as not trained
    const words = (t: string) => t.replace(/↵/g, " ").split(/\s+/).filter((w) => w !== "");
    const firstObs = turns.find((t) => t.observation !== "")!.observation;
    expect(words(obs.map((s) => s.text).join(" ")).join(" ")).toContain(words(firstObs).join(" "));
    await page.screenshot({ path: join(SHOTS, "trajectory-tokens.png") });
  });

  it("shows a tool env's episode: tool calls and results per turn, the grader's parts", async () => {
    // the travel env's scripted persona (an evaluation row of the smoke run): it books, so every part is graded
    const file = "eval-prompt-driven-careful-scripted";
    const lines = jsonl(join(FIXTURES, "smoke-travel", "samples", `${file}.jsonl`));
    await open(`view=trajectories&tsrc=smoke-travel&file=${file}&ep=0`);
    const grade = lines[0].grade as { score: number; parts: Record<string, number> };
    const parts = await page.locator("table.grade tr[data-part]").evaluateAll((els) => els.map((e) => [e.getAttribute("data-part"), e.querySelector("td.num")?.textContent]));
    expect(parts).toEqual(Object.entries(grade.parts).map(([k, v]) => [k, v.toFixed(3)]));
    expect(await page.locator(".episode-detail .badge").first().textContent()).toBe(grade.score >= 1 ? "success" : "fail");
    const turns = lines[0].turns as { tools?: { name: string; ok: boolean }[] }[];
    const shown = await page.locator(".turn[data-turn]").evaluateAll((els) => els.map((e) => [...e.querySelectorAll(".calls span")].map((c) => c.textContent)));
    expect(shown).toEqual(turns.map((t) => (t.tools ?? []).map((c: { name: string; ok: boolean; error?: string }) => `${c.name}() ${c.ok ? "ok" : `failed: ${c.error ?? "error"}`}`)));
    expect(shown.flat().length).toBeGreaterThan(0);
    await page.screenshot({ path: join(SHOTS, "trajectory-grader.png") });
  });

  it("opens an arl train --agent rollout: its group, its calls and tool results, tokens with the tool results not trained", async () => {
    type AgentLine = { task: string; reward: { value: number }; advantage: number; calls: { content: string; toolCalls: { name: string; arguments: unknown }[] }[]; segments: { tokens: number[]; text: string[]; lossMask: number[] }[] };
    const lines = jsonl(join(FIXTURES, "smoke-agent", "samples", "step-0.jsonl")) as unknown as AgentLine[];
    await open("view=trajectories&tsrc=smoke-agent&file=step-1");
    await page.locator("#prev-step").click(); // the scrubber moves to step 0
    await settled();
    expect(await page.locator("section.content h2").first().textContent()).toContain("RL step 0");
    expect(await page.locator("section.content").textContent()).toContain("in 4 group(s)");
    // each rollout's reward and the trainer's advantage, as the samples file has them
    const rows = await page.locator("tr.episode").evaluateAll((els) => els.map((e) => [e.querySelector('[data-col="reward"]')?.textContent, e.querySelector('[data-col="advantage"]')?.textContent]));
    expect(rows).toEqual(lines.map((l) => [l.reward.value.toFixed(3), l.advantage.toFixed(3)]));
    // a rollout that searched and was rewarded (else one that searched)
    const searched = lines.map((l, i) => [l, i] as const).filter(([l]) => l.calls.some((c) => c.toolCalls.length > 0));
    const pick = (searched.find(([l]) => l.reward.value > 0) ?? searched[0])[1];
    await page.locator(`tr.episode[data-episode="${pick}"]`).click();
    await settled();
    const l = lines[pick];
    expect(await page.locator(".turn[data-turn]").count()).toBe(l.calls.length);
    expect(await page.locator(".turn[data-turn] pre.action").allTextContents()).toEqual(l.calls.map((c) => c.content));
    expect(await page.locator(".turn[data-turn] [data-tool-call]").evaluateAll((els) => els.map((e) => e.getAttribute("data-tool-call")))).toEqual(l.calls.flatMap((c) => c.toolCalls.map((t) => t.name)));
    const shownResults = await page.locator("pre[data-tool-result]").allTextContents();
    expect(shownResults.length).toBeGreaterThan(0);
    const seg = l.segments[0];
    const words = (t: string) => t.replace(/↵/g, " ").split(/\s+/).filter((w) => w !== "");
    const open0 = seg.text.indexOf("<tool_response>");
    const close0 = seg.text.indexOf("</tool_response>");
    expect(words(shownResults[0])).toEqual(seg.text.slice(open0 + 1, close0).flatMap(words)); // the passages the search returned
    await page.screenshot({ path: join(SHOTS, "agent-turns.png") });

    await page.locator('button[data-tab="tokens"]').click();
    await settled();
    const spans = await page.locator(".tokens .tok").evaluateAll((els) => els.map((e) => ({ i: Number(e.getAttribute("data-i")), mask: e.getAttribute("data-mask"), role: e.getAttribute("data-role"), cls: e.className, text: e.textContent ?? "" })));
    const promptLength = seg.lossMask.indexOf(1);
    expect(spans).toHaveLength(seg.tokens.length - promptLength); // the prompt folded away
    for (const sp of spans) expect(sp.mask, `token ${sp.i}`).toBe(String(seg.lossMask[sp.i]));
    const tool = spans.filter((sp) => sp.role === "tool-result");
    // every token from <tool_response> to </tool_response> is a tool result: loss mask 0, drawn as not trained
    const inBlocks: number[] = [];
    let inside = false;
    seg.text.forEach((w, i) => {
      if (w === "<tool_response>") inside = true;
      if (inside) inBlocks.push(i);
      if (w === "</tool_response>") inside = false;
    });
    expect(tool.map((sp) => sp.i)).toEqual(inBlocks);
    expect(tool.length).toBeGreaterThan(2);
    for (const sp of tool) {
      expect(sp.mask).toBe("0");
      expect(sp.cls).toContain("masked");
      expect(sp.cls).not.toContain("trained");
    }
    expect(words(tool.map((sp) => sp.text).join(" ")).join(" ")).toContain(words(shownResults[0]).join(" "));
    const acted = spans.filter((sp) => sp.role === "action");
    expect(acted.length).toBe(seg.lossMask.filter((m) => m === 1).length);
    for (const sp of acted) expect(sp.cls).toContain("trained");
    await page.locator(".tokens .tok.tool").first().scrollIntoViewIfNeeded();
    await page.screenshot({ path: join(SHOTS, "agent-tokens.png") });
  });

  it("compares an --agent run's warm start with after RL on the same held-out tasks", async () => {
    // the default pair of a folder with an --agent run: its evaluations before and after RL (rollouts.jsonl)
    const agentOnly = await startViewServer([join(FIXTURES, "smoke-agent")], { port: 0, pollMs: 0 });
    try {
      await open("view=compare", agentOnly.url + "/");
      expect(await page.locator("section.content h2").first().textContent()).toMatch(/smoke-agent · eval-warm.*vs.*smoke-agent · eval-after/);
    } finally {
      await agentOnly.close();
    }
    await open("view=compare&lsrc=smoke-agent&lfile=eval-warm&rsrc=smoke-agent&rfile=eval-after&diff=1");
    const rows = jsonl(join(FIXTURES, "smoke-agent", "rollouts.jsonl"));
    const warm = new Map(rows.filter((r) => r.stage === "eval-warm").map((r) => [r.task as string, r.reward as number]));
    const after = new Map(rows.filter((r) => r.stage === "eval-after").map((r) => [r.task as string, r.reward as number]));
    const differ = [...warm.keys()].filter((t) => after.has(t) && warm.get(t) !== after.get(t));
    expect(await page.locator("section.content h2").first().textContent()).toMatch(/smoke-agent · eval-warm.*vs.*smoke-agent · eval-after/);
    expect(await page.locator("tr[data-task]").evaluateAll((els) => els.map((e) => e.getAttribute("data-task")))).toEqual(differ);
    expect(differ.length).toBeGreaterThan(0);
    const cells = await page.locator("tr[data-task]").evaluateAll((els) => els.map((e) => [...e.querySelectorAll(".badge")].map((b) => b.textContent)));
    expect(cells).toEqual(differ.map((t) => [warm.get(t) === 1 ? "success" : "fail", after.get(t) === 1 ? "success" : "fail"]));
    const summary = JSON.parse(readFileSync(join(FIXTURES, "smoke-agent", "agent-summary.json"), "utf8")) as { before: { success: number }; after: { success: number } };
    expect(await page.locator('[data-note="left"]').textContent()).toContain(`held-out EM ${summary.before.success.toFixed(1)} %`);
    expect(await page.locator('[data-note="right"]').textContent()).toContain(`held-out EM ${summary.after.success.toFixed(1)} %`);
    await page.screenshot({ path: join(SHOTS, "agent-compare.png") });
  });

  it("filters episodes by outcome and steps by detector", async () => {
    await open("view=trajectories&tsrc=smoke-a&file=step-2");
    const lines = jsonl(join(FIXTURES, "smoke-a", "samples", "step-2.jsonl"));
    await page.locator("#filter-outcome").selectOption("no-answer");
    await settled();
    expect(await page.locator("tr.episode").count()).toBe(lines.filter((l) => l.answer === null).length);
    await page.locator("#filter-outcome").selectOption("");
    await settled();
    await page.locator("#filter-detector").selectOption("answer_avoidance");
    await settled();
    // answer_avoidance fires from step 2 on (detectors.jsonl) and keeps firing (the monitor replayed): steps 2–4
    expect(await page.locator("#step-scrubber").getAttribute("max")).toBe("2");
    expect(await page.locator(".badge.firing").first().textContent()).toContain("answer_avoidance");
    // the same filter from a URL that names a step where it was not firing: the page moves to its first firing step
    await open("view=trajectories&tsrc=smoke-a&file=step-0&detector=answer_avoidance");
    expect(await page.locator("section.content h2").first().textContent()).toContain("RL step 2");
    expect(await page.evaluate(() => location.hash)).toContain("file=step-2");
  });

  it("compares two runs on the same held-out tasks, side by side", async () => {
    await open("view=compare&lsrc=smoke-a&lfile=eval-rl-grpo&rsrc=smoke-b&rfile=eval-rl-grpo");
    const a = jsonl(join(FIXTURES, "smoke-a", "samples", "eval-rl-grpo.jsonl"));
    const b = jsonl(join(FIXTURES, "smoke-b", "samples", "eval-rl-grpo.jsonl"));
    const shared = a.map((l) => l.task as string).filter((t) => b.some((l) => l.task === t));
    expect(await page.locator("tr[data-task]").evaluateAll((els) => els.map((e) => e.getAttribute("data-task")))).toEqual(shared);
    expect(shared.length).toBeGreaterThan(0); // same seed and world, another reward preset: the same held-out tasks
    {
      const t = shared.at(-1)!;
      await page.locator(`tr[data-task="${t}"]`).click();
      await settled();
      const left = a.find((l) => l.task === t)!;
      const right = b.find((l) => l.task === t)!;
      expect(await page.locator('[data-side="left"] .turn[data-turn]').count()).toBe((left.turns as unknown[]).length);
      expect(await page.locator('[data-side="right"] .turn[data-turn]').count()).toBe((right.turns as unknown[]).length);
      expect(await page.locator('[data-side="left"] .turn pre.action').first().textContent()).toBe((left.turns as { action: string }[])[0].action);
      expect(await page.locator('[data-side="right"] .turn pre.action').first().textContent()).toBe((right.turns as { action: string }[])[0].action);
    }
    await page.screenshot({ path: join(SHOTS, "compare.png") });
    // an evaluation episode's tokens are sampled, never trained: the token view says so
    await open("view=trajectories&tsrc=smoke-a&file=eval-rl-grpo&ep=0&tab=tokens");
    const legend = (await page.locator(".episode-detail .legend").first().textContent()) ?? "";
    expect(legend).toContain("an evaluation rollout is never trained on");
    expect(legend).not.toMatch(/\btrained loss mask 1/);
    expect(await page.locator(".episode-detail").textContent()).toMatch(/\d+ sampled \(evaluation: not trained\)/);
  });

  it("follows a run that is still training: a new metrics line shows up without a reload", async () => {
    const live = join(tmp, "live,1"); // a comma in a folder's name survives the page's URL state
    cpSync(join(FIXTURES, "smoke-b"), live, { recursive: true });
    const liveServer = await startViewServer([live], { port: 0, pollMs: 200 });
    try {
      await open(`view=curves&src=${encodeURIComponent("live,1")}&m=reward/mean&stage=rl`, liveServer.url + "/");
      const before = await curve("reward/mean", "live,1");
      expect(before.size).toBeGreaterThan(0);
      expect(await page.locator('input[data-source="live,1"]').isChecked()).toBe(true);
      await page.reload();
      await page.waitForFunction(() => document.body.dataset.ready !== undefined && document.body.dataset.ready !== "", null, { timeout: 45_000 });
      expect(await curve("reward/mean", "live,1")).toEqual(before);
      const next = Math.max(...before.keys()) + 1;
      appendFileSync(join(live, "metrics.jsonl"), JSON.stringify({ stage: "rl", step: next, "reward/mean": 0.125 }) + "\n");
      await page.waitForFunction(
        (label) => [...document.querySelectorAll('[data-vega="reward/mean"] svg [aria-label]')].some((e) => e.getAttribute("aria-label") === label),
        `live,1 step ${next}: 0.125`,
        { timeout: 45_000 },
      );
      expect((await curve("reward/mean", "live,1")).size).toBe(before.size + 1);
      // a damaged line is skipped, and the page says so
      appendFileSync(join(live, "metrics.jsonl"), "{not json\n");
      await page.waitForSelector("[data-damaged]", { timeout: 45_000 });
      expect(await page.locator("[data-damaged]").textContent()).toContain("live,1/metrics.jsonl: 1");
      expect((await curve("reward/mean", "live,1")).size).toBe(before.size + 1);
      // the trajectories view on the newest step follows the run to the step it writes next
      const last = Math.max(...readdirSync(join(live, "samples")).filter((f) => f.startsWith("step-")).map((f) => Number(f.slice(5, -6))));
      await open(`view=trajectories&tsrc=${encodeURIComponent("live,1")}&file=step-${last}`, liveServer.url + "/");
      writeFileSync(join(live, "samples", `step-${last + 1}.jsonl`), readFileSync(join(live, "samples", `step-${last}.jsonl`)));
      await page.waitForFunction((h) => document.querySelector("section.content h2")?.textContent?.includes(h) === true, `RL step ${last + 1}`, { timeout: 45_000 });
    } finally {
      await liveServer.close();
    }
  });

  it("with --api-key, the page sends the token from its URL; without it, it says why it cannot read", async () => {
    const locked = await startViewServer([join(FIXTURES, "smoke-a")], { port: 0, pollMs: 0, apiKey: "s3cret" });
    try {
      await open("view=curves&src=smoke-a&m=reward/mean", `${locked.url}/?token=s3cret`);
      expect((await curve("reward/mean", "smoke-a")).size).toBeGreaterThan(0);
      // the key leaves the address bar (a URL copied to share a view does not carry it); a reload still has it
      expect(page.url()).not.toContain("s3cret");
      expect(page.url()).toContain("#view=curves");
      await page.reload();
      await page.waitForFunction(() => document.body.dataset.ready !== undefined && document.body.dataset.ready !== "", null, { timeout: 45_000 });
      expect((await curve("reward/mean", "smoke-a")).size).toBeGreaterThan(0);
      // another tab without it cannot read, and says why
      const other = await browser.newPage();
      try {
        await other.goto(`${locked.url}/#view=curves`);
        await other.waitForFunction(() => document.querySelector("#app")?.textContent?.includes("API key") === true, null, { timeout: 45_000 });
        expect(await other.locator("#app").textContent()).toContain("missing or wrong API key");
      } finally {
        await other.close();
      }
    } finally {
      await locked.close();
    }
  });

  it("exports one self-contained file that draws the same views with every network request refused", async () => {
    const file = join(tmp, "view.html");
    await exportView([FIXTURES], file);
    const ctx = await browser.newContext({ viewport: { width: 1400, height: 900 } });
    const requests: string[] = [];
    await ctx.route("**/*", (route) => {
      const url = route.request().url();
      if (url.startsWith("file:")) return route.continue();
      requests.push(url);
      return route.abort();
    });
    const p = await ctx.newPage();
    const errors: string[] = [];
    p.on("pageerror", (e) => errors.push(e.message));
    const base = pathToFileURL(file).href;
    await p.goto(`${base}#view=curves&src=smoke-a&m=reward/mean`);
    await p.waitForFunction(() => (document.body.dataset.ready ?? "") !== "", null, { timeout: 45_000 });
    const labels = await p.locator(`[data-vega="reward/mean"] svg [aria-label]`).evaluateAll((els) => els.map((e) => e.getAttribute("aria-label") ?? ""));
    const rl = jsonl(join(FIXTURES, "smoke-a", "metrics.jsonl")).filter((r) => r.stage === "rl");
    for (const r of rl) expect(labels).toContain(`smoke-a step ${r.step}: ${r["reward/mean"]}`);
    expect(await p.locator("header .status").textContent()).toContain("exported file");
    await p.goto(`${base}#view=trajectories&tsrc=lab/composite&file=step-0&ep=0&tab=tokens`);
    await p.waitForFunction(() => (document.body.dataset.ready ?? "") !== "" && document.querySelectorAll(".tokens .tok").length > 0, null, { timeout: 45_000 });
    expect(await p.locator('.tokens .tok[data-mask="1"]').count()).toBeGreaterThan(0);
    expect(requests).toEqual([]);
    expect(errors).toEqual([]);
    await ctx.close();
  });

  it.runIf(process.env.ARL_VIEW_SCREENSHOTS === "1" && process.env.ARL_VIEW_SCREENSHOT_RUNS !== undefined)("takes the docs' screenshots on other folders", async () => {
    const other = await startViewServer(process.env.ARL_VIEW_SCREENSHOT_RUNS!.split(","), { port: 0, pollMs: 0 });
    try {
      mkdirSync(SHOTS, { recursive: true });
      for (const [name, hash] of (process.env.ARL_VIEW_SCREENSHOT_HASHES ?? "").split(";").filter((x) => x !== "").map((x) => x.split("=>") as [string, string])) {
        await open(hash, other.url + "/");
        await page.screenshot({ path: join(SHOTS, `${name}.png`) });
      }
    } finally {
      await other.close();
    }
  });
});
