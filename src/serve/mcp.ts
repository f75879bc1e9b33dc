/**
 * `arl serve mcp`: an environment's tools as an MCP server over Streamable HTTP (MCP spec 2025-03-26 and later),
 * built with the official TypeScript SDK (`@modelcontextprotocol/sdk`: `McpServer`, `StreamableHTTPServerTransport`)
 * and mounted on the shared fastify app at `POST /mcp`.
 *
 * Stateless mode (the SDK's `sessionIdGenerator: undefined`): every POST gets a fresh server and transport, so any
 * number of clients (veRL's MCP tools, an agent, an inspector) can call concurrently without sessions. `GET` and
 * `DELETE /mcp` answer 405 (no server-initiated stream, no session to end), as the SDK's stateless example does.
 *
 * Tools are `Tool`s of src/env/tool.ts (zod input schema → the MCP `inputSchema` JSON Schema). A tool's value becomes
 * the text content of the result; a failing or timing-out tool, and arguments its schema rejects, become a result
 * with `isError: true` and the reason as text — never a crashed server or a transport error.
 *
 * veRL's MCP tools (v0.5.0 – v0.7.1; removed before v0.8.0 in verl-project/verl commit 4f8f4c01b093) read only the
 * text parts of a result: `MCPBaseTool._parse_tool_result` joins them with a space, so the default `text` format
 * reaches the model verbatim; `MCPSearchTool._parse_tool_result` keeps only what its regex `"results"\s*:\s*(\[.*?\])`
 * (DOTALL, after replacing every `'` by `"`) finds in each part, which is `""` for the `text` format — hence the
 * `json` format (`mcpSearchJson`). Source: verl/tools/mcp_base_tool.py, verl/tools/mcp_search_tool.py at v0.5.0
 * (8fdc4d3f202f41461f4de9f42a637228e342668b), unchanged at v0.7.1 (bec9ef74768dd201881cd4e54cd0385e87caae27).
 */
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import type { FastifyInstance } from "fastify";
import type { Passage } from "../core/types.ts";
import { z } from "zod";
import { formatPassages, informationObservation } from "../protocol/searchR1.ts";
import { callTool, tool, type Tool } from "../env/tool.ts";
import type { Retriever } from "../retrieval/retriever.ts";
import { createApp, type ServeOptions } from "../http/server.ts";
import { SMALL_BODY_LIMIT } from "../http/limits.ts";

/** Most passages one MCP search call may ask for. */
export const MAX_MCP_TOPK = 50;

export { MCP_RESULT_FORMATS, type McpResultFormat } from "./mcpFormats.ts";
import { MCP_RESULT_FORMATS, type McpResultFormat } from "./mcpFormats.ts";

