/**
 * The run folder (`runs/<name>/`): its marker `.arl-run` (written first; which folders arl may clear: runFolder.ts),
 * resolved config, `metrics.jsonl` (one line per step, no wall-clock fields, so two runs with the same seed are
 * byte-identical), `timings.jsonl` (wall-clock, ms), `samples/step-<n>.jsonl`, `checkpoints/<name>/` and `summary.json`.
 */
import { appendFileSync, existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { stringify as toYaml } from "yaml";
import type { Metrics, Trajectory } from "../core/types.ts";
import { RUN_ENTRIES, RUN_MARKER, clearRunEntries, lockHolder, markerEntries, planRunFolder, removeOwnTree } from "./runFolder.ts";

export { lockHolder };

/** The marker's text: what it is and the top-level entries the run wrote (sorted; no clock, so reruns match). */
function markerText(entries: readonly string[]): string {
  return `${JSON.stringify({ arl: "run folder", about: "written by agentic-rl; arl deletes only the entries listed here (and the files it always writes) when the run is replaced", entries: [...new Set(entries)].sort() }, null, 2)}\n`;
}

/** Writes a file through a temp file + rename, so a crash never leaves it half-written. */
export function writeFileAtomic(path: string, text: string): void {
  const tmp = `${path}.tmp-${process.pid}`;
  writeFileSync(tmp, text);
  renameSync(tmp, path);
}

/** Writes one run's files. */
export class RunDir {
  readonly path: string;
  /** Top-level entries this run's marker lists (`.arl-run`), so a later reuse deletes only what a run wrote. */
  private readonly entries: Set<string>;

  /**
   * Opens the run folder `<root>/<name>` and takes its `.lock` for this process. What may be opened and what is
   * deleted follows `planRunFolder` (src/train/runFolder.ts): a new or empty folder is created with its marker
   * `.arl-run` written first; a marked folder that holds a run needs `overwrite` (its run files are deleted, other
   * files kept) or `resume` (kept; the caller truncates what follows its checkpoint); a marked folder of a run that
   * stopped before its first checkpoint is reused (its run files cleared, a one-line notice through `log`); a folder
   * arl did not write is refused, `overwrite` or not. A folder whose lock a live process holds is refused.
   * @param root folder of runs
   * @param name run name (letters, digits, `.`, `_`, `-`)
   * @param opts `overwrite`, `resume` as above; `resumable`: the caller supports `--resume` (a refusal then suggests
   *   it); `log` receives the reuse notice (default: stderr)
   * @throws ConfigError naming the folder (from `planRunFolder`); Error when a live process holds its lock
   */
  constructor(root: string, name: string, opts: { overwrite: boolean; resume?: boolean; resumable?: boolean; log?: (message: string) => void } = { overwrite: false }) {
    const plan = planRunFolder(root, name, opts);
    this.path = plan.path;
    if (plan.action === "create") {
      if (existsSync(this.path)) lockRunFolder(this.path); // an empty folder: a live process's lock still refuses
      else mkdirSync(this.path, { recursive: true });
      try {
        writeFileSync(join(this.path, RUN_MARKER), markerText(["checkpoints", "samples"]), { flag: "wx" }); // first, before anything of the run
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e;
        throw new Error(`run folder ${this.path} was created by another process just now (another arl train/lab with the same name?)`);
      }
      lockRunFolder(this.path);
    } else {
      lockRunFolder(this.path); // never touch a folder another live process is writing
      if (plan.action !== "resume") {
        const removed = clearRunEntries(this.path);
        writeFileAtomic(join(this.path, RUN_MARKER), markerText(["checkpoints", "samples"]));
        const kept = plan.info.foreign.length === 0 ? "" : `; kept ${plan.info.foreign.length} file(s) arl did not write: ${plan.info.foreign.slice(0, 5).join(", ")}${plan.info.foreign.length > 5 ? ", …" : ""}`;
        if (plan.action === "reuse" && removed.length > 0) {
          (opts.log ?? ((m: string) => console.error(m)))(
            `notice: run folder ${this.path} holds a run that stopped before its first checkpoint (no checkpoint, no summary.json); reusing it (its run files were cleared: ${removed.join(", ")}${kept})`,
          );
        } else if (plan.action === "replace" && kept !== "") {
          (opts.log ?? ((m: string) => console.error(m)))(`notice: run folder ${this.path} replaced (its run files were deleted${kept})`);
        }
      } else if (plan.info.kind !== "marked") {
        // A run folder of an arl before the marker: from now on it carries one, listing the run files it holds.
        writeFileAtomic(join(this.path, RUN_MARKER), markerText(readdirSync(this.path).filter((e) => RUN_ENTRIES.includes(e))));
      }
    }
    this.entries = new Set(markerEntries(this.path));
    mkdirSync(join(this.path, "samples"), { recursive: true });
    mkdirSync(join(this.path, "checkpoints"), { recursive: true });
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
    this.record("metrics.jsonl");
    appendFileSync(join(this.path, "metrics.jsonl"), JSON.stringify({ stage, step, ...sorted }) + "\n");
  }

  /** Appends one wall-clock line (ms). */
  logTimings(stage: string, step: number, timings: Record<string, number>): void {
    this.record("timings.jsonl");
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
    this.record(rel);
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

  /**
   * Removes a file or folder inside the run folder (no error when missing): a folder loses only what arl wrote in it
   * (`removeOwnTree`), so a user's file inside `checkpoints/step-3/` survives a resume's clean-up.
   */
  remove(rel: string): void {
    removeOwnTree(join(this.path, rel));
  }

  /** Adds `rel`'s top-level entry to the marker before it is first written (so a crash right after still lists it). */
  private record(rel: string): void {
    const top = rel.split(/[\\/]/)[0];
    if (this.entries.has(top)) return;
    this.entries.add(top);
    writeFileAtomic(join(this.path, RUN_MARKER), markerText([...this.entries]));
  }

  private atomicWrite(rel: string, text: string): void {
    this.record(rel);
    writeFileAtomic(join(this.path, rel), text);
  }
}

/** Run folders this process holds (`.lock` files with our pid), released when the process exits. */
const heldLocks = new Set<string>();
let releaseHooked = false;

/** The run folders whose `.lock` this process holds now (a lab's design folders included), in the order taken. */
export function heldRunFolders(): string[] {
  return [...heldLocks].map((l) => dirname(l));
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
    // A stale lock is replaced, never written through: a `.lock` that is a link (or not a plain file) would make the
    // write land on whatever it points at (issue 29's outside probe: a linked user file got our pid).
    const st = lstatSync(lock, { throwIfNoEntry: false });
    if (st !== undefined && !st.isFile()) throw new Error(`run folder ${path}: ${lock} is not a plain file (a link or a folder); arl will not write through it — remove it if it is not yours`);
    rmSync(lock, { force: true });
    writeFileSync(lock, String(process.pid), { flag: "wx" });
  }
  heldLocks.add(lock);
  if (!releaseHooked) {
    releaseHooked = true;
    process.on("exit", () => {
      for (const l of heldLocks) rmSync(l, { force: true });
    });
  }
}
