/**
 * The hermes protocol (src/protocol/hermes.ts) against its sources:
 * - the Qwen2.5-7B-Instruct chat template, verbatim from huggingface/huggingface.js
 *   `packages/jinja/test/e2e.test.js` @ fe42e68017ffc76d09922ea8f9b38a6964345710 (test/fixtures/qwen25-template), and
 *   the tiny-chatml fixture's Qwen-style template, both rendered by @huggingface/jinja through `HfTokenizer`;
 * - veRL `verl/experimental/agent_loop/tool_parser.py` @ 17152ef7fa8ce673ef4d469b5ecfea9f076f36b3 (`HermesToolParser`:
 *   `<tool_call>(.*?)</tool_call>`, `json.loads`, `name` + `arguments`);
 * - transformers' `tojson` (`json.dumps` with `", "` / `": "` separators, `ensure_ascii=False`).
 */
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Template } from "@huggingface/jinja";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import type { Action } from "../src/core/types.ts";
import { tool, renderTools } from "../src/env/tool.ts";
import type { ToolJsonSchema } from "../src/protocol/types.ts";
import { loadTokenizer, type ChatMessage } from "../src/policy/hf/index.ts";
import { WordTokenizer } from "../src/policy/tokenizer.ts";
import { chatToolSpec, hermesProtocol as hermes, toJsonLikeTemplate, trimKeys } from "../src/protocol/hermes.ts";

const QWEN25_DIR = "test/fixtures/qwen25-template";
const TINY_DIR = "test/fixtures/tiny-chatml";

const airports: ToolJsonSchema = {
  name: "get_airports",
  description: "List the airports of a city.",
  parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
};
const weather: ToolJsonSchema = {
  name: "get_weather",
  description: "The weather of a city.",
  parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
};
const opts = { tools: [airports, weather] };
const call = (name: string, args: Record<string, unknown>): Action => ({ type: "tool_call", calls: [{ name, arguments: args }] });