/** A JSON string literal in which `'` and `]` are escaped (`\u0027`, `\u005d`): same value, but safe for MCPSearchTool's regex. */
function guardedJsonString(s: string): string {
  return JSON.stringify(s).replace(/'/g, "\\u0027").replace(/]/g, "\\u005d");
}

/**
 * The `json` result of a search: `{"results": [{"title": …, "text": …[, "source": …]}, …], "query": …}` — valid
 * JSON with `results` first and every `'` and `]` inside strings written as `\u0027` / `\u005d`. That makes
 * veRL's `MCPSearchTool` parser (replace `'` by `"`, then the non-greedy `"results"\s*:\s*(\[.*?\])`) cut out exactly
 * the whole results array — which is again valid JSON, one object per passage, and its `"title":` count (the tool's
 * `total_results` metric) is the number of passages — whatever the passages contain; a raw `]` in a passage would
 * end the array early and a raw `'` would become `"`.
 * @param query the query searched (echoed as `query`, MCPSearchTool's `queries` metric)
 * @param passages the passages found, best first
 */
export function mcpSearchJson(query: string, passages: readonly Passage[]): string {
  const items = passages.map((p) => {
    const fields: [string, string][] = [["title", p.title], ["text", p.text]];
    if (p.source !== undefined) fields.push(["source", p.source]);
    return `{${fields.map(([k, v]) => `"${k}": ${guardedJsonString(v)}`).join(", ")}}`;
  });
  return `{"results": [${items.join(", ")}], "query": ${guardedJsonString(query)}}`;
}

/** Options of `searchEnvTools`. */
export interface SearchEnvToolOptions {
  /** What `search` returns (default `text`, the env's observation). */
  resultFormat?: McpResultFormat;
}

/** Options of `createMcpApp`. */
export interface McpAppOptions extends ServeOptions {
  /** Server name reported in `initialize` (default `agentic-rl`). */
  name?: string;
  /** Server version reported in `initialize` (default `0.1.0`). */
  version?: string;
  /** Limit of one tool call (ms; default 10 000, as `callTool`). */
  toolTimeoutMs?: number;
}

/** The text of a tool's value: a string as it is, anything else as JSON. */
function toText(value: unknown): string {
  return typeof value === "string" ? value : JSON.stringify(value);
}

/**
 * The search environment's tool for MCP: `search({query, topK?})` returns exactly the observation `SearchEnv.step`
 * appends after a search — `\n\n<information>Doc 1(Title: …) …\n</information>\n\n` (Search-R1 `_passages2string`
 * inside the information block; src/protocol/searchR1.ts) — over the same retriever; with `resultFormat: "json"` the
 * same passages as `mcpSearchJson` instead.
 * @param retriever the index the env searches (e.g. a `BM25Index`)
 * @param defaultTopK passages per search when the call gives no `topK` (the env's `topK`, default 3)
 * @throws Error when defaultTopK is not an integer in [1, MAX_MCP_TOPK], or resultFormat is not text / json
 */
export function searchEnvTools(retriever: Retriever, defaultTopK = 3, options: SearchEnvToolOptions = {}): Tool[] {
  if (!Number.isInteger(defaultTopK) || defaultTopK < 1 || defaultTopK > MAX_MCP_TOPK) {
    throw new Error(`searchEnvTools: defaultTopK must be an integer in [1, ${MAX_MCP_TOPK}], got ${defaultTopK}`);
  }
  const format = options.resultFormat ?? "text";
  if (!MCP_RESULT_FORMATS.includes(format)) {
    throw new Error(`searchEnvTools: resultFormat must be one of ${MCP_RESULT_FORMATS.join(", ")}, got ${JSON.stringify(format)}`);
  }
  const shape = format === "json" ? '{"results": [{"title", "text"}, …], "query"} (JSON)' : "<information>Doc 1(Title: …) …</information>";
  const search = tool({
    name: "search",
    description: `Search the knowledge base (BM25) and return the top passages for a query (default ${defaultTopK}) as ${shape}.`,
    inputSchema: z
      .object({
        query: z.string().trim().min(1, "query must be a non-empty string").max(4096).describe("The search query (keywords or a question)."),
        topK: z.number().int().min(1).max(MAX_MCP_TOPK).optional().describe(`Passages to return (1–${MAX_MCP_TOPK}, default ${defaultTopK}).`),
      })
      .strict(),
    execute: async ({ query, topK }) => {
      const k = topK ?? defaultTopK;
      const passages = (await retriever.search(query, k)).slice(0, k);
      return format === "json" ? mcpSearchJson(query, passages) : informationObservation(formatPassages(passages));
    },
  });
  return [search as unknown as Tool];
}

/**
 * An MCP server (the SDK's `McpServer`) exposing `tools`: `tools/list` gives each tool's name, description and JSON
 * Schema; `tools/call` validates the arguments (invalid → `isError` result naming the field), runs the tool under
 * `callTool`'s timeout, and returns its value as one text content item (a failure → `isError` with the reason).
 * @throws Error on duplicate tool names (from the SDK)
 */
export function createMcpServer(tools: readonly Tool[], options: Pick<McpAppOptions, "name" | "version" | "toolTimeoutMs"> = {}): McpServer {
  const server = new McpServer({ name: options.name ?? "agentic-rl", version: options.version ?? "0.1.0" });
  for (const t of tools) {
    server.registerTool(t.name, { description: t.description, inputSchema: t.inputSchema }, async (args: unknown): Promise<CallToolResult> => {
      const r = await callTool(t, args, { timeoutMs: options.toolTimeoutMs });
      return r.ok ? { content: [{ type: "text", text: toText(r.value) }] } : { content: [{ type: "text", text: r.error }], isError: true };
    });
  }
  return server;
}

/**
 * A fastify app serving the tools over MCP Streamable HTTP at `/mcp` (POST: JSON-RPC; GET/DELETE: 405) plus
 * `GET /healthz` (`{status: "ok", tools: [names]}`). Bodies that are not JSON answer 400 `{error}` before MCP sees them;
 * JSON that is not JSON-RPC gets the SDK's JSON-RPC error with a 4xx status.
 * @throws Error when `tools` is empty or has duplicate names
 */
export function createMcpApp(tools: readonly Tool[], options: McpAppOptions = {}): FastifyInstance {
  if (tools.length === 0) throw new Error("mcp: at least one tool is required");
  const names = tools.map((t) => t.name);
  const dup = names.find((n, i) => names.indexOf(n) !== i);
  if (dup !== undefined) throw new Error(`mcp: duplicate tool name "${dup}"`);
  const app = createApp({ ...options, bodyLimit: options.bodyLimit ?? SMALL_BODY_LIMIT });
  app.get("/healthz", async () => ({ status: "ok", tools: names }));
  app.post("/mcp", async (req, reply) => {
    const server = createMcpServer(tools, options);
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    reply.hijack();
    reply.raw.on("close", () => {
      void transport.close();
      void server.close();
    });
    await server.connect(transport);
    await transport.handleRequest(req.raw, reply.raw, req.body);
  });
  const notAllowed = { jsonrpc: "2.0", error: { code: -32000, message: "Method not allowed: this MCP server is stateless (POST /mcp only)" }, id: null };
  app.get("/mcp", async (_req, reply) => reply.code(405).header("allow", "POST").send(notAllowed));
  app.delete("/mcp", async (_req, reply) => reply.code(405).header("allow", "POST").send(notAllowed));
  return app;
}
