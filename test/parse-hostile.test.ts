/**
 * Issue 29, part 6 (the parser half): model output nested deep, holding huge values, or repeating a fragment that
 * made a regex rescan the text, is an invalid action with a short reason (or the action it is) — never a thrown
 * `RangeError`, never a reason that repeats megabytes, never seconds of work per turn.
 *
 * Property-based (fast-check, fixed seed) over the three env protocols (hermes, react, search-r1) and the two chat
 * agents' parsers (function-calling, ReAct `Action: verb[arg]`): nestings of arrays / objects from 0 to 20 000 levels
 * (closed or not, arguments as an object or as a JSON string), values of 100 KB to 2 MB in every place a reason
 * repeats, and runs of the fragments that were quadratic. Time bounds are generous (a stall of seconds): the texts
 * are 1 MB, which the quadratic versions took 30 s and more on (linear: well under a second).
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import type { Action, Task } from "../src/core/types.ts";
import { nestedDeeperThan, jsonTextDeeperThan } from "../src/core/values.ts";
import { FunctionCallingProtocol } from "../src/baselines/functionCalling.ts";
import { parseReactAction } from "../src/baselines/react.ts";
import { callTool, tool } from "../src/env/tool.ts";
import { toolEnv } from "../src/env/toolEnv.ts";
import { hermesProtocol, MAX_ARGUMENT_DEPTH } from "../src/protocol/hermes.ts";
import { reactProtocol, stripReactEnd } from "../src/protocol/react.ts";
import { searchR1Protocol } from "../src/protocol/searchR1.ts";
import type { Protocol } from "../src/protocol/types.ts";

const SEED = 20_261_207;
const tools = [{ name: "f", description: "", parameters: {} }, { name: "search", description: "", parameters: {} }];
const opts = { tools, maxCallsPerTurn: 1 };
const PROTOCOLS: readonly Protocol[] = [hermesProtocol, reactProtocol, searchR1Protocol];

/** Runs `parse` and checks what every parse of hostile text must give: no throw, a short reason, a serialisable action. */
function parsed(p: Protocol, text: string): Action {
  const a = p.parse(text, opts);
  if (a.type === "invalid") expect(a.reason.length).toBeLessThan(400);
  expect(() => JSON.stringify(a)).not.toThrow();
  if (a.type !== "invalid") expect(() => p.format(a)).not.toThrow();
  return a;
}

/** A nesting of `depth` levels (each an array or a one-key object, cycling through `kinds`) around `leaf`. */
function nest(depth: number, kinds: readonly ("arr" | "obj")[], leaf: string, closed: boolean): string {
  let open = "";
  let close = "";
  for (let i = 0; i < depth; i++) {
    const arr = kinds[i % kinds.length] === "arr";
    open += arr ? "[" : '{"k":';
    close = (arr ? "]" : "}") + close;
  }
  return open + leaf + (closed ? close : close.slice(0, Math.floor(close.length / 2)));
}

const nesting = fc.record({
  depth: fc.oneof(fc.integer({ min: 0, max: MAX_ARGUMENT_DEPTH + 4 }), fc.integer({ min: 0, max: 20_000 })),
  kinds: fc.array(fc.constantFrom<"arr" | "obj">("arr", "obj"), { minLength: 1, maxLength: 4 }),
  leaf: fc.constantFrom("1", '"x"', "{}", "[]", "null", '"[{"'),
  closed: fc.boolean(),
  asString: fc.boolean(),
});

