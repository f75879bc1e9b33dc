/**
 * The tool-env helper (src/env/toolEnv.ts): protocol parsing, tool calls with their failures as observations, turn
 * limits, grading on the last step, and the rollout's books (calls per tool, grade, results on turns).
 */
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { RetryableToolError, tool } from "../src/env/tool.ts";
import { toolEnv, type GradeInput } from "../src/env/toolEnv.ts";
import { hermesProtocol } from "../src/protocol/hermes.ts";
import { reactProtocol } from "../src/protocol/react.ts";
import { ScriptedAgent } from "../src/rollout/agent.ts";
import { rolloutGroups } from "../src/rollout/rollout.ts";
import { WordTokenizer } from "../src/policy/tokenizer.ts";
import type { Task } from "../src/core/types.ts";
import { loadTokenizer } from "../src/policy/hf/index.ts";
import { join } from "node:path";

interface Counter { adds: number }
const task: Task<{ target: number }> = { id: "t1", question: "add 2 and 3", answers: [], kind: "calc", data: { target: 5 } };

function calcEnv(extra: { maxTurns?: number; maxCallsPerTurn?: number; protocol?: typeof hermesProtocol } = {}) {
  let flaky = 0;
  return toolEnv<{ target: number }, Counter>({
    protocol: extra.protocol ?? hermesProtocol,
    instructions: "You are a calculator agent.",
    reset: () => ({ adds: 0 }),
    tools: (state) => [
      tool({
        name: "add",
        description: "Add two numbers.",
        inputSchema: z.object({ a: z.number(), b: z.number() }),
        execute: ({ a, b }) => {
          state.adds++;
          return { sum: a + b };
        },
      }),
      tool({ name: "boom", description: "Always fails.", inputSchema: z.object({}), execute: () => { throw new Error("kaput"); } }),
      tool({
        name: "flaky",
        description: "Fails once, retryably.",
        inputSchema: z.object({}),
        execute: () => {
          if (flaky++ === 0) throw new RetryableToolError("rate limited (429)");
          return "ok";
        },
      }),
    ],
    grade: (input: GradeInput<{ target: number }, Counter>) => {
      const right = input.answer !== null && Number(input.answer) === input.task.data!.target ? 1 : 0;
      return { score: right, parts: { right, used_tool: input.state.adds > 0 ? 1 : 0 } };
    },
    maxTurns: extra.maxTurns ?? 4,
    maxCallsPerTurn: extra.maxCallsPerTurn ?? 1,
  });
}

