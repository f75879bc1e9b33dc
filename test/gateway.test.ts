/**
 * Issue 15 parts 1-3: the OpenAI-compatible training gateway (src/gateway/) through real HTTP on 127.0.0.1, driven by
 * the real `openai` npm client and the real AI SDK (`ai` + `@ai-sdk/openai-compatible`), over a scripted sampler
 * (fixed token sequences: deterministic well-formed and malformed tool calls) and a small embedded policy.
 */
import { connect } from "node:net";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { generateText, stepCountIs, streamText, tool } from "ai";
import OpenAI, { APIError } from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { EmbeddedBackend } from "../src/policy/embedded/backend.ts";
import { WordTokenizer } from "../src/policy/tokenizer.ts";
import { hermesProtocol } from "../src/protocol/hermes.ts";
import { renderChatText, type ChatMsg } from "../src/gateway/render.ts";
import { startGateway, type RunningGateway } from "../src/gateway/server.ts";
import type { GatewayCall, RolloutRecord } from "../src/gateway/types.ts";
import { ScriptedSampler, cityOf, hermesCall, qwenTokenizer, weatherScript } from "./gateway-helpers.ts";

const tok = qwenTokenizer();
const KEY = "gw-key";
const CONTEXT = 2048;

const weatherTool: OpenAI.Chat.Completions.ChatCompletionTool = {
  type: "function",
  function: { name: "get_weather", description: "The weather of a city.", parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } },
};
const weatherOf = (city: string) => JSON.stringify({ city, sky: city === "Oslo" ? "snow" : "sunny" });

let scripted: ScriptedSampler;
let gw: RunningGateway;
let backend: EmbeddedBackend;
let embeddedGw: RunningGateway;
let wordTok: WordTokenizer;

const client = (id: string, apiKey = KEY) => new OpenAI({ baseURL: gw.baseUrl(id), apiKey, maxRetries: 0 });
const withoutMs = (calls: GatewayCall[]) => calls.map(({ ms: _ms, ...c }) => c);

/** POST raw JSON (or text) to the gateway; status and parsed body. */
async function post(path: string, body: unknown, raw = false): Promise<{ status: number; json: Record<string, any> }> {
  const r = await fetch(`${gw.url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${KEY}` },
    body: raw ? (body as string) : JSON.stringify(body),
  });
  return { status: r.status, json: (await r.json()) as Record<string, any> };
}

/** One agent episode with the openai client: ask, run the tool calls, ask again, until an answer (≤ 4 calls). */
async function openaiEpisode(c: OpenAI, city: string, opts: { stream?: boolean; seed?: number } = {}): Promise<{ answer: string; messages: OpenAI.Chat.Completions.ChatCompletionMessageParam[] }> {
  const messages: OpenAI.Chat.Completions.ChatCompletionMessageParam[] = [
    { role: "system", content: "You are a weather assistant." },
    { role: "user", content: `What is the weather in ${city}?` },
  ];
  for (let i = 0; i < 4; i++) {
    let msg: OpenAI.Chat.Completions.ChatCompletionMessage;
    if (opts.stream) {
      const stream = await c.chat.completions.create({ model: "any", messages, tools: [weatherTool], seed: opts.seed, stream: true, stream_options: { include_usage: true } });
      let content = "";
      const calls: Array<{ id: string; name: string; arguments: string }> = [];
      for await (const chunk of stream) {
        const d = chunk.choices[0]?.delta;
        if (d?.content) content += d.content;
        for (const tc of d?.tool_calls ?? []) {
          calls[tc.index] ??= { id: "", name: "", arguments: "" };
          calls[tc.index].id += tc.id ?? "";
          calls[tc.index].name += tc.function?.name ?? "";
          calls[tc.index].arguments += tc.function?.arguments ?? "";
        }
      }
      msg = {
        role: "assistant",
        content: calls.length > 0 && content === "" ? null : content,
        refusal: null,
        ...(calls.length > 0 ? { tool_calls: calls.map((x) => ({ id: x.id, type: "function" as const, function: { name: x.name, arguments: x.arguments } })) } : {}),
      };
    } else {
      const res = await c.chat.completions.create({ model: "any", messages, tools: [weatherTool], seed: opts.seed });
      msg = res.choices[0].message;
    }
    messages.push(msg);
    if (!msg.tool_calls || msg.tool_calls.length === 0) return { answer: msg.content ?? "", messages };
    for (const tc of msg.tool_calls) {
      if (tc.type !== "function") continue;
      const args = JSON.parse(tc.function.arguments) as { city: string };
      messages.push({ role: "tool", tool_call_id: tc.id, content: weatherOf(args.city) });
    }
  }
  throw new Error("episode did not end");
}

/** Runs `use` with `sampler` behind the gateway `gw`, then puts the scripted sampler back (whether `use` fails or not). */
async function withSampler(sampler: ScriptedSampler, use: () => Promise<void>): Promise<void> {
  gw.setSampler(sampler);
  try {
    await use();
  } finally {
    gw.setSampler(scripted);
  }
}

beforeAll(async () => {
  scripted = new ScriptedSampler(tok);
  gw = await startGateway({ policy: { name: "arl/policy", sampler: scripted, tokenizer: tok, contextLength: CONTEXT, maxTokens: 256 }, apiKey: KEY, seed: 5, deadlineMs: 30_000 });
  // A small embedded policy over the word tokenizer with the hermes tags (as the travel recipe builds it).
  const texts = [hermesProtocol.system([{ name: "get_weather", description: "The weather of a city.", parameters: weatherTool.function.parameters! }], "You are a weather assistant."), "What is the weather in Paris Oslo ?", weatherOf("Paris"), weatherOf("Oslo"), hermesCall("get_weather", { city: "Paris" }), "sunny in paris ."];
  wordTok = WordTokenizer.fromTexts(texts, hermesProtocol.specialTokens);
  const gpt = { vocabSize: wordTok.vocabSize, contextLength: 512, dModel: 32, nLayers: 1, nHeads: 2 };
  backend = await EmbeddedBackend.create(gpt, 3);
  embeddedGw = await startGateway({ policy: { name: "tiny", sampler: backend.samplingClient(), tokenizer: wordTok, contextLength: 512, maxTokens: 24 }, openOnDemand: true, seed: 1 });
}, 60_000);
afterAll(async () => {
  await Promise.all([gw?.close(), embeddedGw?.close()]);
  backend?.dispose();
});

