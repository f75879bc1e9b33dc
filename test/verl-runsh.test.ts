/**
 * run.sh of `arl export verl`: sized from the dataset (verlSchedule), only keys that exist in the targeted veRL
 * release (test/fixtures/verl/config-keys.json, read from verl-project/verl's
 * verl/trainer/config/_generated_ppo_trainer.yaml at v0.5.0 8fdc4d3f, v0.8.0 7aed6b23 and v0.9.0 483b8a00), and the
 * GPU checks / micro-batch it computes before starting veRL — run for real with a stand-in `python3` that records
 * its arguments.
 */
import { spawnSync } from "node:child_process";
import { chmodSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parquetMetadata } from "hyparquet";
import { beforeAll, describe, expect, it } from "vitest";
import { exportVerl, type VerlExportResult } from "../src/export/verl.ts";
import { runScriptOverrides } from "../src/export/verlRunScript.ts";
import { DEFAULT_MIN_STEPS, verlSchedule } from "../src/export/verlSchedule.ts";
import { maxToolResponseLength } from "../src/export/verlSearchTool.ts";
import type { VerlTarget } from "../src/export/verlTarget.ts";
import { resolveConfig } from "../src/train/config.ts";
import { applyOverrides } from "../src/train/configFile.ts";
import { searchRecipe } from "../src/envs/index.ts";
import { setupExperiment } from "../src/train/setup.ts";

interface KeyFixture {
  recorded: string[];
  versions: Record<string, { commit: string; defaults: Record<string, unknown> }>;
}
const fixture = JSON.parse(readFileSync(new URL("./fixtures/verl/config-keys.json", import.meta.url), "utf8")) as KeyFixture;

/** The veRL releases each target must run on. */
const RELEASES: Record<VerlTarget, string[]> = { current: ["v0.8.0", "v0.9.0"], "0.5": ["v0.5.0"] };

const config = resolveConfig(applyOverrides({}, {})); // the default world: 280 train / 120 test rows
let dir: string;
const exported: Partial<Record<VerlTarget, VerlExportResult>> = {};

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "arl-verl-runsh-"));
  for (const target of ["current", "0.5"] as const) exported[target] = await exportVerl({ outDir: join(dir, target), config, verlVersion: target });
});

/** The `key=value` overrides of a run.sh (the lines between `python3 -m verl.trainer.main_ppo` and `"$@"`). */
function overridesOf(sh: string): Map<string, string> {
  const body = sh.slice(sh.indexOf("python3 -m verl.trainer.main_ppo \\\n") + "python3 -m verl.trainer.main_ppo \\\n".length, sh.lastIndexOf('    "$@"'));
  const out = new Map<string, string>();
  for (const line of body.split("\n").filter((l) => l.trim() !== "")) {
    const m = /^ {4}([A-Za-z_][\w.]*)=(.*) \\$/.exec(line);
    expect(m, line).not.toBeNull();
    out.set(m![1], m![2]);
  }
  return out;
}

/**
 * Runs run.sh with `python3` replaced by a script that writes its arguments (one per line) to a file; returns the
 * exit status, stderr and the arguments veRL would have received.
 */
function runWithFakePython(script: string, env: Record<string, string>, extra: string[] = []): { status: number | null; stderr: string; args: string[] } {
  const bin = mkdtempSync(join(tmpdir(), "arl-fake-python-"));
  const argsFile = join(bin, "args.txt");
  writeFileSync(join(bin, "python3"), `#!/usr/bin/env bash\nprintf '%s\\n' "$@" > ${JSON.stringify(argsFile)}\n`);
  chmodSync(join(bin, "python3"), 0o755);
  const r = spawnSync("bash", [script, ...extra], { encoding: "utf8", env: { PATH: `${bin}:${process.env.PATH}`, HOME: process.env.HOME ?? "/tmp", ...env } });
  let args: string[] = [];
  try {
    args = readFileSync(argsFile, "utf8").split("\n").slice(0, -1);
  } catch {
    // python3 was never started
  }
  return { status: r.status, stderr: r.stderr, args };
}

