/**
 * Shared pieces of the benchmark scripts: the machine description, the result file format, CPU-contention
 * accounting (the machine may be shared), medians/percentiles, and the PyTorch reference finder.
 *
 * Every bench writes `bench/results/<bench>.json` as a {@link BenchResult}; `bench/report.ts` renders them all into
 * `BENCHMARKS.md`. Speed is always reported as a *speedup* over the reference (reference time ÷ our time, or our
 * throughput ÷ the reference's), so "≥ 1.0×" reads as "at least as fast".
 */
import { spawnSync } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { availableParallelism, cpus, totalmem } from "node:os";
import { dirname, isAbsolute, join } from "node:path";
import { fileURLToPath } from "node:url";

/** `bench/` (absolute). */
export const benchDir: string = dirname(fileURLToPath(import.meta.url));
/**
 * Where results are written and read: `bench/results/` (the committed full run), or `ARL_BENCH_RESULTS` (absolute
 * or relative to the repo root) — `npm run bench -- --quick` uses `bench/results-quick/` so a fast subset never
 * replaces the full figures.
 */
export const resultsDir: string = process.env.ARL_BENCH_RESULTS
  ? isAbsolute(process.env.ARL_BENCH_RESULTS)
    ? process.env.ARL_BENCH_RESULTS
    : join(benchDir, "..", process.env.ARL_BENCH_RESULTS)
  : join(benchDir, "results");

/** What a measurement ran on. */
export interface Machine {
  cpu: string;
  cores: number;
  /** Total RAM (GiB). */
  memGiB: number;
  node: string;
  platform: string;
}

/** The machine this process runs on. */
export function machine(): Machine {
  return {
    cpu: cpus()[0]?.model?.trim() ?? "?",
    cores: availableParallelism(),
    memGiB: Math.round((totalmem() / 2 ** 30) * 10) / 10,
    node: process.version,
    platform: `${process.platform}-${process.arch}`,
  };
}

/** One line of a benchmark table. */
export interface BenchRow {
  /** What was measured, e.g. "base train 16×256". */
  name: string;
  /** Our figure in `unit`. */
  ours: number;
  /** The reference's figure in `unit` (null: no reference run or none exists). */
  reference: number | null;
  /** e.g. "ms/step", "tok/s", "ms", "s", "MiB", "%". */
  unit: string;
  /** Reference time ÷ our time (or our throughput ÷ the reference's); > 1 = we are faster. Null without reference. */
  speedup: number | null;
  /** The target in words, e.g. "≥ 1.0× PyTorch", "< 5 %" (empty: no target). */
  target: string;
  /** Whether the target is met (null: no target or not measurable here). */
  met: boolean | null;
  /** Details of the measurement. */
  note: string;
  /** Why a target was missed (set by the bench when `met` is false; shown in BENCHMARKS.md's Targets table). */
  reason?: string;
}

/** The content of `bench/results/<bench>.json`. */
export interface BenchResult {
  /** File stem, e.g. "train-step". */
  bench: string;
  /** Section title in BENCHMARKS.md. */
  title: string;
  /** ISO time the measurement finished. */
  date: string;
  /** The command that produced it. */
  command: string;
  machine: Machine;
  /** What the reference is, e.g. "PyTorch 1.13 CPU, 2 threads". */
  reference: string;
  rows: BenchRow[];
  /** Fraction of the machine's CPU other processes used during the measurement (≈ 0 for clean numbers). */
  contention: number | null;
  /** Anything else the bench wants to keep (raw samples, settings). */
  extra?: Record<string, unknown>;
}

/**
 * A bench's result, stamped with the time now, this machine, and the command that reproduces it:
 * `node --import tsx <script> <args…>` (`script` from the repository root, e.g. "bench/kernels.ts").
 */
export function benchResult(run: { script: string; args: readonly string[] }, r: Omit<BenchResult, "date" | "command" | "machine">): BenchResult {
  const command = ["node --import tsx", run.script, ...run.args].join(" ");
  return { bench: r.bench, title: r.title, date: new Date().toISOString(), command, machine: machine(), reference: r.reference, rows: r.rows, contention: r.contention, extra: r.extra };
}

/** Where a partial run's results go when `ARL_BENCH_RESULTS` is unset: beside the quick suite's, never over bench/results/. */
export const partialResultsDir: string = join(benchDir, "results-quick");

