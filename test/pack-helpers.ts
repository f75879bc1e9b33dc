/**
 * Helpers for tests that use agentic-rl the way a user does: from the tarball `npm pack` makes (built by the
 * `prepack` script), installed into a fresh folder outside the repo.
 *
 * - `packOnce()` packs the repo at most once per content of its sources: the tarball is cached in the OS temp folder
 *   under a hash of every file that goes into it (src/, bin/, package.json, tsconfigs, README.md), so the test files
 *   of one run (separate vitest forks) share one build, and a later run reuses it until a source changes. A lock
 *   folder serialises the builds (they all write the repo's dist/).
 * - `freshProject(deps)` makes a new ESM project (`"type": "module"`) in the temp folder and `npm install`s `deps`
 *   there (`--prefer-offline`: the npm cache holds every dependency).
 * - `exec(cmd, args, options)` runs a command and returns its output, or throws with the output's tail.
 */
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/** The repository root (the folder holding package.json). */
export const REPO_ROOT = resolve(fileURLToPath(new URL("..", import.meta.url)));

/** Options of `exec`: working folder, time limit (ms; default 5 min) and extra environment variables. */
export interface ExecOptions {
  cwd: string;
  timeoutMs?: number;
  env?: Record<string, string>;
}

/** What a finished command printed. */
export interface ExecResult {
  stdout: string;
  stderr: string;
}

/**
 * The environment for child commands: ours minus the variables an enclosing `npm run`/`npm test` sets for its own
 * package (`npm_package_*`, `npm_lifecycle_*`, `npm_config_local_prefix`…), which would make a nested npm act on
 * the wrong project. The cache, registry and user config are kept.
 */
function childEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const keep = new Set(["npm_config_cache", "npm_config_registry", "npm_config_userconfig", "npm_config_globalconfig"]);
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!/^npm_/i.test(k) || keep.has(k.toLowerCase())) env[k] = v;
  return { ...env, ...extra };
}

/**
 * Runs `cmd args` (no shell) in `options.cwd`.
 * @returns its stdout and stderr
 * @throws Error naming the command, its exit status and the last 4000 characters of its output, when it fails or runs
 *   past `timeoutMs`
 */
export function exec(cmd: string, args: readonly string[], options: ExecOptions): Promise<ExecResult> {
  return new Promise((resolvePromise, reject) => {
    execFile(
      cmd,
      args,
      { cwd: options.cwd, env: childEnv(options.env), timeout: options.timeoutMs ?? 300_000, maxBuffer: 64 * 2 ** 20 },
      (error, stdout, stderr) => {
        if (error) {
          const out = `${stdout}\n${stderr}`.trim();
          const status = error.killed ? `killed (${error.signal ?? "timeout"})` : `exit ${String(error.code)}`;
          reject(new Error(`${cmd} ${args.join(" ")} (in ${options.cwd}): ${status}\n${out.slice(-4000)}`));
        } else resolvePromise({ stdout, stderr });
      },
    );
  });
}

/** Files of `dir` (recursively), sorted, as paths relative to the repo root. */
function listFiles(dir: string): string[] {
  if (!existsSync(dir)) return [];
  const out: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...listFiles(path));
    else if (entry.isFile()) out.push(relative(REPO_ROOT, path));
  }
  return out.sort();
}