describe("rendering", () => {
  it("is the Qwen2.5 chat template's text (with and without tools, default system, grouped tool responses)", () => {
    const messages: ChatMsg[] = [
      { role: "system", content: "You are a weather assistant.", toolCalls: [] },
      { role: "user", content: "Weather in Paris and Oslo?", toolCalls: [] },
      { role: "assistant", content: "Let me check.", toolCalls: [{ name: "get_weather", arguments: '{"city":"Paris"}' }, { name: "get_weather", arguments: '{"city": "Oslo"}' }] },
      { role: "tool", content: weatherOf("Paris"), toolCalls: [] },
      { role: "tool", content: weatherOf("Oslo"), toolCalls: [] },
      { role: "assistant", content: "Sunny in Paris, snow in Oslo.", toolCalls: [] },
      { role: "user", content: "Thanks!", toolCalls: [] },
    ];
    const asTemplate = messages.map((m) => ({
      role: m.role,
      content: m.content,
      ...(m.toolCalls.length > 0 ? { tool_calls: m.toolCalls.map((c) => ({ type: "function" as const, function: { name: c.name, arguments: JSON.parse(c.arguments) as Record<string, unknown> } })) } : {}),
    }));
    const tools = [{ name: "get_weather", description: "The weather of a city.", parameters: weatherTool.function.parameters! }];
    const spec = tools.map((t) => ({ type: "function" as const, function: t }));
    expect(renderChatText(messages, tools)).toBe(tok.applyChatTemplate(asTemplate, { tools: spec, addGenerationPrompt: true }));
    expect(renderChatText(messages.slice(1), tools)).toBe(tok.applyChatTemplate(asTemplate.slice(1), { tools: spec, addGenerationPrompt: true }));
    expect(renderChatText(messages.slice(1), [])).toBe(tok.applyChatTemplate(asTemplate.slice(1), { addGenerationPrompt: true }));
    expect(renderChatText(messages, [])).toBe(tok.applyChatTemplate(asTemplate, { addGenerationPrompt: true }));
  });
});

