/**
 * The benchmark suite (`npm run bench`): runs each bench script in its own child process, in order, then
 * bench/report.ts, which writes BENCHMARKS.md and prints the tables.
 *
 *   npm run bench [-- --quick] [-- --only retrieval,end-to-end] [-- --max-wait S]
 *
 * --quick: a fast subset (~10 min on 2 cores): each script's own quick arguments ({@link QUICK_ARGS}); the default
 * `arl train` (11 min) is left out. --only: bench names (file stems) to run; the report still covers every result
 * file present. --max-wait S is passed on (how long a bench waits for other processes to leave the CPUs idle).
 * A script that does not exist yet is skipped with a message. Exit status 1 when a bench failed (the others still run).
 */
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { benchDir } from "./lib.ts";

/** The suite, in order (file stems under bench/). */
export const SUITE = ["train-step", "kernels", "sampling", "rollout", "retrieval", "end-to-end"];

/** Arguments each script gets with --quick (scripts that know `--quick` get that; the others a case subset). */
export const QUICK_ARGS: Record<string, string[]> = {
  "train-step": ["--only", "base"],
  kernels: [],
  sampling: ["--only", "base"],
  rollout: ["--quick"],
  retrieval: ["--quick"],
  "end-to-end": ["--quick"],
};

const args = process.argv.slice(2);
const flag = (name: string): string | undefined => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
};
const quick = args.includes("--quick");
const onlyArg = flag("--only");
const only = onlyArg ? onlyArg.split(",").map((s) => s.trim()) : null;
const maxWait = flag("--max-wait");

const unknown = only?.filter((n) => !SUITE.includes(n)) ?? [];
if (unknown.length > 0) {
  console.error(`bench: unknown bench ${unknown.join(", ")}; the suite: ${SUITE.join(", ")}`);
  process.exit(2);
}

const repo = join(benchDir, "..");
const failed: string[] = [];
const t0 = performance.now();
for (const name of SUITE) {
  if (only && !only.includes(name)) continue;
  const file = join(benchDir, `${name}.ts`);
  if (!existsSync(file)) {
    console.log(`\n=== ${name}: bench/${name}.ts does not exist yet; skipped`);
    continue;
  }
  const benchArgs = [...(quick ? (QUICK_ARGS[name] ?? ["--quick"]) : []), ...(maxWait ? ["--max-wait", maxWait] : [])];
  console.log(`\n=== ${name}: node --import tsx bench/${name}.ts ${benchArgs.join(" ")}`);
  const s = performance.now();
  const r = spawnSync(process.execPath, ["--import", "tsx", file, ...benchArgs], { cwd: repo, stdio: "inherit" });
  const took = ((performance.now() - s) / 60000).toFixed(1);
  if (r.status !== 0) {
    failed.push(name);
    console.log(`=== ${name}: FAILED (exit ${r.status ?? r.signal}) after ${took} min`);
  } else console.log(`=== ${name}: done in ${took} min`);
}

console.log("\n=== report: node --import tsx bench/report.ts");
const rep = spawnSync(process.execPath, ["--import", "tsx", join(benchDir, "report.ts")], { cwd: repo, stdio: "inherit" });
if (rep.status !== 0) failed.push("report");
console.log(`\nbench suite: ${((performance.now() - t0) / 60000).toFixed(1)} min${failed.length ? `; failed: ${failed.join(", ")}` : ""}`);
process.exit(failed.length ? 1 : 0);
