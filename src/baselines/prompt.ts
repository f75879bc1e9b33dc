/**
 * The prompt agent (instructions only): the system message describes Search-R1's text protocol and the model writes
 * it directly — `<search> query </search>` to retrieve, `<answer> answer </answer>` to finish. The reply text is the
 * env action as is; each observation (`<information>…</information>`, or the env's corrective text after an
 * invalid turn) goes back verbatim as a user message. Requests stop at `</search>` / `</answer>` with vLLM's
 * `include_stop_str_in_output: true`; a server that cuts the stop string anyway (the OpenAI API) gets the closing
 * tag restored. Source: the Search-R1 prompt template (PeterGriffinJin/Search-R1 `scripts/data_process/nq_search.py`,
 * `make_prefix`), paraphrased.
 */
import type OpenAI from "openai";
import type { StepResult } from "../core/types.ts";
import type { ChatMessage, ChatProtocol, ParsedReply } from "./chat.ts";

/** The prompt agent's system message. */
export const PROMPT_AGENT_INSTRUCTIONS =
  "Answer the given question. You may reason inside <think> and </think> first. If you lack some knowledge, call a " +
  "search engine by writing <search> query </search>; it returns the top searched passages between <information> and " +
  "</information>. You can search as many times as you want, one search per reply. When no further knowledge is " +
  "needed, give the final answer inside <answer> and </answer>, without detailed explanation, for example " +
  "<answer> Beijing </answer>.";

/**
 * Restores a closing tag a server cut as a stop string: when the reply stopped (`finish_reason: "stop"`) after an
 * opening `<search>` or `<answer>` that is never closed, ` </search>` / ` </answer>` is appended.
 */
export function restoreClosingTag(text: string, finishReason: string | null): string {
  if (finishReason !== "stop") return text;
  const open = (["search", "answer"] as const)
    .map((tag) => ({ tag, at: text.lastIndexOf(`<${tag}>`) }))
    .filter((o) => o.at >= 0 && text.indexOf(`</${o.tag}>`, o.at) < 0)
    .sort((a, b) => b.at - a.at)[0];
  return open ? `${text} </${open.tag}>` : text;
}

/** The prompt agent's protocol (see the module doc). */
export class PromptProtocol implements ChatProtocol {
  readonly kind = "prompt" as const;
  readonly instructions = PROMPT_AGENT_INSTRUCTIONS;
  readonly requestFields = { stop: ["</search>", "</answer>"], include_stop_str_in_output: true };

  /** The reply (closing tag restored) is the env action; the env decides whether it is valid. */
  parse(message: OpenAI.Chat.Completions.ChatCompletionMessage, finishReason: string | null): ParsedReply {
    const text = restoreClosingTag(message.content ?? "", finishReason);
    return { envText: text, assistant: { role: "assistant", content: text } };
  }

  /** The env's observation, verbatim, as a user message. */
  feedback(_reply: ParsedReply, result: StepResult): ChatMessage[] {
    return [{ role: "user", content: result.observation }];
  }
}
