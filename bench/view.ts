/**
 * `arl view` speed (issue 18): a 200-step run's folder opens in under 2 s, and a lab of 6 designs overlays without
 * lag. Drives the real page in Debian's Chromium (playwright-core, `/usr/bin/chromium` or `ARL_CHROMIUM`) against
 * the real server (`startViewServer`) over synthetic folders written by the trainer's own writer (`RunDir`):
 *
 *   node --import tsx bench/view.ts [--quick] [--steps N] [--repeats N] [--max-wait S] [--keep DIR] [--only-write]
 *
 * --keep DIR writes the folders into DIR and leaves them there (`arl view DIR` opens them); --only-write stops after
 * writing them.
 * Folders (in a temp dir, removed after): a run of `--steps` (200) RL steps after 200 SFT steps — `metrics.jsonl`
 * with the 34 keys a default `arl train` RL line has, `samples/step-<n>.jsonl` with 32 episodes each (4 groups of 8,
 * ~230 tokens each with loss mask and logprobs, like `--run.samplesPerStep 32`), 3 eval files, `detectors.jsonl` —
 * and a lab of 6 designs of the same shape (8 episodes per step). Values come from a seeded RNG: the viewer's work
 * depends on sizes, not values.
 *
 * Where a cold open's time went is kept per open in `extra.coldParts` (ms from navigation: DOMContentLoaded = the
 * page script parsed and run, `indexEnd` / `metricsEnd` = those responses in, then the last draw's data / charts /
 * whole durations).
 * Measured (median of `--repeats`, 5): time from navigation to the page's "drawn" mark (`body[data-ready]`, set after
 * every chart has rendered) for (1) the run's curves, 8 charts, on a server that has just started (files not read
 * yet; the page script is bundled at start-up and awaited first — it is a one-off per process), (2) the same
 * again (files cached), (3) the trajectories view at the last step, (4) the lab's 6 designs overlaid on 8 charts,
 * (5) one smoothing-slider move on that page (input event → every chart redrawn), 20 moves, (6) hiding or showing
 * one design (its checkbox → every chart redrawn). Targets: (1) and (3) < 2 000 ms; (5) and (6) < 100 ms, the limit under which a response feels instantaneous (Nielsen, "Response Times: The 3
 * Important Limits", 1993), which is what "without lag" is taken to mean. Writes bench/results/view.json.
 */
import { mkdtempSync, rmSync, writeFileSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Trajectory } from "../src/core/types.ts";
import { Rng } from "../src/core/rng.ts";
import { RunDir } from "../src/train/runDir.ts";
import { clientBundle } from "../src/view/bundle.ts";
import { startViewServer } from "../src/view/server.ts";
import { benchResult, flag, median, percentile, printResult, waitIdle, withContention, writeResult, type BenchRow } from "./lib.ts";

const args = process.argv.slice(2);
const quick = args.includes("--quick");
const steps = Number(flag("--steps") ?? 200);
const repeats = Number(flag("--repeats") ?? (quick ? 3 : 5));
const maxWait = Number(flag("--max-wait") ?? 60);
const CHROMIUM = process.env.ARL_CHROMIUM ?? "/usr/bin/chromium";

/** The keys of a default `arl train` RL line (runs/default/metrics.jsonl, 2026-12-01). */
const RL_KEYS = [
  "dropped", "em", "guess_rate", "hack/fabricated_citation", "hack/guess_rate_known", "hack/guess_rate_unknown", "hack/kl_ref", "hack/no_answer",
  "hack/response_length", "hack/search_then_ignore", "hack/tool_spam", "invalid_rate", "no_answer_rate", "observation_length", "response_length",
  "reward/mean", "reward/std", "reward/std_within_group", "reward/term/em", "reward/term/format", "reward/term/invalid", "reward/term/search_cost",
  "searches", "searches/known", "searches/unknown", "tool_errors", "train/clip_fraction", "train/entropy", "train/grad_norm",
  "train/informative_fraction", "train/kl", "train/loss", "train/ptx_loss", "train/ratio_mean",
];
const CONFIG = (samplesPerStep: number) =>
  `run:\n  samplesPerStep: ${samplesPerStep}\nrl:\n  groupSize: 8\n  advantage: grpo\ndetectors:\n  enabled: true\n  baselineSteps: 10\n  window: 10\n`;