describe("deep nesting in a call's arguments", () => {
  it("hermes and react: a call up to MAX_ARGUMENT_DEPTH levels parses; deeper is an invalid action with a reason; never a throw", () => {
    fc.assert(
      fc.property(nesting, ({ depth, kinds, leaf, closed, asString }) => {
        const inner = nest(depth, kinds, leaf, closed);
        const args = `{"x":${inner}}`;
        // Levels of the arguments object: itself, the nesting, and an empty {} / [] leaf.
        const levels = 1 + depth + (leaf === "{}" || leaf === "[]" ? 1 : 0);
        const hermes = `<tool_call>{"name":"f","arguments":${asString ? JSON.stringify(args) : args}}</tool_call>`;
        for (const [p, text] of [[hermesProtocol, hermes], [reactProtocol, `Action: f\nAction Input: ${args}`]] as const) {
          const a = parsed(p, text);
          if (levels > MAX_ARGUMENT_DEPTH) {
            expect(a).toMatchObject({ type: "invalid" });
            if (closed) expect(a).toEqual({ type: "invalid", reason: expect.stringMatching(/nested deeper than 64 levels of arrays and objects in "arguments"$/) });
          } else if (closed) {
            expect(a.type).toBe("tool_call");
            if (a.type === "tool_call") expect(nestedDeeperThan(a.calls[0].arguments, MAX_ARGUMENT_DEPTH)).toBe(false);
          }
        }
        // search-r1 reads the text as a query: any depth is fine.
        parsed(searchR1Protocol, `<search> ${inner} </search>`);
      }),
      { seed: SEED, numRuns: 300 },
    );
  });

  it("the issue's input: 10 000-deep arguments are an invalid action in a tool env, and the episode goes on", async () => {
    const env = toolEnv({ protocol: hermesProtocol, instructions: "x", tools: [tool({ name: "f", description: "", inputSchema: z.object({}).passthrough(), execute: () => "ok" })] })();
    const task: Task = { id: "t", question: "q", answers: [], kind: "q" };
    await env.reset(task);
    const deep = `<tool_call>{"name": "f", "arguments": {"a": ${"[".repeat(10_000)}${"]".repeat(10_000)}}}</tool_call>`;
    const r = await env.step(deep);
    expect(r.done).toBe(false);
    expect(r.info.action).toEqual({ type: "invalid", reason: 'tool call: nested deeper than 64 levels of arrays and objects in "arguments"' });
    expect(r.observation).toContain("error: tool call: nested deeper than 64 levels");
    expect((await env.step("the answer")).info.action).toEqual({ type: "answer", answer: "the answer" });
  });

  it("a tool whose schema is recursive gets deep arguments from code (MCP, a script) as invalid input, not a throw", async () => {
    type Tree = { kids: Tree[] };
    const treeSchema: z.ZodType<Tree> = z.lazy(() => z.object({ kids: z.array(treeSchema) }));
    const t = tool({ name: "tree", description: "", inputSchema: treeSchema, execute: () => "ok" });
    let deep: Tree = { kids: [] };
    for (let i = 0; i < 20_000; i++) deep = { kids: [deep] };
    const r = await callTool(t, deep);
    expect(r).toMatchObject({ ok: false, kind: "invalid_input" });
    expect(!r.ok && r.error).toMatch(/^tool tree: invalid input: could not be validated \(Maximum call stack size exceeded\)$/);
  });

  it("nestedDeeperThan and jsonTextDeeperThan agree with the nesting, a million levels deep included", () => {
    const text = "[".repeat(1_000_000) + "]".repeat(1_000_000);
    expect(jsonTextDeeperThan(text, 64)).toBe(true);
    expect(nestedDeeperThan(JSON.parse(text), 64)).toBe(true);
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 8 }), fc.integer({ min: 0, max: 10 }), (v, limit) => {
        const depth = (x: unknown): number => (x !== null && typeof x === "object" ? 1 + Math.max(0, ...Object.values(x).map(depth)) : 0);
        expect(nestedDeeperThan(v, limit)).toBe(depth(v) > limit);
        expect(jsonTextDeeperThan(JSON.stringify(v), limit)).toBe(depth(v) > limit);
      }),
      { seed: SEED, numRuns: 500 },
    );
  });
});

describe("huge values in model output", () => {
  it("a reason never repeats more than 80 characters of what the model wrote, whatever its size", () => {
    // Sizes and places are drawn (not the strings), so a failure prints a number, not megabytes.
    const places: ReadonlyArray<(s: string) => readonly [Protocol, string]> = [
      (s) => [hermesProtocol, `<tool_call>{"name":"${s}","arguments":{}}</tool_call>`], // unknown tool
      (s) => [hermesProtocol, `<tool_call>"${s}"</tool_call>`], // not an object
      (s) => [hermesProtocol, `<tool_call>{"name":["${s}"],"arguments":{}}</tool_call>`], // name not a string
      (s) => [hermesProtocol, `<tool_call>{"name":"f","arguments":"\\"${s}\\""}</tool_call>`], // arguments not an object
      (s) => [hermesProtocol, `<tool_call>{"name":"f","arguments":1${s.replace(/x/g, "0")}}</tool_call>`], // a huge number
      (s) => [reactProtocol, `Action: ${s}\nAction Input: {}`],
      (s) => [reactProtocol, `Action: f\nAction Input: ${s}`],
      (s) => [searchR1Protocol, `<search> ${s} `],
    ];
    fc.assert(
      fc.property(fc.integer({ min: 100_000, max: 2_000_000 }), fc.integer({ min: 0, max: places.length - 1 }), (n, at) => {
        const [p, text] = places[at]("x".repeat(n));
        expect(parsed(p, text).type).toBe("invalid");
      }),
      { seed: SEED, numRuns: 24 },
    );
    const fc1 = new FunctionCallingProtocol().parse({ role: "assistant", content: null, refusal: null, tool_calls: [{ id: "1", type: "function", function: { name: "x".repeat(1_000_000), arguments: "{}" } }] }, "tool_calls");
    expect(fc1.invalidReason!.length).toBeLessThan(200);
    const ra = parseReactAction(`Action: ${"x".repeat(1_000_000)}[q]`);
    expect("invalid" in ra && ra.invalid.length).toBeLessThan(200);
  });
});

