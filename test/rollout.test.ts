import { describe, expect, it } from "vitest";
import { SearchEnv } from "../src/envs/search/env.ts";
import { PolicyAgent } from "../src/rollout/agent.ts";
import { capObservation, rolloutGroups, runEpisode } from "../src/rollout/rollout.ts";
import type { SampleOptions, SampledSequence, SamplingClient } from "../src/core/sampling.ts";
import { assertTrajectory, trajectoryToDatum } from "../src/algo/datum.ts";
import { forcedTextFor } from "../src/train/eval.ts";
import { retriever, tok } from "./toy-search.ts";
import { WordTokenizer } from "../src/policy/tokenizer.ts";

const makeEnv = () => new SearchEnv({ retriever, topK: 1, maxTurns: 3 });
const task = { id: "t1", question: "what is the capital of france ?", answers: ["paris"], kind: "single-hop", known: false };

/** A sampler that replays scripted turns and records its calls; logprob of each token = -0.1 × (index + 1). */
class ScriptSampler implements SamplingClient {
  calls: number[][] = [];
  constructor(private readonly turns: string[]) {}
  async sample(prompt: number[], opts: SampleOptions): Promise<SampledSequence[]> {
    this.calls.push(prompt);
    const text = this.turns[Math.min(this.calls.length - 1, this.turns.length - 1)];
    const tokens = tok.encode(text).slice(0, opts.maxTokens);
    return [{ tokens, logprobs: tokens.map((_, i) => -0.1 * (i + 1)), stopReason: "stop" }];
  }
}

const stop = [tok.id("</search>"), tok.id("</answer>")];

