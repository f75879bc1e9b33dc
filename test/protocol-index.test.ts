/** The protocol registry and tool rendering (src/protocol/index.ts). */
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { tool, toolJsonSchema, renderTools } from "../src/env/tool.ts";
import { PROTOCOLS, PROTOCOL_NAMES, getProtocol, hermesProtocol, reactProtocol, searchR1Protocol } from "../src/protocol/index.ts";

describe("protocol registry", () => {
  it("PROTOCOLS holds every name, each protocol under its own name", () => {
    expect(Object.keys(PROTOCOLS).sort()).toEqual([...PROTOCOL_NAMES].sort());
    for (const name of PROTOCOL_NAMES) expect(PROTOCOLS[name].name).toBe(name);
    expect(getProtocol("search-r1")).toBe(searchR1Protocol);
    expect(getProtocol("hermes")).toBe(hermesProtocol);
    expect(getProtocol("react")).toBe(reactProtocol);
  });

  it("getProtocol names the allowed protocols on an unknown name", () => {
    expect(() => getProtocol("x")).toThrow('protocol: unknown protocol "x"; allowed: search-r1, hermes, react');
    expect(() => getProtocol("toString")).toThrow(/unknown protocol "toString"/);
  });

  it("renderTools maps toolJsonSchema over the tools, in order", () => {
    const a = tool({ name: "a", description: "A.", inputSchema: z.object({ q: z.string() }), execute: ({ q }) => q });
    const b = tool({ name: "b", description: "B.", inputSchema: z.object({ n: z.number().int() }), execute: ({ n }) => n });
    expect(renderTools([a, b])).toEqual([toolJsonSchema(a), toolJsonSchema(b)]);
    expect(renderTools([])).toEqual([]);
  });

  it("every protocol's format round-trips an answer and a call of its kind", () => {
    const tools = renderTools([tool({ name: "search", description: "S.", inputSchema: z.object({ query: z.string() }), execute: () => [] })]);
    for (const p of Object.values(PROTOCOLS)) {
      const call = { type: "tool_call" as const, calls: [{ name: "search", arguments: { query: "capital of france" } }] };
      expect(p.parse(p.format(call), { tools }), p.name).toEqual(call);
      expect(p.parse(p.format({ type: "answer", answer: "Paris" }), { tools }), p.name).toEqual({ type: "answer", answer: "Paris" });
    }
  });
});