/**
 * Writes `<resultsDir>/<r.bench>.json` and returns its path. `partial`: the run measured a subset (`--only`, other
 * engines, no reference…), so unless `ARL_BENCH_RESULTS` names a folder it goes to bench/results-quick/ and the
 * committed full results stay whole (a new-user pass found `--only sft` had cut train-step.json to 2 of 10 rows).
 */
export function writeResult(r: BenchResult, partial = false): string {
  const dir = partial && !process.env.ARL_BENCH_RESULTS ? partialResultsDir : resultsDir;
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `${r.bench}.json`);
  writeFileSync(file, JSON.stringify(r, null, 1) + "\n");
  return file;
}

/** Reads every result file in `bench/results/` (skips files that are not BenchResults). */
export function readResults(): BenchResult[] {
  const out: BenchResult[] = [];
  let names: string[] = [];
  try {
    names = spawnSync("ls", [resultsDir], { encoding: "utf8" }).stdout.split("\n").filter((n) => n.endsWith(".json"));
  } catch {
    return out;
  }
  for (const n of names.sort()) {
    try {
      const r = JSON.parse(readFileSync(join(resultsDir, n), "utf8")) as BenchResult;
      if (Array.isArray(r.rows) && typeof r.bench === "string") out.push(r);
    } catch {
      // not ours
    }
  }
  return out;
}

/** The value after `--name` in this process's arguments (undefined when absent). */
export function flag(name: string, args: readonly string[] = process.argv.slice(2)): string | undefined {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
}

/**
 * Runs `fn` up to `retries` times (after waiting up to `maxWaitS` for idle CPUs each time) until other processes
 * used < 10 % of the CPUs meanwhile; keeps the least disturbed run.
 */
export async function measured<T>(fn: () => T | Promise<T>, retries: number, maxWaitS: number): Promise<{ value: T; others: number | null }> {
  let best: { value: T; others: number | null } | null = null;
  for (let attempt = 0; attempt < Math.max(1, retries); attempt++) {
    await waitIdle(maxWaitS);
    const r = await withContention(fn);
    if (best === null || (r.others ?? 0) < (best.others ?? 0)) best = r;
    if ((r.others ?? 0) < 0.1) break;
  }
  return best!;
}

/** Median of a non-empty list. */
export function median(xs: number[]): number {
  return percentile(xs, 50);
}

/** The p-th percentile (0–100) by linear interpolation between order statistics. @throws Error on an empty list */
export function percentile(xs: number[], p: number): number {
  if (xs.length === 0) throw new Error("percentile of an empty list");
  const s = [...xs].sort((a, b) => a - b);
  const pos = ((s.length - 1) * p) / 100;
  const lo = Math.floor(pos);
  const hi = Math.ceil(pos);
  return s[lo] + (s[hi] - s[lo]) * (pos - lo);
}

/** Cumulative CPU ticks of the machine: [busy, total] (null where /proc is unavailable). */
export function machineTicks(): [number, number] | null {
  try {
    const f = readFileSync("/proc/stat", "utf8").split("\n")[0].trim().split(/\s+/).slice(1).map(Number);
    const total = f.reduce((a, b) => a + b, 0);
    return [total - f[3] - (f[4] ?? 0), total];
  } catch {
    return null;
  }
}

/** CPU ticks used by this process's waited-for children (cutime + cstime). */
function childTicks(): number {
  try {
    const f = readFileSync("/proc/self/stat", "utf8").split(") ")[1].split(" ");
    return Number(f[13]) + Number(f[14]); // fields 16, 17 of /proc/[pid]/stat
  } catch {
    return 0;
  }
}

/**
 * Runs `fn` and measures the fraction of the machine's CPU used meanwhile by other processes (neither this one
 * nor its waited-for children): timings on a shared machine are only meaningful when this is ≈ 0.
 */
export async function withContention<T>(fn: () => T | Promise<T>): Promise<{ value: T; others: number | null }> {
  const m0 = machineTicks();
  const c0 = childTicks();
  const selfCpu0 = process.cpuUsage();
  const value = await fn();
  const m1 = machineTicks();
  if (!m0 || !m1) return { value, others: null };
  const self = process.cpuUsage(selfCpu0);
  const selfTicks = ((self.user + self.system) / 1e6) * 100; // USER_HZ = 100
  const busy = m1[0] - m0[0] - (childTicks() - c0) - selfTicks;
  const total = m1[1] - m0[1];
  return { value, others: total > 0 ? Math.max(0, busy / total) : null };
}