describe("fragment runs that a regex rescanned: linear time", () => {
  // Each was quadratic somewhere: 1 MB of it took 30–80 s (react's turn end, the agents' Action / Observation / <answer>
  // regexes); a long whitespace run inside "Action …" / "Observation …" was quadratic in the run alone.
  const FRAGMENTS = ["Observation:", "observation :\n", "Observation: <|im_end|>", "<|im_end|>", " <|im_end|> ", "<answer>", "Action: a[", "Action" + " ".repeat(200_000), "Observation" + " ".repeat(200_000), "Action: f\n"];
  it("every protocol and agent parser takes well under seconds on 1 MB of any of them", () => {
    const fcp = new FunctionCallingProtocol();
    fc.assert(
      fc.property(fc.constantFrom(...FRAGMENTS), fc.constantFrom("", "Action: f\nAction Input: {}", "Thought: x\n"), (frag, head) => {
        const text = head + frag.repeat(Math.ceil(1_000_000 / frag.length));
        const start = performance.now();
        for (const p of PROTOCOLS) parsed(p, text);
        fcp.parse({ role: "assistant", content: text, refusal: null }, "stop");
        parseReactAction(text);
        // Linear: ~0.3 s on a loaded 2-core machine; the quadratic versions took 30 s and more here.
        expect(performance.now() - start).toBeLessThan(8_000);
      }),
      { seed: SEED, numRuns: 10 },
    );
  }, 90_000);

  it("the linear rewrites read turns as the regexes did", () => {
    // ReAct turns: a trailing Observation: / <|im_end|> (any order, any count) is stripped; a word before it stays.
    expect(reactProtocol.parse("Action: f\nAction Input: {}\nObservation:  <|im_end|>\n observation : ", opts)).toEqual({ type: "tool_call", calls: [{ name: "f", arguments: {} }] });
    expect(reactProtocol.parse("Final Answer: no observation:", opts)).toEqual({ type: "answer", answer: "no" });
    expect(reactProtocol.parse("Final Answer: x nonobservation:", opts)).toEqual({ type: "answer", answer: "x nonobservation:" });
    // On short fragment soups, equal to the regexes they replace (kept here as the reference).
    const soup = fc.array(fc.constantFrom("Observation", "observation", "OBSERVATION", "xobservation", ":", " ", "\n", "\t", "<|im_end|>", "<|im_end", "Action", "action", " 2 ", "7", "search", "[", "]", "q", "Final Answer:", "\u2028"), { maxLength: 30 }).map((xs) => xs.join(""));
    const refStrip = (text: string) => {
      let t = text;
      for (;;) {
        const before = t;
        t = t.trimEnd();
        if (t.endsWith("<|im_end|>")) t = t.slice(0, -"<|im_end|>".length);
        t = t.replace(/\bobservation\s*:\s*$/i, "");
        if (t === before) return t;
      }
    };
    const refAction = (text: string) => /Action\s*\d*\s*:\s*([A-Za-z_]+)\s*\[(.*)\]/i.exec(text.split(/Observation\s*\d*\s*:/i)[0]);
    fc.assert(
      fc.property(soup, (text) => {
        expect(stripReactEnd(text)).toBe(refStrip(text));
        const m = refAction(text);
        const got = parseReactAction(text);
        if (m === null) expect(got).toEqual({ invalid: "react: no action line of the form Action: search[query] or Action: finish[answer]" });
        else if ("verb" in got) expect([got.verb, got.arg]).toEqual([m[1].toLowerCase(), m[2].replace(/\s+/g, " ").trim()]);
        else expect(got.invalid).not.toMatch(/^react: no action line/);
      }),
      { seed: SEED, numRuns: 3000 },
    );
    // Agent ReAct: the first Action line with a `]` on it, the argument to its last `]`.
    expect(parseReactAction("Action: search[a[b]c] tail\nAction: finish[z]")).toEqual({ verb: "search", arg: "a[b]c" });
    expect(parseReactAction("Action: search[open\nAction 2 : finish[z]")).toEqual({ verb: "finish", arg: "z" });
    expect(parseReactAction("Action: finish[x]\nObservation: Action: search[y]")).toEqual({ verb: "finish", arg: "x" });
    expect(parseReactAction("Action: search[]")).toEqual({ invalid: "react: empty argument in search[]" });
    // Function calling: the first <answer> and the first </answer> after it.
    const fcp = new FunctionCallingProtocol();
    const reply = (content: string) => fcp.parse({ role: "assistant", content, refusal: null }, "stop").envText;
    expect(reply("x <answer> paris </answer> <answer> rome </answer>")).toBe("<answer> paris </answer>");
    expect(reply("<answer> open only")).toBe("<answer> open only </answer>");
  });
});
