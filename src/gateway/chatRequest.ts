/**
 * A validated chat-completions request, read for the renderer: messages (tool-call `arguments` checked for depth
 * before the recursive renderer walks them), tools (names unique) and `tool_choice`.
 */
import { MAX_JSON_DEPTH, pathName, quoteShort, tooDeepPath } from "../http/limits.ts";
import { GatewayError } from "./errors.ts";
import type { ChatCall, ChatMsg, ChatTool } from "./render.ts";
import type { ChatCompletionRequest } from "./schema.ts";

/** Text of a content field (parts joined; null → ''). */
function text(content: string | Array<{ text: string }> | null | undefined): string {
  if (content === null || content === undefined) return "";
  return typeof content === "string" ? content : content.map((p) => p.text).join("");
}

/**
 * @throws GatewayError 400 naming the field when tool-call `arguments` (JSON text) nest deeper than `MAX_JSON_DEPTH`
 *   levels: the renderer prints them with a recursive walk
 */
function checkArgumentsDepth(args: string, field: string): void {
  if (args.length <= MAX_JSON_DEPTH) return; // too short to nest that deep
  let parsed: unknown;
  try {
    parsed = JSON.parse(args);
  } catch {
    return; // not JSON: rendered as a string
  }
  const path = tooDeepPath(parsed, MAX_JSON_DEPTH);
  if (path !== undefined) {
    throw new GatewayError(400, `${field}: JSON nested deeper than ${MAX_JSON_DEPTH} levels of arrays and objects (at ${pathName(path.slice(0, 6)) ?? "the top"}…); flatten it`, field, "invalid_value");
  }
}

/** Validated request messages → the renderer's messages. @throws GatewayError 400 on arguments nested too deep */
export function chatMessages(body: ChatCompletionRequest): ChatMsg[] {
  return body.messages.map((m, i) => {
    const role = m.role === "developer" ? "system" : m.role;
    const toolCalls: ChatCall[] =
      m.role === "assistant"
        ? (m.tool_calls ?? []).map((c, j) => {
            checkArgumentsDepth(c.function.arguments, `messages[${i}].tool_calls[${j}].function.arguments`);
            return { name: c.function.name, arguments: c.function.arguments };
          })
        : [];
    return { role, content: text(m.content), toolCalls };
  });
}

/** Validated tools; @throws GatewayError 400 on a repeated name */
export function chatTools(body: ChatCompletionRequest): ChatTool[] {
  const tools = (body.tools ?? []).map((t) => ({
    name: t.function.name,
    ...(typeof t.function.description === "string" ? { description: t.function.description } : {}),
    ...(t.function.parameters ? { parameters: t.function.parameters } : {}),
  }));
  const seen = new Set<string>();
  tools.forEach((t, i) => {
    if (seen.has(t.name)) throw new GatewayError(400, `tools[${i}].function.name: tool ${JSON.stringify(t.name)} is declared twice`, `tools[${i}].function.name`, "invalid_value");
    seen.add(t.name);
  });
  return tools;
}

/** How a completion is read: not parsed (`none`), parsed (`auto`), must call a tool (`required`), or one named tool. */
export type Choice = { kind: "none" } | { kind: "auto" } | { kind: "required" } | { kind: "named"; name: string };

/** @throws GatewayError 400 for `required` / a named tool without tools, or a name not among them */
export function toolChoice(body: ChatCompletionRequest, tools: readonly ChatTool[]): Choice {
  const c = body.tool_choice;
  if (c === null || c === undefined || c === "auto") return { kind: "auto" };
  if (c === "none") return { kind: "none" };
  if (tools.length === 0) throw new GatewayError(400, `tool_choice: ${JSON.stringify(c)} needs tools; this request declares none`, "tool_choice", "invalid_value");
  if (c === "required") return { kind: "required" };
  const name = c.function.name;
  if (!tools.some((t) => t.name === name)) {
    const names = tools.slice(0, 10).map((t) => t.name).join(", ") + (tools.length > 10 ? ` … and ${tools.length - 10} more` : "");
    throw new GatewayError(400, `tool_choice: unknown tool ${quoteShort(name)}; the request's tools are ${names}`, "tool_choice.function.name", "invalid_value");
  }
  return { kind: "named", name };
}
