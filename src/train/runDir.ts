/**
 * The run folder (`runs/<name>/`): resolved config, `metrics.jsonl` (one line per step, no wall-clock fields, so
 * two runs with the same seed are byte-identical), `timings.jsonl` (wall-clock, ms), `samples/step-<n>.jsonl`,
 * `checkpoints/<name>/` and `summary.json`.
 */
import { appendFileSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join, resolve, sep } from "node:path";
import { stringify as toYaml } from "yaml";
import type { Metrics, Trajectory } from "../core/types.ts";

/** Writes a file through a temp file + rename, so a crash never leaves it half-written. */
export function writeFileAtomic(path: string, text: string): void {
  const tmp = `${path}.tmp-${process.pid}`;
  writeFileSync(tmp, text);
  renameSync(tmp, path);
}

/** Writes one run's files. */
export class RunDir {
  readonly path: string;

  /**
   * Opens (creates) the run folder `<root>/<name>` and takes its `.lock` for this process.
   * A folder that already holds a run (`runFolderState` "run": a checkpoint or `summary.json`) needs `overwrite`
   * (it is replaced) or `resume` (it is kept; the caller truncates what follows its checkpoint). A folder left by a
   * run that stopped before its first checkpoint ("failed-early": `config.yaml` and logs only) does not block its
   * name: it is cleared and reused, with a one-line notice through `log`. Either way a folder whose lock a live
   * process holds is refused (a run still in its warm start has no checkpoint yet).
   * @param root folder of runs
   * @param name run name (letters, digits, `.`, `_`, `-`)
   * @param opts `overwrite`, `resume` as above; `log` receives the reuse notice (default: stderr)
   * @throws Error when the name would escape the root folder, when the folder holds a run and neither `overwrite`
   *   nor `resume` is set, or when a live process holds its lock
   */
  constructor(root: string, name: string, opts: { overwrite: boolean; resume?: boolean; log?: (message: string) => void } = { overwrite: false }) {
    const base = resolve(root);
    this.path = resolve(base, name);
    if (!this.path.startsWith(base + sep) || !/^[A-Za-z0-9._-]+$/.test(name) || name === "." || name === "..") {
      throw new Error(`run.name: ${JSON.stringify(name)} is not a plain folder name inside ${base}`);
    }
    const state = runFolderState(this.path);
    if (state !== "new" && opts.resume !== true) {
      if (state === "run" && !opts.overwrite) {
        throw new Error(`run folder ${this.path} already holds a run; choose another name (--run.name; --name for arl lab) or pass --overwrite`);
      }
      lockRunFolder(this.path); // never replace a folder another live process is writing
      rmSync(this.path, { recursive: true, force: true });
      heldLocks.delete(join(this.path, ".lock"));
      if (state === "failed-early" && !opts.overwrite) {
        (opts.log ?? ((m: string) => console.error(m)))(
          `notice: run folder ${this.path} holds a run that stopped before its first checkpoint (no checkpoint, no summary.json); reusing it (its files were cleared)`,
        );
      }
    }
    mkdirSync(join(this.path, "samples"), { recursive: true });
    mkdirSync(join(this.path, "checkpoints"), { recursive: true });
    lockRunFolder(this.path);
  }

  /** Path of a checkpoint folder by name (e.g. `sft`, `step-10`). */
  checkpoint(name: string): string {
    return join(this.path, "checkpoints", name);
  }

  writeConfig(config: unknown): void {
    this.atomicWrite("config.yaml", toYaml(config));
  }

  /** Appends one metrics line. Keys are sorted so the bytes depend only on the values. */
  logMetrics(stage: string, step: number, metrics: Metrics): void {
    const sorted = Object.fromEntries(
      Object.entries(metrics)
        .filter(([k]) => k !== "stage" && k !== "step") // the line's own keys win (optimizers report a `step` too)
        .sort(([a], [b]) => (a < b ? -1 : 1)),
    );
    appendFileSync(join(this.path, "metrics.jsonl"), JSON.stringify({ stage, step, ...sorted }) + "\n");
  }

  /** Appends one wall-clock line (ms). */
  logTimings(stage: string, step: number, timings: Record<string, number>): void {
    appendFileSync(join(this.path, "timings.jsonl"), JSON.stringify({ stage, step, ...timings }) + "\n");
  }

  /**
   * Writes trajectories to `samples/<name>.jsonl`, one line each: readable (task, question, gold, turns, answer,
   * reward with every term) and, for `arl view`, the task `kind`, group `member`, the env's `grade`, `toolCalls`,
   * `invalidActions`, `truncated` and the token books — `tokens`, `lossMask`, `logprobs` (nats, rounded to 1e-5)
   * all `[seq]`, and `promptLength` (tokens).
   */
  writeSamples(name: string, trajectories: Trajectory[]): void {
    const lines = trajectories.map((t) =>
      JSON.stringify({
        task: t.task.id,
        kind: t.task.kind,
        question: t.task.question,
        gold: t.task.answers,
        known: t.task.known,
        member: t.member,
        turns: t.turns.map((turn) => ({ action: turn.actionText, observation: turn.observation, tools: turn.toolResults?.map((r) => ({ name: r.name, ok: r.ok, error: r.errorKind })) })),
        answer: t.answer,
        reward: t.reward,
        grade: t.grade,
        toolCalls: t.toolCalls,
        invalidActions: t.invalidActions,
        truncated: t.truncated,
        promptLength: t.promptLength,
        tokens: t.tokens,
        lossMask: t.lossMask,
        logprobs: t.logprobs.map((x) => Math.round(x * 1e5) / 1e5),
      }),
    );
    this.atomicWrite(join("samples", `${name}.jsonl`), lines.join("\n") + "\n");
  }

