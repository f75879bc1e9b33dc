import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { tool, type Tool } from "../src/env/tool.ts";
import type { RunningServer } from "../src/http/server.ts";
import { createMcpApp, searchEnvTools } from "../src/serve/mcp.ts";
import { connectMcp, country, index, searchEnvObservation, type McpConnection } from "./mcp-helpers.ts";

/** A tool that always throws, to check that failures become isError results. */
const broken = tool({
  name: "broken",
  description: "Always fails.",
  inputSchema: z.object({}),
  execute: () => {
    throw new Error("backend offline");
  },
}) as unknown as Tool;

let mcp: McpConnection;
let server: RunningServer;
let client: Client;

beforeAll(async () => {
  mcp = await connectMcp([...searchEnvTools(index, 3), broken]);
  ({ server, client } = mcp);
});

afterAll(async () => {
  await mcp?.close();
});

describe("arl serve mcp (real MCP client over Streamable HTTP)", () => {
  it("lists the env's tools with name, description and JSON Schema", async () => {
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name)).toEqual(["search", "broken"]);
    const search = tools[0];
    expect(search.description).toMatch(/^Search the knowledge base \(BM25\)/);
    expect(search.inputSchema.type).toBe("object");
    expect(search.inputSchema.required).toEqual(["query"]);
    const props = search.inputSchema.properties as Record<string, Record<string, unknown>>;
    expect(Object.keys(props)).toEqual(["query", "topK"]);
    expect(props.query.type).toBe("string");
    expect(props.topK).toMatchObject({ type: "integer", minimum: 1, maximum: 50 });
  });

  it("search returns exactly the observation SearchEnv appends", async () => {
    const query = `capital of ${country.name}`;
    const observation = await searchEnvObservation(query);
    const r = await client.callTool({ name: "search", arguments: { query } });
    expect(r.isError).toBeFalsy();
    expect(r.content).toEqual([{ type: "text", text: observation }]);
    expect(observation.startsWith(`\n\n<information>Doc 1(Title: ${country.name}) the capital of ${country.name} is ${country.capital} .`)).toBe(true);
    // topK is honoured: one passage, one Doc line.
    const one = await client.callTool({ name: "search", arguments: { query, topK: 1 } });
    const text = (one.content as { text: string }[])[0].text;
    expect(text.match(/Doc \d+\(/g)).toEqual(["Doc 1("]);
  });

  it("bad arguments, unknown tools and failing tools are isError results, not crashes", async () => {
    const wrongType = await client.callTool({ name: "search", arguments: { query: 5 } });
    expect(wrongType.isError).toBe(true);
    expect((wrongType.content as { text: string }[])[0].text).toMatch(/Invalid arguments for tool search.*query/s);
    const missing = await client.callTool({ name: "search", arguments: {} });
    expect(missing.isError).toBe(true);
    expect((missing.content as { text: string }[])[0].text).toMatch(/query/);
    const badTopK = await client.callTool({ name: "search", arguments: { query: "x", topK: 0 } });
    expect(badTopK.isError).toBe(true);
    expect((badTopK.content as { text: string }[])[0].text).toMatch(/topK/);
    const unknown = await client.callTool({ name: "nope", arguments: {} });
    expect(unknown.isError).toBe(true);
    expect((unknown.content as { text: string }[])[0].text).toMatch(/nope/);
    const failing = await client.callTool({ name: "broken", arguments: {} });
    expect(failing).toMatchObject({ isError: true, content: [{ type: "text", text: "tool broken: backend offline" }] });
    // The server is still healthy after all of that.
    const ok = await client.callTool({ name: "search", arguments: { query: "currency" } });
    expect(ok.isError).toBeFalsy();
  });

  it("malformed HTTP requests get 4xx with a reason", async () => {
    const bad = await fetch(`${server.url}/mcp`, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
      body: "{not json",
    });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: string }).error).toMatch(/JSON/);
    const notRpc = await fetch(`${server.url}/mcp`, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
      body: JSON.stringify({ hello: "world" }),
    });
    expect(notRpc.status).toBeGreaterThanOrEqual(400);
    expect(notRpc.status).toBeLessThan(500);
    const get = await fetch(`${server.url}/mcp`);
    expect(get.status).toBe(405);
    expect(((await get.json()) as { error: { message: string } }).error.message).toMatch(/stateless/);
    const health = await fetch(`${server.url}/healthz`);
    expect(await health.json()).toEqual({ status: "ok", tools: ["search", "broken"] });
  });

  it("rejects an empty or duplicate tool list", () => {
    expect(() => createMcpApp([])).toThrow(/at least one tool/);
    expect(() => createMcpApp([broken, broken])).toThrow(/duplicate tool name "broken"/);
  });
});
