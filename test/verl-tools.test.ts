/**
 * What veRL's tools make of our servers' real output.
 *
 * MCP (veRL v0.5.0 – v0.7.1; MCP tools removed before v0.8.0 in verl-project/verl 4f8f4c01b093): the parsing rules of
 * `verl/tools/mcp_base_tool.py` and `verl/tools/mcp_search_tool.py` at v0.5.0 (8fdc4d3f202f41461f4de9f42a637228e342668b;
 * the same at v0.7.1, bec9ef74768dd201881cd4e54cd0385e87caae27), restated here as facts and applied to what
 * `arl serve mcp` returns to a real MCP client:
 * - MCPBaseTool._parse_tool_result: the `text` of the content parts of type "text", joined with one space;
 * - MCPSearchTool._parse_tool_result: for each text part, every `'` is replaced by `"`; the query is group 1 of the
 *   first match of `query"\s*:\s*"([^"]+)"` (else ""), `total_results` adds the number of matches of `"title"\s*:`,
 *   and the model sees group 1 of the first match of `"results"\s*:\s*(\[.*?\])` (DOTALL; else ""), concatenated
 *   over the parts.
 *
 * Function tool (current veRL, v0.8.0+): `search_tool.py` loaded as veRL's `load_function_tools_from_path` does
 * (`verl/tools/function_tool.py` at v0.9.0 483b8a009ba3a97563edee3a19887e4862b8094a: exec the file, the
 * `@function_tool(name, schema=…)` decorator registers the function under `name` and returns it; veRL calls
 * `fn(**arguments)` and uses a returned `str` as the tool response text), with a stand-in `verl.tools.function_tool`
 * module, against a live `arl serve retrieval`; its answer is compared with veRL's former SearchTool format
 * (v0.5.0 `verl/tools/utils/search_r1_like_utils.py`: `_passages2string` and `perform_single_search_batch`).
 */
import { execFile, spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Passage } from "../src/core/types.ts";
import { SEARCH_TOOL_SCHEMA, searchToolPy } from "../src/export/verlSearchTool.ts";
import { presetWeights } from "../src/reward/presets.ts";
import { listen, type RunningServer } from "../src/http/server.ts";
import { createMcpApp, mcpSearchJson, searchEnvTools } from "../src/serve/mcp.ts";
import { createRetrievalApp } from "../src/serve/retrieval.ts";
import { createRewardApp } from "../src/serve/reward.ts";
import { connectMcp, country, index, searchEnvObservation, task, world, type McpConnection } from "./mcp-helpers.ts";

/** A content part of an MCP tool result, as the SDK client returns it. */
interface Part {
  type: string;
  text?: string;
}

/** veRL MCPBaseTool._parse_tool_result (see the file comment). */
function mcpBaseToolView(content: readonly Part[]): string {
  return content.filter((p) => p.type === "text").map((p) => p.text ?? "").join(" ");
}