describe("toolEnv", () => {
  it("renders the tools into the protocol's system prompt and runs a call, then grades the answer", async () => {
    const env = calcEnv()();
    const prompt = await env.reset(task, { seed: 1 });
    expect(prompt).toContain('"name": "add"');
    expect(prompt).toContain("You are a calculator agent.");
    const r1 = await env.step(hermesProtocol.format({ type: "tool_call", calls: [{ name: "add", arguments: { a: 2, b: 3 } }] }));
    expect(r1.done).toBe(false);
    expect(r1.info.toolResults).toEqual([{ name: "add", ok: true, content: '{"sum":5}', value: { sum: 5 } }]);
    expect(r1.observation).toContain('<tool_response>\n{"sum":5}\n</tool_response>');
    expect(r1.observationClose).toBeDefined();
    expect(r1.observation.endsWith(r1.observationClose!)).toBe(true);
    const r2 = await env.step(hermesProtocol.format({ type: "answer", answer: "5" }));
    expect(r2.done).toBe(true);
    expect(r2.info.grade).toEqual({ score: 1, parts: { right: 1, used_tool: 1 } });
  });

  it("turns bad arguments, a throwing tool and malformed text into observations, never exceptions", async () => {
    const env = calcEnv()();
    await env.reset(task);
    const bad = await env.step('<tool_call>\n{"name": "add", "arguments": {"a": "two"}}\n</tool_call><|im_end|>');
    expect(bad.done).toBe(false);
    expect(bad.info.toolError).toBe("invalid_input");
    expect(bad.observation).toContain("invalid input");
    const boom = await env.step('<tool_call>\n{"name": "boom", "arguments": {}}\n</tool_call><|im_end|>');
    expect(boom.info.toolError).toBe("error");
    expect(boom.observation).toContain("kaput");
    const junk = await env.step("<tool_call>\n{not json\n</tool_call><|im_end|>");
    expect(junk.info.action.type).toBe("invalid");
    expect(junk.done).toBe(false);
    // Its error closes like a tool result, so a cut keeps the close whole (capObservation).
    expect(junk.observationClose).toBe(hermesProtocol.observation([]).close);
    expect(junk.observation.endsWith(junk.observationClose!)).toBe(true);
    // The 4th turn is the last: the episode ends truncated and is graded (no answer → 0).
    const last = await env.step('<tool_call>\n{"name": "add", "arguments": {"a": 1, "b": 1}}\n</tool_call><|im_end|>');
    expect(last.done).toBe(true);
    expect(last.info.truncated).toBe(true);
    expect(last.info.grade?.score).toBe(0);
  });

  it("lets the policy retry a failed call itself (the env's retries default to 0)", async () => {
    const env = calcEnv()();
    await env.reset(task);
    const first = await env.step('<tool_call>\n{"name": "flaky", "arguments": {}}\n</tool_call><|im_end|>');
    expect(first.info.toolError).toBe("error");
    expect(first.observation).toContain("rate limited (429)");
    const again = await env.step('<tool_call>\n{"name": "flaky", "arguments": {}}\n</tool_call><|im_end|>');
    expect(again.info.toolError).toBeUndefined();
    expect(again.info.toolResults?.[0]).toMatchObject({ ok: true, content: "ok" });
  });

  it("enforces maxCallsPerTurn, and runs several calls in order when allowed", async () => {
    const two = hermesProtocol.format({ type: "tool_call", calls: [{ name: "add", arguments: { a: 1, b: 2 } }, { name: "add", arguments: { a: 3, b: 4 } }] });
    const one = calcEnv()();
    await one.reset(task);
    expect((await one.step(two)).info.action.type).toBe("invalid");
    const many = calcEnv({ maxCallsPerTurn: 2 })();
    await many.reset(task);
    const r = await many.step(two);
    expect(r.info.toolResults?.map((x) => x.content)).toEqual(['{"sum":3}', '{"sum":7}']);
  });

  it("works the same through the react protocol", async () => {
    const env = calcEnv({ protocol: reactProtocol })();
    await env.reset(task);
    const r = await env.step(reactProtocol.format({ type: "tool_call", calls: [{ name: "add", arguments: { a: 2, b: 3 } }] }));
    expect(r.info.toolResults?.[0].value).toEqual({ sum: 5 });
    expect((await env.step(reactProtocol.format({ type: "answer", answer: "5" }))).info.grade?.score).toBe(1);
  });

  it("gives the rollout calls per tool, each turn's results and the grade", async () => {
    const call = hermesProtocol.format({ type: "tool_call", calls: [{ name: "add", arguments: { a: 2, b: 3 } }] });
    const answer = hermesProtocol.format({ type: "answer", answer: "5" });
    // The word vocabulary holds every text of the episode: prompt, the scripted turns, the observation.
    const prompt = await calcEnv()().reset(task);
    const tok = WordTokenizer.fromTexts([prompt, call, answer, hermesProtocol.observation([{ name: "add", ok: true, content: '{"sum":5}' }]).text], hermesProtocol.specialTokens);
    const script = new ScriptedAgent(tok, (ctx) => (ctx.turnIndex === 0 ? call : answer));
    const [g] = await rolloutGroups([task], { makeEnv: calcEnv(), agent: script, tokenizer: tok, limits: { contextLength: 1024, maxObservationTokens: 64 } }, { groupSize: 1, seed: 3 });
    const t = g.trajectories[0];
    expect(t.toolCalls).toEqual({ add: 1 });
    expect(t.turns[0].toolResults?.[0].value).toEqual({ sum: 5 });
    expect(t.grade).toEqual({ score: 1, parts: { right: 1, used_tool: 1 } });
    expect(t.answer).toBe("5");
  });

  it("with a real chat tokenizer, a hermes prompt is encoded as rendered, not wrapped in the template again", async () => {
    const tok = loadTokenizer(join(import.meta.dirname, "fixtures", "tiny-chatml"));
    const call = hermesProtocol.format({ type: "tool_call", calls: [{ name: "add", arguments: { a: 2, b: 3 } }] });
    const script = new ScriptedAgent(tok, (ctx) => (ctx.turnIndex === 0 ? call : hermesProtocol.format({ type: "answer", answer: "5" })));
    const [g] = await rolloutGroups([task], { makeEnv: calcEnv(), agent: script, tokenizer: tok, limits: { contextLength: 4096, maxObservationTokens: 512 } }, { groupSize: 1, seed: 3 });
    const t = g.trajectories[0];
    const prompt = await calcEnv()().reset(task);
    expect(tok.decode(t.tokens.slice(0, t.promptLength))).toBe(prompt);
    expect(prompt.split("<|im_start|>user").length - 1).toBe(1);
    expect(t.grade?.score).toBe(1);
  });

  it("rejects bad limits naming the field", () => {
    expect(() => calcEnv({ maxTurns: 0 })).toThrow(/maxTurns must be a positive integer/);
  });
});
