/**
 * Guards from the reliability new-user pass: one process per run folder, config sections must be mappings, fault
 * kinds as a comma list, warm-start demonstrations never see injected faults, and an RL step where no trajectory
 * reaches the update is a skipped step (counted toward rl.maxNonFiniteSteps), not a crash.
 */
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { RunDir } from "../src/train/runDir.ts";
import { RUN_MARKER, inspectRunFolder } from "../src/train/runFolder.ts";
import { ConfigError, resolveConfig } from "../src/train/config.ts";
import { SMOKE_OVERRIDES, searchRecipe } from "../src/envs/index.ts";
import { applyOverrides } from "../src/train/configFile.ts";
import { dryRun } from "../src/train/dryRun.ts";
import { setupExperiment } from "../src/train/setup.ts";
import { warmStartDemos } from "../src/train/warmStart.ts";
import { rlStep } from "../src/train/rl.ts";
import type { TrainingBackend } from "../src/core/training.ts";

describe("run folder lock", () => {
  it("refuses a folder a live process holds, takes over one whose process is gone", async () => {
    const root = mkdtempSync(join(tmpdir(), "arl-lock-"));
    const live = spawn("sleep", ["10"]);
    const dead = spawn("true");
    await new Promise((r) => dead.on("exit", r));
    try {
      // A run folder another process is writing (its marker, config.yaml and .lock), as a second `arl train` would find it.
      mkdirSync(join(root, "a"), { recursive: true });
      writeFileSync(join(root, "a", RUN_MARKER), JSON.stringify({ entries: ["config.yaml"] }));
      writeFileSync(join(root, "a", "config.yaml"), "run: {}\n");
      writeFileSync(join(root, "a", ".lock"), String(live.pid));
      expect(() => new RunDir(root, "a", { overwrite: false, resume: true })).toThrow(`run folder ${join(root, "a")} is in use by process ${live.pid}`);
      expect(() => new RunDir(root, "a", { overwrite: true })).toThrow(/is in use by process/);
      expect(readFileSync(join(root, "a", "config.yaml"), "utf8")).toBe("run: {}\n"); // not replaced
      writeFileSync(join(root, "a", ".lock"), String(dead.pid));
      new RunDir(root, "a", { overwrite: false, resume: true });
      expect(readFileSync(join(root, "a", ".lock"), "utf8")).toBe(String(process.pid));
    } finally {
      live.kill();
    }
  });
});

