// DAPO's data-side pieces (src/algo/dapo.ts) on hand-computed examples: overlong shaping and the group filter of
// dynamic sampling, the source of its extra tasks and its wiring in the RL loop (trainRl: extra batches are new
// tasks of the world, not the step's own re-rolled). The loop's metrics: test/algo-rl.test.ts.
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import type { Trajectory, TrajectoryGroup } from "../src/core/types.ts";
import type { EnvFactory } from "../src/env/types.ts";
import { applyOverlongShaping, informativeGroups, moreTasksFrom, overlongPenalty } from "../src/algo/dapo.ts";
import { resolveConfig } from "../src/train/config.ts";
import { SMOKE_OVERRIDES, searchRecipe } from "../src/envs/index.ts";
import { applyOverrides } from "../src/train/configFile.ts";
import { silentReporter } from "../src/train/reporter.ts";
import { trainRl } from "../src/train/rlLoop.ts";
import { setupExperiment } from "../src/train/setup.ts";
import { warmStart, warmStartDemos } from "../src/train/warmStart.ts";
import { RunDir } from "../src/train/runDir.ts";

describe("overlongPenalty (veRL DAPORewardManager)", () => {
  it("0 up to max − buffer, then linear down to −factor at the budget", () => {
    // max 64, buffer 16 → expected 48. len 40: min(−(40−48)/16, 0) = 0; len 56: −(8/16)·1 = −0.5; len 64: −1;
    // len 72 (past the budget): −1.5; factor 0.5 at len 56: −0.25
    expect(overlongPenalty(40, 64, 16, 1)).toBe(0);
    expect(overlongPenalty(56, 64, 16, 1)).toBeCloseTo(-0.5, 12);
    expect(overlongPenalty(64, 64, 16, 1)).toBeCloseTo(-1, 12);
    expect(overlongPenalty(72, 64, 16, 1)).toBeCloseTo(-1.5, 12);
    expect(overlongPenalty(56, 64, 16, 0.5)).toBeCloseTo(-0.25, 12);
    expect(() => overlongPenalty(1, 8, 16, 1)).toThrow(/buffer 16/);
  });
});

function traj(id: string, total: number, sampled: number): Trajectory {
  const n = sampled + 1;
  return {
    task: { id, question: "q", answers: [], kind: "k" },
    tokens: new Array(n).fill(1),
    lossMask: [0, ...new Array(sampled).fill(1)],
    logprobs: [0, ...new Array(sampled).fill(-1)],
    promptLength: 1,
    turns: [],
    answer: null,
    searches: 0,
    invalidActions: 0,
    truncated: false,
    reward: { total, terms: [] },
  };
}

describe("dynamic sampling filter and overlong term", () => {
  it("keeps only groups whose rewards differ; the overlong term is added to the total and kept", () => {
    const groups: TrajectoryGroup[] = [
      { task: { id: "a", question: "", answers: [], kind: "k" }, trajectories: [traj("a", 1, 4), traj("a", 1, 4)] },
      { task: { id: "b", question: "", answers: [], kind: "k" }, trajectories: [traj("b", 1, 4), traj("b", 0, 4)] },
    ];
    expect(informativeGroups(groups).map((g) => g.task.id)).toEqual(["b"]);
    // budget 6, buffer 4 → expected 2; 4 sampled tokens: −(4 − 2)/4 · 1 = −0.5 on every member
    applyOverlongShaping(groups, 6, 4, 1);
    expect(groups[0].trajectories[0].reward!.total).toBeCloseTo(0.5, 12);
    expect(groups[1].trajectories[1].reward!.total).toBeCloseTo(-0.5, 12);
    expect(groups[1].trajectories[1].reward!.terms.map((t) => [t.name, t.value])).toEqual([["overlong", -0.5]]);
    // Equal lengths shift a group's rewards equally: the filter's verdict does not change.
    expect(informativeGroups(groups).map((g) => g.task.id)).toEqual(["b"]);
  });
});

describe("DAPO dynamic sampling draws new tasks (moreTasksFrom, wired in trainRl)", () => {
  it("moreTasksFrom: the world's other tasks first, seeded, then a fresh shuffle of all", () => {
    const train = ["a", "b", "c", "d", "e", "f"];
    const batch = ["a", "b"];
    const next = moreTasksFrom(train, batch, 7);
    const first = next(3);
    const second = next(1);
    // 4 tasks are outside the batch: the first 4 drawn are exactly those, each once.
    expect([...first, ...second].sort()).toEqual(["c", "d", "e", "f"]);
    // Past them, a fresh shuffle of all six (so a batch's own tasks may come back only then).
    const third = next(6);
    expect([...third].sort()).toEqual(train);
    // Same inputs, same sequence; another seed, another order (of the same four).
    const again = moreTasksFrom(train, batch, 7);
    expect([...again(3), ...again(1)]).toEqual([...first, ...second]);
    const other = moreTasksFrom(train, batch, 8);
    expect(other(4).sort()).toEqual(["c", "d", "e", "f"]);
    expect(moreTasksFrom([], [], 1)(3)).toEqual([]);
  });

  it("an RL step that resamples rolls out tasks outside its own batch", async () => {
    const root = mkdtempSync(join(tmpdir(), "arl-dapo-"));
    const config = resolveConfig(applyOverrides({}, { ...SMOKE_OVERRIDES, "rl.steps": "3", "rl.filterGroups": "true", "rl.maxGenBatches": "3", "run.dir": root, "run.name": "dapo", "run.checkpointEvery": "0" }));
    const s = setupExperiment(config, searchRecipe);
    const run = new RunDir(root, "dapo", { overwrite: false });
    const demos = await warmStartDemos(s, config);
    const backend = await warmStart(s, config, demos, run, silentReporter);
    // Every episode's task id, and a marker after each RL step (the progress bar's update).
    const seen: Array<string | null> = [];
    const makeEnv: EnvFactory = () => {
      const env = s.instance.makeEnv(0)();
      const reset = env.reset.bind(env);
      env.reset = (task, info) => {
        seen.push(task.id);
        return reset(task, info);
      };
      return env;
    };
    const reporter = { log: () => {}, bar: () => ({ update: () => void seen.push(null), stop: () => {} }) };
    const rl = await trainRl({ backend, worlds: [{ train: s.instance.train, makeEnv }], replayDatums: [], setup: s, config, run, reporter, referenceDir: run.checkpoint("sft"), label: "RL" });
    const perStep: string[][] = [];
    let cur: string[] = [];
    for (const id of seen) {
      if (id === null) {
        perStep.push(cur);
        cur = [];
      } else cur.push(id);
    }
    expect(perStep.length).toBe(3);
    const first = config.rl.tasksPerStep * config.rl.groupSize;
    let resampled = 0;
    perStep.forEach((ids, step) => {
      const own = new Set(ids.slice(0, first));
      expect(own.size).toBe(config.rl.tasksPerStep);
      const extra = new Set(ids.slice(first));
      expect(rl.steps[step]["train/gen_batches"] > 1).toBe(extra.size > 0);
      for (const id of extra) expect(own.has(id), `step ${step}: ${id} re-rolled from its own batch`).toBe(false);
      if (extra.size > 0) resampled++;
    });
    expect(resampled).toBeGreaterThan(0); // the smoke policy's groups are mostly all-equal: some step resamples
  });
});