/** A hash of every file the tarball is built from (names and contents). */
function sourceHash(): string {
  const h = createHash("sha256");
  const files = [
    ...listFiles(join(REPO_ROOT, "src")),
    ...listFiles(join(REPO_ROOT, "bin")),
    ...["package.json", "tsconfig.json", "tsconfig.build.json", "README.md"].filter((f) => existsSync(join(REPO_ROOT, f))),
  ];
  for (const f of files) h.update(f).update("\0").update(readFileSync(join(REPO_ROOT, f))).update("\0");
  return h.digest("hex").slice(0, 16);
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** The one `.tgz` in `dir`, or undefined. */
function tarballIn(dir: string): string | undefined {
  if (!existsSync(dir)) return undefined;
  const tgz = readdirSync(dir).filter((f) => f.endsWith(".tgz"));
  return tgz.length === 1 ? join(dir, tgz[0]) : undefined;
}

/** How long a lock may be held before it counts as left behind by a killed process (ms). */
const STALE_LOCK_MS = 10 * 60_000;

/** Packs the repo into `dest` (via a scratch folder renamed into place, so `dest` is never half-written). */
async function packInto(dest: string): Promise<string> {
  const scratch = `${dest}.tmp-${process.pid}`;
  rmSync(scratch, { recursive: true, force: true });
  mkdirSync(scratch, { recursive: true });
  await exec("npm", ["pack", "--pack-destination", scratch], { cwd: REPO_ROOT, timeoutMs: 300_000 });
  if (tarballIn(scratch) === undefined) throw new Error(`npm pack left no single .tgz in ${scratch}: ${readdirSync(scratch).join(", ")}`);
  rmSync(dest, { recursive: true, force: true });
  renameSync(scratch, dest);
  pruneOldPacks(dest);
  return tarballIn(dest)!;
}

/** How long a cached tarball of other sources is kept after it was made (ms). */
const OLD_PACK_MS = 60 * 60_000;

/** Deletes cached tarballs of other source versions made more than `OLD_PACK_MS` ago (they are never reused). */
function pruneOldPacks(keep: string): void {
  for (const name of readdirSync(tmpdir())) {
    const path = join(tmpdir(), name);
    if (path === keep || !/^agentic-rl-pack-[0-9a-f]{16}$/.test(name)) continue;
    try {
      if (Date.now() - statSync(path).mtimeMs > OLD_PACK_MS) rmSync(path, { recursive: true, force: true });
    } catch {
      // gone meanwhile
    }
  }
}

let packed: Promise<string> | undefined;

/**
 * The path of a tarball of the repo as `npm pack` makes it (running `prepack`, i.e. the build), made at most once per
 * content of the sources and shared by concurrent test processes.
 * @throws Error with npm's output when the build or the pack fails
 */
export function packOnce(): Promise<string> {
  packed ??= (async () => {
    const dest = join(tmpdir(), `agentic-rl-pack-${sourceHash()}`);
    const lock = join(tmpdir(), `agentic-rl-pack-${createHash("sha256").update(REPO_ROOT).digest("hex").slice(0, 12)}.lock`);
    for (;;) {
      const ready = tarballIn(dest);
      if (ready !== undefined) return ready;
      try {
        mkdirSync(lock);
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e;
        let age = 0;
        try {
          age = Date.now() - statSync(lock).mtimeMs;
        } catch {
          continue; // released meanwhile
        }
        if (age > STALE_LOCK_MS) rmSync(lock, { recursive: true, force: true });
        else await sleep(500);
        continue;
      }
      try {
        return tarballIn(dest) ?? (await packInto(dest));
      } finally {
        rmSync(lock, { recursive: true, force: true });
      }
    }
  })();
  packed.catch(() => (packed = undefined)); // a failed pack is retried by the next caller
  return packed;
}

/** A fresh project folder with its dependencies installed. */
export interface FreshProject {
  /** The project folder (in the OS temp folder, outside the repo). */
  dir: string;
  /** Runs a command in the project folder (see `exec`). */
  exec(cmd: string, args: readonly string[], options?: Omit<ExecOptions, "cwd">): Promise<ExecResult>;
  /** Writes a file of the project (`rel` relative to `dir`; folders made as needed). */
  write(rel: string, text: string): void;
  /** Deletes the folder. */
  remove(): void;
}

/**
 * Makes a new ESM project (`package.json` with `"type": "module"`) in the OS temp folder and installs `deps` there in
 * one `npm install --no-audit --no-fund --prefer-offline` (tarball paths and `name@version` specs alike). Its
 * `.npmrc` skips onnxruntime-node's download of CUDA binaries (from nuget.org; its CPU binaries ship in the npm
 * package), as the repo's own `.npmrc` does.
 * @throws Error with npm's output when the install fails
 */
export async function freshProject(deps: readonly string[], options: { timeoutMs?: number } = {}): Promise<FreshProject> {
  const dir = mkdtempSync(join(tmpdir(), "agentic-rl-consumer-"));
  const write = (rel: string, text: string) => {
    const path = join(dir, rel);
    mkdirSync(resolve(path, ".."), { recursive: true });
    writeFileSync(path, text);
  };
  write("package.json", JSON.stringify({ name: "arl-consumer", version: "0.0.0", private: true, type: "module" }, null, 2) + "\n");
  write(".npmrc", "onnxruntime-node-install=skip\n");
  const project: FreshProject = {
    dir,
    exec: (cmd, args, opts = {}) => exec(cmd, args, { ...opts, cwd: dir }),
    write,
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
  if (deps.length > 0) {
    try {
      await project.exec("npm", ["install", "--no-audit", "--no-fund", "--prefer-offline", ...deps], { timeoutMs: options.timeoutMs ?? 300_000 });
    } catch (e) {
      project.remove();
      throw e;
    }
  }
  return project;
}