/** A synthetic episode shaped like a search episode: prompt, 2 turns, one observation, an answer. */
function episode(rng: Rng, task: number, member: number, vocab: number): Trajectory {
  const prompt = 60;
  const a1 = 8 + rng.int(8);
  const obs = 120;
  const a2 = 6 + rng.int(6);
  const n = prompt + a1 + obs + a2;
  const tokens = Array.from({ length: n }, () => 5 + rng.int(vocab - 5));
  const lossMask = tokens.map((_, i) => (i >= prompt && i < prompt + a1) || i >= prompt + a1 + obs ? 1 : 0);
  const logprobs = lossMask.map((m) => (m === 1 ? -rng.next() * 3 : 0));
  const em = rng.next() < 0.5 ? 1 : 0;
  const terms = [
    { name: "em", value: em, weight: 1, explanation: em ? "matches" : "no match" },
    { name: "format", value: 1, weight: 0.1, explanation: "answered" },
    { name: "search_cost", value: -1, weight: 0.1, explanation: "1 search" },
  ];
  return {
    task: { id: `capital:t${task}`, question: `what is the capital of country ${task} ?`, answers: [`city ${task}`], kind: "single-hop", known: task % 2 === 0 },
    tokens,
    lossMask,
    logprobs,
    promptLength: prompt,
    turns: [
      { actionText: `<search> country ${task} capital </search>`, action: { type: "tool_call", calls: [{ name: "search", arguments: { query: `country ${task} capital` } }] }, observation: "\n<information> doc 1 … </information>\n", sampledTokens: a1, observationTokens: obs, stopReason: "stop" },
      { actionText: `<answer> city ${em ? task : task + 1} </answer>`, action: { type: "answer", answer: `city ${task}` }, observation: "", sampledTokens: a2, observationTokens: 0, stopReason: "stop" },
    ],
    answer: `city ${em ? task : task + 1}`,
    searches: 1,
    toolCalls: { search: 1 },
    invalidActions: 0,
    truncated: false,
    member,
    reward: { total: terms.reduce((a, t) => a + t.value * t.weight, 0), terms },
  };
}

/** Writes a synthetic run folder with the trainer's writer. */
function writeRun(root: string, name: string, seed: number, perStep: number): void {
  const rng = new Rng(seed);
  const run = new RunDir(root, name, { overwrite: true });
  run.writeText("config.yaml", CONFIG(perStep));
  for (let s = 0; s < 200; s++) run.logMetrics("sft", s, { loss: 5 * Math.exp(-s / 60) + rng.next() * 0.1, lr: 1e-3, grad_norm: 1 + rng.next() });
  for (let s = 0; s < steps; s++) {
    run.logMetrics("rl", s, Object.fromEntries(RL_KEYS.map((k) => [k, Math.sin(s / 17 + k.length) * 0.3 + 0.5 + rng.next() * 0.1])));
    run.writeSamples(`step-${s}`, Array.from({ length: perStep }, (_, i) => episode(rng, s * 4 + Math.floor(i / 8), i % 8, 340)));
    if (s === 40 || s === 120) run.appendJsonl("detectors.jsonl", { detector: "guess_unknown", metric: "hack/guess_rate_unknown", since: s, step: s, value: 0.6, baseline: 0.4, threshold: 0.5, message: `guess_unknown: hack/guess_rate_unknown 0.600 > 0.500 since step ${s}` });
  }
  for (const p of ["warm-start-sft", "rl-grpo", "direct"]) run.writeSamples(`eval-${p}`, Array.from({ length: 120 }, (_, i) => episode(rng, i, 0, 340)));
}

