import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RunningServer } from "../src/http/server.ts";
import { serveOpenAI } from "../src/serve/openai.ts";
import { ScriptedSampler, serveTinyPolicy, tinySetup } from "./openai-helpers.ts";

const { s, tasks } = tinySetup();
const tok = s.tokenizer;
const tiny = serveTinyPolicy(s, 3);
let scripted: RunningServer;
let keyed: RunningServer;
let client: OpenAI;
let scriptedClient: OpenAI;

beforeAll(async () => {
  const policy = { name: "scripted", sampler: new ScriptedSampler(tok, tasks), tokenizer: tok, contextLength: s.gpt.contextLength };
  scripted = await serveOpenAI(policy);
  keyed = await serveOpenAI(policy, { apiKey: "sekret" });
  client = new OpenAI({ baseURL: `${tiny.server.url}/v1`, apiKey: "none", maxRetries: 0 });
  scriptedClient = new OpenAI({ baseURL: `${scripted.url}/v1`, apiKey: "none", maxRetries: 0 });
});
afterAll(async () => {
  await Promise.all([scripted?.close(), keyed?.close()]);
});

/** POST a raw JSON body (or text) and return status + parsed body. */
async function post(server: RunningServer, path: string, body: unknown, raw = false): Promise<{ status: number; json: { error?: unknown } & Record<string, unknown> }> {
  const r = await fetch(`${server.url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: raw ? (body as string) : JSON.stringify(body),
  });
  return { status: r.status, json: (await r.json()) as { error?: unknown } };
}

describe("arl serve openai (real HTTP, official openai client)", () => {
  it("GET /v1/models lists the served model with its context window", async () => {
    const page = await client.models.list();
    expect(page.data.map((m) => m.id)).toEqual(["tiny"]);
    expect(page.data[0]).toMatchObject({ object: "model", owned_by: "agentic-rl", max_model_len: 512 });
  });

  it("POST /v1/completions: token-id and text prompts, return_token_ids, logprobs, usage, seeded", async () => {
    const prompt = tok.promptTokens("question : what is the capital of ireland ?\n");
    const req = { model: "tiny", prompt, max_tokens: 12, temperature: 1, seed: 42, logprobs: 1, return_token_ids: true };
    const a = (await client.completions.create(req as OpenAI.CompletionCreateParamsNonStreaming)) as unknown as {
      object: string;
      choices: Array<{ text: string; token_ids: number[]; prompt_token_ids: number[]; logprobs: { tokens: string[]; token_logprobs: number[]; top_logprobs: Array<Record<string, number>> }; finish_reason: string }>;
      usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number };
    };
    expect(a.object).toBe("text_completion");
    const c = a.choices[0];
    expect(c.prompt_token_ids).toEqual(prompt);
    expect(c.token_ids.length).toBeGreaterThan(0);
    expect(c.logprobs.token_logprobs).toHaveLength(c.token_ids.length);
    expect(c.logprobs.tokens).toEqual(c.token_ids.map((t) => tok.decode([t])));
    expect(c.logprobs.top_logprobs[0]).toEqual({ [tok.decode([c.token_ids[0]])]: c.logprobs.token_logprobs[0] });
    for (const lp of c.logprobs.token_logprobs) expect(lp).toBeLessThanOrEqual(0);
    expect(c.text).toBe(tok.decode(c.token_ids));
    expect(["stop", "length"]).toContain(c.finish_reason);
    expect(a.usage).toEqual({ prompt_tokens: prompt.length, completion_tokens: c.token_ids.length, total_tokens: prompt.length + c.token_ids.length });
    // Same seed → same tokens; the same prompt as text → the same prompt ids.
    const b = (await client.completions.create({ ...req, prompt: "question : what is the capital of ireland ?\n" } as OpenAI.CompletionCreateParamsNonStreaming)) as unknown as typeof a;
    expect(b.choices[0].prompt_token_ids).toEqual(prompt);
    expect(b.choices[0].token_ids).toEqual(c.token_ids);
    // Without return_token_ids / logprobs the extras are absent (as vLLM).
    const plain = (await client.completions.create({ model: "tiny", prompt, max_tokens: 3, seed: 1 })) as unknown as Record<string, unknown> & { choices: Array<Record<string, unknown>> };
    expect(plain.choices[0].token_ids).toBeUndefined();
    expect(plain.choices[0].logprobs).toBeNull();
  });

  it("stop strings: cut from text and token ids (kept with include_stop_str_in_output); stop_token_ids stay in the ids", async () => {
    const prompt = `question : ${tasks[0].question}\n`;
    const base = { model: "scripted", prompt, max_tokens: 40, seed: 0, return_token_ids: true };
    const one = (await scriptedClient.completions.create({ ...base, stop: ["</search>"] } as OpenAI.CompletionCreateParamsNonStreaming)) as unknown as { choices: Array<{ text: string; token_ids: number[]; finish_reason: string; stop_reason: unknown }> };
    const q = tok.decode(tok.encode(tasks[0].question));
    expect(one.choices[0].text).toBe(`<search> ${q}`);
    expect(one.choices[0]).toMatchObject({ finish_reason: "stop", stop_reason: "</search>" });
    const kept = (await scriptedClient.completions.create({ ...base, stop: ["</search>"], include_stop_str_in_output: true } as OpenAI.CompletionCreateParamsNonStreaming)) as unknown as typeof one;
    expect(kept.choices[0].text).toBe(`<search> ${q} </search>`);
    // A multi-token stop string is matched on tokens after sampling.
    const words = tok.decode(tok.encode(tasks[0].question)).split(" ");
    const multi = (await scriptedClient.completions.create({ ...base, stop: [`${words[1]} ${words[2]}`] } as OpenAI.CompletionCreateParamsNonStreaming)) as unknown as typeof one;
    expect(multi.choices[0].text).toBe(`<search> ${words[0]}`);
    expect(multi.choices[0].finish_reason).toBe("stop");
    const ids = (await scriptedClient.completions.create({ ...base, stop_token_ids: [tok.id("</search>")] } as OpenAI.CompletionCreateParamsNonStreaming)) as unknown as typeof one;
    expect(ids.choices[0].token_ids.at(-1)).toBe(tok.id("</search>"));
    expect(ids.choices[0].text).toBe(`<search> ${q}`);
    expect(ids.choices[0].stop_reason).toBe(tok.id("</search>"));
  });

  it("chat with tools: <search> becomes a search tool call; the tool result is rendered as <information>; <answer> becomes the content", async () => {
    const task = tasks[0];
    const tools: OpenAI.ChatCompletionTool[] = [{ type: "function", function: { name: "search", parameters: { type: "object", properties: { query: { type: "string" } } } } }];
    const messages: OpenAI.ChatCompletionMessageParam[] = [
      { role: "system", content: "You are a helpful assistant." },
      { role: "user", content: `question : ${task.question}\n` },
    ];
    const first = await scriptedClient.chat.completions.create({ model: "scripted", messages, tools, seed: 1, return_token_ids: true } as OpenAI.ChatCompletionCreateParamsNonStreaming);
    expect(first.object).toBe("chat.completion");
    const m = first.choices[0].message;
    expect(first.choices[0].finish_reason).toBe("tool_calls");
    expect(m.content).toBeNull();
    expect(m.tool_calls).toHaveLength(1);
    const call = m.tool_calls![0] as OpenAI.ChatCompletionMessageFunctionToolCall;
    expect(call).toMatchObject({ type: "function", function: { name: "search" } });
    expect(JSON.parse(call.function.arguments)).toEqual({ query: tok.decode(tok.encode(task.question)) });
    // System messages are dropped: the prompt is exactly the env's reset prompt.
    expect((first as unknown as { prompt_token_ids: number[] }).prompt_token_ids).toEqual(tok.promptTokens(`question : ${task.question}\n`));
    expect(first.usage?.completion_tokens).toBe((first.choices[0] as unknown as { token_ids: number[] }).token_ids.length);

    messages.push(m as OpenAI.ChatCompletionMessageParam, { role: "tool", tool_call_id: call.id, content: "Doc 1(Title: x) some passage" });
    const second = await scriptedClient.chat.completions.create({ model: "scripted", messages, tools, seed: 2 });
    expect(second.choices[0].finish_reason).toBe("stop");
    expect(second.choices[0].message.content).toBe(tok.decode(tok.encode(task.answers[0])));
    expect(second.choices[0].message.tool_calls ?? []).toHaveLength(0);

    // Without tools the policy's own text comes back, tags included.
    const raw = await scriptedClient.chat.completions.create({ model: "scripted", messages: messages.slice(0, 2), seed: 1, logprobs: true });
    expect(raw.choices[0].message.content).toBe(`<search> ${tok.decode(tok.encode(task.question))} </search>`);
    expect(raw.choices[0].logprobs?.content?.map((x) => x.logprob)).toEqual(tok.encode(raw.choices[0].message.content!).map(() => -0.5));
  });

  it("chat through the embedded policy is seeded: same seed, same reply", async () => {
    const req = { model: "tiny", messages: [{ role: "user" as const, content: `question : ${tasks[1].question}\n` }], temperature: 1, seed: 9, max_tokens: 10 };
    const [a, b] = await Promise.all([client.chat.completions.create(req), client.chat.completions.create(req)]);
    expect(a.choices[0].message.content).toBe(b.choices[0].message.content);
    expect(a.usage?.prompt_tokens).toBe(tok.promptTokens(req.messages[0].content).length);
  });

  it("bad requests are 4xx with a reason, never 500", async () => {
    const embedded = tiny.server;
    const chat = (body: unknown) => post(embedded, "/v1/chat/completions", body);
    const cases: Array<[Promise<{ status: number; json: { error?: unknown } }>, number, RegExp]> = [
      [post(embedded, "/v1/completions", { prompt: "x" }), 400, /model: expected the model id/],
      [post(embedded, "/v1/completions", { model: "nope", prompt: "x" }), 404, /model "nope" does not exist; this server serves "tiny"/],
      [post(embedded, "/v1/completions", { model: "tiny", prompt: "x", stream: true }), 400, /streaming is not supported/],
      [post(embedded, "/v1/completions", { model: "tiny", prompt: [[1, 2]] }), 400, /prompt: expected one prompt/],
      [post(embedded, "/v1/completions", { model: "tiny", prompt: [1, 99999] }), 400, /token id 99999 outside the vocabulary/],
      [post(embedded, "/v1/completions", { model: "tiny", prompt: Array(600).fill(5) }), 400, /maximum context length is 512 tokens; the prompt is 600 tokens/],
      [post(embedded, "/v1/completions", { model: "tiny", prompt: "x", logprobs: 5 }), 400, /logprobs: expected 0 or 1/],
      [post(embedded, "/v1/completions", { model: "tiny", prompt: "x", top_p: 0.5 }), 400, /top_p = 1/],
      [post(embedded, "/v1/completions", { model: "tiny", prompt: "x", temperature: -1 }), 400, /temperature: expected a number in \[0, 2\]/],
      [post(embedded, "/v1/completions", '{"model": "tiny", "prompt":', true), 400, /JSON/i],
      [chat({ model: "tiny", messages: [] }), 400, /messages: expected at least one message/],
      [chat({ model: "tiny", messages: [{ role: "wizard", content: "x" }] }), 400, /role "system", "developer", "user", "assistant" or "tool"/],
      [chat({ model: "tiny", messages: [{ role: "assistant", content: "x" }] }), 400, /must start with a user message/],
      [chat({ model: "tiny", messages: [{ role: "tool", content: "x" }] }), 400, /tool_call_id/],
      [chat({ model: "tiny", messages: [{ role: "user", content: "x" }], tools: [{ type: "retrieval" }] }), 400, /tools/],
      [chat({ model: "tiny", messages: [{ role: "user", content: "x" }], stream: true }), 400, /streaming is not supported/],
    ];
    for (const [p, status, re] of cases) {
      const r = await p;
      expect(r.status, JSON.stringify(r.json)).toBe(status);
      expect(String(r.json.error)).toMatch(re);
    }
  });

  it("sizes before work (issue 29): a prompt over context × 32 bytes is refused untokenised, a body over the context's limit is 413, error bodies stay short", async () => {
    let chars = 0;
    const counting = { ...tok, vocabSize: tok.vocabSize, bos: tok.bos, pad: tok.pad, encode: (t: string) => ((chars += t.length), tok.encode(t)), promptTokens: (t: string) => ((chars += t.length), tok.promptTokens(t)), decode: (ids: readonly number[]) => tok.decode(ids), id: (t: string) => tok.id(t), toJSON: () => tok.toJSON() };
    const server = await serveOpenAI({ name: "scripted", sampler: new ScriptedSampler(tok, tasks), tokenizer: counting, contextLength: 512 });
    try {
      const long = "capital ".repeat(12_500); // 100 KB: over 512 × 32 bytes, under the 1 MiB body limit
      for (const [path, body] of [
        ["/v1/completions", { model: "scripted", prompt: long }],
        ["/v1/chat/completions", { model: "scripted", messages: [{ role: "user", content: long }] }],
      ] as const) {
        const r = await post(server, path, body);
        expect(r.status, path).toBe(400);
        expect(String(r.json.error)).toMatch(/^This model's maximum context length is 512 tokens; the (prompt is|messages are) 100000 bytes of text, more than this server tokenizes for it \(512 tokens × 32 bytes = 16384 bytes\)$/);
      }
      expect(chars).toBe(0);
      const huge = await post(server, "/v1/completions", { model: "scripted", prompt: "x".repeat(1_100_000) });
      expect(huge.status).toBe(413);
      const many = await fetch(`${server.url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: "scripted", messages: Array.from({ length: 10_000 }, () => ({ role: "wizard" })) }) });
      const text = await many.text();
      expect(many.status).toBe(400);
      expect(text.length).toBeLessThan(4096);
      expect((JSON.parse(text) as { error: string }).error).toMatch(/^messages\.0\.role: .*; … and 9995 more problems$/);
    } finally {
      await server.close();
    }
  });

  it("--api-key: 401 without the key, served with it", async () => {
    const r = await post(keyed, "/v1/completions", { model: "scripted", prompt: "x" });
    expect(r.status).toBe(401);
    const ok = new OpenAI({ baseURL: `${keyed.url}/v1`, apiKey: "sekret", maxRetries: 0 });
    expect((await ok.models.list()).data[0].id).toBe("scripted");
    const bad = new OpenAI({ baseURL: `${keyed.url}/v1`, apiKey: "wrong", maxRetries: 0 });
    await expect(bad.models.list()).rejects.toThrow(/401/);
  });
});