describe("the gateway with the openai client (scripted sampler)", () => {
  it("a tool-call round trip: OpenAI shapes, records equal to the sampled ids, ONE segment with the tool result masked", async () => {
    gw.registry.open("r1", { meta: { task: "weather:paris" } });
    const c = client("r1");
    const first = await c.chat.completions.create({
      model: "gpt-4o",
      messages: [
        { role: "system", content: "You are a weather assistant." },
        { role: "user", content: "What is the weather in Paris?" },
      ],
      tools: [weatherTool],
      seed: 11,
    });
    expect(first.object).toBe("chat.completion");
    expect(first.model).toBe("arl/policy");
    const choice = first.choices[0];
    expect(choice.finish_reason).toBe("tool_calls");
    expect(choice.message.content).toBeNull();
    expect(choice.message.role).toBe("assistant");
    expect(choice.message.tool_calls).toHaveLength(1);
    const tc = choice.message.tool_calls![0];
    expect(tc.type).toBe("function");
    expect(tc.id).toMatch(/^call_[0-9a-f]{24}$/);
    if (tc.type !== "function") throw new Error("function tool call expected");
    expect(tc.function).toEqual({ name: "get_weather", arguments: '{"city":"Paris"}' });
    const sampled0 = scripted.returned[scripted.returned.length - 1];
    expect(first.usage).toEqual({ prompt_tokens: sampled0.prompt.length, completion_tokens: sampled0.sample.tokens.length, total_tokens: sampled0.prompt.length + sampled0.sample.tokens.length });

    const second = await c.chat.completions.create({
      model: "gpt-4o",
      messages: [
        { role: "system", content: "You are a weather assistant." },
        { role: "user", content: "What is the weather in Paris?" },
        choice.message, // sent back as the client returned it (content null, refusal null, tool_calls)
        { role: "tool", tool_call_id: tc.id, content: weatherOf("Paris") },
      ],
      tools: [weatherTool],
      seed: 12,
    });
    expect(second.choices[0].finish_reason).toBe("stop");
    expect(second.choices[0].message.content).toBe(`The weather in Paris: ${weatherOf("Paris")}.`);
    expect(second.choices[0].message.tool_calls).toBeUndefined();
    const sampled1 = scripted.returned[scripted.returned.length - 1];
    expect([sampled0.options.rolloutId, sampled1.options.rolloutId]).toEqual(["r1", "r1"]); // the sampler knows the call's rollout

    // The transcript a trainer would grade: the latest request's messages and the turn it returned.
    const snap = gw.registry.snapshot("r1");
    expect(snap.messages.map((m) => m.role)).toEqual(["system", "user", "assistant", "tool", "assistant"]);
    expect(snap.messages[3].content).toBe(weatherOf("Paris"));
    expect(snap.messages[4].content).toBe(second.choices[0].message.content);
    expect(snap).toMatchObject({ status: "open", inFlight: 0, mismatches: 0 });
    const rewarded = await post("/rollout/r1/reward", { value: 1, parts: { correct: 1, format: 0.5 } });
    expect(rewarded.status).toBe(200);
    const rec = await gw.registry.wait("r1");
    expect(rec).toMatchObject({ id: "r1", meta: { task: "weather:paris" }, status: "rewarded", reward: { value: 1, parts: { correct: 1, format: 0.5 } }, mismatches: 0 });
    expect(rec.calls.map((x) => x.index)).toEqual([0, 1]);
    // Exactly what the sampler returned, for the prompt it was given.
    for (const [i, s] of [sampled0, sampled1].entries()) {
      expect(rec.calls[i].promptTokens).toEqual(s.prompt);
      expect(rec.calls[i].completionTokens).toEqual(s.sample.tokens);
      expect(rec.calls[i].logprobs).toEqual(s.sample.logprobs);
    }
    expect(rec.calls[0]).toMatchObject({ finishReason: "tool_calls", content: "", toolCalls: [{ name: "get_weather", arguments: { city: "Paris" } }], invalid: false });
    expect(rec.calls[1]).toMatchObject({ finishReason: "stop", toolCalls: [], invalid: false });
    // Call 1's prompt extends call 0's prompt + completion token for token (the reused turn's exact ids).
    const head = [...rec.calls[0].promptTokens, ...rec.calls[0].completionTokens];
    expect(rec.calls[1].promptTokens.slice(0, head.length)).toEqual(head);
    expect(rec.segments).toHaveLength(1);
    const seg = rec.segments[0];
    expect(seg.calls).toEqual([0, 1]);
    expect(seg.promptLength).toBe(rec.calls[0].promptTokens.length);
    expect(seg.tokens).toEqual([...rec.calls[1].promptTokens, ...rec.calls[1].completionTokens]);
    const obs = rec.calls[1].promptTokens.slice(head.length);
    expect(seg.lossMask).toEqual([...head.map((_, i) => (i < seg.promptLength ? 0 : 1)), ...obs.map(() => 0), ...rec.calls[1].completionTokens.map(() => 1)]);
    expect(tok.decode(obs)).toBe(`\n<|im_start|>user\n<tool_response>\n${weatherOf("Paris")}\n</tool_response><|im_end|>\n<|im_start|>assistant\n`);
    expect(seg.logprobs.filter((_, i) => seg.lossMask[i] === 1)).toEqual([...rec.calls[0].logprobs, ...rec.calls[1].logprobs]);
    expect(seg.logprobs.filter((_, i) => seg.lossMask[i] === 0).every((x) => x === 0)).toBe(true);
  });

  it("streaming and non-streaming give the same records and the same message (tool-call deltas included)", async () => {
    gw.registry.open("ns");
    gw.registry.open("st");
    const a = await openaiEpisode(client("ns"), "Oslo", { seed: 3 });
    const b = await openaiEpisode(client("st"), "Oslo", { stream: true, seed: 3 });
    expect(b.answer).toBe(a.answer);
    expect(a.answer).toBe(`The weather in Oslo: ${weatherOf("Oslo")}.`);
    gw.registry.reward("ns", 1);
    gw.registry.reward("st", 1);
    const [ra, rb] = await Promise.all([gw.registry.wait("ns"), gw.registry.wait("st")]);
    expect(withoutMs(rb.calls)).toEqual(withoutMs(ra.calls));
    expect(rb.segments).toEqual(ra.segments);
    expect(ra.segments).toHaveLength(1);
    expect(rb.mismatches).toBe(0);
  });

  it("a history rewrite (the agent edits an earlier message) is detected: two segments, mismatches 1", async () => {
    gw.registry.open("rw");
    const c = client("rw");
    const { messages } = await openaiEpisode(c, "Paris");
    // The agent now edits its first user message and asks again with the rest of the history.
    const edited = messages.map((m, i) => (i === 1 ? { role: "user" as const, content: "What is the weather in Paris today?" } : m));
    await c.chat.completions.create({ model: "m", messages: edited, tools: [weatherTool] });
    const rec = gw.registry.reward("rw", 0.5);
    expect(rec.calls).toHaveLength(3);
    expect(rec.mismatches).toBe(1);
    expect(rec.segments.map((s) => s.calls)).toEqual([[0, 1], [2]]);
    // The new segment is call 2's own prompt + completion (its earlier turn still reused as sampled, never re-tokenised).
    expect(rec.segments[1].tokens).toEqual([...rec.calls[2].promptTokens, ...rec.calls[2].completionTokens]);
    expect(rec.segments[1].lossMask.filter((x) => x === 1)).toHaveLength(rec.calls[2].completionTokens.length);
  });

  it("two concurrent rollouts never mix", async () => {
    const cities = ["Paris", "Oslo", "Paris", "Oslo"];
    const ids = cities.map((_, i) => `conc-${i}`);
    for (const id of ids) gw.registry.open(id);
    const slow = new ScriptedSampler(tok, weatherScript, 15); // slow enough that the episodes' calls interleave
    await withSampler(slow, async () => {
      const answers = await Promise.all(ids.map((id, i) => openaiEpisode(client(id), cities[i], { stream: i % 2 === 1 })));
      answers.forEach((a, i) => expect(a.answer).toContain(`in ${cities[i]}:`));
    });
    expect(slow.returned).toHaveLength(8); // setSampler took effect for every call of the episodes
    for (const [i, id] of ids.entries()) {
      const rec = gw.registry.reward(id, 1);
      expect(rec.calls).toHaveLength(2);
      expect(rec.segments).toHaveLength(1);
      expect(rec.mismatches).toBe(0);
      for (const call of rec.calls) {
        const prompt = tok.decode(call.promptTokens);
        expect(cityOf(prompt)).toBe(cities[i]);
        expect(prompt).not.toContain(cities[i] === "Paris" ? "Oslo" : "Paris");
      }
    }
  });

  it("a rollout without a reward is dropped with its reason after its deadline; later calls and rewards get 409", async () => {
    gw.registry.open("late", { deadlineMs: 400, meta: { task: "t" } });
    await client("late").chat.completions.create({ model: "m", messages: [{ role: "user", content: "What is the weather in Paris?" }], tools: [weatherTool] });
    const rec = await gw.registry.wait("late");
    expect(rec.status).toBe("dropped");
    expect(rec.dropReason).toBe("no reward within its deadline of 400 ms");
    expect(rec.reward).toBeUndefined();
    expect(rec.calls).toHaveLength(1); // kept for diagnosis
    const err = await client("late").chat.completions.create({ model: "m", messages: [{ role: "user", content: "hi" }] }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.ConflictError);
    expect((err as APIError).status).toBe(409);
    expect((err as APIError).code).toBe("rollout_finished");
    const late = await post("/rollout/late/reward", { value: 1 });
    expect(late.status).toBe(409);
    expect(late.json.error.message).toMatch(/was dropped \(no reward within its deadline of 400 ms\)/);
    // A finished (not yet rewarded) rollout refuses calls but takes its reward; dropped at the deadline otherwise.
    gw.registry.open("fin", { deadlineMs: 150 });
    gw.registry.finish("fin");
    const refused = await post("/rollout/fin/v1/chat/completions", { messages: [{ role: "user", content: "hi" }] });
    expect(refused.status).toBe(409);
    expect((await gw.registry.wait("fin")).dropReason).toBe("finished but not rewarded within its deadline of 150 ms");
  });

  it("malformed model output: invalid tool-call JSON and unknown tools come back as content (finish_reason stop), recorded invalid", async () => {
    const bad = '<tool_call>\n{"name": "get_weather", "arguments": {"city": }\n</tool_call><|im_end|>';
    const unknown = hermesCall("book_flight", { to: "Oslo" });
    const script = (_p: string, call: number) => [bad, unknown, "Done.<|im_end|>"][call % 3];
    const s = new ScriptedSampler(tok, script);
    await withSampler(s, async () => {
      gw.registry.open("bad");
      const c = client("bad");
      const messages: OpenAI.Chat.Completions.ChatCompletionMessageParam[] = [{ role: "user", content: "What is the weather in Paris?" }];
      const r0 = await c.chat.completions.create({ model: "m", messages, tools: [weatherTool] });
      expect(r0.choices[0].finish_reason).toBe("stop");
      expect(r0.choices[0].message.content).toBe('<tool_call>\n{"name": "get_weather", "arguments": {"city": }\n</tool_call>');
      expect(r0.choices[0].message.tool_calls).toBeUndefined();
      messages.push(r0.choices[0].message, { role: "user", content: "That was not valid JSON; try again." });
      const r1 = await c.chat.completions.create({ model: "m", messages, tools: [weatherTool] });
      expect(r1.choices[0].finish_reason).toBe("stop");
      expect(r1.choices[0].message.content).toContain("book_flight");
      messages.push(r1.choices[0].message, { role: "user", content: "Use get_weather." });
      const r2 = await c.chat.completions.create({ model: "m", messages, tools: [weatherTool] });
      expect(r2.choices[0].message.content).toBe("Done.");
      const rec = gw.registry.reward("bad", 0);
      expect(rec.calls.map((x) => [x.invalid, x.finishReason])).toEqual([[true, "stop"], [true, "stop"], [false, "stop"]]);
      expect(rec.calls[0].completionTokens).toEqual(s.returned[0].sample.tokens);
      // The malformed turns were sent back as content and reused token for token: still one exact segment.
      expect(rec.segments).toHaveLength(1);
      expect(rec.mismatches).toBe(0);
    });
  });

  it("parallel tool calls: two calls in one turn, their results in one user block, still one segment; parallel_tool_calls false refuses them", async () => {
    const two = `<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call><|im_end|>`;
    const s = new ScriptedSampler(tok, (p) => (p.includes("<tool_response>") ? "Sunny and snow.<|im_end|>" : two));
    await withSampler(s, async () => {
      gw.registry.open("par");
      const c = client("par");
      const messages: OpenAI.Chat.Completions.ChatCompletionMessageParam[] = [{ role: "user", content: "What is the weather in Paris and Oslo?" }];
      const r0 = await c.chat.completions.create({ model: "m", messages, tools: [weatherTool] });
      const calls = r0.choices[0].message.tool_calls!;
      expect(calls.map((x) => (x.type === "function" ? x.function.arguments : ""))).toEqual(['{"city":"Paris"}', '{"city":"Oslo"}']);
      expect(new Set(calls.map((x) => x.id)).size).toBe(2);
      messages.push(r0.choices[0].message, ...calls.map((x) => ({ role: "tool" as const, tool_call_id: x.id, content: weatherOf(x.type === "function" ? (JSON.parse(x.function.arguments) as { city: string }).city : "") })));
      const r1 = await c.chat.completions.create({ model: "m", messages, tools: [weatherTool] });
      expect(r1.choices[0].message.content).toBe("Sunny and snow.");
      const single = await c.chat.completions.create({ model: "m", messages: messages.slice(0, 1), tools: [weatherTool], parallel_tool_calls: false });
      expect(single.choices[0].finish_reason).toBe("stop");
      const rec = gw.registry.reward("par", 1);
      expect(rec.calls.map((x) => x.invalid)).toEqual([false, false, true]);
      expect(rec.segments.map((x) => x.calls)).toEqual([[0, 1], [2]]);
      const obs = rec.calls[1].promptTokens.slice(rec.calls[0].promptTokens.length + rec.calls[0].completionTokens.length);
      expect(tok.decode(obs)).toBe(`\n<|im_start|>user\n<tool_response>\n${weatherOf("Paris")}\n</tool_response>\n<tool_response>\n${weatherOf("Oslo")}\n</tool_response><|im_end|>\n<|im_start|>assistant\n`);
    });
  });

  it("a client that hangs up before its completion is ready: the call is not recorded", async () => {
    const slow = new ScriptedSampler(tok, weatherScript, 300);
    await withSampler(slow, async () => {
      gw.registry.open("gone");
      const abort = new AbortController();
      const req = fetch(`${gw.baseUrl("gone")}/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${KEY}` },
        body: JSON.stringify({ messages: [{ role: "user", content: "What is the weather in Paris?" }] }),
        signal: abort.signal,
      });
      const until = async (cond: () => boolean) => {
        for (let i = 0; i < 400 && !cond(); i++) await new Promise((r) => setTimeout(r, 10));
      };
      await until(() => gw.registry.snapshot("gone").inFlight === 1); // the call is sampling
      abort.abort();
      await expect(req).rejects.toThrow();
      await until(() => gw.registry.snapshot("gone").inFlight === 0);
      expect(slow.returned).toHaveLength(1); // it was sampled…
      expect(gw.registry.snapshot("gone")).toMatchObject({ calls: [], inFlight: 0 }); // …and not recorded
    });
  });

  it("tool_choice: none leaves a call unparsed; required/named without a call is invalid; stop strings cut the content", async () => {
    gw.registry.open("choice");
    const c = client("choice");
    const messages: OpenAI.Chat.Completions.ChatCompletionMessageParam[] = [{ role: "user", content: "What is the weather in Paris?" }];
    const none = await c.chat.completions.create({ model: "m", messages, tools: [weatherTool], tool_choice: "none" });
    expect(none.choices[0].message.content).toBe('<tool_call>\n{"name": "get_weather", "arguments": {"city":"Paris"}}\n</tool_call>');
    expect(none.choices[0].finish_reason).toBe("stop");
    const named = await c.chat.completions.create({ model: "m", messages, tools: [weatherTool], tool_choice: { type: "function", function: { name: "get_weather" } } });
    expect(named.choices[0].finish_reason).toBe("tool_calls");
    const answered: OpenAI.Chat.Completions.ChatCompletionMessageParam[] = [...messages, named.choices[0].message, { role: "tool", tool_call_id: "x", content: weatherOf("Paris") }];
    const required = await c.chat.completions.create({ model: "m", messages: answered, tools: [weatherTool], tool_choice: "required" });
    expect(required.choices[0].finish_reason).toBe("stop");
    const cut = await c.chat.completions.create({ model: "m", messages: answered, tools: [weatherTool], stop: [": {"] });
    expect(cut.choices[0].message.content).toBe("The weather in Paris");
    const rec = gw.registry.reward("choice", 0);
    expect(rec.calls.map((x) => x.invalid)).toEqual([false, false, true, false]);
    // The completion keeps the tokens up to the one that completed the stop string, as sampled (vLLM's rule); only
    // the returned text is cut.
    const kept = rec.calls[3].completionTokens;
    expect(tok.decode(kept)).toContain("The weather in Paris: {");
    expect(tok.decode(kept.slice(0, -1))).not.toContain(": {");
  });

  it("plain /v1 calls: no rollout id → answered, recorded nowhere; x-rollout-id header → recorded; models listed", async () => {
    const plain = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: KEY, maxRetries: 0 });
    const before = gw.registry.pending().length;
    const r = await plain.chat.completions.create({ model: "m", messages: [{ role: "user", content: "What is the weather in Paris?" }], tools: [weatherTool] });
    expect(r.choices[0].finish_reason).toBe("tool_calls");
    expect(gw.registry.pending().length).toBe(before);
    gw.registry.open("hdr");
    const viaHeader = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: KEY, maxRetries: 0, defaultHeaders: { "x-rollout-id": "hdr" } });
    await viaHeader.chat.completions.create({ model: "m", messages: [{ role: "user", content: "What is the weather in Oslo?" }], tools: [weatherTool] });
    expect(gw.registry.snapshot("hdr").calls).toHaveLength(1);
    expect((await plain.models.list()).data.map((m) => m.id)).toEqual(["arl/policy"]);
    expect((await client("hdr").models.list()).data[0]).toMatchObject({ id: "arl/policy", object: "model", owned_by: "agentic-rl" });
    expect((await client("hdr").models.retrieve("arl/policy")).id).toBe("arl/policy");
    gw.registry.drop("hdr", "test over");
  });
});