/** veRL MCPSearchTool._parse_tool_result (see the file comment): what the model sees, and the metadata. */
function mcpSearchToolView(content: readonly Part[]): { text: string; queries: string[]; totalResults: number } {
  let text = "";
  let totalResults = 0;
  const queries: string[] = [];
  for (const part of content) {
    if (part.type !== "text") continue;
    const t = (part.text ?? "").replace(/'/g, '"');
    queries.push(/query"\s*:\s*"([^"]+)"/.exec(t)?.[1] ?? "");
    totalResults += (t.match(/"title"\s*:/g) ?? []).length;
    text += /"results"\s*:\s*(\[.*?\])/s.exec(t)?.[1] ?? "";
  }
  return { text, queries, totalResults };
}

/** Passages with the characters that break MCPSearchTool's regex: `'` (rewritten to `"`) and `]` (ends the match). */
const tricky: Passage[] = [
  { id: "t1", title: "Côte d'Ivoire", text: "the capital [de jure] is yamoussoukro ; abidjan's port is \"big\" ]]" },
  { id: "t2", title: "a]b", text: "\"results\": [fake] 'title': x \\ back\\slash\nnew line", source: "forum" },
];
const trickyRetriever = { search: (_q: string, k: number) => tricky.slice(0, k) };

const hasPython = spawnSync("python3", ["--version"]).status === 0;
const connections: McpConnection[] = [];

/** An MCP client connected to a fresh `arl serve mcp` app over the given tools (closed after all tests). */
async function mcpClient(tools: Parameters<typeof createMcpApp>[0]): Promise<Client> {
  const c = await connectMcp(tools);
  connections.push(c);
  return c.client;
}

let textClient: Client;
let jsonClient: Client;
let trickyClient: Client;

beforeAll(async () => {
  textClient = await mcpClient(searchEnvTools(index, 3));
  jsonClient = await mcpClient(searchEnvTools(index, 3, { resultFormat: "json" }));
  trickyClient = await mcpClient(searchEnvTools(trickyRetriever, 2, { resultFormat: "json" }));
});

afterAll(async () => {
  for (const c of connections) await c.close();
});

describe("arl serve mcp through veRL's MCP tool parsers (v0.5.0 – v0.7.1)", () => {
  it("text (default): MCPBaseTool passes the env's observation through verbatim; MCPSearchTool would show the model nothing", async () => {
    const query = `capital of ${country.name}`;
    const observation = await searchEnvObservation(query);
    const r = await textClient.callTool({ name: "search", arguments: { query } });
    const content = r.content as Part[];
    expect(mcpBaseToolView(content)).toBe(observation);
    expect(observation).toContain(`Doc 1(Title: ${country.name}) the capital of ${country.name} is ${country.capital} .`);
    // The finding: no "results": [...] in the text → an empty string for the model.
    expect(mcpSearchToolView(content)).toEqual({ text: "", queries: [""], totalResults: 0 });
  });

  it("json: MCPSearchTool cuts out exactly the results array — valid JSON, one object per passage, titles counted", async () => {
    const query = `capital of ${country.name}`;
    const r = await jsonClient.callTool({ name: "search", arguments: { query } });
    const content = r.content as Part[];
    expect(r.isError).toBeFalsy();
    const passages = index.search(query, 3);
    expect(passages).toHaveLength(3);
    const view = mcpSearchToolView(content);
    expect(JSON.parse(view.text)).toEqual(passages.map((p) => ({ title: p.title, text: p.text })));
    expect(view.text).toContain(`"text": "the capital of ${country.name} is ${country.capital} ."`);
    expect(view).toMatchObject({ queries: [query], totalResults: 3 });
    // MCPBaseTool shows the whole JSON object: results and the query.
    expect(JSON.parse(mcpBaseToolView(content))).toEqual({ results: passages.map((p) => ({ title: p.title, text: p.text })), query });
    expect(mcpBaseToolView(content)).toBe(mcpSearchJson(query, passages));
    // topK is honoured.
    const one = await jsonClient.callTool({ name: "search", arguments: { query, topK: 1 } });
    expect(JSON.parse(mcpSearchToolView(one.content as Part[]).text)).toHaveLength(1);
  });

  it("json: passages with ' and ] (and a fake \"results\": [ in the text) still parse whole, with their exact text", async () => {
    const query = "what's [x] 'title': y";
    const r = await trickyClient.callTool({ name: "search", arguments: { query } });
    const content = r.content as Part[];
    const view = mcpSearchToolView(content);
    expect(JSON.parse(view.text)).toEqual([
      { title: tricky[0].title, text: tricky[0].text },
      { title: tricky[1].title, text: tricky[1].text, source: "forum" },
    ]);
    expect(view.totalResults).toBe(2);
    expect(view.queries).toEqual(["what\\u0027s [x\\u005d \\u0027title\\u0027: y"]); // metadata only; the value is escaped
    expect(JSON.parse(mcpBaseToolView(content)).query).toBe(query);
    // Without the escapes the same regex would stop at the first ] inside a passage.
    const naive = JSON.stringify({ results: tricky.map((p) => ({ title: p.title, text: p.text })), query });
    expect(() => JSON.parse(mcpSearchToolView([{ type: "text", text: naive }]).text)).toThrow();
  });

  it("a bad resultFormat is refused (API and `arl serve mcp --result-format`)", () => {
    expect(() => searchEnvTools(index, 3, { resultFormat: "xml" as never })).toThrow(/resultFormat must be one of text, json, got "xml"/);
    const r = spawnSync(process.execPath, ["bin/arl.mjs", "serve", "mcp", "--port", "0", "--result-format", "xml"], { encoding: "utf8", timeout: 20_000 });
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/--result-format: expected one of "text", "json", got "xml"/);
  }, 30_000);
});

describe.skipIf(!hasPython)("search_tool.py (veRL ≥ 0.8 @function_tool) against a live arl serve retrieval", () => {
  let retrieval: RunningServer;
  let reward: RunningServer;
  let dir: string;
  let stubPath: string;

  beforeAll(async () => {
    retrieval = await listen(createRetrievalApp(index, { defaultTopk: 3 }), { host: "127.0.0.1", port: 0 });
    reward = await listen(createRewardApp({ reward: { weights: presetWeights("default") }, passages: world.passages }), { host: "127.0.0.1", port: 0 });
    dir = mkdtempSync(join(tmpdir(), "arl-verl-tool-"));
    writeFileSync(join(dir, "search_tool.py"), searchToolPy(`${retrieval.url}/retrieve`, 2));
    // Stand-in for verl.tools.function_tool (the facts the file relies on: name positional, schema keyword, the
    // decorator returns the function and registers it under the name).
    stubPath = join(dir, "stub");
    mkdirSync(join(stubPath, "verl", "tools"), { recursive: true });
    writeFileSync(join(stubPath, "verl", "__init__.py"), "");
    writeFileSync(join(stubPath, "verl", "tools", "__init__.py"), "");
    writeFileSync(
      join(stubPath, "verl", "tools", "function_tool.py"),
      "REGISTRY = {}\n\ndef function_tool(name=None, *, schema=None):\n    def decorator(fn):\n        REGISTRY[name or fn.__name__] = (fn, schema)\n        return fn\n    return decorator\n",
    );
  });
  afterAll(async () => {
    await retrieval?.close();
    await reward?.close();
  });

  /** Loads search_tool.py like veRL (exec of the file) and calls the registered tool with each argument set. */
  function callTool(calls: unknown[], env: Record<string, string> = {}, withVerl = true): Promise<{ registered: string[]; schema: unknown; results: string[] }> {
    const script = `
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("_verl_function_tools_test", sys.argv[1])
m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
try:
    from verl.tools.function_tool import REGISTRY
except ImportError:
    REGISTRY = {"search": (m.search, None)}
fn, schema = REGISTRY["search"]
print(json.dumps({"registered": sorted(REGISTRY), "schema": schema, "results": [fn(**kw) for kw in json.loads(sys.argv[2])]}))
`;
    const pyEnv = { ...process.env, ...env, PYTHONPATH: withVerl ? stubPath : "" };
    return new Promise((resolve, reject) =>
      execFile("python3", ["-c", script, join(dir, "search_tool.py"), JSON.stringify(calls)], { env: pyEnv, timeout: 30_000 }, (err, so, se) =>
        err ? reject(new Error(`${err.message}\n${se}`)) : resolve(JSON.parse(so)),
      ),
    );
  }

  /** veRL v0.5.0 SearchTool's result text for queries (`_passages2string` per query, `\n---\n` between). */
  async function searchToolText(queries: string[], topk: number): Promise<string> {
    const res = await fetch(`${retrieval.url}/retrieve`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ queries, topk, return_scores: true }) });
    const { result } = (await res.json()) as { result: { document: { contents: string } }[][] };
    return result
      .map((hits) => {
        let s = "";
        hits.forEach((h, i) => {
          const [title, ...rest] = h.document.contents.split("\n");
          s += `Doc ${i + 1} (Title: ${title})\n${rest.join("\n")}\n\n`;
        });
        return s.trim();
      })
      .join("\n---\n");
  }

  it("registers `search` with the exported schema and answers in veRL's SearchTool format", async () => {
    const q1 = `capital of ${country.name}`;
    const q2 = `region of ${country.name}`;
    const out = await callTool([{ query_list: [q1] }, { query_list: [q1, q2] }, { query_list: q1 }]);
    expect(out.registered).toEqual(["search"]);
    expect(out.schema).toEqual(SEARCH_TOOL_SCHEMA);
    const [one, two, str] = out.results.map((r) => JSON.parse(r) as { result: string });
    expect(one.result).toBe(await searchToolText([q1], 2));
    expect(one.result.startsWith(`Doc 1 (Title: "${country.name}")\nthe capital of ${country.name} is ${country.capital} .\n\nDoc 2 (Title: `)).toBe(true);
    expect(two.result).toBe(await searchToolText([q1, q2], 2));
    expect(two.result.split("\n---\n")).toHaveLength(2);
    expect(str.result).toBe(one.result); // a bare string is one query
    // ARL_RETRIEVAL_TOPK overrides the exported topk.
    const three = await callTool([{ query_list: [q1] }], { ARL_RETRIEVAL_TOPK: "3" });
    expect((JSON.parse(three.results[0]) as { result: string }).result).toBe(await searchToolText([q1], 3));
  }, 30_000);

  it("without veRL installed the file still imports and `search` is a plain function", async () => {
    const out = await callTool([{ query_list: ["capital"] }], {}, false);
    expect(out.schema).toBeNull();
    expect((JSON.parse(out.results[0]) as { result: string }).result).toMatch(/^Doc 1 \(Title: /);
  }, 30_000);

  it("errors come back as tool text: bad arguments, a 4xx from the server, an unreachable server", async () => {
    const out = await callTool([{ query_list: [] }, { query_list: [""] }, { query_list: ["x".repeat(5000)] }]);
    const texts = out.results.map((r) => (JSON.parse(r) as { result: string }).result);
    expect(texts[0]).toBe("Search error: query_list must be a non-empty list of non-empty strings.");
    expect(texts[1]).toBe(texts[0]);
    expect(texts[2]).toMatch(/^Search error: retrieval server rejected the request \(400\): /);
    const down = await callTool([{ query_list: ["capital"] }], { ARL_RETRIEVAL_URL: "http://127.0.0.1:9/retrieve", ARL_RETRIEVAL_TIMEOUT: "2" });
    expect((JSON.parse(down.results[0]) as { result: string }).result).toMatch(/^Search error: retrieval server http:\/\/127\.0\.0\.1:9\/retrieve failed after 3 tries: /);
  }, 30_000);

  it("our reward server reads a veRL transcript carrying the tool's answer (one search, the answer right)", async () => {
    const q = `capital of ${country.name}`;
    const out = await callTool([{ query_list: [q] }]);
    // veRL decodes the response with skip_special_tokens=True: the role markers remain as words.
    const solution =
      `<think>look it up</think>\n<tool_call>\n{"name": "search", "arguments": {"query_list": [${JSON.stringify(q)}]}}\n</tool_call>user\n` +
      `<tool_response>\n${out.results[0]}\n</tool_response>\nassistant\n<think>found</think>\n<answer> ${country.capital} </answer>`;
    const res = await fetch(`${reward.url}/reward`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      // veRL ≥ 0.8's naive reward manager adds num_turns and rollout_reward_scores to extra_info.
      body: JSON.stringify({ data_source: "arl_world", solution_str: solution, ground_truth: { target: task.answers }, extra_info: { index: 0, split: "train", num_turns: 3, rollout_reward_scores: {} } }),
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ answer: country.capital, searches: 1, terms: { em: 1, format: 1, invalid: 0 } });
  }, 30_000);
});