  writeSummary(summary: unknown): void {
    this.atomicWrite("summary.json", JSON.stringify(summary, null, 2) + "\n");
  }

  /** Writes a text file inside the run folder (temp file + rename). `rel` is a path relative to the run folder. */
  writeText(rel: string, text: string): void {
    this.atomicWrite(rel, text);
  }

  /** Appends one JSON line to `rel` (e.g. `detectors.jsonl`). */
  appendJsonl(rel: string, value: unknown): void {
    appendFileSync(join(this.path, rel), JSON.stringify(value) + "\n");
  }

  /**
   * Rewrites the JSON-lines file `rel` (relative to the run folder) keeping only the complete lines `keep` accepts;
   * a torn last line (no newline, or not JSON: the process was killed mid-append) is always dropped.
   * @returns the number of lines dropped (0 when the file does not exist)
   */
  truncateJsonl(rel: string, keep: (row: Record<string, unknown>) => boolean): number {
    const path = join(this.path, rel);
    if (!existsSync(path)) return 0;
    const text = readFileSync(path, "utf8");
    const lines = text.split("\n");
    lines.pop(); // after the last newline: "" for a complete file, the torn line otherwise
    const kept: string[] = [];
    for (const line of lines) {
      let row: unknown;
      try {
        row = JSON.parse(line);
      } catch {
        continue;
      }
      if (row !== null && typeof row === "object" && keep(row as Record<string, unknown>)) kept.push(line);
    }
    this.atomicWrite(rel, kept.map((l) => l + "\n").join(""));
    return lines.length + (text.endsWith("\n") || text === "" ? 0 : 1) - kept.length;
  }

  /** Removes a file or folder inside the run folder (no error when missing). */
  remove(rel: string): void {
    rmSync(join(this.path, rel), { recursive: true, force: true });
  }

  private atomicWrite(rel: string, text: string): void {
    writeFileAtomic(join(this.path, rel), text);
  }
}

/** Run folders this process holds (`.lock` files with our pid), released when the process exits. */
const heldLocks = new Set<string>();
let releaseHooked = false;

/**
 * What a run folder holds:
 * - `run`: a summary (`summary.json`, or a lab's `lab.json`) or a whole checkpoint (a `checkpoints/<name>/` with its `policy-manifest.json`,
 *   which `savePolicy` writes last) — or, without a `config.yaml`, any file a run writes (`summary.json`,
 *   `metrics.jsonl`, an entry of `checkpoints/`): something is there that is not ours to clear or append to;
 * - `failed-early`: a `config.yaml` but no summary and no whole checkpoint (a run that stopped in warm start, or
 *   while writing its first checkpoint: only temp files): nothing worth keeping, the folder may be cleared;
 * - `new`: nothing of a run (no folder, or one without any run file).
 */
export function runFolderState(path: string): "new" | "failed-early" | "run" {
  const checkpoints = join(path, "checkpoints");
  const entries = existsSync(checkpoints) ? readdirSync(checkpoints) : [];
  if (existsSync(join(path, "summary.json")) || existsSync(join(path, "lab.json"))) return "run"; // a lab's summary is lab.json
  if (entries.some((e) => existsSync(join(checkpoints, e, "policy-manifest.json")))) return "run";
  if (!existsSync(join(path, "config.yaml"))) return entries.length > 0 || existsSync(join(path, "metrics.jsonl")) ? "run" : "new";
  return "failed-early";
}

/** The pid in `<path>/.lock` when it is a live process other than this one, else undefined (no lock, or a stale one). */
export function lockHolder(path: string): number | undefined {
  let text: string;
  try {
    text = readFileSync(join(path, ".lock"), "utf8");
  } catch {
    return undefined;
  }
  const pid = Number(text.trim());
  if (!Number.isInteger(pid) || pid <= 0 || pid === process.pid) return undefined;
  try {
    process.kill(pid, 0);
    return pid;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM" ? pid : undefined;
  }
}

/**
 * Takes `<run>/.lock` for this process, so two processes never write one run folder (e.g. a `--resume` started
 * while the killed run's process is in fact still alive). A lock whose process is gone is taken over.
 * @throws Error naming the folder and the pid that holds it
 */
export function lockRunFolder(path: string): void {
  const lock = join(path, ".lock");
  if (heldLocks.has(lock)) return;
  try {
    writeFileSync(lock, String(process.pid), { flag: "wx" });
  } catch {
    const pid = lockHolder(path);
    if (pid !== undefined) throw new Error(`run folder ${path} is in use by process ${pid} (another arl train/lab); wait for it or stop it (remove ${lock} only if that process is gone)`);
    writeFileSync(lock, String(process.pid));
  }
  heldLocks.add(lock);
  if (!releaseHooked) {
    releaseHooked = true;
    process.on("exit", () => {
      for (const l of heldLocks) rmSync(l, { force: true });
    });
  }
}