describe("verlSchedule: batch, steps and epochs from the dataset", () => {
  it("the rule: batch ≤ rows/4 in multiples of 8 (≤ 256), ⌊rows/batch⌋ steps per epoch, epochs up to ≥ 50 steps", () => {
    // The case: 280 rows used to give one update (batch 256, drop_last, one epoch).
    expect(verlSchedule(280)).toEqual({ rows: 280, trainBatchSize: 64, ppoMiniBatchSize: 32, stepsPerEpoch: 4, epochs: 13, totalSteps: 52, updates: 104, testFreq: 11, saveFreq: 52 });
    expect(verlSchedule(40)).toEqual({ rows: 40, trainBatchSize: 8, ppoMiniBatchSize: 8, stepsPerEpoch: 5, epochs: 10, totalSteps: 50, updates: 50, testFreq: 10, saveFreq: 50 });
    expect(verlSchedule(32)).toMatchObject({ trainBatchSize: 8, stepsPerEpoch: 4, epochs: 13, totalSteps: 52 });
    expect(verlSchedule(100_000)).toMatchObject({ trainBatchSize: 256, ppoMiniBatchSize: 128, stepsPerEpoch: 390, epochs: 1, totalSteps: 390, updates: 780 });
    for (const rows of [32, 33, 47, 63, 64, 100, 280, 1000, 4321, 100_000]) {
      for (const minSteps of [1, 7, DEFAULT_MIN_STEPS, 200]) {
        const sc = verlSchedule(rows, { minSteps });
        expect(sc.trainBatchSize % 8, `${rows}`).toBe(0);
        expect(sc.trainBatchSize).toBeLessThanOrEqual(Math.min(256, rows / 4));
        expect(sc.stepsPerEpoch).toBe(Math.floor(rows / sc.trainBatchSize));
        expect(sc.stepsPerEpoch).toBeGreaterThanOrEqual(4);
        expect(sc.totalSteps).toBe(sc.stepsPerEpoch * sc.epochs);
        expect(sc.totalSteps).toBeGreaterThanOrEqual(minSteps);
        expect(sc.totalSteps - sc.stepsPerEpoch).toBeLessThan(minSteps); // no epoch more than needed
        expect(sc.trainBatchSize % sc.ppoMiniBatchSize).toBe(0);
        expect(sc.ppoMiniBatchSize % 8).toBe(0);
        // batch × n and mini-batch × n responses split evenly over 1, 2, 4 and 8 GPUs
        for (const g of [1, 2, 4, 8]) expect(((sc.ppoMiniBatchSize * 5) % g) + ((sc.trainBatchSize * 5) % g)).toBe(0);
      }
    }
  });

  it("options and errors: --train-batch-size, --min-steps, a dataset too small", () => {
    expect(verlSchedule(40, { trainBatchSize: 16, minSteps: 12 })).toMatchObject({ trainBatchSize: 16, ppoMiniBatchSize: 8, stepsPerEpoch: 2, epochs: 6, totalSteps: 12 });
    expect(verlSchedule(10, { trainBatchSize: 10 })).toMatchObject({ trainBatchSize: 10, ppoMiniBatchSize: 10, stepsPerEpoch: 1, epochs: 50 });
    expect(() => verlSchedule(31)).toThrow(/the train split has 31 rows; veRL needs at least 32 \(4 steps per epoch of ≥ 8 prompts/);
    expect(() => verlSchedule(0)).toThrow(/has 0 rows/);
    expect(() => verlSchedule(40, { trainBatchSize: 41 })).toThrow(/trainBatchSize must be an integer in \[1, 40\]/);
    expect(() => verlSchedule(40, { trainBatchSize: 0 })).toThrow(/trainBatchSize must be an integer/);
    expect(() => verlSchedule(40, { minSteps: 0 })).toThrow(/minSteps must be an integer in \[1, 1000000\]/);
    expect(() => verlSchedule(40, { minSteps: 2.5 })).toThrow(/minSteps/);
  });

  it("max_tool_response_length covers the longest tool response (veRL's default 256 would cut it)", () => {
    const s = setupExperiment(config, searchRecipe);
    expect(maxToolResponseLength(s.instance.corpus!(), 3)).toBe(1024);
    const long = [{ id: "a", title: "t", text: "x".repeat(2000) }];
    const response = JSON.stringify({ result: `Doc 1 (Title: "t")\n${"x".repeat(2000)}` }); // what search_tool.py answers
    expect(maxToolResponseLength(long, 3)).toBeGreaterThanOrEqual(2 * response.length);
    expect(maxToolResponseLength(long, 3)).toBe(4096); // 2 × 2041 rounded up to a multiple of 256
  });
});

describe("run.sh", () => {
  it("numbers come from the exported train.parquet: rows, batch, steps, epochs", () => {
    for (const target of ["current", "0.5"] as const) {
      const r = exported[target]!;
      const buf = readFileSync(r.files.train);
      const rows = Number(parquetMetadata(buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength) as ArrayBuffer).num_rows);
      expect(rows).toBe(280);
      expect(r.schedule).toEqual(verlSchedule(rows));
      const sh = readFileSync(r.files.runScript, "utf8");
      for (const [name, value] of [
        ["TRAIN_ROWS", rows],
        ["TRAIN_BATCH_SIZE", 64],
        ["PPO_MINI_BATCH_SIZE", 32],
        ["ROLLOUT_N", 5],
        ["TOTAL_EPOCHS", 13],
        ["TOTAL_TRAINING_STEPS", 52],
      ] as const) {
        expect(sh, `${target} ${name}`).toContain(`\n${name}=${value}\n`);
      }
      expect(Math.floor(rows / 64) * 13).toBe(52); // what veRL's drop_last dataloader × total_epochs gives
      const o = overridesOf(sh);
      expect(o.get("trainer.test_freq")).toBe("11");
      expect(o.get("trainer.save_freq")).toBe("52");
      expect(o.get("data.train_batch_size")).toBe("$TRAIN_BATCH_SIZE");
      expect(o.get("actor_rollout_ref.rollout.n")).toBe("$ROLLOUT_N");
    }
  });

  it("every override key exists in the targeted veRL release's config (and the targets differ where veRL does)", () => {
    for (const target of ["current", "0.5"] as const) {
      const o = overridesOf(readFileSync(exported[target]!.files.runScript, "utf8"));
      expect([...o.keys()]).toEqual(runScriptOverrides({ target, model: "m", rewardUrl: "http://x:1", retrievalUrl: "http://x:2/r", maxTurns: 4, topK: 3, schedule: verlSchedule(280) }).map(([k]) => k));
      for (const key of o.keys()) {
        expect(fixture.recorded, `fixture records ${key}`).toContain(key);
        for (const tag of RELEASES[target]) expect(Object.keys(fixture.versions[tag].defaults), `${key} in veRL ${tag} (${target})`).toContain(key);
      }
    }
    // Why the targets differ: these keys of the current run.sh do not exist in v0.5.0 …
    const current = overridesOf(readFileSync(exported.current!.files.runScript, "utf8"));
    const missingIn05 = [...current.keys()].filter((k) => !(k in fixture.versions["v0.5.0"].defaults));
    expect(missingIn05).toEqual([
      "actor_rollout_ref.rollout.multi_turn.function_tool_path",
      "actor_rollout_ref.rollout.agent.default_agent_loop",
      "reward.reward_manager.name",
      "reward.custom_reward_function.path",
      "reward.custom_reward_function.name",
    ]);
    // … and veRL's defaults that the overrides change: v0.5.0 rolls out sync, later releases async only; without
    // agent_name the async loop is single_turn_agent (no tools).
    expect(fixture.versions["v0.5.0"].defaults["actor_rollout_ref.rollout.mode"]).toBe("sync");
    expect(fixture.versions["v0.9.0"].defaults["actor_rollout_ref.rollout.mode"]).toBe("async");
    expect(fixture.versions["v0.9.0"].defaults["actor_rollout_ref.rollout.agent.default_agent_loop"]).toBe("single_turn_agent");
    expect(fixture.versions["v0.9.0"].defaults["actor_rollout_ref.rollout.multi_turn.max_tool_response_length"]).toBe(256);
    expect(fixture.versions["v0.9.0"].defaults["reward.reward_manager.name"]).toBe("naive");
    expect(fixture.versions["v0.9.0"].commit).toBe("483b8a009ba3a97563edee3a19887e4862b8094a");
    expect(fixture.versions["v0.5.0"].commit).toBe("8fdc4d3f202f41461f4de9f42a637228e342668b");
  });

  it("runs: checks N_GPUS, picks the micro-batch per GPU, passes the overrides and extra arguments to veRL", () => {
    const sh = exported.current!.files.runScript;
    // mini-batch 32 prompts × 5 = 160 responses per update → per GPU 20 (8 GPUs), 40, 80, 160 → micro 4, 8, 8, 8
    for (const [gpus, micro] of [["8", "4"], ["4", "8"], ["2", "8"], ["1", "8"]] as const) {
      const r = runWithFakePython(sh, { N_GPUS: gpus, MODEL: "org/model-1" }, ["trainer.test_freq=5"]);
      expect(r.status, r.stderr).toBe(0);
      expect(r.args.slice(0, 2)).toEqual(["-m", "verl.trainer.main_ppo"]);
      expect(r.args).toContain(`actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=${micro}`);
      expect(r.args).toContain(`trainer.n_gpus_per_node=${gpus}`);
      expect(r.args).toContain("data.train_batch_size=64");
      expect(r.args).toContain("actor_rollout_ref.actor.ppo_mini_batch_size=32");
      expect(r.args).toContain("actor_rollout_ref.rollout.n=5");
      expect(r.args).toContain("trainer.total_epochs=13");
      expect(r.args).toContain("trainer.total_training_steps=52");
      expect(r.args).toContain("actor_rollout_ref.model.path=org/model-1");
      expect(r.args).toContain(`actor_rollout_ref.rollout.multi_turn.function_tool_path=${join(dir, "current", "search_tool.py")}`);
      expect(r.args).toContain("actor_rollout_ref.rollout.agent.default_agent_loop=tool_agent");
      expect(r.args).toContain(`reward.custom_reward_function.path=${join(dir, "current", "reward_fn.py")}`);
      expect(r.args).toContain('trainer.logger=["console"]');
      expect(r.args.at(-1)).toBe("trainer.test_freq=5");
    }
    const r05 = runWithFakePython(exported["0.5"]!.files.runScript, { N_GPUS: "8" });
    expect(r05.status, r05.stderr).toBe(0);
    expect(r05.args).toContain(`actor_rollout_ref.rollout.multi_turn.tool_config_path=${join(dir, "0.5", "tool_config.yaml")}`);
    expect(r05.args).toContain(`custom_reward_function.path=${join(dir, "0.5", "reward_fn.py")}`);
    expect(r05.args).toContain("actor_rollout_ref.rollout.mode=sync");
    // 3 GPUs cannot split 320 responses evenly; not a number → refused before veRL starts.
    const three = runWithFakePython(sh, { N_GPUS: "3" });
    expect(three.status).toBe(2);
    expect(three.stderr).toMatch(/run\.sh: 3 GPUs do not evenly split a batch of 320 responses \(mini-batch 160\) of 280-row data; use N_GPUS=1, 2, 4 or 8/);
    expect(three.args).toEqual([]);
    const nan = runWithFakePython(sh, { N_GPUS: "eight" });
    expect(nan.status).toBe(2);
    expect(nan.stderr).toMatch(/N_GPUS must be a positive integer, got 'eight'/);
    // A small world: batch 8, mini 8 → 40 responses, 5 per GPU on 8 GPUs → micro-batch 1.
  });

  it("a 40-row export on 8 GPUs uses micro-batch 1 (5 responses per GPU)", async () => {
    const small = await exportVerl({ outDir: join(dir, "small"), config: resolveConfig(applyOverrides({}, { "env.options.numCountries": "12" })) });
    const r = runWithFakePython(small.files.runScript, {});
    expect(r.status, r.stderr).toBe(0);
    expect(r.args).toContain("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1");
    expect(r.args).toContain("trainer.n_gpus_per_node=8");
    expect(r.args).toContain("data.train_batch_size=8");
  });
});