describe("errors", () => {
  const user = [{ role: "user", content: "What is the weather in Paris?" }];
  beforeAll(() => gw.registry.open("err"));

  it("malformed requests get OpenAI-style 4xx errors naming the field", async () => {
    const p = "/rollout/err/v1/chat/completions";
    const cases: Array<[unknown, number, string | null, RegExp, boolean?]> = [
      ['{"messages": [', 400, null, /not valid JSON/, true],
      [{ model: "m" }, 400, "messages", /messages: expected a list of messages/],
      [{ messages: [] }, 400, "messages", /at least one message/],
      [{ messages: user, temperature: "hot" }, 400, "temperature", /temperature: expected a number in \[0, 2\]/],
      [{ messages: user, temperature: 3 }, 400, "temperature", /\[0, 2\]/],
      [{ messages: [{ role: "wizard", content: "x" }] }, 400, "messages[0].role", /role "system", "developer", "user", "assistant" or "tool"/],
      [{ messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: "x" } }] }] }, 400, "messages[0].content", /string or a list of text parts/],
      [{ messages: [{ role: "tool", content: "x" }] }, 400, "messages[0].tool_call_id", /id of the tool call/],
      [{ messages: user, tools: [weatherTool], tool_choice: { type: "function", function: { name: "book" } } }, 400, "tool_choice.function.name", /unknown tool "book"/],
      [{ messages: user, tool_choice: "required" }, 400, "tool_choice", /needs tools/],
      [{ messages: user, tools: [weatherTool, weatherTool] }, 400, "tools[1].function.name", /declared twice/],
      [{ messages: user, tools: [{ type: "function", function: { name: "bad name!" } }] }, 400, "tools[0].function.name", /1-64 letters/],
      [{ messages: user, n: 2 }, 400, "n", /only n = 1/],
      [{ messages: user, top_p: 0.5 }, 400, "top_p", /not supported/],
      [{ messages: user, max_tokens: 0 }, 400, "max_tokens", /≥ 1/],
      [{ messages: user, stop: [""] }, 400, "stop[0]", /empty/],
      [{ messages: user, response_format: { type: "json_object" } }, 400, "response_format.type", /not supported/],
      [{ messages: user, seed: 1.5 }, 400, "seed", /integer seed/],
      [{ messages: [{ role: "user", content: "weather ".repeat(3000) }] }, 400, "messages", /maximum context length is 2048 tokens\. However, your messages resulted in \d+ tokens/],
    ];
    for (const [body, status, param, message, raw] of cases) {
      const r = await post(p, body, raw === true);
      expect(r.status, JSON.stringify(body).slice(0, 80)).toBe(status);
      expect(r.json.error.type).toBe("invalid_request_error");
      expect(r.json.error.param, JSON.stringify(body).slice(0, 80)).toBe(param);
      expect(r.json.error.message).toMatch(message);
      expect(Object.keys(r.json.error).sort()).toEqual(["code", "message", "param", "type"]);
    }
    const long = await post(p, { messages: [{ role: "user", content: "weather ".repeat(3000) }] });
    expect(long.json.error.code).toBe("context_length_exceeded");
    // Nothing above was recorded.
    expect(gw.registry.snapshot("err").calls).toHaveLength(0);
  });

  it("huge requests under the body limit (a megabyte prompt, 2·10⁴ messages, 3·10³ tools) get 400 context_length_exceeded, never a 500", async () => {
    // Found by review: `tokens.push(...ids)` over ~10⁵ ids overflowed the call stack (500 "Maximum call stack size exceeded").
    gw.registry.open("huge");
    const p = "/rollout/huge/v1/chat/completions";
    const manyTools = Array.from({ length: 3_000 }, (_, i) => ({ ...weatherTool, function: { ...weatherTool.function, name: `tool_${i}` } }));
    const bodies: unknown[] = [
      { messages: [{ role: "user", content: "capital ".repeat(120_000) }] }, // under the 1 MiB body limit of a 2048-token context
      { messages: Array.from({ length: 20_000 }, (_, i) => ({ role: i % 2 === 0 ? "user" : "assistant", content: "hi" })) },
      { messages: user, tools: manyTools },
    ];
    for (const body of bodies) {
      const r = await post(p, body);
      expect(r.status, JSON.stringify(r.json).slice(0, 200)).toBe(400);
      expect(r.json.error).toMatchObject({ type: "invalid_request_error", code: "context_length_exceeded", param: "messages" });
    }
    expect(gw.registry.snapshot("huge").calls).toHaveLength(0);
  }, 60_000);

  // The shape: OpenAI's `{error: {message, type, param, code}}` as the `openai` npm client's APIError reads it
  // (node_modules/openai/core/error.d.ts; src/gateway/errors.ts openAIError cites the rest).
  it("errors outside the routes are OpenAI-shaped too: a path parameter over 1 024 characters (414), a slow request (408)", async () => {
    const long = await post(`/rollout/${"r".repeat(5000)}/v1/chat/completions`, { messages: user });
    expect(long.status).toBe(414);
    expect(long.json.error).toMatchObject({ message: "a path parameter (e.g. a rollout id) is longer than 1024 characters", type: "invalid_request_error", param: null });
    // A rollout id of 150 characters (within ROLLOUT_ID_RULE's 256) reaches the route in the path as in the header;
    // fastify's default 100-character limit answered 414 (issue 29's outside probe).
    const mid = await post(`/rollout/${"c".repeat(150)}/v1/chat/completions`, { messages: user });
    expect(mid.status).not.toBe(414);
    expect(Object.keys(long.json.error).sort()).toEqual(["code", "message", "param", "type"]);
    // A client that sends its body too slowly is answered on the raw connection (no fastify hooks run there).
    const slow = await startGateway({ policy: { name: "arl/policy", sampler: scripted, tokenizer: tok, contextLength: CONTEXT }, apiKey: KEY, requestTimeoutMs: 300 });
    try {
      const reply = await new Promise<string>((resolve) => {
        const sock = connect(Number(new URL(slow.url).port), "127.0.0.1", () => {
          sock.write(`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${KEY}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"a"`);
        });
        let data = "";
        sock.on("data", (d) => (data += d.toString()));
        sock.on("close", () => resolve(data));
        sock.setTimeout(5000, () => sock.destroy());
      });
      expect(reply).toMatch(/^HTTP\/1\.1 408/);
      const body = JSON.parse(reply.slice(reply.indexOf("\r\n\r\n") + 4)) as { error: Record<string, unknown> };
      expect(body.error).toMatchObject({ message: "the request was not received within 300 ms", type: "invalid_request_error", param: null });
    } finally {
      await slow.close();
    }
  }, 15_000);

  it("unknown rollouts 404, bad rewards 400 naming the field, unknown routes 404 — all OpenAI-shaped", async () => {
    const nf = await post("/rollout/nope/v1/chat/completions", { messages: user });
    expect(nf.status).toBe(404);
    expect(nf.json.error).toMatchObject({ type: "invalid_request_error", code: "rollout_not_found" });
    expect((await post("/rollout/nope/reward", { value: 1 })).status).toBe(404);
    const rewards: Array<[unknown, string, boolean?]> = [
      [{ value: "x" }, "value"],
      [{}, "value"],
      ['{"value": 1e999}', "value", true],
      [{ value: 1, parts: { correct: "yes" } }, "parts.correct"],
      [{ value: 1, parts: [1] }, "parts"],
    ];
    for (const [body, param, raw] of rewards) {
      const r = await post("/rollout/err/reward", body, raw === true);
      expect(r.status, String(body)).toBe(400);
      expect(r.json.error.param).toBe(param);
      expect(r.json.error.message).toMatch(new RegExp(`^${param.replace(".", "\\.")}: expected`));
    }
    expect(() => gw.registry.reward("err", Number.NaN)).toThrow(/value: expected a finite number/);
    expect(() => gw.registry.reward("err", -1e308)).toThrow(/value: expected a number in \[-1000000, 1000000\], got -1e\+308/);
    const route = await post("/v2/nothing", {});
    expect(route.status).toBe(404);
    expect(route.json.error).toMatchObject({ type: "invalid_request_error", code: "not_found" });
    expect(route.json.error.message).toMatch(/no route POST \/v2\/nothing/);
  });

  it("the openai client surfaces them as APIError subclasses with the status, param and code", async () => {
    const c = client("err");
    const e400 = await c.chat.completions.create({ model: "m", messages: [{ role: "user", content: "x" }], n: 2 }).catch((e: unknown) => e);
    expect(e400).toBeInstanceOf(OpenAI.BadRequestError);
    expect(e400).toBeInstanceOf(APIError);
    expect((e400 as APIError).status).toBe(400);
    expect((e400 as APIError).param).toBe("n");
    expect((e400 as APIError).message).toMatch(/only n = 1 is supported/);
    const e404 = await client("missing").chat.completions.create({ model: "m", messages: [{ role: "user", content: "x" }] }).catch((e: unknown) => e);
    expect(e404).toBeInstanceOf(OpenAI.NotFoundError);
    expect((e404 as APIError).code).toBe("rollout_not_found");
    const eStream = await c.chat.completions.create({ model: "m", messages: [{ role: "user", content: "x" }], temperature: 9, stream: true }).catch((e: unknown) => e);
    expect(eStream).toBeInstanceOf(OpenAI.BadRequestError);
  });

  it("the bearer key is enforced (401, OpenAI-shaped, AuthenticationError); /healthz needs none", async () => {
    const bad = await client("err", "wrong").chat.completions.create({ model: "m", messages: [{ role: "user", content: "x" }] }).catch((e: unknown) => e);
    expect(bad).toBeInstanceOf(OpenAI.AuthenticationError);
    expect((bad as APIError).status).toBe(401);
    expect((bad as APIError).code).toBe("invalid_api_key");
    const none = await fetch(`${gw.url}/rollout/err/reward`, { method: "POST", headers: { "content-type": "application/json" }, body: '{"value": 1}' });
    expect(none.status).toBe(401);
    expect(((await none.json()) as { error: { type: string } }).error.type).toBe("invalid_request_error");
    const health = await fetch(`${gw.url}/healthz`);
    expect(health.status).toBe(200);
    expect(await health.json()).toMatchObject({ status: "ok", model: "arl/policy" });
  });

  it("a sampler that never answers is bounded: 504, nothing recorded, the rollout goes on", async () => {
    const hung = await startGateway({ policy: { name: "hung", sampler: { sample: () => new Promise(() => {}) }, tokenizer: tok, contextLength: CONTEXT }, callTimeoutMs: 100, bodyLimit: 4096 });
    try {
      const huge = await fetch(`${hung.url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ messages: [{ role: "user", content: "x".repeat(8192) }] }) });
      expect(huge.status).toBe(413);
      expect(((await huge.json()) as { error: { code: string; type: string } }).error).toMatchObject({ code: "request_too_large", type: "invalid_request_error" });
      hung.registry.open("h");
      const r = await fetch(`${hung.baseUrl("h")}/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ messages: user }) });
      expect(r.status).toBe(504);
      expect(((await r.json()) as { error: { code: string; type: string } }).error).toMatchObject({ code: "timeout", type: "server_error" });
      expect(hung.registry.snapshot("h")).toMatchObject({ status: "open", calls: [], inFlight: 0 });
    } finally {
      await hung.close();
    }
    expect(hung.registry.status("h")).toBe("dropped");
  });
});