describe("rollout token books", () => {
  it("loss mask is 1 exactly on sampled tokens, never on prompt or observation tokens", async () => {
    const sampler = new ScriptSampler(["<search> france capital </search>", "<answer> paris </answer>"]);
    const agent = new PolicyAgent(sampler, tok, { temperature: 1, maxTokensPerTurn: 16, stop });
    const traj = await runEpisode(task, { makeEnv, agent, tokenizer: tok, limits: { contextLength: 256, maxObservationTokens: 64 } }, 1);
    assertTrajectory(traj);
    expect(traj.answer).toBe("paris");
    expect(traj.searches).toBe(1);
    const turn1 = tok.encode("<search> france capital </search>");
    const obs = tok.encode(traj.turns[0].observation);
    const turn2 = tok.encode("<answer> paris </answer>");
    // The sequence is exactly prompt + turn 1 + observation + turn 2 (observation tokens appended as ids).
    expect(traj.tokens).toEqual([...traj.tokens.slice(0, traj.promptLength), ...turn1, ...obs, ...turn2]);
    const expectedMask = [
      ...new Array(traj.promptLength).fill(0),
      ...turn1.map(() => 1),
      ...obs.map(() => 0),
      ...turn2.map(() => 1),
    ];
    expect(traj.lossMask).toEqual(expectedMask);
    expect(obs[0]).toBeDefined();
    expect(tok.decode(obs)).toContain("<information>");
    // The second call's prompt is the whole context so far (prompt + turn 1 + observation).
    expect(sampler.calls[1]).toEqual(traj.tokens.slice(0, traj.promptLength + turn1.length + obs.length));
    // Sampler logprobs land on the sampled positions only.
    expect(traj.logprobs.slice(traj.promptLength, traj.promptLength + turn1.length)).toEqual(turn1.map((_, i) => -0.1 * (i + 1)));
    // The datum shifts by one and carries the mask as weights: observation targets get no weight.
    const d = trajectoryToDatum(traj, 0.5);
    expect(d.weights).toEqual(expectedMask.slice(1));
    expect(d.advantages).toEqual(expectedMask.slice(1).map((m) => m * 0.5));
  });

  it("forced text (RAG baseline) is never trained on", async () => {
    const sampler = new ScriptSampler(["paris </answer>"]);
    const agent = new PolicyAgent(sampler, tok, { temperature: 0, maxTokensPerTurn: 8, stop, forced: forcedTextFor("rag") });
    const traj = await runEpisode(task, { makeEnv, agent, tokenizer: tok, limits: { contextLength: 256, maxObservationTokens: 64 } }, 3);
    expect(traj.turns[0].actionText).toBe("<search> what is the capital of france ? </search>");
    expect(traj.turns[0].sampledTokens).toBe(0);
    expect(traj.turns[1].actionText).toBe("<answer> paris </answer>");
    expect(traj.turns[1].sampledTokens).toBe(2);
    expect(traj.lossMask.reduce((a, b) => a + b, 0)).toBe(2);
    expect(traj.answer).toBe("paris");
  });

  it("malformed model output is an invalid action, counted, and the episode goes on", async () => {
    const sampler = new ScriptSampler(["paris paris", "<answer> paris </answer>"]);
    const agent = new PolicyAgent(sampler, tok, { temperature: 1, maxTokensPerTurn: 8, stop });
    const traj = await runEpisode(task, { makeEnv, agent, tokenizer: tok, limits: { contextLength: 256, maxObservationTokens: 64 } }, 1);
    expect(traj.invalidActions).toBe(1);
    expect(traj.turns[0].action.type).toBe("invalid");
    expect(traj.answer).toBe("paris");
    assertTrajectory(traj);
  });

  it("a word tokenizer's cut observation keeps a closing text it decodes with its own spacing (hermes)", () => {
    // `<|im_start|>assistant` decodes as `<|im_start|> assistant`: the close must still be found (it was not before).
    const close = "\n</tool_response><|im_end|>\n<|im_start|>assistant\n";
    const wt = WordTokenizer.fromTexts(["blue code item filler"], ["<tool_response>", "</tool_response>", "<|im_end|>", "<|im_start|>"]);
    const obsIds = wt.encode(`<tool_response>\n${"filler ".repeat(200)}blue${close}`);
    const kept = capObservation(obsIds, 20, { text: close, tokenizer: wt })!;
    const closeIds = wt.encode(close);
    expect(kept.length).toBe(20);
    expect(kept.slice(-closeIds.length)).toEqual(closeIds);
    expect(kept.slice(0, 20 - closeIds.length)).toEqual(obsIds.slice(0, 20 - closeIds.length));
  });

  it("observations are capped, keeping the closing tag; groups come back in task order", async () => {
    const obsIds = tok.encode("\n\n<information> doc ( title : france ) the capital of france is paris . </information>\n\n");
    const close = { text: "</information>\n\n", tokenizer: tok }; // 3 word tokens
    expect(capObservation(obsIds, 5, close)).toEqual([...obsIds.slice(0, 2), ...obsIds.slice(-3)]);
    expect(tok.decode(capObservation(obsIds, 5, close)!).endsWith("</information>\n\n")).toBe(true);
    expect(capObservation(obsIds, obsIds.length, close)).toEqual(obsIds); // fits: unchanged
    expect(capObservation(obsIds, 3, close)).toEqual(obsIds.slice(-3)); // the close alone
    expect(capObservation(obsIds, 2, close)).toBeNull(); // the close does not fit
    expect(capObservation(obsIds, 5)).toEqual(obsIds.slice(0, 5)); // no close declared: the head only
    const sampler = new ScriptSampler(["<search> france </search>", "<answer> paris </answer>"]);
    const agent = new PolicyAgent(sampler, tok, { temperature: 1, maxTokensPerTurn: 8, stop });
    const traj = await runEpisode(task, { makeEnv, agent, tokenizer: tok, limits: { contextLength: 256, maxObservationTokens: 6 } }, 1);
    expect(traj.turns[0].observationTokens).toBe(6);
    expect(traj.turns[0].observation.endsWith("</information>\n\n")).toBe(true);
    const groups = await rolloutGroups([task, { ...task, id: "t2" }], { makeEnv, agent, tokenizer: tok, limits: { contextLength: 256, maxObservationTokens: 64 } }, {
      groupSize: 2,
      seed: 0,
    });
    expect(groups.map((g) => g.task.id)).toEqual(["t1", "t2"]);
    expect(groups.every((g) => g.trajectories.length === 2)).toBe(true);
  });
});
