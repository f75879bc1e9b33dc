/**
 * Issue 29, part 1 and part 10 (a–c): `arl train` / `arl lab` delete only what they can show they wrote (the
 * `.arl-run` marker and the run files it lists), refuse other folders — `--overwrite` included — and system folders;
 * Ctrl-C says what was stopped, releases the lock and suggests `--resume`; progress lines without a terminal;
 * `arl rollout` on a tool env shows its tool calls, not `searches 0`.
 */
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import { basename, dirname, join, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { RunDir } from "../src/train/runDir.ts";
import { RUN_MARKER, inspectRunFolder, planRunFolder } from "../src/train/runFolder.ts";
import { resolveConfig } from "../src/train/config.ts";
import { SMOKE_OVERRIDES, searchRecipe } from "../src/envs/index.ts";
import { applyOverrides } from "../src/train/configFile.ts";
import { dryRun } from "../src/train/dryRun.ts";
import { consoleReporter } from "../src/cli/format.ts";
import { ProgressLines } from "../src/cli/progress.ts";
import { arlLauncher, resumeCommand, stopMessage } from "../src/cli/interrupt.ts";
import { formatTrajectory } from "../src/rollout/format.ts";
import type { Trajectory } from "../src/core/types.ts";

// Commands below are printed as a plain shell runs arl; under `npx vitest` npm sets npm_command=exec, which would make
// them `npx arl …` (arlLauncher; spawned CLIs inherit this environment).
delete process.env.npm_command;

const repo = resolve(import.meta.dirname, "..");
const arl = (...args: string[]) => {
  const r = spawnSync(process.execPath, [join(repo, "bin", "arl.mjs"), ...args], { cwd: repo, encoding: "utf8", timeout: 120_000 });
  return { code: r.status, out: r.stdout, err: r.stderr };
};
const quiet = { log: () => {} };

describe("arl train deletes only what it wrote", () => {
  it("the tester's repro: a folder holding a config.yaml and notes.md is refused, --overwrite too, and nothing is deleted", () => {
    const x = mkdtempSync(join(tmpdir(), "arl-safety-"));
    mkdirSync(join(x, "exp1"));
    writeFileSync(join(x, "exp1", "config.yaml"), "rl:\n  groupSize: 4\n");
    writeFileSync(join(x, "exp1", "notes.md"), "n\n");
    const r = arl("train", "--smoke", "--config", join(x, "exp1", "config.yaml"), "--run.dir", x, "--run.name", "exp1");
    expect(r.code, r.err).toBe(2);
    expect(r.err).toContain(`${join(x, "exp1")} exists and is not a run folder`);
    expect(r.err).toContain("--overwrite replaces only run folders");
    expect(() => new RunDir(x, "exp1", { overwrite: true, ...quiet })).toThrow(`${join(x, "exp1")} exists and is not a run folder`);
    expect(readdirSync(join(x, "exp1")).sort()).toEqual(["config.yaml", "notes.md"]);
    expect(readFileSync(join(x, "exp1", "notes.md"), "utf8")).toBe("n\n");
    expect(readFileSync(join(x, "exp1", "config.yaml"), "utf8")).toBe("rl:\n  groupSize: 4\n");
  }, 120_000);

  it("a new or empty folder gets the marker first; a rerun after a kill clears only the run's files", () => {
    const root = mkdtempSync(join(tmpdir(), "arl-safety-"));
    mkdirSync(join(root, "empty"));
    for (const name of ["fresh", "empty"]) {
      const run = new RunDir(root, name, { overwrite: false, ...quiet });
      expect(JSON.parse(readFileSync(join(run.path, RUN_MARKER), "utf8")).entries).toEqual(["checkpoints", "samples"]);
      run.writeConfig({ run: { name } });
      run.logMetrics("sft", 0, { loss: 1 });
      expect(JSON.parse(readFileSync(join(run.path, RUN_MARKER), "utf8")).entries).toEqual(["checkpoints", "config.yaml", "metrics.jsonl", "samples"]);
      // Killed after config.yaml (no checkpoint); the user then keeps notes in the folder; the same command again:
      writeFileSync(join(run.path, "notes.md"), "mine");
      mkdirSync(join(run.path, "analysis"));
      writeFileSync(join(run.path, "analysis", "plot.py"), "print(1)");
      const notices: string[] = [];
      new RunDir(root, name, { overwrite: false, log: (m) => notices.push(m) });
      expect(notices.join("\n")).toContain("its run files were cleared: checkpoints, config.yaml, metrics.jsonl, samples; kept 2 file(s) arl did not write: analysis, notes.md");
      expect(readdirSync(run.path).sort()).toEqual([".arl-run", ".lock", "analysis", "checkpoints", "notes.md", "samples"]);
      expect(readFileSync(join(run.path, "analysis", "plot.py"), "utf8")).toBe("print(1)");
      // --overwrite of a finished run: the same — run files only.
      writeFileSync(join(run.path, "summary.json"), "{}");
      expect(() => new RunDir(root, name, { overwrite: false, ...quiet })).toThrow("already holds a run; choose another name");
      new RunDir(root, name, { overwrite: true, ...quiet });
      expect(readdirSync(run.path).sort()).toEqual([".arl-run", ".lock", "analysis", "checkpoints", "notes.md", "samples"]);
    }
  });

  it("a folder written before the marker: --resume adopts it, --overwrite and plain are refused (nothing deleted)", () => {
    const root = mkdtempSync(join(tmpdir(), "arl-safety-"));
    const legacy = (name: string): string => {
      const dir = join(root, name);
      mkdirSync(join(dir, "checkpoints", "sft"), { recursive: true });
      writeFileSync(join(dir, "checkpoints", "sft", "policy-manifest.json"), "{}");
      writeFileSync(join(dir, "config.yaml"), "run: {}\n");
      writeFileSync(join(dir, "metrics.jsonl"), '{"stage":"sft","step":0}\n');
      writeFileSync(join(dir, "notes.md"), "mine");
      return dir;
    };
    const a = legacy("a");
    expect(inspectRunFolder(a)).toMatchObject({ kind: "legacy", progress: "checkpointed", foreign: ["notes.md"] });
    expect(() => new RunDir(root, "a", { overwrite: false, resumable: true, ...quiet })).toThrow(
      `run folder ${a} already holds a run that stopped after its checkpoint ${join(a, "checkpoints", "sft")} (written by an arl before run folders had a marker); continue it with --resume`,
    );
    new RunDir(root, "a", { overwrite: false, resume: true, ...quiet });
    expect(JSON.parse(readFileSync(join(a, RUN_MARKER), "utf8")).entries).toEqual(["checkpoints", "config.yaml", "metrics.jsonl"]);
    expect(existsSync(join(a, "metrics.jsonl"))).toBe(true);
    // --overwrite deletes nothing in an unmarked folder: config.yaml beside checkpoints/ is what any training tool
    // writes (the outside probe's user folder lost its model.pt this way).
    const b = legacy("b");
    writeFileSync(join(b, "checkpoints", "model.pt"), "weights");
    expect(() => new RunDir(root, "b", { overwrite: true, ...quiet })).toThrow(`has no ${RUN_MARKER} marker`);
    expect(readdirSync(b).sort()).toEqual(["checkpoints", "config.yaml", "metrics.jsonl", "notes.md"]);
    expect(readFileSync(join(b, "checkpoints", "model.pt"), "utf8")).toBe("weights");
  });

  it("clearing a run's folders removes only what arl wrote in them: a user's file in designs/<d>/ or checkpoints/ stays", () => {
    // Issue 29's outside probe: `arl lab --overwrite` removed designs/composite/notes.md with the design's folder, and
    // reuse / --resume removed a user's file under checkpoints/.
    const root = mkdtempSync(join(tmpdir(), "arl-safety-"));
    const run = new RunDir(root, "lab", { overwrite: false, ...quiet });
    const design = join(run.path, "designs", "composite");
    mkdirSync(join(design, "checkpoints", "final"), { recursive: true });
    writeFileSync(join(run.path, "designs", ".keep-me"), "x");
    for (const f of ["config.yaml", "metrics.jsonl", "summary.json", ".arl-run", "notes.md"]) writeFileSync(join(design, f), f === "notes.md" ? "mine" : "{}");
    for (const f of ["tensors.bin", "policy-manifest.json", "tensors.bin.tmp-12", "model.pt"]) writeFileSync(join(design, "checkpoints", "final", f), "x");
    mkdirSync(join(run.path, "checkpoints", "step-3"), { recursive: true });
    writeFileSync(join(run.path, "checkpoints", "step-3", "gpt.json"), "{}");
    run.writeConfig({ run: {} });
    new RunDir(root, "lab", { overwrite: true, ...quiet });
    expect(readFileSync(join(design, "notes.md"), "utf8")).toBe("mine");
    expect(readdirSync(design).sort()).toEqual(["checkpoints", "notes.md"]);
    expect(readdirSync(join(design, "checkpoints", "final"))).toEqual(["model.pt"]);
    expect(readFileSync(join(run.path, "designs", ".keep-me"), "utf8")).toBe("x");
    expect(existsSync(join(run.path, "checkpoints", "step-3"))).toBe(false); // all arl's: removed with its folder
    expect(existsSync(join(run.path, "config.yaml"))).toBe(false);
  });

  it("a run name over 255 characters is a config error naming the rule, before anything is written", () => {
    const root = mkdtempSync(join(tmpdir(), "arl-safety-"));
    expect(() => new RunDir(root, "a".repeat(256), { overwrite: false, ...quiet })).toThrow("allowed: 1 to 255 of A-Z a-z 0-9 . _ -");
    expect(readdirSync(root)).toEqual([]);
    new RunDir(root, "a".repeat(255), { overwrite: false, ...quiet });
  });

  it("a garbled marker proves nothing, and a stale .lock that is a link is never written through", () => {
    const root = mkdtempSync(join(tmpdir(), "arl-safety-"));
    const g = join(root, "g");
    mkdirSync(join(g, "samples"), { recursive: true });
    writeFileSync(join(g, RUN_MARKER), "garbage{{{");
    writeFileSync(join(g, "report.html"), "mine");
    writeFileSync(join(g, "samples", "mydata.csv"), "mine");
    expect(inspectRunFolder(g).kind).toBe("foreign");
    expect(() => new RunDir(root, "g", { overwrite: true, ...quiet })).toThrow("is not a run folder");
    expect(readFileSync(join(g, "samples", "mydata.csv"), "utf8")).toBe("mine");
    const precious = join(root, "p.txt");
    writeFileSync(precious, "PRECIOUS");
    mkdirSync(join(root, "l"));
    symlinkSync(precious, join(root, "l", ".lock"));
    expect(() => new RunDir(root, "l", { overwrite: false, ...quiet })).toThrow("is not a plain file");
    expect(readFileSync(precious, "utf8")).toBe("PRECIOUS");
  });

  it("system folders are refused as run folders, by --dry-run as well (`--run.dir / --run.name tmp`)", async () => {
    const smoke = (dir: string, name: string) => resolveConfig(applyOverrides({}, { ...SMOKE_OVERRIDES, "run.dir": dir, "run.name": name }));
    await expect(dryRun(smoke("/", "tmp"), searchRecipe)).rejects.toThrow("refusing run folder /tmp: /tmp is a system folder");
    expect(() => new RunDir("/", "tmp", { overwrite: true })).toThrow("/tmp is a system folder");
    expect(() => new RunDir("/", "nonexistent-arl-folder", { overwrite: false })).toThrow("is a system folder");
    expect(() => planRunFolder(dirname(homedir()), homedir().split("/").pop()!, { overwrite: true })).toThrow("refusing run folder");
    // The project folder above runs/ (`--run.dir .. --run.name <project>`) holds files and no marker: refused, --overwrite too.
    expect(() => planRunFolder(dirname(repo), basename(repo), { overwrite: true })).toThrow(`${repo} exists and is not a run folder`);
    const ok = mkdtempSync(join(tmpdir(), "arl-safety-"));
    expect(planRunFolder(ok, "x").describe).toBe(`${join(ok, "x")} (new)`);
  });
});

describe("Ctrl-C during arl train", () => {
  it("says what was stopped and how to resume, releases the lock, exits 130; the rerun reuses the folder", async () => {
    const root = mkdtempSync(join(tmpdir(), "arl-sigint-"));
    const child = spawn(process.execPath, [join(repo, "bin", "arl.mjs"), "train", "--smoke", "--run.dir", root], { cwd: repo });
    let err = "";
    child.stderr.on("data", (d: Buffer) => (err += d.toString()));
    const folder = join(root, "smoke");
    const exited = new Promise<number | null>((r) => child.on("exit", (code) => r(code)));
    await new Promise<void>((r) => {
      const poll = setInterval(() => {
        if (existsSync(join(folder, "config.yaml")) || child.exitCode !== null) {
          clearInterval(poll);
          r();
        }
      }, 20);
    });
    child.kill("SIGINT");
    expect(await exited, err).toBe(130);
    expect(err).toContain(`stopped by SIGINT: arl train in ${folder}`);
    expect(err).toContain(`continue it (the same command and flags): arl train --smoke --run.dir ${root} --resume`);
    expect(existsSync(join(folder, ".lock"))).toBe(false);
    expect(existsSync(join(folder, RUN_MARKER))).toBe(true);
    writeFileSync(join(folder, "notes.md"), "mine");
    new RunDir(root, "smoke", { overwrite: false, ...quiet }); // the same command again: reused, notes kept
    expect(readFileSync(join(folder, "notes.md"), "utf8")).toBe("mine");
  }, 120_000);

  it("the message names the last whole checkpoint; a rerun without --resume suggests --resume (train, not lab)", () => {
    const root = mkdtempSync(join(tmpdir(), "arl-sigint-"));
    const run = new RunDir(root, "r", { overwrite: false, ...quiet });
    run.writeConfig({});
    for (const c of ["sft", "step-2", "step-10"]) {
      mkdirSync(run.checkpoint(c), { recursive: true });
      writeFileSync(join(run.checkpoint(c), "policy-manifest.json"), "{}");
    }
    mkdirSync(run.checkpoint("step-12")); // killed mid-save: not whole
    const msg = stopMessage("SIGINT", "train", [run.path, join(run.path, "designs", "d")], ["train", "--config", "my file.yaml", "--overwrite"]);
    expect(msg).toContain(`stopped by SIGINT: arl train in ${run.path}\n`);
    expect(msg).toContain(`last whole checkpoint: ${run.checkpoint("step-10")}; lock released`);
    expect(msg).toContain("arl train --config 'my file.yaml' --resume");
    expect(stopMessage("SIGTERM", "lab", [run.path], ["lab"])).toContain("rerun it with --overwrite");
    expect(stopMessage("SIGINT", "train", [], ["train"])).toContain("before its run folder was opened");
    expect(resumeCommand(["train", "--resume"])).toBe("arl train --resume");
    // Under npx (a consumer project, where `arl` is not on PATH) the command to paste starts with npx.
    expect(arlLauncher({ npm_command: "exec" })).toBe("npx arl");
    expect(resumeCommand(["train", "--env", "./weather.ts"], arlLauncher({ npm_command: "exec" }))).toBe("npx arl train --env ./weather.ts --resume");
    expect(() => new RunDir(root, "r", { overwrite: false, resumable: true })).toThrow(`already holds a run that stopped after its checkpoint ${run.checkpoint("step-10")}; continue it with --resume`);
    let labRefusal = ""; // a lab's RunDir (no `resumable`: arl lab has no --resume to offer)
    try {
      new RunDir(root, "r", { overwrite: false });
    } catch (e) {
      labRefusal = (e as Error).message;
    }
    expect(labRefusal).toContain("already holds a run that stopped after its checkpoint");
    expect(labRefusal).not.toContain("--resume");
    // A lab stopped after its warm start: another --name can start from that checkpoint.
    rmSync(run.checkpoint("step-10"), { recursive: true });
    rmSync(run.checkpoint("step-2"), { recursive: true });
    expect(stopMessage("SIGTERM", "lab", [run.path], ["lab"])).toContain(`--warm-start ${run.checkpoint("sft")} skips the warm start`);
  });
});

describe("progress without a terminal", () => {
  it("prints a line per stage at a steady interval of wall time, and one when it ends", () => {
    let t = 0;
    const lines: string[] = [];
    const p = new ProgressLines("warm start (SFT)", 300, { intervalMs: 30_000, now: () => t, write: (l) => lines.push(l) });
    for (let step = 1; step <= 300; step++) {
      t += 1_000; // 1 s per step: 300 s in all
      p.update(step, { loss: (1 / step).toFixed(3) });
    }
    p.done();
    expect(lines).toHaveLength(11);
    expect(lines[0]).toBe("warm start (SFT): 30/300 (10%)  loss 0.033  elapsed 30s");
    expect(lines[9]).toBe("warm start (SFT): 300/300 (100%)  loss 0.003  elapsed 5m00s");
    expect(lines[10]).toBe("warm start (SFT): done (300) in 5m00s");
    // A stage whose one step outlasts the interval still shows it is alive (the reporter's timer calls tick).
    const slow: string[] = [];
    const q = new ProgressLines("RL", 2, { now: () => t, write: (l) => slow.push(l) });
    t += 65_000;
    q.tick();
    q.tick();
    expect(slow).toEqual(["RL: 0/2 (0%)  elapsed 1m05s"]);
  });

  it("the console reporter writes lines when stderr is not a terminal", () => {
    let t = 0;
    const out: string[] = [];
    const reporter = consoleReporter({ tty: false, intervalMs: 10, now: () => t, write: (l) => out.push(l) });
    reporter.log("warm start: 1954 demonstrations");
    const bar = reporter.bar("SFT", 3);
    for (let i = 1; i <= 3; i++) {
      t += 10;
      bar.update(i, { loss: 2 });
    }
    bar.stop();
    expect(out).toEqual(["warm start: 1954 demonstrations", "SFT: 1/3 (33%)  loss 2  elapsed 0s", "SFT: 2/3 (66%)  loss 2  elapsed 0s", "SFT: 3/3 (100%)  loss 2  elapsed 0s", "SFT: done (3) in 0s"]);
  });
});

describe("arl rollout on a tool env", () => {
  it("prints the tool calls per tool, no `searches 0`, and no empty gold line", () => {
    const r = arl("rollout", "--env", "travel", "-n", "1");
    expect(r.code, r.err).toBe(0);
    expect(r.out).toMatch(/tool calls search_flights 1, search_hotels 1, book 1/);
    expect(r.out).not.toContain("searches 0");
    expect(r.out).not.toMatch(/^gold: *$/m);
    // A task with gold answers still shows them; no call at all reads "none"; the search env keeps its searches.
    const t = { task: { id: "c:1", question: "q", answers: ["billing"] }, turns: [], answer: "billing", searches: 0, invalidActions: 0, toolCalls: {} } as unknown as Trajectory;
    expect(formatTrajectory(t, { toolCalls: true })).toBe("── c:1\nquestion: q\ngold:     billing\nanswer:   billing   tool calls none   invalid 0");
    expect(formatTrajectory(t)).toContain("searches 0");
  }, 120_000);
});
