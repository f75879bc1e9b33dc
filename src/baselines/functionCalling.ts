/**
 * The function-calling agent: the model gets a `search` tool (OpenAI `tools`, JSON Schema parameters derived from a
 * zod schema with `toolJsonSchema`) and answers in plain text. A `search` tool call becomes `<search> query </search>`
 * for the env and its passages come back as a `role: "tool"` message with the call's `tool_call_id`; a text reply is
 * the final answer (`<answer> text </answer>`; an `<answer>` block inside it is unwrapped). Malformed calls — invalid
 * JSON arguments, a missing or empty `query`, an unknown tool — and empty replies are invalid actions (penalised by
 * the env, explained to the model in the tool message), never crashes. One search per reply: further calls in the
 * same reply get a tool message saying they were not run. Source: OpenAI API reference, Chat Completions `tools` /
 * function calling.
 */
import type OpenAI from "openai";
import { z } from "zod";
import type { StepResult } from "../core/types.ts";
import { tool, toolJsonSchema } from "../env/tool.ts";
import { answerAction, searchAction, stripInformation, stripProtocolTags, type ChatMessage, type ChatProtocol, type ParsedReply } from "./chat.ts";

/** The arguments of the `search` tool as the model sees them. */
export const SEARCH_TOOL_INPUT = z.object({
  query: z.string().min(1).describe("What to search for: a few keywords, e.g. capital of ireland"),
});

/** The `search` tool (its `execute` is never called here: the env runs the search). */
export const SEARCH_TOOL = tool({
  name: "search",
  description: "Search a passage index (BM25) and return the top passages for the query.",
  inputSchema: SEARCH_TOOL_INPUT,
  execute: () => {
    throw new Error("the search tool runs in the env, not in the agent");
  },
});

/** The `tools` entry sent with every request: `{type: "function", function: {name, description, parameters}}`. */
export function searchToolDefinition(): OpenAI.Chat.Completions.ChatCompletionFunctionTool {
  const { name, description, parameters } = toolJsonSchema(SEARCH_TOOL);
  const { $schema: _drop, ...rest } = parameters; // draft marker: not part of OpenAI's function parameters
  return { type: "function", function: { name, description, parameters: rest } };
}

/** The function-calling agent's system message. */
export const FUNCTION_CALLING_INSTRUCTIONS =
  "Answer the given question. When you lack some knowledge, call the search tool (one call per reply) and read the " +
  "passages it returns. When you know the answer, reply with the final answer only: a few words, no explanation.";

/** Per-reply parse state kept for `feedback`. */
interface FcReply extends ParsedReply {
  /** Ids of the reply's tool calls, in order. */
  callIds: string[];
}

/** The function-calling agent's protocol (see the module doc). */
export class FunctionCallingProtocol implements ChatProtocol {
  readonly kind = "function-calling" as const;
  readonly instructions = FUNCTION_CALLING_INSTRUCTIONS;
  readonly requestFields = { tools: [searchToolDefinition()], tool_choice: "auto" };

  parse(message: OpenAI.Chat.Completions.ChatCompletionMessage, _finishReason: string | null): FcReply {
    const calls = message.tool_calls ?? [];
    const assistant: ChatMessage = {
      role: "assistant",
      content: message.content ?? null,
      ...(calls.length > 0 ? { tool_calls: calls } : {}),
    };
    const callIds = calls.map((c) => c.id);
    const invalid = (reason: string, text: string): FcReply => ({ envText: stripProtocolTags(text), invalidReason: reason, assistant, callIds });
    if (calls.length > 0) {
      const call = calls[0];
      if (call.type !== "function") return invalid(`function-calling: unsupported tool call type "${call.type}" (allowed: function)`, "");
      const { name, arguments: args } = call.function;
      const raw = `${name}(${args})`;
      const shownName = JSON.stringify(name.length > 80 ? `${name.slice(0, 80)}…` : name); // the model's text, cut
      if (name !== "search") return invalid(`function-calling: unknown tool ${shownName} (allowed: search)`, raw);
      let parsed: unknown;
      try {
        parsed = JSON.parse(args);
      } catch (e) {
        return invalid(`function-calling: arguments of search are not valid JSON (${(e as Error).message})`, raw);
      }
      const r = SEARCH_TOOL_INPUT.safeParse(parsed);
      if (!r.success) {
        const why = r.error.issues.map((i) => `${i.path.length > 0 ? i.path.join(".") : "(arguments)"}: ${i.message}`).join("; ");
        return invalid(`function-calling: invalid arguments of search: ${why}`, raw);
      }
      if (stripProtocolTags(r.data.query).trim() === "") return invalid("function-calling: empty query", raw);
      return { envText: searchAction(r.data.query), assistant, callIds };
    }
    const content = (message.content ?? "").trim();
    // The first <answer> and the first </answer> after it — what /<answer>([\s\S]*?)<\/answer>/ matches, found with
    // indexOf: the lazy regex rescans to the end from every <answer> when none closes (quadratic: 53 s on 1 MB).
    const open = content.indexOf("<answer>");
    const close = open < 0 ? -1 : content.indexOf("</answer>", open + "<answer>".length);
    const answer = (close < 0 ? content : content.slice(open + "<answer>".length, close)).trim();
    if (stripProtocolTags(answer).trim() === "") return invalid("function-calling: empty reply (no tool call and no answer)", content);
    return { envText: answerAction(answer), assistant, callIds };
  }

  /** One tool message per tool call (the first gets the passages or the error), or a nudge after an empty reply. */
  feedback(reply: ParsedReply, result: StepResult): ChatMessage[] {
    const { callIds, invalidReason } = reply as FcReply;
    if (callIds.length === 0) {
      return [{ role: "user", content: `${invalidReason ?? "invalid reply"}. Call the search tool, or reply with the final answer.` }];
    }
    return callIds.map((id, i) => ({
      role: "tool" as const,
      tool_call_id: id,
      content:
        i > 0
          ? "error: one search per reply; this call was not run."
          : invalidReason !== undefined
            ? `error: ${invalidReason}. Call search with arguments {"query": "<a few keywords>"}.`
            : stripInformation(result.observation),
    }));
  }
}
