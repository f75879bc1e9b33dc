/**
 * The ReAct agent (Yao et al. 2023, "ReAct: Synergizing Reasoning and Acting in Language Models", ICLR; the
 * HotpotQA action space without `lookup`): the model writes `Thought: …` then `Action: search[query]` or
 * `Action: finish[answer]`; the agent parses the first `Action` line (numbered `Action 1:` as in the paper also
 * accepted; the verb is case-insensitive), runs it in the env, and replies `Observation: …` as a user message.
 * Requests stop at `Observation:` so the model does not invent observations; text after an `Observation:` the server
 * did not cut is ignored. A reply without a parseable action, with an unknown verb (e.g. `lookup`) or with an empty
 * argument is an invalid action (penalised by the env, explained in the observation), never a crash.
 */
import type OpenAI from "openai";
import type { StepResult } from "../core/types.ts";
import { answerAction, searchAction, stripInformation, stripProtocolTags, type ChatMessage, type ChatProtocol, type ParsedReply } from "./chat.ts";

/** The ReAct agent's system message (instructions and one worked example). */
export const REACT_INSTRUCTIONS = [
  "Solve a question answering task with interleaving Thought, Action, Observation steps. Thought can reason about the",
  "current situation, and Action can be two types:",
  "(1) search[query], which searches a passage index and returns the top passages for the query.",
  "(2) finish[answer], which returns the answer (a few words) and finishes the task.",
  "Write one Thought and one Action per reply, then wait for the Observation. Here is an example.",
  "Question: what is the capital of the country whose currency is the kyat ?",
  "Thought: I need to find the country whose currency is the kyat, then its capital.",
  "Action: search[currency kyat]",
  "Observation: Doc 1(Title: myanmar) the currency of myanmar is the kyat .",
  "Thought: The country is myanmar. Now I need its capital.",
  "Action: search[capital of myanmar]",
  "Observation: Doc 1(Title: myanmar) the capital of myanmar is naypyidaw .",
  "Thought: The capital of myanmar is naypyidaw.",
  "Action: finish[naypyidaw]",
].join("\n");

/** A parsed ReAct action. */
export type ReactAction = { verb: "search" | "finish"; arg: string } | { invalid: string };

// `\s*(?:\d+\s*)?` rather than `\s*\d*\s*`: the same language, but the latter splits a run of whitespace between its
// two `\s*` in every way before failing (quadratic: 0.3 s for "Action" + 20 000 spaces, ~7 s for 100 000).
const ACTION_HEAD_RE = /Action\s*(?:\d+\s*)?:\s*([A-Za-z_]+)\s*\[/gi;
const OBSERVATION_RE = /Observation\s*(?:\d+\s*)?:/i;
const LINE_END_RE = /[\n\r\u2028\u2029]/g;

/**
 * The first `Action: verb[argument]` of `text`: what `/Action\s*\d*\s*:\s*([A-Za-z_]+)\s*\[(.*)\]/i` matches (the
 * argument runs to the last `]` on the line of its `[`), found in linear time. The regex, tried from every `Action`,
 * rescanned the rest of the line each time (quadratic: 2 s for 200 KB of `Action: a[`); here each line's last `]`
 * is found once.
 */
function firstAction(text: string): { verb: string; arg: string } | null {
  let lineEnd = -1;
  let lastBracket = -1; // the last `]` in [first head end on the line, lineEnd), or -1
  for (const m of text.matchAll(ACTION_HEAD_RE)) {
    const argStart = (m.index ?? 0) + m[0].length;
    if (argStart > lineEnd) {
      LINE_END_RE.lastIndex = argStart;
      lineEnd = LINE_END_RE.exec(text)?.index ?? text.length;
      const close = text.slice(argStart, lineEnd).lastIndexOf("]");
      lastBracket = close < 0 ? -1 : argStart + close;
    }
    if (lastBracket >= argStart) return { verb: m[1], arg: text.slice(argStart, lastBracket) };
  }
  return null;
}

/**
 * Parses the first `Action: verb[argument]` of a reply (text after the first `Observation:` ignored). Never throws.
 * Linear time in the reply's length.
 * @returns the verb and its trimmed argument, or `{invalid: reason}`
 */
export function parseReactAction(text: string): ReactAction {
  const own = text.split(OBSERVATION_RE)[0];
  const m = firstAction(own);
  if (!m) return { invalid: "react: no action line of the form Action: search[query] or Action: finish[answer]" };
  const verb = m.verb.toLowerCase();
  const arg = stripProtocolTags(m.arg).replace(/\s+/g, " ").trim();
  if (verb !== "search" && verb !== "finish") {
    return { invalid: `react: unknown action ${JSON.stringify(m.verb.length > 80 ? `${m.verb.slice(0, 80)}…` : m.verb)} (allowed: search, finish)` };
  }
  if (arg === "") return { invalid: `react: empty argument in ${verb}[]` };
  return { verb, arg };
}

/** The ReAct agent's protocol (see the module doc). */
export class ReactProtocol implements ChatProtocol {
  readonly kind = "react" as const;
  readonly instructions = REACT_INSTRUCTIONS;
  readonly requestFields = { stop: ["Observation:"] };

  parse(message: OpenAI.Chat.Completions.ChatCompletionMessage, _finishReason: string | null): ParsedReply {
    const text = message.content ?? "";
    const assistant: ChatMessage = { role: "assistant", content: text.split(OBSERVATION_RE)[0] };
    const a = parseReactAction(text);
    if ("invalid" in a) return { envText: stripProtocolTags(text), invalidReason: a.invalid, assistant };
    return { envText: a.verb === "search" ? searchAction(a.arg) : answerAction(a.arg), assistant };
  }

  /** `Observation: <passages>` (or the reason an action was invalid) as a user message. */
  feedback(reply: ParsedReply, result: StepResult): ChatMessage[] {
    const obs =
      reply.invalidReason !== undefined
        ? `Invalid action (${reply.invalidReason}). Reply with Thought: … then Action: search[query] or Action: finish[answer].`
        : stripInformation(result.observation);
    return [{ role: "user", content: `Observation: ${obs}` }];
  }
}
