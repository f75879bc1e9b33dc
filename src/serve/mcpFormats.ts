/**
 * The MCP server's result formats (`arl serve mcp --result-format`), apart from `mcp.ts` so the CLI can list and check
 * them without loading the MCP SDK.
 */

/**
 * What `search` returns as its text: `text` — the env's observation, verbatim (for veRL's `MCPBaseTool` and any
 * other client); `json` — `mcpSearchJson`, for veRL's `MCPSearchTool`, whose parser keeps only a `"results": [...]`
 * array.
 */
export type McpResultFormat = "text" | "json";

/** The formats, default first. */
export const MCP_RESULT_FORMATS: readonly McpResultFormat[] = ["text", "json"];
