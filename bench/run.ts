/**
 * The benchmark suite (`npm run bench`): runs each bench script in its own child process, in order, then
 * bench/report.ts, which writes BENCHMARKS.md and prints the tables.
 *
 *   npm run bench [-- --quick] [-- --only retrieval,end-to-end] [-- --max-wait S]
 *
 * --quick: a fast subset (~10 min on 2 cores), written to bench/results-quick/ with its own BENCHMARKS.md there (the
 * committed full results are not touched): each script's own quick arguments ({@link QUICK_ARGS}); the default
 * `arl train` (11 min) is left out. --only: bench names (file stems) to run; the report still covers every result
 * file present. --max-wait S is passed on (how long a bench waits for other processes to leave the CPUs idle).
 * A script that does not exist yet is skipped with a message. Exit status 1 when a bench failed (the others still run).
 */
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { benchDir } from "./lib.ts";

/** The suite, in order: result name → script (under bench/) and the arguments it always gets. */
export const SUITE: Record<string, { script: string; args: string[] }> = {
  "train-step": { script: "train-step", args: [] },
  kernels: { script: "kernels", args: [] },
  sampling: { script: "sampling", args: [] },
  rollout: { script: "rollout", args: [] },
  "rollout-jax": { script: "rollout", args: ["--engine", "jax"] },
  retrieval: { script: "retrieval", args: [] },
  "end-to-end": { script: "end-to-end", args: [] },
  view: { script: "view", args: [] },
};

/** Arguments each bench gets with --quick (scripts that know `--quick` get that; the others a case subset). */
export const QUICK_ARGS: Record<string, string[]> = {
  "train-step": ["--only", "base"],
  kernels: [],
  sampling: ["--only", "base"],
  rollout: ["--quick"],
  "rollout-jax": ["--quick"],
  retrieval: ["--quick"],
  "end-to-end": ["--quick"],
  view: ["--quick"],
};

/** Where --quick writes its results and report (gitignored): the committed full results are never replaced. */
export const QUICK_RESULTS = "bench/results-quick";

const args = process.argv.slice(2);
const usage = "usage: npm run bench [-- --quick] [-- --only NAME,…] [-- --max-wait SECONDS]";
const value = (name: string): string | undefined => {
  const i = args.indexOf(name);
  if (i < 0) return undefined;
  const v = args[i + 1];
  if (v === undefined || v.startsWith("--")) {
    console.error(`bench: ${name} needs a value\n${usage}`);
    process.exit(2);
  }
  return v;
};
for (let i = 0; i < args.length; i++) {
  const a = args[i];
  if (a === "--quick") continue;
  if (a === "--only" || a === "--max-wait") {
    i++;
    continue;
  }
  console.error(`bench: unknown argument ${JSON.stringify(a)}\n${usage}`);
  process.exit(2);
}
const quick = args.includes("--quick");
const onlyArg = value("--only");
const only = onlyArg ? onlyArg.split(",").map((s) => s.trim()) : null;
const maxWait = value("--max-wait");
if (maxWait !== undefined && !(Number(maxWait) >= 0)) {
  console.error(`bench: --max-wait: expected seconds ≥ 0, got ${JSON.stringify(maxWait)}`);
  process.exit(2);
}

const unknown = only?.filter((n) => !(n in SUITE)) ?? [];
if (unknown.length > 0) {
  console.error(`bench: unknown bench ${unknown.join(", ")}; the suite: ${Object.keys(SUITE).join(", ")}`);
  process.exit(2);
}
// Quick results go to their own folder (bench/lib.ts reads ARL_BENCH_RESULTS), and so does their report.
const env = quick ? { ...process.env, ARL_BENCH_RESULTS: QUICK_RESULTS } : process.env;
if (quick) console.log(`quick subset: results and report in ${QUICK_RESULTS}/ (the full results in bench/results/ stay as they are)`);

const repo = join(benchDir, "..");
const failed: string[] = [];
const t0 = performance.now();
for (const [name, entry] of Object.entries(SUITE)) {
  if (only && !only.includes(name)) continue;
  const file = join(benchDir, `${entry.script}.ts`);
  if (!existsSync(file)) {
    console.log(`\n=== ${name}: bench/${entry.script}.ts does not exist; skipped`);
    continue;
  }
  const benchArgs = [...entry.args, ...(quick ? (QUICK_ARGS[name] ?? ["--quick"]) : []), ...(maxWait ? ["--max-wait", maxWait] : [])];
  console.log(`\n=== ${name}: node --import tsx bench/${entry.script}.ts ${benchArgs.join(" ")}`);
  const s = performance.now();
  const r = spawnSync(process.execPath, ["--import", "tsx", file, ...benchArgs], { cwd: repo, stdio: "inherit", env });
  const took = ((performance.now() - s) / 60000).toFixed(1);
  if (r.status !== 0) {
    failed.push(name);
    console.log(`=== ${name}: FAILED (exit ${r.status ?? r.signal}) after ${took} min`);
  } else console.log(`=== ${name}: done in ${took} min`);
}

console.log("\n=== report: node --import tsx bench/report.ts");
const rep = spawnSync(process.execPath, ["--import", "tsx", join(benchDir, "report.ts")], { cwd: repo, stdio: "inherit", env });
if (rep.status !== 0) failed.push("report");
console.log(`\nbench suite: ${((performance.now() - t0) / 60000).toFixed(1)} min${failed.length ? `; failed: ${failed.join(", ")}` : ""}`);
process.exit(failed.length ? 1 : 0);
