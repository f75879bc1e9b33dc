/**
 * Issue 12, defects 3 and 6: a capped observation keeps its whole closing text (`</information>\n\n`) with a real
 * BPE tokenizer, or the episode ends when it cannot fit; a turn is cut at its first stop (stop id or stop string),
 * whatever the sampler reports, before its tokens enter the trajectory.
 */
import { describe, expect, it } from "vitest";
import { searchAction, type Passage } from "../src/core/types.ts";
import { INFORMATION_CLOSE } from "../src/protocol/searchR1.ts";
import { SearchEnv, searchPrompt } from "../src/envs/search/env.ts";
import { loadTokenizer } from "../src/policy/hf/index.ts";
import { WordTokenizer } from "../src/policy/tokenizer.ts";
import type { Tokenizer } from "../src/core/tokenizer.ts";
import type { SampleOptions, SampledSequence, SamplingClient } from "../src/core/sampling.ts";
import { PolicyAgent, protocolStops, stopCut } from "../src/rollout/agent.ts";
import { runEpisode } from "../src/rollout/rollout.ts";
import { assertTrajectory } from "../src/algo/datum.ts";
import { FIXTURE_DIR } from "../scripts/make-tiny-tokenizer.ts";

const passages: Passage[] = [
  { id: "p1", title: "ireland", text: "the capital of ireland is dublin ." },
  { id: "p2", title: "france", text: "the capital of france is paris ." },
];
const question = "what is the capital of ireland ?";
const task = { id: "ie", question, answers: ["dublin"], kind: "single-hop", known: false };
const retriever = { search: (q: string) => passages.filter((p) => q.split(" ").some((w) => w !== "capital" && p.text.includes(w))).slice(0, 1) };
const makeEnv = () => new SearchEnv({ retriever, topK: 1, maxTurns: 3 });

const word = WordTokenizer.fromTexts([`question : ${question} doc ( title : ) error`, ...passages.map((p) => `${p.title} ${p.text}`)]);
const bpe = loadTokenizer(FIXTURE_DIR);
const tokenizers: Array<[string, Tokenizer]> = [
  ["word tokenizer (single-token tags: stop ids)", word],
  ["BPE fixture (multi-token tags: stop strings)", bpe],
];

/** Replays scripted turns (one per call, the last repeated); logprob of token i = -0.01 × (i + 1). */
class ScriptSampler implements SamplingClient {
  calls: Array<{ prompt: number[]; opts: SampleOptions }> = [];
  constructor(
    private readonly tok: Tokenizer,
    private readonly turns: string[],
    private readonly stopReason: SampledSequence["stopReason"],
  ) {}
  async sample(prompt: number[], opts: SampleOptions): Promise<SampledSequence[]> {
    this.calls.push({ prompt, opts });
    const tokens = this.tok.encode(this.turns[Math.min(this.calls.length - 1, this.turns.length - 1)]).slice(0, opts.maxTokens);
    return [{ tokens, logprobs: tokens.map((_, i) => -0.01 * (i + 1)), stopReason: this.stopReason }];
  }
}

/** The observation the env gives for `action` as its first step. */
async function observationOf(action: string): Promise<string> {
  const env = makeEnv();
  await env.reset(task);
  return (await env.step(action)).observation;
}

/** Tokens of the shortest suffix of `ids` whose decoded text holds the whole `</information>\n\n`. */
function closeSuffixLength(tok: Tokenizer, ids: number[]): number {
  for (let k = 1; k <= ids.length; k++) if (tok.decode(ids.slice(ids.length - k)).includes(INFORMATION_CLOSE)) return k;
  throw new Error("no close");
}

const agentFor = (tok: Tokenizer, sampler: SamplingClient) => new PolicyAgent(sampler, tok, { temperature: 1, maxTokensPerTurn: 64, ...protocolStops(tok) });