describe("the AI SDK (generateText / streamText with zod tools, multi-step)", () => {
  const provider = () => createOpenAICompatible({ baseURL: gw.baseUrl("ai"), name: "arl", apiKey: KEY, includeUsage: true });
  const tools = (seen: string[]) => ({
    get_weather: tool({
      description: "The weather of a city.",
      inputSchema: z.object({ city: z.string() }),
      execute: async ({ city }: { city: string }) => {
        seen.push(city);
        return { city, sky: city === "Oslo" ? "snow" : "sunny" };
      },
    }),
  });

  it("generateText runs the tool loop through the gateway; the rollout merges into one exact segment", async () => {
    gw.registry.open("ai");
    const seen: string[] = [];
    const result = await generateText({
      model: provider().chatModel("any-model"),
      system: "You are a weather assistant.",
      prompt: "What is the weather in Paris?",
      tools: tools(seen),
      stopWhen: stepCountIs(3),
      seed: 4,
      maxRetries: 0,
    });
    expect(seen).toEqual(["Paris"]);
    expect(result.steps).toHaveLength(2);
    expect(result.steps[0].finishReason).toBe("tool-calls");
    expect(result.text).toBe(`The weather in Paris: ${JSON.stringify({ city: "Paris", sky: "sunny" })}.`);
    const rec = gw.registry.reward("ai", 1);
    expect(rec.calls).toHaveLength(2);
    expect(rec.segments).toHaveLength(1);
    expect(rec.mismatches).toBe(0);
    const seg = rec.segments[0];
    const obsText = tok.decode(seg.tokens.filter((_, i) => i >= seg.promptLength && seg.lossMask[i] === 0));
    expect(obsText).toContain(`<tool_response>\n${JSON.stringify({ city: "Paris", sky: "sunny" })}\n</tool_response>`);
  });

  it("streamText parses the gateway's SSE (text and tool-call deltas) and records the same as generateText", async () => {
    gw.registry.open("ai-gen");
    gw.registry.open("ai-stream");
    const run = async (id: string, stream: boolean) => {
      const model = createOpenAICompatible({ baseURL: gw.baseUrl(id), name: "arl", apiKey: KEY, includeUsage: true }).chatModel("m");
      const args = { model, prompt: "What is the weather in Oslo?", tools: tools([]), stopWhen: stepCountIs(3), seed: 9, maxRetries: 0 };
      if (!stream) return (await generateText(args)).text;
      const r = streamText(args);
      let text = "";
      for await (const d of r.textStream) text += d;
      return text;
    };
    const [a, b] = [await run("ai-gen", false), await run("ai-stream", true)];
    expect(b).toBe(a);
    expect(a).toContain("snow");
    const [ra, rb] = [gw.registry.reward("ai-gen", 1), gw.registry.reward("ai-stream", 1)];
    expect(withoutMs(rb.calls)).toEqual(withoutMs(ra.calls));
    expect(rb.segments).toEqual(ra.segments);
  });
});

