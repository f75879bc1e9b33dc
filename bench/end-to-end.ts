/**
 * End-to-end benchmark (issue 6, benchmark 5) and the memory target: wall time and peak RSS of whole CLI runs.
 *
 *   node --import tsx bench/end-to-end.ts [--only train,lab,memory] [--quick] [--short N] [--long N] [--max-wait S]
 *     [--memory-args "--rl.learningRate 0 …"] [--no-write]
 *
 * - train: the default `arl train` (~11 min on 2 cores; skipped with --quick), run folder runs/bench-e2e-train.
 * - lab: `arl lab --quick` (the CI-sized lab), folder runs/bench-e2e-lab.
 * - memory: the smoke configuration (`arl train --smoke`, tiny model) with `--rl.steps 50` and with `--rl.steps 200`
 *   (checkpoints every 10 steps, as the default config): the issue's target is peak RSS(200 steps) ≤ 1.10 × peak
 *   RSS(50 steps), i.e. memory bounded by the configuration, not growing with steps. RSS is also recorded per RL
 *   step (from the run's metrics.jsonl as it grows). When the target is missed, the long run is repeated with V8's
 *   old space capped (NODE_OPTIONS=--max-old-space-size=128) to tell live memory from garbage collected late.
 * Each command is a child process (`node bin/arl.mjs …` from the repo root). Its memory is sampled from /proc every
 * 200 ms over the whole process tree (the CLI and any descendant, e.g. tsx's esbuild service; jax-js's worker
 * threads are in-process): peak RSS = max(largest sampled sum of VmRSS, the CLI process's own VmHWM), which also
 * catches a spike between samples. Writes bench/results/end-to-end.json (not with --no-write, for experiments such as
 * --memory-args, which adds CLI arguments to both memory runs).
 */
import { spawn } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { benchResult, flag, benchDir, printResult, waitIdle, withContention, writeResult, type BenchRow } from "./lib.ts";

const repo = join(benchDir, "..");
const args = process.argv.slice(2);
const quick = args.includes("--quick");
const only = new Set((flag("--only") ?? "train,lab,memory").split(",").map((s) => s.trim()));
if (quick) only.delete("train");
const shortSteps = Number(flag("--short") ?? 50);
const longSteps = Number(flag("--long") ?? 200);
const maxWait = Number(flag("--max-wait") ?? 60);
const memoryArgs = (flag("--memory-args") ?? "").split(/\s+/).filter(Boolean);
const noWrite = args.includes("--no-write");
/** Memory target: peak RSS of the long run ÷ the short run's. */
const MEMORY_RATIO_TARGET = 1.1;
/** V8 old-space cap (MiB) of the diagnostic rerun when the memory target is missed. */
const CAP_MIB = 128;

/** Memory of a process from /proc/<pid>/status (KiB), or null when it is gone. */
function procMem(pid: number): { rss: number; hwm: number } | null {
  try {
    const s = readFileSync(`/proc/${pid}/status`, "utf8");
    const kib = (key: string): number => Number(new RegExp(`^${key}:\\s+(\\d+)`, "m").exec(s)?.[1] ?? 0);
    return { rss: kib("VmRSS"), hwm: kib("VmHWM") };
  } catch {
    return null;
  }
}

/** `root` and its descendants (by /proc/<pid>/stat's parent pid). */
function processTree(root: number): number[] {
  const children = new Map<number, number[]>();
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      if (!children.has(ppid)) children.set(ppid, []);
      children.get(ppid)!.push(Number(name));
    } catch {
      // exited meanwhile
    }
  }
  const out = [root];
  for (let i = 0; i < out.length; i++) out.push(...(children.get(out[i]) ?? []));
  return out;
}

/** RL steps finished so far, from `<runDir>/metrics.jsonl` (null before the file exists). */
function rlSteps(runDir: string): number | null {
  try {
    return (readFileSync(join(runDir, "metrics.jsonl"), "utf8").match(/"stage":"rl"/g) ?? []).length;
  } catch {
    return null;
  }
}

/** What one CLI run cost. */
interface RunCost {
  wallS: number;
  /** Peak RSS of the process tree (MiB), see the header; null without /proc. */
  peakMiB: number | null;
  /** Largest sampled RSS (MiB) while each RL step ran, index = steps finished so far (only with runDir). */
  perStepMiB: number[];
  exitCode: number | null;
  /** Last lines of the output (for failures). */
  tail: string;
}