if (!existsSync(CHROMIUM) && !args.includes("--only-write")) {
  console.log(`bench view: skipped — no Chromium at ${CHROMIUM} (apt-get install -y chromium, or set ARL_CHROMIUM)`);
  process.exit(0);
}
const keep = flag("--keep");
const root = keep ?? mkdtempSync(join(tmpdir(), "arl-bench-view-"));
try {
  const t0 = performance.now();
  writeRun(root, "run200", 1, 32);
  const lab = join(root, "lab6");
  for (let d = 0; d < 6; d++) writeRun(join(lab, "designs"), `design-${d}`, 10 + d, 8);
  writeFileSync(join(lab, "lab.json"), JSON.stringify({ name: "lab6", designs: [] }));
  const genMs = performance.now() - t0;
  console.log(`folders written in ${(genMs / 1000).toFixed(1)} s under ${root}`);
  if (args.includes("--only-write")) process.exit(0);

  const { chromium } = await import("playwright-core");
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"] });
  await clientBundle();
  const metrics8 = "reward/mean,em,searches,train/kl,train/entropy,train/grad_norm,train/clip_fraction,hack/guess_rate_unknown";
  const designs = Array.from({ length: 6 }, (_, d) => `lab6/design-${d}`).join(",");
  const drawn = async (page: import("playwright-core").Page, url: string): Promise<number> => {
    const s = performance.now();
    await page.goto(url);
    await page.waitForFunction(() => (document.body.dataset.ready ?? "") !== "", null, { timeout: 60_000 });
    return performance.now() - s;
  };
  const cold: number[] = [];
  const coldParts: string[] = [];
  const warm: number[] = [];
  const traj: number[] = [];
  const labOpen: number[] = [];
  const slider: number[] = [];
  const toggle: number[] = [];
  await waitIdle(maxWait);
  const { others } = await withContention(async () => {
    for (let r = 0; r < repeats; r++) {
      const server = await startViewServer([join(root, "run200"), lab], { port: 0, pollMs: 0 });
      const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
      cold.push(await drawn(page, `${server.url}/#view=curves&src=run200&m=${metrics8}&stage=rl`));
      // where the cold open's time went: the page's own User Timing entries of its last draw, and navigation timing
      coldParts.push(
        (await page.evaluate(
          `JSON.stringify({ nav: Math.round(performance.getEntriesByType("navigation")[0].domContentLoadedEventEnd), ...Object.fromEntries(performance.getEntriesByType("resource").filter((e) => e.name.includes("/api/")).map((e) => [new URL(e.name).pathname.slice(5) + "End", Math.round(e.responseEnd)])), ...Object.fromEntries(["data", "charts", "draw"].map((n) => [n, Math.round(performance.getEntriesByName("arl-view:" + n).at(-1)?.duration ?? -1)])) })`,
        )) as string,
      );
      warm.push(await drawn(page, `${server.url}/?again#view=curves&src=run200&m=${metrics8}&stage=rl`));
      traj.push(await drawn(page, `${server.url}/#view=trajectories&tsrc=run200&file=step-${steps - 1}&ep=0&tab=tokens`));
      labOpen.push(await drawn(page, `${server.url}/?lab#view=curves&src=${designs}&m=${metrics8}&stage=rl`));
      for (let k = 0; k < (r === 0 ? 20 : 4); k++) {
        const v = ((k % 10) + 1) / 11;
        // a string, not a function: tsx's helpers (__name) do not exist in the page
        const ms = (await page.evaluate(`(async () => {
          const el = document.querySelector("#smoothing");
          const s = performance.now();
          el.value = "${v.toFixed(2)}";
          el.dispatchEvent(new Event("input", { bubbles: true }));
          await new Promise((resolve) => { const o = new MutationObserver(() => { if (document.body.dataset.ready !== "") { o.disconnect(); resolve(); } }); o.observe(document.body, { attributes: true, attributeFilter: ["data-ready"] }); });
          return performance.now() - s;
        })()`)) as number;
        slider.push(ms);
      }
      for (let k = 0; k < 4; k++) {
        // hide / show the last design: the charts' data change, not their specs
        const ms = (await page.evaluate(`(async () => {
          const el = document.querySelector('input[data-source="lab6/design-5"]');
          const s = performance.now();
          el.click();
          await new Promise((resolve) => { const o = new MutationObserver(() => { if (document.body.dataset.ready !== "") { o.disconnect(); resolve(); } }); o.observe(document.body, { attributes: true, attributeFilter: ["data-ready"] }); });
          return performance.now() - s;
        })()`)) as number;
        toggle.push(ms);
      }
      await page.close();
      await server.close();
    }
  });
  await browser.close();
  const ms = (xs: number[]) => Math.round(median(xs));
  const rows: BenchRow[] = [
    { name: `${steps}-step run: curves (8 charts), fresh server`, ours: ms(cold), reference: null, unit: "ms", speedup: null, target: "< 2000 ms", met: median(cold) < 2000, note: `median of ${cold.length}; min ${Math.round(Math.min(...cold))}, max ${Math.round(Math.max(...cold))}` },
    { name: `${steps}-step run: curves again (files cached)`, ours: ms(warm), reference: null, unit: "ms", speedup: null, target: "", met: null, note: `median of ${warm.length}` },
    { name: `${steps}-step run: trajectories at step ${steps - 1} (32 episodes, tokens)`, ours: ms(traj), reference: null, unit: "ms", speedup: null, target: "< 2000 ms", met: median(traj) < 2000, note: `median of ${traj.length}` },
    { name: "lab of 6 designs × 200 steps: overlay on 8 charts", ours: ms(labOpen), reference: null, unit: "ms", speedup: null, target: "< 2000 ms", met: median(labOpen) < 2000, note: `median of ${labOpen.length}; 9 600 points` },
    { name: "lab of 6 designs: smoothing slider → all charts redrawn", ours: Math.round(median(slider)), reference: null, unit: "ms", speedup: null, target: "< 100 ms", met: median(slider) < 100, note: `median of ${slider.length} moves; p95 ${Math.round(percentile(slider, 95))} ms` },
    { name: "lab of 6 designs: hide / show one design → all charts redrawn", ours: Math.round(median(toggle)), reference: null, unit: "ms", speedup: null, target: "< 100 ms", met: median(toggle) < 100, note: `median of ${toggle.length} clicks; p95 ${Math.round(percentile(toggle, 95))} ms` },
  ];
  for (const r of rows) if (r.met === false) r.reason = "see the note; measured on a shared 2-core machine";
  const result = benchResult({ script: "bench/view.ts", args: quick ? ["--quick"] : [] }, {
    bench: "view",
    title: "arl view: opening a 200-step run, overlaying a lab of 6 designs (Chromium, playwright-core)",
    reference: "targets of issue 18 (no reference implementation)",
    rows,
    contention: others,
    extra: { steps, repeats, folderWriteMs: Math.round(genMs), cold, coldParts: coldParts.map((x) => JSON.parse(x) as unknown), warm, traj, labOpen, slider, toggle },
  });
  printResult(result);
  console.log(`written: ${writeResult(result)}`);
} finally {
  if (keep === undefined) rmSync(root, { recursive: true, force: true });
}
