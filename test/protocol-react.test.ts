/**
 * The react protocol (src/protocol/react.ts). Sources: Yao et al. 2023 "ReAct" §3; langchain-ai/langchain
 * `libs/langchain/langchain/agents/output_parsers/react_single_input.py` @ c787bee0f215a11d9937d43406aac3089af1fd95
 * (`ReActSingleInputOutputParser`) and `libs/langchain/langchain/agents/mrkl/prompt.py` @
 * dba8443e4b97e6d9aa70c168d5725599a45bc149 (`FORMAT_INSTRUCTIONS`).
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import type { Action } from "../src/core/types.ts";
import { tool, renderTools } from "../src/env/tool.ts";
import type { ToolJsonSchema } from "../src/protocol/types.ts";
import { WordTokenizer } from "../src/policy/tokenizer.ts";
import { trimKeys } from "../src/protocol/hermes.ts";
import { reactProtocol as react } from "../src/protocol/react.ts";

const airports: ToolJsonSchema = {
  name: "get_airports",
  description: "List the airports of a city.",
  parameters: { $schema: "https://json-schema.org/draft/2020-12/schema", type: "object", properties: { city: { type: "string" } }, required: ["city"] },
};
const weather: ToolJsonSchema = { name: "get_weather", description: "The weather of a city.", parameters: { type: "object" } };
const opts = { tools: [airports, weather] };
const call = (name: string, args: Record<string, unknown>): Action => ({ type: "tool_call", calls: [{ name, arguments: args }] });

describe("react parse", () => {
  it("parses Thought / Action / Action Input", () => {
    const text = 'Thought: I need the airports.\nAction: get_airports\nAction Input: {"city": "Shanghai"}<|im_end|>';
    expect(react.parse(text, opts)).toEqual(call("get_airports", { city: "Shanghai" }));
  });

  it("is case-insensitive and whitespace-tolerant, and drops the Observation: stop", () => {
    const text = 'thought :  hmm\nACTION :  `get_airports` \n  action   input :\n{"city": "x"}\nObservation:';
    expect(react.parse(text, opts)).toEqual(call("get_airports", { city: "x" }));
    expect(react.parse('Action: get_weather\nAction Input: {}\n<|im_end|>', opts)).toEqual(call("get_weather", {}));
  });

  it("parses the embedded word tokenizer's decoding", () => {
    const decoded = 'action : get_airports \n action input : {" city ": " shanghai "} <|im_end|>';
    expect(react.parse(decoded, opts)).toEqual(call("get_airports", { city: " shanghai " }));
    const text = react.format(call("get_airports", { city: "Shanghai" }));
    const tok = WordTokenizer.fromTexts([text], react.specialTokens);
    expect(react.parse(tok.decode(tok.encode(text)), opts)).toEqual(call("get_airports", { city: " shanghai " }));
  });

  it("malformed JSON, a non-object input and an unclosed object are invalid", () => {
    const bad = react.parse('Action: get_airports\nAction Input: {"city": shanghai}', opts);
    expect(bad.type).toBe("invalid");
    if (bad.type === "invalid") expect(bad.reason).toMatch(/^malformed JSON in Action Input \(/);
    expect(react.parse("Action: get_airports\nAction Input: shanghai", opts)).toEqual({
      type: "invalid",
      reason: 'Action Input must be a JSON object {…}, got "shanghai"',
    });
    const unclosed = react.parse('Action: get_airports\nAction Input: {"city": "shang}', opts);
    expect(unclosed.type).toBe("invalid");
    if (unclosed.type === "invalid") expect(unclosed.reason).toMatch(/^malformed JSON in Action Input: unclosed JSON object/);
  });

  it("an unknown tool is invalid", () => {
    expect(react.parse("Action: book\nAction Input: {}", opts)).toEqual({
      type: "invalid",
      reason: "unknown tool book; available: get_airports, get_weather",
    });
  });

  it("a second Action is invalid, whatever maxCallsPerTurn", () => {
    const text = 'Action: get_airports\nAction Input: {"city": "a"}\nAction: get_weather\nAction Input: {"city": "b"}';
    const reason = "2 calls where at most 1 is allowed (one Action per ReAct turn)";
    expect(react.parse(text, opts)).toEqual({ type: "invalid", reason });
    expect(react.parse(text, { ...opts, maxCallsPerTurn: 2 })).toEqual({ type: "invalid", reason });
  });

  it("text after the Action Input is invalid", () => {
    expect(react.parse('Action: get_airports\nAction Input: {"city": "a"} and more', opts)).toEqual({
      type: "invalid",
      reason: 'text after the Action Input: "and more"',
    });
  });

  it("Final Answer is the answer; both, neither, or half an action are invalid", () => {
    expect(react.parse("Thought: I know it.\nFinal Answer: PVG and SHA<|im_end|>", opts)).toEqual({ type: "answer", answer: "PVG and SHA" });
    expect(react.parse("final answer : paris", opts)).toEqual({ type: "answer", answer: "paris" });
    expect(react.parse('Action: get_airports\nAction Input: {}\nFinal Answer: x', opts)).toEqual({
      type: "invalid",
      reason: "both an Action and a Final Answer in one turn",
    });
    expect(react.parse("Thought: just thinking", opts).type).toBe("invalid");
    expect(react.parse("Final Answer:   <|im_end|>", opts)).toEqual({ type: "invalid", reason: "empty Final Answer" });
    expect(react.parse("Action: get_airports", opts)).toEqual({
      type: "invalid",
      reason: "Action without an Action Input: write Action Input: <JSON object> after it",
    });
    expect(react.parse('Action Input: {"city": "a"}', opts).type).toBe("invalid");
    expect(react.parse('Action Input: {}\nAction: get_airports', opts)).toEqual({ type: "invalid", reason: "Action Input before its Action" });
    expect(react.parse("Action:\nAction Input: {}", opts)).toEqual({ type: "invalid", reason: "empty tool name after Action:" });
  });

  it("never throws on arbitrary text", () => {
    const pieces = fc.constantFrom("Action:", "Action Input:", "Final Answer:", "Observation:", "<|im_end|>", "{", "}", '"', "[", "\\", " ", "\n", "get_airports");
    fc.assert(
      fc.property(fc.array(fc.oneof(pieces, fc.string()), { maxLength: 12 }), (parts) => {
        expect(["tool_call", "answer", "invalid"]).toContain(react.parse(parts.join(""), opts).type);
      }),
      { numRuns: 500 },
    );
  });
});

describe("react format and strings", () => {
  it("format round-trips through parse", () => {
    const actions: Action[] = [
      call("get_airports", { city: "Shanghai" }),
      call("get_weather", { city: "Zürich \"q\" }{", nested: { list: [1, { a: null }] } }),
      call("get_weather", { note: "Action: get_airports\nAction Input: {} Final Answer: x Observation:" }),
      { type: "answer", answer: "PVG and SHA" },
    ];
    for (const a of actions) expect(react.parse(react.format(a), opts)).toEqual(a);
    expect(react.format(call("get_airports", { city: "a" }))).toBe('Action: get_airports\nAction Input: {"city": "a"}<|im_end|>');
    expect(react.format({ type: "answer", answer: "x" })).toBe("Final Answer: x<|im_end|>");
    expect(react.parse(react.format({ type: "invalid", reason: "Final Answer: and Action: both" }), opts).type).toBe("invalid");
    expect(() => react.format({ type: "tool_call", calls: [] })).toThrow(/one call per turn/);
  });

  it("format round-trips arbitrary JSON arguments", () => {
    const args = fc
      .dictionary(fc.string(), fc.json().map((s) => JSON.parse(s) as unknown))
      .filter((d) => JSON.stringify(trimKeys(d)) === JSON.stringify(d));
    fc.assert(
      fc.property(args, (a) => {
        const action = call("get_weather", a as Record<string, unknown>);
        expect(react.parse(react.format(action), opts)).toEqual(action);
      }),
      { numRuns: 300 },
    );
  });

  it("prompt, observation, close, invalidObservation, stops", () => {
    expect(react.prompt("S", "U")).toBe("<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n");
    const obs = react.observation([{ name: "get_airports", ok: true, content: '["PVG"]' }]);
    expect(obs).toEqual({
      text: '\n<|im_start|>user\nObservation: ["PVG"]<|im_end|>\n<|im_start|>assistant\n',
      close: "<|im_end|>\n<|im_start|>assistant\n",
    });
    expect(react.invalidObservation("empty Final Answer")).toBe("\n<|im_start|>user\nObservation: error: empty Final Answer<|im_end|>\n<|im_start|>assistant\n");
    expect(react.stops).toEqual(["<|im_end|>", "Observation:"]);
    expect(react.specialTokens).toEqual(["<|im_start|>", "<|im_end|>"]);
  });

  it("system lists each tool with its JSON Schema and the format", () => {
    const book = tool({
      name: "book_flight",
      description: "Book a flight.",
      inputSchema: z.object({ city: z.string(), seats: z.number().optional(), cabin: z.enum(["economy", "business"]) }),
      execute: () => "ok",
    });
    const system = react.system(renderTools([book]), "You book flights.");
    expect(system).toBe(
      "You book flights.\n\nYou have access to the following tools:\n\n" +
        "book_flight: Book a flight.\n" +
        '  arguments (JSON Schema): {"type": "object", "properties": {"city": {"type": "string"}, "seats": {"type": "number"}, ' +
        '"cabin": {"type": "string", "enum": ["economy", "business"]}}, "required": ["city", "cabin"], "additionalProperties": false}\n\n' +
        "Use the following format:\n\n" +
        "Thought: you should always think about what to do\n" +
        "Action: the action to take, one of [book_flight]\n" +
        "Action Input: the arguments of the action, as a JSON object\n" +
        "Observation: the result of the action\n" +
        "... (this Thought/Action/Action Input/Observation can repeat N times; write one Action per turn, then stop)\n" +
        "Thought: I now know the final answer\n" +
        "Final Answer: the final answer to the original input question",
    );
    expect(react.system([airports], "")).toMatch(/^You have access to the following tools:\n\nget_airports: List the airports of a city\.\n  arguments \(JSON Schema\): \{"type": "object"/);
    expect(react.system([], "Be brief.")).toBe("Be brief.\n\nAnswer with Final Answer: <answer>.");
  });
});