/** Runs `node bin/arl.mjs ...cliArgs` from the repo root, sampling its memory every 200 ms. */
async function measure(cliArgs: string[], runDir?: string, nodeOptions?: string): Promise<RunCost> {
  const hasProc = existsSync("/proc/self/status");
  const t0 = performance.now();
  const child = spawn(process.execPath, [join(repo, "bin/arl.mjs"), ...cliArgs], {
    cwd: repo,
    stdio: ["ignore", "pipe", "pipe"],
    env: nodeOptions ? { ...process.env, NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ""} ${nodeOptions}`.trim() } : process.env,
  });
  let out = "";
  const keep = (b: Buffer): void => {
    out = (out + b.toString()).slice(-4000);
  };
  child.stdout.on("data", keep);
  child.stderr.on("data", keep);
  let peakKiB = 0;
  const perStep: number[] = [];
  const sample = (): void => {
    if (!hasProc || child.pid === undefined) return;
    let sum = 0;
    for (const pid of processTree(child.pid)) {
      const m = procMem(pid);
      if (!m) continue;
      sum += m.rss;
      if (pid === child.pid) peakKiB = Math.max(peakKiB, m.hwm);
    }
    peakKiB = Math.max(peakKiB, sum);
    const step = runDir ? rlSteps(runDir) : null;
    if (step !== null) perStep[step] = Math.max(perStep[step] ?? 0, sum / 1024);
  };
  const timer = setInterval(sample, 200);
  const exitCode = await new Promise<number | null>((resolve) => child.on("close", (code) => resolve(code)));
  clearInterval(timer);
  const wallS = (performance.now() - t0) / 1000;
  return { wallS, peakMiB: hasProc ? peakKiB / 1024 : null, perStepMiB: Array.from(perStep, (x) => x ?? 0), exitCode, tail: out };
}

/** measure() that throws with the output's tail when the command fails. */
async function measureOk(label: string, cliArgs: string[], runDir?: string, nodeOptions?: string): Promise<RunCost> {
  console.log(`  ${label}: node bin/arl.mjs ${cliArgs.join(" ")}`);
  const r = await measure(cliArgs, runDir, nodeOptions);
  if (r.exitCode !== 0) throw new Error(`${label} failed (exit ${r.exitCode}):\n${r.tail}`);
  console.log(`    ${r.wallS.toFixed(1)} s, peak RSS ${r.peakMiB?.toFixed(0) ?? "?"} MiB`);
  return r;
}

const mib = (x: number | null): number => x ?? NaN;

/** RSS (MiB) sampled during RL step `s`, or during the nearest earlier step sampled (steps can be shorter than the
 * sampling interval); 0 when none. */
function rssAt(r: RunCost, s: number): number {
  for (let i = Math.min(s, r.perStepMiB.length - 1); i >= 0; i--) if (r.perStepMiB[i] > 0) return r.perStepMiB[i];
  return 0;
}

async function main(): Promise<void> {
  console.log(`end-to-end: ${[...only].join(", ")}${quick ? " (quick)" : ""}`);
  await waitIdle(maxWait);
  const rows: BenchRow[] = [];
  const extra: Record<string, unknown> = {};
  const { others } = await withContention(async () => {
    if (only.has("train")) {
      const r = await measureOk("default train", ["train", "--run.name", "bench-e2e-train", "--overwrite"], join(repo, "runs/bench-e2e-train"));
      extra.train = { wallS: r.wallS, peakMiB: r.peakMiB };
      rows.push(
        { name: "arl train (default) wall time", ours: r.wallS / 60, reference: null, unit: "min", speedup: null, target: "", met: null, note: "warm start 1 000 SFT steps + 100 GRPO steps + 4 evaluations" },
        { name: "arl train (default) peak RSS", ours: mib(r.peakMiB), reference: null, unit: "MiB", speedup: null, target: "", met: null, note: "process tree" },
      );
    }
    if (only.has("lab")) {
      const r = await measureOk("lab --quick", ["lab", "--quick", "--name", "bench-e2e-lab", "--overwrite"]);
      extra.lab = { wallS: r.wallS, peakMiB: r.peakMiB };
      rows.push(
        { name: "arl lab --quick wall time", ours: r.wallS, reference: null, unit: "s", speedup: null, target: "", met: null, note: "tiny model, 4 RL steps per design, 5 designs, report.html" },
        { name: "arl lab --quick peak RSS", ours: mib(r.peakMiB), reference: null, unit: "MiB", speedup: null, target: "", met: null, note: "process tree" },
      );
    }
    if (only.has("memory")) {
      const run = (steps: number, nodeOptions?: string): Promise<RunCost> => {
        const name = `bench-mem-${steps}`;
        return measureOk(`smoke, ${steps} RL steps${nodeOptions ? ` (NODE_OPTIONS=${nodeOptions})` : ""}`, ["train", "--smoke", "--rl.steps", String(steps), "--run.checkpointEvery", "10", "--run.name", name, "--overwrite", ...memoryArgs], join(repo, "runs", name), nodeOptions);
      };
      const a = await run(shortSteps);
      const b = await run(longSteps);
      const ratio = mib(b.peakMiB) / mib(a.peakMiB);
      const at = (r: RunCost, s: number): string => (rssAt(r, s) ? rssAt(r, s).toFixed(0) : "?");
      const marks = [1, Math.round(longSteps / 4), Math.round(longSteps / 2), Math.round((3 * longSteps) / 4), longSteps - 1];
      const met = Number.isFinite(ratio) ? ratio <= MEMORY_RATIO_TARGET : null;
      // Growth per step after the first `shortSteps` (from the RSS sampled during each step).
      const last = Math.min(b.perStepMiB.length, longSteps) - 1; // the last RL step (later samples: evaluation, exit)
      const perStep = last > shortSteps ? (rssAt(b, last) - rssAt(b, shortSteps)) / (last - shortSteps) : NaN;
      rows.push(
        { name: `smoke train, ${shortSteps} RL steps`, ours: mib(a.peakMiB), reference: null, unit: "MiB", speedup: null, target: "", met: null, note: `peak RSS; wall ${a.wallS.toFixed(0)} s` },
        { name: `smoke train, ${longSteps} RL steps`, ours: mib(b.peakMiB), reference: null, unit: "MiB", speedup: null, target: "", met: null, note: `peak RSS; wall ${b.wallS.toFixed(0)} s; RSS during RL steps ${marks.join("/")}: ${marks.map((s) => at(b, s)).join("/")} MiB (${perStep.toFixed(2)} MiB/step after step ${shortSteps})` },
      );
      let capped: RunCost | null = null;
      if (met === false) {
        // Is the growth live memory or garbage V8 has not collected yet (its heap limit is sized from the RAM)?
        // The same run with the old space capped: it fails if live memory grows, and shows the bounded RSS if not.
        capped = await run(longSteps, `--max-old-space-size=${CAP_MIB}`);
        rows.push({
          name: `smoke train, ${longSteps} RL steps, V8 old space ≤ ${CAP_MIB} MiB`,
          ours: mib(capped.peakMiB),
          reference: null,
          unit: "MiB",
          speedup: null,
          target: "",
          met: null,
          note: `node --max-old-space-size=${CAP_MIB}: ${(mib(capped.peakMiB) / mib(a.peakMiB)).toFixed(2)}× the uncapped ${shortSteps}-step run; RSS during RL steps ${marks.join("/")}: ${marks.map((s) => at(capped!, s)).join("/")} MiB`,
        });
      }
      rows.push({
        name: `peak RSS ${longSteps} steps ÷ ${shortSteps} steps`,
        ours: ratio,
        reference: null,
        unit: "×",
        speedup: null,
        target: `≤ ${MEMORY_RATIO_TARGET.toFixed(2)}×`,
        met,
        note:
          met === false
            ? `${ratio.toFixed(3)}×; RSS grows ${perStep.toFixed(2)} MiB/step${capped ? `; with V8's old space capped at ${CAP_MIB} MiB the ${longSteps}-step run completes at ${mib(capped.peakMiB).toFixed(0)} MiB (${((rssAt(capped, last) - rssAt(capped, shortSteps)) / Math.max(1, last - shortSteps)).toFixed(2)} MiB/step after step ${shortSteps}): most of the growth is garbage V8 collects late (its heap limit is sized from the machine's RAM), not live memory` : ""}`
            : "memory bounded by the configuration",
        reason:
          met === false
            ? `RSS grows ${perStep.toFixed(2)} MiB per step after step ${shortSteps}${capped ? ` (${mib(capped.peakMiB).toFixed(0)} MiB with V8's old space capped at ${CAP_MIB} MiB: garbage collected late rather than live memory)` : ""}; check run.gcEvery (a full collection every N steps)`
            : undefined,
      });
      const keep = (r: RunCost, steps: number) => ({ steps, wallS: r.wallS, peakMiB: r.peakMiB, perStepMiB: r.perStepMiB.map((x) => Math.round(x)) });
      extra.memory = { short: keep(a, shortSteps), long: keep(b, longSteps), ...(capped ? { cappedOldSpaceMiB: CAP_MIB, longCapped: keep(capped, longSteps) } : {}) };
    }
  });
  const result = benchResult({ script: "bench/end-to-end.ts", args }, {
    bench: "end-to-end",
    title: "5. End to end: wall time and peak memory of CLI runs",
    reference: "none (absolute figures; the memory row compares a 200-step run with a 50-step run)",
    rows,
    contention: others,
    extra,
  });
  if (!noWrite) console.log(`wrote ${writeResult(result)}`);
  printResult(result);
  if (others !== null && others > 0.1) console.log(`note: other processes used ${(others * 100).toFixed(0)} % of the CPUs meanwhile; timings are noisy`);
}

await main();