describe("hermes parse", () => {
  it("parses a valid call in the template's format", () => {
    const text = '<tool_call>\n{"name": "get_airports", "arguments": {"city": "Shanghai"}}\n</tool_call><|im_end|>';
    expect(hermes.parse(text, opts)).toEqual(call("get_airports", { city: "Shanghai" }));
  });

  it("allows reasoning and <think> before the call, and whitespace after", () => {
    const text = '<think>\nI need airports.\n</think>\nLet me look.\n<tool_call>\n{"name": "get_airports", "arguments": {"city": "x"}}\n</tool_call>\n <|im_end|>\n';
    expect(hermes.parse(text, opts)).toEqual(call("get_airports", { city: "x" }));
  });

  it("accepts arguments given as a JSON string (OpenAI's function.arguments)", () => {
    const text = '<tool_call>{"name": "get_airports", "arguments": "{\\"city\\": \\"Paris\\"}"}</tool_call>';
    expect(hermes.parse(text, opts)).toEqual(call("get_airports", { city: "Paris" }));
  });

  it("malformed JSON is invalid, naming the JSON error", () => {
    const a = hermes.parse('<tool_call>\n{"name": "get_airports", "arguments": {"city": }\n</tool_call>', opts);
    expect(a.type).toBe("invalid");
    if (a.type === "invalid") expect(a.reason).toMatch(/^tool call: malformed JSON \(/);
  });

  it("JSON that is not {name: string, arguments: object} is invalid", () => {
    const cases: Array<[string, RegExp]> = [
      ['["get_airports"]', /expected a JSON object.*an array/],
      ['{"arguments": {}}', /"name" must be a non-empty string, got nothing/],
      ['{"name": 3, "arguments": {}}', /"name" must be a non-empty string, got 3/],
      ['{"name": "get_airports"}', /"arguments" must be a JSON object, got nothing/],
      ['{"name": "get_airports", "arguments": [1]}', /"arguments" must be a JSON object, got an array/],
      ['{"name": "get_airports", "arguments": "not json"}', /"arguments" is a string that is not JSON/],
      ['{"name": "get_airports", "arguments": "[1]"}', /"arguments" must be a JSON object/],
    ];
    for (const [json, re] of cases) {
      const a = hermes.parse(`<tool_call>${json}</tool_call>`, opts);
      expect(a.type, json).toBe("invalid");
      if (a.type === "invalid") expect(a.reason, json).toMatch(re);
    }
  });

  it("an unknown tool is invalid, listing the tools", () => {
    const a = hermes.parse('<tool_call>{"name": "book", "arguments": {}}</tool_call>', opts);
    expect(a).toEqual({ type: "invalid", reason: "unknown tool book; available: get_airports, get_weather" });
    expect(hermes.parse('<tool_call>{"name": "book", "arguments": {}}</tool_call>', { tools: [] })).toEqual({
      type: "invalid",
      reason: "unknown tool book; no tools are available",
    });
  });

  it("two calls are invalid where one is allowed, and valid with maxCallsPerTurn 2", () => {
    const text =
      '<tool_call>\n{"name": "get_airports", "arguments": {"city": "a"}}\n</tool_call>\n' +
      '<tool_call>\n{"name": "get_weather", "arguments": {"city": "b"}}\n</tool_call><|im_end|>';
    expect(hermes.parse(text, opts)).toEqual({ type: "invalid", reason: "2 calls where at most 1 is allowed" });
    expect(hermes.parse(text, { ...opts, maxCallsPerTurn: 2 })).toEqual({
      type: "tool_call",
      calls: [
        { name: "get_airports", arguments: { city: "a" } },
        { name: "get_weather", arguments: { city: "b" } },
      ],
    });
    const three = `${text}`.replace("<|im_end|>", '\n<tool_call>{"name": "get_weather", "arguments": {}}</tool_call>');
    expect(hermes.parse(three, { ...opts, maxCallsPerTurn: 2 })).toEqual({ type: "invalid", reason: "3 calls where at most 2 are allowed" });
  });

  it("an unclosed <tool_call> is invalid", () => {
    expect(hermes.parse('<tool_call>\n{"name": "get_airports", "arguments": {}}<|im_end|>', opts)).toEqual({
      type: "invalid",
      reason: "unclosed <tool_call>: no </tool_call> follows",
    });
    const nested = '<tool_call>{"name": "get_airports", "arguments": {}} <tool_call>{"name": "get_airports", "arguments": {}}</tool_call>';
    expect(hermes.parse(nested, { ...opts, maxCallsPerTurn: 2 })).toEqual({
      type: "invalid",
      reason: "unclosed <tool_call>: another <tool_call> opens before its </tool_call>",
    });
    expect(hermes.parse("the answer </tool_call>", opts)).toEqual({ type: "invalid", reason: "</tool_call> without an opening <tool_call>" });
  });

  it("text after the call (or between calls) is invalid", () => {
    const a = hermes.parse('<tool_call>{"name": "get_airports", "arguments": {}}</tool_call> and then Paris<|im_end|>', opts);
    expect(a).toEqual({ type: "invalid", reason: 'text after the tool call: "and then Paris"' });
    const b = hermes.parse(
      '<tool_call>{"name": "get_airports", "arguments": {}}</tool_call> hmm <tool_call>{"name": "get_airports", "arguments": {}}</tool_call>',
      { ...opts, maxCallsPerTurn: 2 },
    );
    expect(b).toEqual({ type: "invalid", reason: 'text between tool calls: "hmm"' });
  });

  it("text without <tool_call> is the final answer (trimmed, <|im_end|> and past <think> removed)", () => {
    expect(hermes.parse("  Paris and Lyon.\n<|im_end|>", opts)).toEqual({ type: "answer", answer: "Paris and Lyon." });
    expect(hermes.parse("<think>\nhmm\n</think>\n\nParis<|im_end|>", opts)).toEqual({ type: "answer", answer: "Paris" });
    // A <tool_call> written inside a complete think block is reasoning, not a call.
    expect(hermes.parse('<think>maybe <tool_call>{"name": "x"}</tool_call></think> Paris', opts)).toEqual({ type: "answer", answer: "Paris" });
    expect(hermes.parse(" <|im_end|>", opts).type).toBe("invalid");
    expect(hermes.parse("<think> still thinking", opts)).toEqual({ type: "invalid", reason: "unclosed <think>: no </think> follows" });
  });

  it("parses the embedded word tokenizer's decoding (spaces around every token, lower case)", () => {
    const decoded = '<tool_call> {" name ": " get_airports ", " arguments ": {" city ": " shanghai "}} </tool_call> <|im_end|>';
    expect(hermes.parse(decoded, opts)).toEqual(call("get_airports", { city: " shanghai " }));
    // Nested keys are trimmed too; values are left to the tool's schema.
    const nested = '<tool_call> {" name ": " get_airports ", " arguments ": {" filter ": {" kind ": [{" a ": " b "}]}}} </tool_call>';
    expect(hermes.parse(nested, opts)).toEqual(call("get_airports", { filter: { kind: [{ a: " b " }] } }));
  });

  it("parses what WordTokenizer decodes from a formatted call", () => {
    const text = hermes.format(call("get_airports", { city: "Shanghai" }));
    const tok = WordTokenizer.fromTexts([text], hermes.specialTokens);
    const decoded = tok.decode(tok.encode(text));
    expect(decoded).toContain('{" name ": " get_airports "');
    expect(hermes.parse(decoded, opts)).toEqual(call("get_airports", { city: " shanghai " }));
  });

  it("never throws on arbitrary text", () => {
    const pieces = fc.constantFrom("<tool_call>", "</tool_call>", "<think>", "</think>", "<|im_end|>", '{"name": "get_airports", "arguments": {}}', "{", "}", '"', " ", "\n", "x");
    fc.assert(
      fc.property(fc.array(fc.oneof(pieces, fc.string()), { maxLength: 12 }), (parts) => {
        const a = hermes.parse(parts.join(""), { ...opts, maxCallsPerTurn: 3 });
        expect(["tool_call", "answer", "invalid"]).toContain(a.type);
      }),
      { numRuns: 500 },
    );
  });
});

describe("hermes format", () => {
  it("writes the template's tool-call text", () => {
    expect(hermes.format(call("get_airports", { city: "Shanghai", n: 2 }))).toBe(
      '<tool_call>\n{"name": "get_airports", "arguments": {"city": "Shanghai", "n": 2}}\n</tool_call><|im_end|>',
    );
    expect(hermes.format({ type: "answer", answer: "Paris" })).toBe("Paris<|im_end|>");
  });

  it("round-trips: parse(format(a)) equals a", () => {
    const actions: Action[] = [
      call("get_airports", { city: "Shanghai" }),
      call("get_weather", {}),
      {
        type: "tool_call",
        calls: [
          { name: "get_airports", arguments: { city: "a", tags: ["x", "y"], deep: { n: 1.5, ok: true, none: null } } },
          { name: "get_weather", arguments: { city: "Zürich \"quoted\" \\ 東京\n" } },
        ],
      },
      { type: "answer", answer: "Paris and Lyon" },
    ];
    for (const a of actions) expect(hermes.parse(hermes.format(a), { ...opts, maxCallsPerTurn: 2 })).toEqual(a);
    const inv = hermes.parse(hermes.format({ type: "invalid", reason: "bad <tool_call> </tool_call> turn" }), opts);
    expect(inv.type).toBe("invalid");
  });

  it("round-trips arbitrary JSON arguments", () => {
    const args = fc
      .dictionary(fc.string(), fc.json().map((s) => JSON.parse(s) as unknown))
      .filter((d) => JSON.stringify(trimKeys(d)) === JSON.stringify(d));
    fc.assert(
      fc.property(args, (a) => {
        const action = call("get_airports", a as Record<string, unknown>);
        expect(hermes.parse(hermes.format(action), opts)).toEqual(action);
      }),
      { numRuns: 300 },
    );
  });
});

describe("hermes strings", () => {
  it("prompt, observation, close and invalidObservation", () => {
    expect(hermes.prompt("SYS", "USER")).toBe("<|im_start|>system\nSYS<|im_end|>\n<|im_start|>user\nUSER<|im_end|>\n<|im_start|>assistant\n");
    const obs = hermes.observation([
      { name: "get_airports", ok: true, content: '["PVG"]' },
      { name: "get_weather", ok: false, content: "error: tool get_weather: timed out after 10 ms" },
    ]);
    expect(obs.text).toBe(
      '\n<|im_start|>user\n<tool_response>\n["PVG"]\n</tool_response>\n<tool_response>\nerror: tool get_weather: timed out after 10 ms\n</tool_response><|im_end|>\n<|im_start|>assistant\n',
    );
    expect(obs.close).toBe("\n</tool_response><|im_end|>\n<|im_start|>assistant\n");
    expect(obs.text.endsWith(obs.close)).toBe(true);
    expect(hermes.invalidObservation("2 calls where at most 1 is allowed")).toBe(
      "\n<|im_start|>user\n<tool_response>\nerror: 2 calls where at most 1 is allowed\n</tool_response><|im_end|>\n<|im_start|>assistant\n",
    );
    expect(hermes.stops).toEqual(["<|im_end|>"]);
    expect(hermes.specialTokens).toEqual(["<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<think>", "</think>"]);
  });

  it("system renders a zod tool's JSON Schema (required string, optional number, enum) as tojson prints it", () => {
    const book = tool({
      name: "book_flight",
      description: "Book a flight.",
      inputSchema: z.object({
        city: z.string().describe("destination city"),
        seats: z.number().optional(),
        cabin: z.enum(["economy", "business"]),
      }),
      execute: () => "ok",
    });
    const system = hermes.system(renderTools([book]), "You book flights.");
    expect(system).toBe(
      "You book flights.\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n" +
        "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n" +
        '{"type": "function", "function": {"name": "book_flight", "description": "Book a flight.", "parameters": ' +
        '{"type": "object", "properties": {"city": {"type": "string", "description": "destination city"}, ' +
        '"seats": {"type": "number"}, "cabin": {"type": "string", "enum": ["economy", "business"]}}, ' +
        '"required": ["city", "cabin"], "additionalProperties": false}}}\n' +
        "</tools>\n\nFor each function call, return a json object with function name and arguments within " +
        '<tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>',
    );
    expect(hermes.system([], "Plain.")).toBe("Plain.");
  });

  it("toJsonLikeTemplate prints what @huggingface/jinja's tojson prints", () => {
    const values: unknown[] = [
      { a: 1, b: [true, false, null], c: { d: "e\"f\\g\n\t\u0001", "k y": [] }, e: {} },
      ["Zürich", "東京", "emoji 🎉", "\u2028", 0, -3, 1.5, 1e-7, 123456789012],
      "plain",
      null,
      [],
      { nested: [[1, [2, { x: [3] }]]] },
    ];
    for (const v of values) {
      const rendered = new Template("{{ v | tojson }}").render({ v });
      expect(toJsonLikeTemplate(v)).toBe(rendered);
    }
    expect(toJsonLikeTemplate({ a: undefined, b: NaN, c: [undefined] })).toBe('{"b": null, "c": [null]}');
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    expect(() => toJsonLikeTemplate(cyclic)).toThrow(/cyclic/);
  });

  it("the qwen25-template fixture holds the pinned Qwen2.5-7B-Instruct template", () => {
    const cfg = JSON.parse(readFileSync(join(QWEN25_DIR, "tokenizer_config.json"), "utf8")) as { chat_template: string };
    expect(createHash("sha256").update(cfg.chat_template, "utf8").digest("hex")).toBe("cd8e9439f0570856fd70470bf8889ebd8b5d1107207f67a5efb46e342330527f");
    expect(cfg.chat_template).toContain("You are Qwen, created by Alibaba Cloud. You are a helpful assistant.");
  });
});

describe.each([
  ["Qwen2.5-7B-Instruct template", QWEN25_DIR],
  ["tiny-chatml template", TINY_DIR],
])("hermes matches the chat template (%s)", (_label, dir) => {
  const tok = loadTokenizer(dir);
  const schemas = [airports, weather];
  const tools = schemas.map(chatToolSpec);
  const instructions = "You are a travel agent.";
  const user = "Find airports in Shanghai.";
  const argsA = { city: "Shanghai" };
  const argsB = { city: "Shanghai", when: "tomorrow" };
  const resultA = '{"airports": ["PVG", "SHA"]}';
  const resultB = '{"sky": "clear"}';
  const toolCall = (name: string, args: Record<string, unknown>) => ({ type: "function" as const, function: { name, arguments: args } });

  it("prompt = [system, user] with the generation prompt", () => {
    const rendered = tok.applyChatTemplate([{ role: "system", content: instructions }, { role: "user", content: user }], { tools, addGenerationPrompt: true });
    expect(hermes.prompt(hermes.system(schemas, instructions), user)).toBe(rendered);
    const plain = tok.applyChatTemplate([{ role: "system", content: instructions }, { role: "user", content: user }], { addGenerationPrompt: true });
    expect(hermes.prompt(hermes.system([], instructions), user)).toBe(plain);
  });

  it("prompt + call + observation + answer = [system, user, assistant(tool_calls), tool, assistant] (+ the final \\n)", () => {
    const messages: ChatMessage[] = [
      { role: "system", content: instructions },
      { role: "user", content: user },
      { role: "assistant", content: "", tool_calls: [toolCall("get_airports", argsA)] },
      { role: "tool", name: "get_airports", content: resultA },
      { role: "assistant", content: "PVG and SHA." },
    ];
    const rendered = tok.applyChatTemplate(messages, { tools });
    const turn1 = hermes.format(call("get_airports", argsA));
    const obs = hermes.observation([{ name: "get_airports", ok: true, content: resultA }]);
    const turn2 = hermes.format({ type: "answer", answer: "PVG and SHA." });
    // The template ends every message with `<|im_end|>\n`; a turn ends at its stop token `<|im_end|>`, so the only
    // difference is the template's last `\n` (the next observation would write it).
    expect(hermes.prompt(hermes.system(schemas, instructions), user) + turn1 + obs.text + turn2 + "\n").toBe(rendered);
    expect(hermes.parse(turn1, { tools: schemas })).toEqual(call("get_airports", argsA));
    expect(hermes.parse(turn2, { tools: schemas })).toEqual({ type: "answer", answer: "PVG and SHA." });
  });

  it("two calls, two tool messages in one user block, and reasoning before the calls", () => {
    const messages: ChatMessage[] = [
      { role: "system", content: instructions },
      { role: "user", content: user },
      { role: "assistant", content: "I will look both up.", tool_calls: [toolCall("get_airports", argsA), toolCall("get_weather", argsB)] },
      { role: "tool", name: "get_airports", content: resultA },
      { role: "tool", name: "get_weather", content: resultB },
    ];
    const rendered = tok.applyChatTemplate(messages, { tools, addGenerationPrompt: true });
    const action: Action = {
      type: "tool_call",
      calls: [
        { name: "get_airports", arguments: argsA },
        { name: "get_weather", arguments: argsB },
      ],
    };
    const turn = "I will look both up.\n" + hermes.format(action);
    const obs = hermes.observation([
      { name: "get_airports", ok: true, content: resultA },
      { name: "get_weather", ok: true, content: resultB },
    ]);
    // With the generation prompt the rendering ends with the assistant header, as the observation does: equal exactly.
    expect(hermes.prompt(hermes.system(schemas, instructions), user) + turn + obs.text).toBe(rendered);
    expect(hermes.parse(turn, { tools: schemas, maxCallsPerTurn: 2 })).toEqual(action);
  });

  it("a capped observation (head + close) is the template's rendering of the cut content", () => {
    const cut = resultA.slice(0, 10);
    const messages: ChatMessage[] = [
      { role: "system", content: instructions },
      { role: "user", content: user },
      { role: "assistant", content: "", tool_calls: [toolCall("get_airports", argsA)] },
      { role: "tool", name: "get_airports", content: cut },
    ];
    const rendered = tok.applyChatTemplate(messages, { tools, addGenerationPrompt: true });
    const obs = hermes.observation([{ name: "get_airports", ok: true, content: resultA }]);
    const head = obs.text.slice(0, obs.text.indexOf(resultA) + cut.length);
    expect(hermes.prompt(hermes.system(schemas, instructions), user) + hermes.format(call("get_airports", argsA)) + head + obs.close).toBe(rendered);
  });
});