describe("the word tokenizer (the embedded policy's) behind the gateway", () => {
  it("its normalised text is sent back and still reused token for token: one exact segment", async () => {
    const s = new ScriptedSampler(wordTok, (p) => (p.includes("<tool_response>") ? "sunny in paris .<|im_end|>" : hermesCall("get_weather", { city: "Paris" })));
    const g = await startGateway({ policy: { name: "word", sampler: s, tokenizer: wordTok, contextLength: 512 }, openOnDemand: true });
    try {
      const c = new OpenAI({ baseURL: g.baseUrl("w1"), apiKey: "none", maxRetries: 0 });
      const messages: OpenAI.Chat.Completions.ChatCompletionMessageParam[] = [
        { role: "system", content: "You are a weather assistant." },
        { role: "user", content: "What is the weather in Paris ?" },
      ];
      const r0 = await c.chat.completions.create({ model: "m", messages, tools: [weatherTool] });
      const tc = r0.choices[0].message.tool_calls![0];
      // The word tokenizer decodes lower-cased with spaces: keys are trimmed by the parser, values kept.
      expect(tc.type === "function" && JSON.parse(tc.function.arguments)).toEqual({ city: " paris " });
      messages.push(r0.choices[0].message, { role: "tool", tool_call_id: tc.id, content: weatherOf("Paris") });
      const r1 = await c.chat.completions.create({ model: "m", messages, tools: [weatherTool] });
      expect(r1.choices[0].message.content).toBe("sunny in paris .");
      const rec = g.registry.reward("w1", 1);
      expect(rec.segments).toHaveLength(1);
      expect(rec.mismatches).toBe(0);
      expect(rec.calls[0].completionTokens).toEqual(s.returned[0].sample.tokens);
      expect(rec.calls[0].completionTokens.at(-1)).toBe(wordTok.id("<|im_end|>"));
    } finally {
      await g.close();
    }
  });
});