describe("a run that failed before its first checkpoint", () => {
  /** A run folder as a run that died during warm start leaves it: marker, config, metrics, samples, no checkpoint, no summary. */
  const failedEarly = (root: string, name: string): string => {
    const dir = join(root, name);
    mkdirSync(join(dir, "checkpoints"), { recursive: true });
    writeFileSync(join(dir, RUN_MARKER), JSON.stringify({ entries: ["checkpoints", "config.yaml", "metrics.jsonl", "samples"] }));
    mkdirSync(join(dir, "samples"), { recursive: true });
    writeFileSync(join(dir, "config.yaml"), "run: {}\n");
    writeFileSync(join(dir, "metrics.jsonl"), '{"stage":"sft","step":0}\n');
    writeFileSync(join(dir, "samples", "step-0.jsonl"), "{}\n");
    return dir;
  };

  it("does not block its name: the next run reuses the folder, clearing its run files (only those), with a notice", () => {
    const root = mkdtempSync(join(tmpdir(), "arl-stale-"));
    const dir = failedEarly(root, "a");
    writeFileSync(join(dir, "notes.md"), "mine"); // put there by the user after the run stopped
    const notices: string[] = [];
    const run = new RunDir(root, "a", { overwrite: false, log: (m) => notices.push(m) });
    expect(run.path).toBe(dir);
    expect(notices).toHaveLength(1);
    expect(notices[0]).toContain(`run folder ${dir} holds a run that stopped before its first checkpoint`);
    expect(existsSync(join(dir, "config.yaml"))).toBe(false);
    expect(existsSync(join(dir, "metrics.jsonl"))).toBe(false);
    expect(existsSync(join(dir, "samples", "step-0.jsonl"))).toBe(false);
    expect(existsSync(join(dir, "checkpoints"))).toBe(true);
    expect(readFileSync(join(dir, "notes.md"), "utf8")).toBe("mine");
    expect(notices[0]).toContain("kept 1 file(s) arl did not write: notes.md");
    expect(readFileSync(join(dir, ".lock"), "utf8")).toBe(String(process.pid));
  });

  it("a folder holding a checkpoint or a summary still needs --overwrite or --resume", () => {
    const root = mkdtempSync(join(tmpdir(), "arl-stale-"));
    const withCkpt = failedEarly(root, "ckpt");
    mkdirSync(join(withCkpt, "checkpoints", "sft"));
    writeFileSync(join(withCkpt, "checkpoints", "sft", "policy-manifest.json"), "{}"); // written last: a whole checkpoint
    expect(() => new RunDir(root, "ckpt", { overwrite: false })).toThrow(`run folder ${withCkpt} already holds a run`);
    expect(existsSync(join(withCkpt, "metrics.jsonl"))).toBe(true); // untouched
    const withSummary = failedEarly(root, "done");
    writeFileSync(join(withSummary, "summary.json"), "{}");
    expect(() => new RunDir(root, "done", { overwrite: false })).toThrow(`run folder ${withSummary} already holds a run`);
    new RunDir(root, "done", { overwrite: true }); // as before
    // A finished lab has no checkpoint of its own and no summary.json: its lab.json is what must not be lost.
    const lab = failedEarly(root, "lab");
    writeFileSync(join(lab, "lab.json"), "{}");
    expect(() => new RunDir(root, "lab", { overwrite: false })).toThrow(`run folder ${lab} already holds a run`);
    expect(existsSync(join(withSummary, "summary.json"))).toBe(false);
  });

  it("a checkpoint killed mid-write (temp files, no policy-manifest.json) does not block the name; unmarked files without a config.yaml do", () => {
    const root = mkdtempSync(join(tmpdir(), "arl-stale-"));
    const half = failedEarly(root, "half");
    mkdirSync(join(half, "checkpoints", "sft"));
    writeFileSync(join(half, "checkpoints", "sft", "tensors.bin.tmp-123"), "x");
    expect(inspectRunFolder(half)).toMatchObject({ kind: "marked", progress: "started" });
    new RunDir(root, "half", { overwrite: false, log: () => {} });
    expect(existsSync(join(half, "checkpoints", "sft"))).toBe(false);
    // No marker and no config.yaml, but a summary, a checkpoint or metrics: not provably a run folder (refused, untouched, --overwrite too).
    for (const [name, file] of [["s", "summary.json"], ["m", "metrics.jsonl"], ["c", join("checkpoints", "final", "policy-manifest.json")]] as const) {
      const dir = join(root, name);
      mkdirSync(join(dir, "checkpoints", "final"), { recursive: true });
      writeFileSync(join(dir, file), '{"old":1}\n');
      for (const overwrite of [false, true]) expect(() => new RunDir(root, name, { overwrite })).toThrow(`${dir} exists and is not a run folder`);
      expect(readFileSync(join(dir, file), "utf8")).toBe('{"old":1}\n');
    }
    // A folder with files of its own is not a run folder: refused, nothing deleted.
    const other = join(root, "other");
    mkdirSync(other);
    writeFileSync(join(other, "notes.txt"), "mine");
    expect(inspectRunFolder(other).kind).toBe("foreign");
    expect(() => new RunDir(root, "other", { overwrite: false })).toThrow(`${other} exists and is not a run folder`);
    expect(readFileSync(join(other, "notes.txt"), "utf8")).toBe("mine");
  });

  it("is still refused while a live process holds its lock (a run still in its warm start)", async () => {
    const root = mkdtempSync(join(tmpdir(), "arl-stale-"));
    const dir = failedEarly(root, "live");
    const live = spawn("sleep", ["10"]);
    try {
      writeFileSync(join(dir, ".lock"), String(live.pid));
      expect(() => new RunDir(root, "live", { overwrite: false })).toThrow(`run folder ${dir} is in use by process ${live.pid}`);
      expect(existsSync(join(dir, "metrics.jsonl"))).toBe(true); // nothing cleared
      await expect(dryRun(resolveConfig(applyOverrides({}, { ...SMOKE_OVERRIDES, "run.dir": root, "run.name": "live" })), searchRecipe)).rejects.toThrow(`is in use by process ${live.pid}`);
    } finally {
      live.kill();
    }
  });

  it("dry run says the folder would be reused", async () => {
    const root = mkdtempSync(join(tmpdir(), "arl-stale-"));
    failedEarly(root, "smoke");
    const config = resolveConfig(applyOverrides({}, { ...SMOKE_OVERRIDES, "run.dir": root, "run.name": "smoke" }));
    expect((await dryRun(config, searchRecipe)).at(-1)).toBe(`run folder: ${join(root, "smoke")} (a run that stopped before its first checkpoint: its run files would be cleared and the folder reused)`);
  });
});