/** Waits (up to maxWaitS seconds) until other processes leave the CPUs mostly idle (busy < 10 % over 2 s). */
export async function waitIdle(maxWaitS: number): Promise<void> {
  const t0 = Date.now();
  for (;;) {
    const a = machineTicks();
    await new Promise((r) => setTimeout(r, 2000));
    const b = machineTicks();
    if (!a || !b) return;
    const busy = (b[0] - a[0]) / Math.max(1, b[1] - a[1]);
    if (busy < 0.1 || Date.now() - t0 > maxWaitS * 1000) return;
    process.stdout.write(`  (machine busy: ${(busy * 100).toFixed(0)}% CPU used by other processes; waiting)\n`);
    await new Promise((r) => setTimeout(r, 15000));
  }
}

/** A python that can `import torch` (Debian's python3-torch), or null. The bench never installs it. */
export function findTorchPython(): string | null {
  for (const py of ["/usr/bin/python3", "python3"]) {
    const r = spawnSync(py, ["-c", "import torch"], { encoding: "utf8" });
    if (r.status === 0) return py;
  }
  return null;
}

/** What the PyTorch reference reports of its BLAS (bench/torch_reference.py `blas_info`). */
export interface TorchBlas {
  /** Classified from the libraries loaded: openblas | mkl | blis | reference | unknown. */
  kind: string;
  /** Real paths of the BLAS/LAPACK shared libraries mapped into the process after a matrix product. */
  libraries: string[];
  /** torch's build settings: BLAS_INFO, LAPACK_INFO, USE_MKLDNN, USE_OPENMP, PERF_WITH_AVX512. */
  build: Record<string, string>;
}

/**
 * Why a ratio against this PyTorch would be a lie, or null when its BLAS is an optimised one. Debian's python3-torch
 * links the generic `libblas.so.3`, which the alternatives system points at the unoptimised reference BLAS unless an
 * optimised one is installed (measured: PyTorch 5.6× slower on the base training step).
 */
export function torchBlasProblem(blas: TorchBlas | undefined): string | null {
  if (!blas) return "the reference did not report its BLAS (bench/torch_reference.py too old?)";
  if (blas.kind === "openblas" || blas.kind === "mkl" || blas.kind === "blis") return null;
  const libs = blas.libraries.length > 0 ? blas.libraries.join(", ") : "none found";
  return `PyTorch runs on an unoptimised BLAS (${blas.kind}: ${libs}); a ratio against it would overstate ours — install Debian's libopenblas0-pthread (apt install libopenblas0-pthread) and rerun`;
}

/** One line naming the reference's BLAS: kind, library and torch's BLAS_INFO. */
export function blasLabel(blas: TorchBlas): string {
  const lib = blas.libraries.find((l) => /openblas|mkl|blis/.test(l)) ?? blas.libraries[0] ?? "?";
  return `${blas.kind} (${lib}; torch BLAS_INFO=${blas.build.BLAS_INFO ?? "?"}, mkldnn ${blas.build.USE_MKLDNN ?? "?"})`;
}

/** Prints rows as an aligned markdown table (also used for BENCHMARKS.md). */
export function markdownTable(rows: string[][]): string {
  const widths = rows[0].map((_, j) => Math.max(...rows.map((r) => (r[j] ?? "").length)));
  const line = (r: string[]): string => "| " + r.map((x, j) => (x ?? "").padEnd(widths[j])).join(" | ") + " |";
  return [line(rows[0]), "|" + widths.map((w) => "-".repeat(w + 2)).join("|") + "|", ...rows.slice(1).map(line)].join("\n");
}

/** Rows of a result as table cells: name, ours, reference, speedup, target, met, note. */
export function rowCells(r: BenchRow): string[] {
  const num = (x: number): string => (Math.abs(x) >= 100 ? x.toFixed(0) : Math.abs(x) >= 10 ? x.toFixed(1) : x.toFixed(2));
  return [
    r.name,
    r.ours === null || !Number.isFinite(r.ours) ? "failed" : `${num(r.ours)} ${r.unit}`,
    r.reference === null ? "—" : `${num(r.reference)} ${r.unit}`,
    r.speedup === null ? "—" : `${r.speedup.toFixed(2)}×`,
    r.target || "—",
    r.met === null ? "—" : r.met ? "met" : "**missed**",
    r.note,
  ];
}

/** Prints a result's table to stdout. */
export function printResult(r: BenchResult): void {
  console.log(`\n## ${r.title}\nreference: ${r.reference}`);
  console.log(markdownTable([["case", "ours", "reference", "speedup", "target", "", "note"], ...r.rows.map(rowCells)]));
}
