import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { OpenAISamplingClient, UntrainableServerError } from "../src/policy/openai/sampling.ts";
import { PolicyAgent } from "../src/rollout/agent.ts";
import { rolloutGroups } from "../src/rollout/rollout.ts";
import { createApp, listen, type RunningServer } from "../src/http/server.ts";
import { serveTinyPolicy, tinySetup } from "./openai-helpers.ts";

const { s, tasks } = tinySetup();
const tok = s.tokenizer;
const tiny = serveTinyPolicy(s, 5);
let textOnly: RunningServer;
let noLogprobs: RunningServer;

/** A fake completions endpoint that answers every POST /v1/completions with `reply` as a `text_completion`. */
function fakeCompletions(reply: { id: string; model: string; choices: unknown[]; usage?: unknown }): Promise<RunningServer> {
  const app = createApp();
  app.post("/v1/completions", async () => ({ id: reply.id, object: "text_completion", created: 0, model: reply.model, choices: reply.choices, usage: reply.usage }));
  return listen(app);
}

beforeAll(async () => {
  // A text-only server, as the OpenAI API or Ollama answer /v1/completions: no token ids.
  textOnly = await fakeCompletions({
    id: "cmpl-1",
    model: "gpt-x",
    choices: [{ index: 0, text: " dublin", finish_reason: "stop", logprobs: { tokens: [" dublin"], token_logprobs: [-0.1], top_logprobs: null } }],
    usage: { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 },
  });
  noLogprobs = await fakeCompletions({ id: "cmpl-2", model: "m", choices: [{ index: 0, text: "x", finish_reason: "length", logprobs: null, token_ids: [5] }] });
});
afterAll(async () => {
  await Promise.all([textOnly?.close(), noLogprobs?.close()]);
});

describe("OpenAISamplingClient", () => {
  it("through arl serve openai returns the embedded sampler's tokens and logprobs for the same prompt and seed", async () => {
    const client = new OpenAISamplingClient({ baseURL: `${tiny.server.url}/v1`, model: "tiny" });
    const stop = [tok.id("</search>"), tok.id("</answer>")];
    for (const [i, task] of tasks.slice(0, 3).entries()) {
      const prompt = tok.promptTokens(`question : ${task.question}\n`);
      for (const temperature of [0, 1]) {
        const opts = { n: 3, maxTokens: 16, temperature, stop, seed: 100 + i };
        const [viaHttp, direct] = await Promise.all([client.sample(prompt, opts), tiny.be.samplingClient().sample(prompt, opts)]);
        expect(viaHttp).toHaveLength(3);
        viaHttp.forEach((h, j) => {
          expect(h.tokens).toEqual(direct[j].tokens);
          expect(h.stopReason).toBe(direct[j].stopReason === "stop" ? "stop" : "length");
          h.logprobs.forEach((lp, k) => expect(Math.abs(lp - direct[j].logprobs[k])).toBeLessThan(1e-5));
        });
      }
    }
    expect(await client.probe()).toEqual({ tokenIds: true, logprobs: true, promptTokenIds: true, trainable: true });
  });

  it("plugs into the RL rollout unchanged: PolicyAgent over HTTP gives the same trajectories as over the embedded sampler", async () => {
    const opts = { temperature: 1, maxTokensPerTurn: 16, stop: [tok.id("</search>"), tok.id("</answer>")] };
    const run = (sampler: ConstructorParameters<typeof PolicyAgent>[0]) =>
      rolloutGroups(tasks.slice(0, 4), { makeEnv: s.instance.makeEnv(0), agent: new PolicyAgent(sampler, tok, opts), tokenizer: tok, limits: s.limits }, { groupSize: 2, seed: 11 });
    const [http, direct] = await Promise.all([run(new OpenAISamplingClient({ baseURL: `${tiny.server.url}/v1`, model: "tiny" })), run(tiny.be.samplingClient())]);
    http.flatMap((g) => g.trajectories).forEach((t, i) => {
      const d = direct.flatMap((g) => g.trajectories)[i];
      expect(t.tokens).toEqual(d.tokens);
      expect(t.lossMask).toEqual(d.lossMask);
      expect(t.turns.map((x) => x.actionText)).toEqual(d.turns.map((x) => x.actionText));
      t.logprobs.forEach((lp, k) => expect(Math.abs(lp - d.logprobs[k])).toBeLessThan(1e-5));
    });
  });

  it("a server without token ids is refused clearly: it cannot be trained from", async () => {
    const client = new OpenAISamplingClient({ baseURL: `${textOnly.url}/v1`, model: "gpt-x" });
    const err = await client.sample([1, 2, 3], { n: 1, maxTokens: 4, temperature: 1, seed: 0 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UntrainableServerError);
    const msg = (err as Error).message;
    expect(msg).toContain(`${textOnly.url}/v1 (model "gpt-x") returned no token ids (choices[0].token_ids)`);
    expect(msg).toContain("this server cannot be trained from");
    expect(msg).toContain("vLLM ≥ 0.10.2");
    expect(msg).toContain("arl eval --policy openai:MODEL");
    expect(await client.probe()).toEqual({ tokenIds: false, logprobs: true, promptTokenIds: false, trainable: false });

    const noLp = new OpenAISamplingClient({ baseURL: `${noLogprobs.url}/v1`, model: "m" });
    await expect(noLp.sample([1], { n: 1, maxTokens: 1, temperature: 1, seed: 0 })).rejects.toThrow(/returned no logprobs \(choices\[0\]\.logprobs\.token_logprobs\)/);
  });

  it("request failures name the server and model; bad options are refused at construction", async () => {
    const client = new OpenAISamplingClient({ baseURL: `${tiny.server.url}/v1`, model: "nope", maxRetries: 0 });
    await expect(client.sample([1], { n: 1, maxTokens: 1, temperature: 1, seed: 0 })).rejects.toThrow(
      new RegExp(`${tiny.server.url}/v1 \\(model "nope"\\): completions request failed: 404`),
    );
    expect(() => new OpenAISamplingClient({ baseURL: "localhost:8000", model: "m" })).toThrow(/baseURL must be an http\(s\) URL/);
  });
});
