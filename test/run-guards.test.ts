/**
 * Guards from the reliability new-user pass: one process per run folder, config sections must be mappings, fault
 * kinds as a comma list, warm-start demonstrations never see injected faults, and an RL step where no trajectory
 * reaches the update is a skipped step (counted toward rl.maxNonFiniteSteps), not a crash.
 */
import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { RunDir } from "../src/train/runDir.ts";
import { ConfigError, SMOKE_OVERRIDES, applyOverrides, resolveConfig } from "../src/train/config.ts";
import { setup, warmStartDemos } from "../src/train/experiment.ts";
import { rlStep } from "../src/train/rl.ts";
import type { TrainingBackend } from "../src/policy/types.ts";

describe("run folder lock", () => {
  it("refuses a folder a live process holds, takes over one whose process is gone", async () => {
    const root = mkdtempSync(join(tmpdir(), "arl-lock-"));
    const live = spawn("sleep", ["10"]);
    const dead = spawn("true");
    await new Promise((r) => dead.on("exit", r));
    try {
      // A run folder another process is writing (its config.yaml and .lock), as a second `arl train` would find it.
      mkdirSync(join(root, "a"), { recursive: true });
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
    const a = await warmStartDemos(setup(base), base);
    const b = await warmStartDemos(setup(faulty), faulty);
    expect(b.map((t) => t.tokens)).toEqual(a.map((t) => t.tokens));
  }, 30_000);
});

describe("an RL step with nothing to train on", () => {
  it("is reported as a skipped update with the drop reasons, not thrown", async () => {
    const config = resolveConfig(applyOverrides({}, SMOKE_OVERRIDES));
    const s = setup(config);
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
      { backend: broken, tokenizer: s.tokenizer, makeEnv: s.makeEnv, limits: s.limits, config, onSkippedUpdate: (x) => skipped.push(x) },
      s.world.train.slice(0, 2),
      1,
    );
    expect(r.groups).toEqual([]);
    expect(r.metrics.dropped).toBe(2 * config.rl.groupSize);
    expect(skipped).toHaveLength(1);
    expect(skipped[0]).toMatch(/^no trajectory reached the update \(8 dropped; first: \w+: .*id -1/);
  });
});