describe("config guards", () => {
  it("a section given as a scalar is an error naming it; fault kinds take a comma list", () => {
    expect(() => applyOverrides({ rl: 5 }, { "rl.steps": "3" })).toThrow(ConfigError);
    expect(() => applyOverrides({ rl: 5 }, { "rl.steps": "3" })).toThrow(/rl: expected a mapping of fields, got 5/);
    expect(() => resolveConfig({ env: "hello" })).toThrow(/env: expected object/);
    expect(resolveConfig(applyOverrides({}, { "env.faults.kinds": "hang, slow" })).env.faults.kinds).toEqual(["hang", "slow"]);
    expect(() => resolveConfig(applyOverrides({}, { "env.faults.kinds": "hang,nope" }))).toThrow(/expected one of "fail", "hang", "slow", "garbage", "huge"/);
  });
});

describe("faults and the warm start", () => {
  it("demonstrations are the same with faults injected at rate 1 (they are for RL and evaluation only)", async () => {
    const base = resolveConfig(applyOverrides({}, { ...SMOKE_OVERRIDES, "sft.counterfactualWorlds": "1" }));
    const faulty = resolveConfig(applyOverrides({}, { ...SMOKE_OVERRIDES, "sft.counterfactualWorlds": "1", "env.faults.rate": "1", "env.faults.kinds": "fail,garbage" }));
    const a = await warmStartDemos(setupExperiment(base, searchRecipe), base);
    const b = await warmStartDemos(setupExperiment(faulty, searchRecipe), faulty);
    expect(b.map((t) => t.tokens)).toEqual(a.map((t) => t.tokens));
  }, 30_000);
});

describe("an RL step with nothing to train on", () => {
  it("is reported as a skipped update with the drop reasons, not thrown", async () => {
    const config = resolveConfig(applyOverrides({}, SMOKE_OVERRIDES));
    const s = setupExperiment(config, searchRecipe);
    const broken: TrainingBackend = {
      samplingClient: () => ({ sample: async () => [{ tokens: [-1], logprobs: [Number.NaN], stopReason: "length" }] }),
      forwardBackward: async () => {
        throw new Error("no update expected");
      },
      computeLogprobs: async () => {
        throw new Error("no forward expected");
      },
      optimStep: async () => ({}),
      save: async () => {},
      load: async () => {},
    };
    const skipped: string[] = [];
    const r = await rlStep(
      { backend: broken, tokenizer: s.tokenizer, makeEnv: s.instance.makeEnv(0), limits: s.limits, config, onSkippedUpdate: (x) => skipped.push(x) },
      s.instance.train.slice(0, 2),
      1,
    );
    expect(r.groups).toEqual([]);
    expect(r.metrics.dropped).toBe(2 * config.rl.groupSize);
    expect(skipped).toHaveLength(1);
    expect(skipped[0]).toMatch(/^no trajectory reached the update \(8 dropped; first: \w+: .*id -1/);
  });
});
