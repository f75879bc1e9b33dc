// The RL step's stages, piece by piece: DAPO's dynamic sampling around collect (src/algo/dapo.ts `dynamicSampling`)
// and the critic as an optional backend capability (src/train/rl/critic.ts over `TrainingBackend.valueHead`). The
// whole step's numbers: test/algo-rl.test.ts, test/algo-gae.test.ts (resume), test/train-units.test.ts.
import { describe, expect, it } from "vitest";
import type { TrajectoryGroup } from "../src/core/types.ts";
import type { CriticHooks, TrainingBackend, ValueHeadOptions } from "../src/core/training.ts";
import { dynamicSampling } from "../src/algo/dapo.ts";
import { criticFiles, criticOf, CRITIC_STATE_FILE, restoreCritic } from "../src/train/rl/critic.ts";
import type { ExperimentConfig } from "../src/train/config.ts";

/** A group whose members' total rewards are `totals` (all the filter reads). */
const group = (id: string, totals: number[]): TrajectoryGroup =>
  ({ task: { id }, trajectories: totals.map((total) => ({ task: { id }, reward: { total, terms: [] } })) }) as unknown as TrajectoryGroup;

describe("dynamicSampling (DAPO around collect)", () => {
  it("tops up the first batch's informative groups one batch at a time, asks for what is missing, and cuts to want", async () => {
    const asked: Array<[number, number]> = [];
    const extra = [[group("c", [1, 1]), group("d", [0, 1])], [group("e", [1, 0]), group("f", [0, 1])]];
    const r = await dynamicSampling([group("a", [0, 1]), group("b", [1, 1])], {
      want: 3,
      maxBatches: 8,
      collect: async (need, batch) => {
        asked.push([need, batch]);
        return extra[batch - 1];
      },
    });
    expect(asked).toEqual([[2, 1], [1, 2]]);
    expect(r.batches).toBe(3);
    expect(r.groups.map((g) => g.task.id)).toEqual(["a", "d", "e"]);
  });

  it("stops after maxBatches batches however few groups are informative", async () => {
    let calls = 0;
    const r = await dynamicSampling([group("a", [1, 1])], { want: 2, maxBatches: 3, collect: async () => (calls++, [group("x", [0, 0])]) });
    expect(calls).toBe(2);
    expect(r).toEqual({ groups: [], batches: 3 });
  });
});

describe("the critic is the backend's optional value head", () => {
  const config = { rl: { criticLearningRate: 0.01, cliprangeValue: 0.5, criticUpdates: 4 } } as ExperimentConfig;
  const base = (): TrainingBackend => ({
    forwardBackward: async () => ({ loss: 0, metrics: {}, logprobs: [] }),
    computeLogprobs: async () => [],
    optimStep: async () => ({}),
    samplingClient: () => ({ sample: async () => [] }),
    save: async () => {},
    load: async () => {},
  });

  it("a backend without valueHead has no critic; restoring one into it names the file", () => {
    const backend = base();
    expect(criticOf({ backend, config })).toBeUndefined();
    expect(criticFiles(backend)).toEqual({});
    expect(() => restoreCritic({ backend, config }, "{}")).toThrow(`${CRITIC_STATE_FILE}: this backend has no value head to restore it into`);
  });

  it("made once per backend from rl.critic* options, checkpointed only once made, restored into the same head", () => {
    const made: ValueHeadOptions[] = [];
    let state = "zero";
    const backend: TrainingBackend = {
      ...base(),
      valueHead(options): CriticHooks {
        made.push(options);
        return { values: async () => [], update: async () => ({}), stateText: () => state, restoreText: (t) => void (state = t) };
      },
    };
    expect(criticFiles(backend)).toEqual({}); // not a gae run yet: checkpoints unchanged
    const c = criticOf({ backend, config });
    expect(criticOf({ backend, config })).toBe(c);
    expect(made).toEqual([{ learningRate: 0.01, cliprange: 0.5, updates: 4 }]);
    expect(criticFiles(backend)).toEqual({ [CRITIC_STATE_FILE]: "zero" });
    restoreCritic({ backend, config }, "fitted");
    expect(criticFiles(backend)).toEqual({ [CRITIC_STATE_FILE]: "fitted" });
    expect(made).toHaveLength(1);
    // A context's own critic wins and is not the backend's.
    const own: CriticHooks = { values: async () => [], update: async () => ({}) };
    expect(criticOf({ backend, config, critic: own })).toBe(own);
  });
});