describe("a capped observation keeps its whole closing text (defect 3)", () => {
  for (const [name, tok] of tokenizers) {
    it(`${name}: a capped <information> observation decodes to text ending with the exact close`, async () => {
      const sampler = new ScriptSampler(tok, ["<search> ireland </search>", "<answer> dublin </answer>"], "stop");
      const cap = 12;
      const traj = await runEpisode(task, { makeEnv, agent: agentFor(tok, sampler), tokenizer: tok, limits: { contextLength: 512, maxObservationTokens: cap } }, 1);
      assertTrajectory(traj);
      const full = tok.encode(await observationOf("<search> ireland </search>"));
      expect(full.length).toBeGreaterThan(cap); // the cap did cut
      const t0 = traj.turns[0];
      expect(t0.observationTokens).toBe(cap);
      const start = traj.promptLength + traj.sampled![0].tokens.length;
      const obs = traj.tokens.slice(start, start + t0.observationTokens);
      expect(tok.decode(obs).endsWith(INFORMATION_CLOSE)).toBe(true);
      expect(t0.observation.endsWith(INFORMATION_CLOSE)).toBe(true);
      // The head is the observation's own first tokens (tokenised once, never re-tokenised in pieces).
      expect(obs.slice(0, 4)).toEqual(full.slice(0, 4));
      expect(traj.answer).toBe("dublin");
      expect(traj.truncated).toBe(false);
    });

    it(`${name}: with less room than the close needs, no observation is appended and the episode ends truncated`, async () => {
      const searchTurn = "<search> ireland </search>";
      const sampler = new ScriptSampler(tok, [searchTurn, "<answer> dublin </answer>"], "stop");
      // The close is 3 word tokens; in the BPE fixture it starts inside the token ` .</`, so it takes 4.
      const closeTokens = closeSuffixLength(tok, tok.encode(await observationOf(searchTurn)));
      expect(closeTokens).toBeGreaterThanOrEqual(3);
      const used = tok.promptTokens(searchPrompt(question)).length + tok.encode(searchTurn).length;
      const contextLength = used + closeTokens - 1; // room: one token fewer than the close alone
      const traj = await runEpisode(task, { makeEnv, agent: agentFor(tok, sampler), tokenizer: tok, limits: { contextLength, maxObservationTokens: 64 } }, 1);
      assertTrajectory(traj);
      expect(traj.tokens.length).toBe(used);
      expect(traj.turns).toHaveLength(1);
      expect(traj.turns[0].observationTokens).toBe(0);
      expect(traj.turns[0].observation).toBe("");
      expect(traj.truncated).toBe(true);
      const text = tok.decode(traj.tokens.slice(traj.promptLength));
      expect(text).not.toMatch(/information|\n\n$/);
      expect(sampler.calls).toHaveLength(1);
    });
  }
});

