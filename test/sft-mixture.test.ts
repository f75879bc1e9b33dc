/**
 * SFT learns a demonstrated mixture at its demonstrated rate, whatever the lengths of the demonstrations. Half the
 * demonstrations answer at once (2 trained tokens), half call first (a 24-token episode); batches are length-grouped,
 * so a batch holds one kind. Dividing each batch by its own token count gave a short batch's tokens 12× the weight of
 * a long batch's, and the tiny model learned "call first" with probability ≈ 0.1 (the weather example's warm start:
 * 47 % of demonstrations call first, P(call) 0.04–0.15 measured); src/train/sft.ts divides by the mean instead.
 */
import { describe, expect, it } from "vitest";
import type { Datum, Trajectory } from "../src/core/types.ts";
import { EmbeddedBackend } from "../src/policy/embedded/backend.ts";
import type { LossConfig, LossFnName, TrainingBackend } from "../src/core/training.ts";
import { trainSft } from "../src/train/sft.ts";
import { handTrajectory } from "./trajectory-helpers.ts";

const PROMPT = [1, 2];
const ANSWER = 3; // then [4]: end
const CALL = 5; // then a long episode of tokens 6..9
const demo = (i: number): Trajectory => {
  const tail = i % 2 === 0 ? [ANSWER, 4] : [CALL, ...Array.from({ length: 22 }, (_, j) => 6 + ((i + j) % 4)), 4];
  const tokens = [...PROMPT, ...tail];
  return handTrajectory({ id: `d${i}`, question: "", answers: [], kind: "mix" }, { tokens, lossMask: tokens.map((_, j) => (j < PROMPT.length ? 0 : 1)), logprobs: tokens.map(() => 0), promptLength: PROMPT.length });
};

describe("SFT on a mixture of short and long demonstrations", () => {
  it("learns the first token's mixture (½ answer, ½ call) within ±0.12, and scales every batch by one constant", async () => {
    const be = await EmbeddedBackend.create({ vocabSize: 10, contextLength: 32, dModel: 16, nLayers: 1, nHeads: 2 }, 3);
    const configs: (LossConfig | undefined)[] = [];
    const spy: TrainingBackend = {
      forwardBackward: (d: Datum[], fn: LossFnName, c?: LossConfig) => (configs.push(c), be.forwardBackward(d, fn, c)),
      computeLogprobs: (d) => be.computeLogprobs(d),
      optimStep: (a) => be.optimStep(a),
      samplingClient: () => be.samplingClient(),
      save: (dir) => be.save(dir),
      load: (dir) => be.load(dir),
    };
    const demos = Array.from({ length: 64 }, (_, i) => demo(i));
    await trainSft(spy, demos, { steps: 120, batchSize: 8, learningRate: 1e-2, gradClip: 1, seed: 0 });
    // Trained tokens per demonstration: 2 (answer) or 24 (call) → mean 13.
    expect(new Set(configs.map((c) => JSON.stringify(c)))).toEqual(new Set([JSON.stringify({ normalization: "constant", constantLength: 13 })]));
    const probe = (t: number): Datum => ({ modelInput: PROMPT, targetTokens: [2, t], weights: [0, 1], logprobs: [0, 0], advantages: [0, 0] });
    const [call, answer] = (await be.computeLogprobs([probe(CALL), probe(ANSWER)])).map((lp) => Math.exp(lp[1]));
    expect(call + answer).toBeGreaterThan(0.9);
    expect(Math.abs(call / (call + answer) - 0.5)).toBeLessThan(0.12);
  }, 60_000);
});
