import { describe, expect, it } from "vitest";
import { z } from "zod";
import { callTool, tool, toolJsonSchema } from "../src/env/tool.ts";

const add = tool({
  name: "add",
  description: "Adds two integers.",
  inputSchema: z.object({ a: z.number().int(), b: z.number().int().describe("second term") }),
  execute: ({ a, b }) => a + b,
});

describe("tool", () => {
  it("exports a JSON schema", () => {
    const s = toolJsonSchema(add);
    expect(s.name).toBe("add");
    expect(s.parameters).toMatchObject({
      type: "object",
      required: ["a", "b"],
      properties: { a: { type: "integer" }, b: { type: "integer", description: "second term" } },
    });
  });
  it("rejects a bad name", () => {
    expect(() => tool({ name: "bad name", description: "", inputSchema: z.object({}), execute: () => 1 })).toThrow(/name/);
  });
  it("calls, validates, catches and times out", async () => {
    expect(await callTool(add, { a: 1, b: 2 })).toEqual({ ok: true, value: 3 });
    const bad = await callTool(add, { a: 1, b: "x" });
    expect(bad.ok).toBe(false);
    if (!bad.ok) expect(bad.error).toMatch(/^tool add: invalid input: b: /);
    const thrower = tool({ name: "boom", description: "", inputSchema: z.object({}), execute: () => { throw new Error("kaput"); } });
    expect(await callTool(thrower, {})).toEqual({ ok: false, error: "tool boom: kaput" });
    let aborted = false;
    const slow = tool({
      name: "slow",
      description: "",
      inputSchema: z.object({}),
      execute: (_i, { signal }) =>
        new Promise<number>((resolve) => {
          signal.addEventListener("abort", () => { aborted = true; });
          setTimeout(() => resolve(1), 500);
        }),
    });
    expect(await callTool(slow, {}, { timeoutMs: 20 })).toEqual({ ok: false, error: "tool slow: timed out after 20 ms" });
    expect(aborted).toBe(true);
  });
});