describe("a turn is cut at its first stop (defect 6)", () => {
  const doubleAction = "<search> capital ireland </search> <answer> dublin </answer>";
  for (const [name, tok] of tokenizers) {
    for (const reported of ["length", "stop"] as const) {
      it(`${name}, sampler reports "${reported}": only up to </search> enters the trajectory; the env acts on the search`, async () => {
        const sampler = new ScriptSampler(tok, [doubleAction, "<answer> dublin </answer>"], reported);
        const traj = await runEpisode(task, { makeEnv, agent: agentFor(tok, sampler), tokenizer: tok, limits: { contextLength: 512, maxObservationTokens: 64 } }, 1);
        assertTrajectory(traj);
        const sampledAll = tok.encode(doubleAction);
        const kept = traj.sampled![0].tokens;
        expect(kept.length).toBeLessThan(sampledAll.length);
        expect(kept).toEqual(sampledAll.slice(0, kept.length));
        expect(tok.decode(kept)).toBe("<search> capital ireland </search>");
        expect(kept).toEqual(tok.encode("<search> capital ireland </search>"));
        const p = traj.promptLength;
        const k = kept.length;
        expect(traj.tokens.slice(p, p + k)).toEqual(kept);
        expect(traj.lossMask.slice(p, p + k)).toEqual(kept.map(() => 1));
        expect(traj.logprobs.slice(p, p + k)).toEqual(kept.map((_, i) => -0.01 * (i + 1)));
        // What follows the turn is the env's observation (loss mask 0), not the rest of the sample.
        const t0 = traj.turns[0];
        expect(t0.sampledTokens).toBe(k);
        expect(t0.stopReason).toBe("stop");
        expect(t0.actionText).toBe("<search> capital ireland </search>");
        expect(t0.action).toEqual(searchAction("capital ireland"));
        expect(t0.observation).toContain("<information>");
        expect(t0.observation).toContain("dublin");
        expect(traj.lossMask.slice(p + k, p + k + t0.observationTokens)).toEqual(new Array(t0.observationTokens).fill(0));
        expect(tok.decode(traj.tokens.slice(p + k, p + k + t0.observationTokens))).toBe(t0.observation);
        // The second turn is sampled from exactly that context.
        expect(sampler.calls[1].prompt).toEqual(traj.tokens.slice(0, p + k + t0.observationTokens));
        expect(traj.searches).toBe(1);
        expect(traj.answer).toBe("dublin");
        expect(traj.lossMask.reduce((a, b) => a + b, 0)).toBe(k + tok.encode("<answer> dublin </answer>").length);
      });
    }
  }

  it("stopCut: the first stop wins, id or string; the completing token is kept; -1 when none", () => {
    const ids = bpe.encode("<search> a </search><|im_end|> b");
    const im = bpe.id("<|im_end|>");
    const endOfSearch = ids.indexOf(im) - 1;
    expect(bpe.decode(ids.slice(0, endOfSearch + 1))).toBe("<search> a </search>");
    expect(stopCut(bpe, ids, [im], ["</search>"])).toBe(endOfSearch); // the string completes first
    expect(stopCut(bpe, ids, [im], ["</answer>"])).toBe(ids.indexOf(im)); // only the id
    expect(stopCut(bpe, ids, [im], [" b"])).toBe(ids.indexOf(im)); // the id comes before the string
    expect(stopCut(bpe, ids, [], [" b"])).toBe(ids.length - 1);
    expect(stopCut(bpe, ids, [], [])).toBe(-1);
    expect(stopCut(bpe, [], [im], ["</search>"])).toBe(-1);
    const w = word.encode("<search> dublin </search> <answer> dublin </answer>");
    expect(stopCut(word, w, [word.id("</answer>"), word.id("</search>")], [])).toBe(2);
  });

  it("a cut at the budget's end is still a stop, an uncut sample keeps the sampler's reason", async () => {
    const ended = new ScriptSampler(word, ["<search> ireland </search>"], "length");
    const agent = agentFor(word, ended);
    const ctx = { task, turnIndex: 0, history: [], seed: 1, budget: 100 };
    expect((await agent.generate([word.bos], ctx)).stopReason).toBe("stop");
    const open = new ScriptSampler(word, ["<search> ireland"], "length");
    const g = await agentFor(word, open).generate([word.bos], ctx);
    expect(g.stopReason).toBe("length");
    expect(g.tokens).toEqual(word.encode("<search> ireland"));
  });

  it("a sampler that ignores maxTokens is cut to it: a turn never exceeds its budget or the context", async () => {
    /** Returns 40 tokens whatever maxTokens says. */
    const greedy: SamplingClient = {
      sample: async () => {
        const tokens = Array.from({ length: 40 }, () => word.id("dublin"));
        return [{ tokens, logprobs: tokens.map(() => -0.5), stopReason: "length" }];
      },
    };
    const agent = new PolicyAgent(greedy, word, { temperature: 1, maxTokensPerTurn: 16, ...protocolStops(word) });
    const turn = await agent.generate([word.bos], { task, turnIndex: 0, history: [], seed: 1, budget: 10 });
    expect(turn.tokens).toHaveLength(10);
    expect(turn.logprobs).toHaveLength(10);
    expect(turn.stopReason).toBe("context");
    const traj = await runEpisode(task, { makeEnv, agent, tokenizer: word, limits: { contextLength: 64, maxObservationTokens: 32 } }, 1);
    assertTrajectory(traj);
    expect(traj.tokens.length).toBeLessThanOrEqual(64);
    expect(traj.turns.every((t) => t.sampledTokens <= 16)).toBe(true);
  });
});
