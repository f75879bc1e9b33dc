/**
 * Which folders `arl train` / `arl lab` may write into, and what they may delete there (issue 29: a run once cleared
 * a folder it had not created). The rule: arl deletes only what it can show it wrote.
 *
 * - A run folder is proven by its marker `.arl-run` (JSON: the top-level entries the run wrote), written first, when
 *   the folder is created or an empty folder is taken. Only marked folders are reused or replaced, and then only the
 *   entries the marker lists plus the names arl writes (`RUN_ENTRIES`); any other file in the folder is kept.
 * - A folder written by arl before the marker existed ("legacy": `config.yaml` and `checkpoints/`, no marker) may be
 *   continued with `--resume` (the marker is added) or replaced with `--overwrite`, which deletes only `RUN_ENTRIES`.
 * - Any other existing, non-empty folder is refused, `--overwrite` included; so are system folders (`/` and the
 *   folders directly under it, the home and temp folders and the folders above them).
 */
import { existsSync, lstatSync, readdirSync, readFileSync, realpathSync, rmSync, statSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import { dirname, join, parse, resolve } from "node:path";
import { ConfigError } from "./config.ts";

/** The marker file of a run folder. */
export const RUN_MARKER = ".arl-run";

/**
 * Every top-level name arl writes in a run or lab folder (`runDir.ts`, the judge's cache, a lab's `designs/`), besides
 * the marker and `.lock`. Temp files `<name>.tmp-<pid>` of these names count as theirs.
 */
export const RUN_ENTRIES: readonly string[] = [
  "config.yaml",
  "metrics.jsonl",
  "timings.jsonl",
  "detectors.jsonl",
  "rollouts.jsonl",
  "summary.json",
  "agent.json",
  "agent-summary.json",
  "eval-warm.json",
  "judge-cache.json",
  "lab.json",
  "report.html",
  "samples",
  "checkpoints",
  "designs",
];

/**
 * What an existing path holds, as far as deleting is concerned:
 * - `new`: nothing there, or an empty folder (also: only the empty `samples/`, `checkpoints/` and `.lock` a run leaves
 *   when killed in its first millisecond — nothing to lose);
 * - `marked`: a run folder with its `.arl-run` marker;
 * - `legacy`: no marker, but `config.yaml` and `checkpoints/` (a run folder of an arl before the marker);
 * - `foreign`: anything else (a file, or a folder with files arl cannot show it wrote).
 */
export type FolderKind = "new" | "marked" | "legacy" | "foreign";

/** A run folder's progress: `finished` (summary.json / lab.json), `checkpointed` (a whole checkpoint), `started`. */
export type RunProgress = "finished" | "checkpointed" | "started";

/** What `inspectRunFolder` found. */
export interface RunFolderInfo {
  kind: FolderKind;
  progress: RunProgress;
  /** The newest whole checkpoint (`final`, else the highest `step-<n>`, else `sft`), as a path; undefined if none. */
  lastCheckpoint?: string;
  /** Top-level entries arl did not write (names; never deleted). */
  foreign: string[];
}

/**
 * Whether `<path>/.arl-run` is a marker arl wrote: a plain file (not a link) of at most 64 KiB holding a JSON object
 * with an `entries` list. A garbled marker proves nothing (the folder is then judged as unmarked).
 */
export function hasValidMarker(path: string): boolean {
  const file = join(path, RUN_MARKER);
  const st = lstatSync(file, { throwIfNoEntry: false });
  if (st === undefined || !st.isFile() || st.size > 64 * 1024) return false;
  try {
    const value = JSON.parse(readFileSync(file, "utf8")) as { entries?: unknown } | null;
    return value !== null && typeof value === "object" && Array.isArray(value.entries);
  } catch {
    return false;
  }
}

/** The entry names a marker lists (empty when it is missing or unreadable: then only `RUN_ENTRIES` count). */
export function markerEntries(path: string): string[] {
  if (!hasValidMarker(path)) return [];
  try {
    const value = JSON.parse(readFileSync(join(path, RUN_MARKER), "utf8")) as { entries?: unknown };
    return Array.isArray(value.entries) ? value.entries.filter((e): e is string => typeof e === "string" && e !== "" && !e.includes("/") && !e.includes("\\") && e !== "." && e !== "..") : [];
  } catch {
    return [];
  }
}

/** Whether a top-level name is arl's in a run folder whose marker lists `listed`. */
function isRunEntry(name: string, listed: readonly string[]): boolean {
  if (name === RUN_MARKER || name === ".lock") return true;
  const base = name.replace(/\.tmp-\d+$/, "");
  return RUN_ENTRIES.includes(base) || listed.includes(base);
}

const isDir = (p: string): boolean => {
  try {
    return statSync(p).isDirectory();
  } catch {
    return false;
  }
};

/** The newest whole checkpoint under `<path>/checkpoints` (one with `policy-manifest.json`, which is written last). */
export function lastWholeCheckpoint(path: string): string | undefined {
  const dir = join(path, "checkpoints");
  const names = isDir(dir) ? readdirSync(dir).filter((n) => existsSync(join(dir, n, "policy-manifest.json"))) : [];
  const rank = (n: string): number => (n === "final" ? Infinity : /^step-\d+$/.test(n) ? Number(n.slice(5)) : n === "sft" ? -1 : -2);
  const best = names.filter((n) => rank(n) > -2).sort((a, b) => rank(b) - rank(a))[0];
  return best === undefined ? undefined : join(dir, best);
}

/** Reads what a folder holds (see `FolderKind`); touches nothing. */
export function inspectRunFolder(path: string): RunFolderInfo {
  if (!existsSync(path)) return { kind: "new", progress: "started", foreign: [] };
  if (!isDir(path)) return { kind: "foreign", progress: "started", foreign: [parse(path).base] };
  const entries = readdirSync(path);
  const lastCheckpoint = lastWholeCheckpoint(path);
  const finished = existsSync(join(path, "summary.json")) || existsSync(join(path, "lab.json"));
  const progress: RunProgress = finished ? "finished" : lastCheckpoint !== undefined ? "checkpointed" : "started";
  const marked = hasValidMarker(path);
  const listed = marked ? markerEntries(path) : [];
  const foreign = entries.filter((e) => !isRunEntry(e, listed)).sort();
  if (marked) return { kind: "marked", progress, lastCheckpoint, foreign };
  const residue = entries.every((e) => e === ".lock" || ((e === "samples" || e === "checkpoints") && isDir(join(path, e)) && readdirSync(join(path, e)).length === 0));
  if (residue) return { kind: "new", progress, foreign: [] };
  if (entries.includes("config.yaml") && isDir(join(path, "checkpoints"))) return { kind: "legacy", progress, lastCheckpoint, foreign };
  return { kind: "foreign", progress, lastCheckpoint, foreign: entries.sort() };
}

/** `p` and every folder above it. */
function withAncestors(p: string): string[] {
  const out = [p];
  for (let d = dirname(p); d !== out[out.length - 1]; d = dirname(d)) out.push(d);
  return out;
}

/** The real path of `p`'s nearest existing folder joined with the rest (symlinks such as macOS's /tmp resolved). */
function realish(p: string): string {
  let head = p;
  const tail: string[] = [];
  while (!existsSync(head)) {
    const up = dirname(head);
    if (up === head) break;
    tail.unshift(parse(head).base);
    head = up;
  }
  try {
    return join(realpathSync(head), ...tail);
  } catch {
    return p;
  }
}

/**
 * Why `path` may not be a run folder, or undefined: the filesystem root or a folder directly under it (`/tmp`, `/usr`,
 * `/home`…), the home or temp folder, or a folder above one of those (symlinks resolved as well). Other folders —
 * the working folder's ancestors included — are protected by the marker rule: one that holds files and no marker
 * is refused whatever the flags, and a run folder around the working folder is a legitimate one.
 * @param path absolute folder path
 */
export function systemFolderProblem(path: string): string | undefined {
  const candidates = new Set([resolve(path), realish(resolve(path))]);
  const guarded = new Set<string>();
  for (const p of [homedir(), tmpdir()]) for (const q of [resolve(p), realish(resolve(p))]) for (const a of withAncestors(q)) guarded.add(a);
  for (const p of candidates) {
    const { root } = parse(p);
    if (p === root || dirname(p) === root) return `${p} is a system folder (the filesystem root or a folder directly under it)`;
    if (guarded.has(p)) return `${p} is the home or temp folder, or a folder above one`;
  }
  return undefined;
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

/** What opening a run folder will do. */
export type RunFolderAction = "create" | "resume" | "reuse" | "replace";

/** `planRunFolder`'s answer. */
export interface RunFolderPlan {
  path: string;
  action: RunFolderAction;
  info: RunFolderInfo;
  /** A line for `--dry-run` (`/x/runs/a (new)`, `… (would be replaced: …)`). */
  describe: string;
}

/**
 * Decides what opening `<root>/<name>` with these flags does, or refuses (see the module comment for the rules).
 * @param root folder of runs (`run.dir`; relative to the working folder)
 * @param name run folder name (letters, digits, `.`, `_`, `-`)
 * @param opts `overwrite`/`resume` as given; `resumable`: the command has `--resume` (arl train; not arl lab),
 *   so a refusal of an unfinished run suggests it
 * @throws ConfigError (field `run.name` / `run.dir`) naming the folder: a name that escapes the root, a system
 *   folder, a folder that is not a run folder (with or without `--overwrite`), a run folder without `--overwrite`
 *   or `--resume` (suggesting `--resume` when it can continue); Error when a live process holds its `.lock`
 */
export function planRunFolder(root: string, name: string, opts: { overwrite?: boolean; resume?: boolean; resumable?: boolean } = {}): RunFolderPlan {
  const base = resolve(root);
  const path = resolve(base, name);
  // 255 bytes: the longest file name Linux and macOS file systems take (a longer one failed later with ENAMETOOLONG).
  if (dirname(path) !== base || !/^[A-Za-z0-9._-]{1,255}$/.test(name) || name === "." || name === "..") {
    const shown = name.length > 80 ? `${JSON.stringify(name.slice(0, 80))}… (${name.length} characters)` : JSON.stringify(name);
    throw new ConfigError([`run.name: ${shown} is not a plain folder name inside ${base} (allowed: 1 to 255 of A-Z a-z 0-9 . _ -, not . or ..)`]);
  }
  const system = systemFolderProblem(path);
  if (system !== undefined) throw new ConfigError([`run.dir/run.name: refusing run folder ${path}: ${system}; give a folder of runs such as --run.dir runs`]);
  const holder = lockHolder(path);
  if (holder !== undefined) {
    throw new Error(`run folder ${path} is in use by process ${holder} (another arl train/lab); wait for it or stop it (remove ${join(path, ".lock")} only if that process is gone)`);
  }
  const info = inspectRunFolder(path);
  const nameFlag = "--run.name; --name for arl lab";
  const kept = info.foreign.length === 0 ? "" : `; kept: ${info.foreign.slice(0, 5).join(", ")}${info.foreign.length > 5 ? ` and ${info.foreign.length - 5} more` : ""} (not written by arl)`;
  if (info.kind === "new") return { path, action: "create", info, describe: `${path} (new)` };
  if (info.kind === "foreign") {
    throw new ConfigError([
      `run.name: ${path} exists and is not a run folder (no ${RUN_MARKER} marker; it holds ${info.foreign.slice(0, 5).join(", ")}${info.foreign.length > 5 ? ", …" : ""}); ` +
        `arl writes only into a new or empty folder or a run folder it created, and --overwrite replaces only run folders: choose another name (${nameFlag}) or another --run.dir`,
    ]);
  }
  if (opts.resume) return { path, action: "resume", info, describe: `${path} (resumed)` };
  const legacy = info.kind === "legacy" ? " (written by an arl before run folders had a marker)" : "";
  if (opts.overwrite && info.kind === "legacy") {
    // `config.yaml` beside `checkpoints/` is what any training tool writes: it does not prove arl wrote them, so
    // nothing there is deleted (issue 29's outside probe: a user's model.pt went with --overwrite). --resume adopts it.
    throw new ConfigError([
      `run.name: ${path} has no ${RUN_MARKER} marker (config.yaml and checkpoints/ do not prove arl wrote it), so --overwrite deletes nothing there: ` +
        `continue an arl run of an earlier version with --resume, or choose another name (${nameFlag}) or another --run.dir`,
    ]);
  }
  if (opts.overwrite) return { path, action: "replace", info, describe: `${path} (would be replaced: its run files are deleted${kept})` };
  if (info.kind === "marked" && info.progress === "started") {
    return { path, action: "reuse", info, describe: `${path} (a run that stopped before its first checkpoint: its run files would be cleared and the folder reused${kept})` };
  }
  const canResume = opts.resumable === true && info.progress !== "finished";
  const what =
    info.progress === "finished" ? "" : info.progress === "checkpointed" ? ` that stopped after its checkpoint ${info.lastCheckpoint}` : " that stopped before its first checkpoint";
  throw new ConfigError([
    `run.name: run folder ${path} already holds a run${what}${legacy}; ` +
      (canResume ? "continue it with --resume (the same command and flags), or " : "") +
      `choose another name (${nameFlag}) or pass --overwrite to replace it (only its run files are deleted)`,
  ]);
}

/**
 * Deletes a run folder's run entries (the marker's list and `RUN_ENTRIES`, their temp files), keeping `.lock`, the
 * marker and every other file.
 * @returns the names deleted
 */
export function clearRunEntries(path: string): string[] {
  const listed = markerEntries(path);
  const removed: string[] = [];
  for (const e of readdirSync(path)) {
    if (e === RUN_MARKER || e === ".lock" || !isRunEntry(e, listed)) continue;
    const st = lstatSync(join(path, e), { throwIfNoEntry: false });
    if (st?.isDirectory()) removeOwnTree(join(path, e));
    else rmSync(join(path, e), { force: true }); // a listed file (or a link: the link, never its target)
    removed.push(e);
  }
  return removed.sort();
}

/**
 * The names of the files arl writes below a run folder's top level (checkpoints, samples, a lab's design folders):
 * JSON, JSON lines, tensors, YAML, HTML reports, ONNX graphs, Parquet exports, chat templates (`.jinja`), the marker and the lock, and their
 * temp files (`<name>.tmp-<pid>`).
 */
const ARL_FILE = /^(?:\.arl-run|\.lock|.+\.(?:json|jsonl|bin|yaml|html|onnx|parquet|jinja))(?:\.tmp-\d+)?$/;

/**
 * Removes what arl wrote inside a folder of a run: files named as arl names its files (`ARL_FILE`), folders once empty;
 * anything else — a user's `notes.md` in `designs/<d>/`, a `model.pt` in `checkpoints/` — is kept, and so are the
 * folders above it. Links are removed, never followed. Issue 29's outside probe: a listed folder was removed whole.
 */
export function removeOwnTree(dir: string): void {
  const st = lstatSync(dir, { throwIfNoEntry: false });
  if (st === undefined) return;
  if (!st.isDirectory()) {
    if (ARL_FILE.test(parse(dir).base) || st.isSymbolicLink()) rmSync(dir, { force: true });
    return;
  }
  for (const e of readdirSync(dir)) removeOwnTree(join(dir, e));
  if (readdirSync(dir).length === 0) rmSync(dir, { recursive: true, force: true });
}
