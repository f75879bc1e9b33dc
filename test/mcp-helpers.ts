/**
 * Shared fixtures of the `arl serve mcp` tests (test/serve-mcp.test.ts, test/verl-tools.test.ts): the search world
 * with its BM25 index, a capital task and its country, the observation the search env appends for a query (what the
 * MCP `search` tool must return), and MCP clients connected to fresh servers.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { Task } from "../src/core/types.ts";
import { SearchEnv } from "../src/envs/search/env.ts";
import { buildWorld } from "../src/envs/search/world.ts";
import { listen, type RunningServer } from "../src/http/server.ts";
import { BM25Index } from "../src/retrieval/bm25.ts";
import { createMcpApp } from "../src/serve/mcp.ts";

/** The default search world. */
export const world = buildWorld();
/** BM25 over the world's passages. */
export const index = new BM25Index(world.passages);
/** The world's first training task about a capital. */
export const task = world.train.find((t) => t.id.startsWith("capital:")) as Task;
/** The country `task` asks about. */
export const country = world.countries.find((c) => `capital:${c.cca3}` === task.id)!;

/** The observation `SearchEnv` (top-`topK` passages of `index`) appends after `<search> {query} </search>` on `task`. */
export async function searchEnvObservation(query: string, topK = 3): Promise<string> {
  const env = new SearchEnv({ retriever: index, topK });
  await env.reset(task);
  return (await env.step(`<search> ${query} </search>`)).observation;
}

/** An MCP client and the `arl serve mcp` server it is connected to. */
export interface McpConnection {
  client: Client;
  server: RunningServer;
  /** Closes the client, then the server. */
  close(): Promise<void>;
}

/** Starts a fresh `arl serve mcp` app over `tools` on a free port and connects a real MCP client (Streamable HTTP). */
export async function connectMcp(tools: Parameters<typeof createMcpApp>[0]): Promise<McpConnection> {
  const server = await listen(createMcpApp(tools), { host: "127.0.0.1", port: 0 });
  const client = new Client({ name: "arl-test", version: "0.0.1" });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`)));
  return {
    client,
    server,
    close: async () => {
      await client.close();
      await server.close();
    },
  };
}