describe("the embedded policy behind the gateway", () => {
  it("records the embedded sampler's tokens and logprobs; streaming and non-streaming agree for the same seed", async () => {
    const messages: OpenAI.Chat.Completions.ChatCompletionMessageParam[] = [
      { role: "system", content: "You are a weather assistant." },
      { role: "user", content: "What is the weather in Paris ?" },
    ];
    const c = (id: string) => new OpenAI({ baseURL: embeddedGw.baseUrl(id), apiKey: "none", maxRetries: 0 });
    const a = await c("e-ns").chat.completions.create({ model: "tiny", messages, tools: [weatherTool], seed: 21, logprobs: true });
    const stream = await c("e-st").chat.completions.create({ model: "tiny", messages, tools: [weatherTool], seed: 21, stream: true });
    let streamed = "";
    let finish: string | null = null;
    for await (const chunk of stream) {
      streamed += chunk.choices[0]?.delta?.content ?? "";
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    expect(streamed).toBe(a.choices[0].message.content ?? "");
    expect(finish).toBe(a.choices[0].finish_reason);
    const [ra, rb]: RolloutRecord[] = [embeddedGw.registry.reward("e-ns", 0), embeddedGw.registry.reward("e-st", 0)];
    expect(withoutMs(rb.calls)).toEqual(withoutMs(ra.calls));
    const call = ra.calls[0];
    expect(call.completionTokens.length).toBeGreaterThan(0);
    expect(call.completionTokens.length).toBeLessThanOrEqual(24);
    // The same prompt and seed sampled directly give the recorded ids and logprobs.
    const direct = await backend.samplingClient().sample(call.promptTokens, { n: 1, maxTokens: 24, temperature: 1, stop: [wordTok.id("<|im_end|>")], seed: 21 });
    const n = call.completionTokens.length;
    expect(call.completionTokens).toEqual(direct[0].tokens.slice(0, n));
    expect(call.logprobs).toEqual(direct[0].logprobs.slice(0, n));
    // The logprobs block holds every sampled token's logprob (nats).
    expect(a.choices[0].logprobs!.content!.map((x) => x.logprob)).toEqual(call.logprobs);
    expect(call.promptTokens[0]).toBe(wordTok.bos);
    // An untrained model's text: whatever it is, a valid answer, or an invalid call returned as content — never a 5xx.
    expect(["stop", "length", "tool_calls"]).toContain(call.finishReason);
  });
});
