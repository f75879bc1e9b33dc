/**
 * The ReAct protocol: the policy interleaves `Thought:` reasoning with one `Action:` + `Action Input:` per turn and
 * reads an `Observation:`, until it writes `Final Answer:`. Framed in ChatML like `hermes` (each observation is a user
 * message), so it runs on the same chat models.
 *
 * Sources (read for this file):
 * - Yao et al. 2023, "ReAct: Synergizing Reasoning and Acting in Language Models" (ICLR), §3: thought / action /
 *   observation steps, one action per step;
 * - langchain-ai/langchain `libs/langchain/langchain/agents/output_parsers/react_single_input.py`
 *   (`ReActSingleInputOutputParser`, commit c787bee0f215a11d9937d43406aac3089af1fd95): the regex
 *   `Action\s*\d*\s*:[\s]*(.*?)[\s]*Action\s*\d*\s*Input\s*\d*\s*:[\s]*(.*)`, `Final Answer:` (the text after the last
 *   one), and "both a final answer and a parse-able action" is an error;
 * - langchain-ai/langchain `libs/langchain/langchain/agents/mrkl/prompt.py` (commit
 *   dba8443e4b97e6d9aa70c168d5725599a45bc149): `PREFIX` and `FORMAT_INSTRUCTIONS`, which `system` adapts (JSON
 *   arguments instead of a single string input).
 * Differences from LangChain: markers are case-insensitive and whitespace-tolerant (the embedded word tokenizer decodes
 * `Action Input:` as `action input :`); the Action Input must be a JSON object (keys trimmed as in `hermes`); a second
 * `Action:` in one turn is invalid rather than ignored.
 */
import type { Action, ToolCall, ToolCallResult } from "../core/types.ts";
import { jsonTextDeeperThan } from "../core/values.ts";
import { stripThink } from "./think.ts";
import type { ToolJsonSchema, ParseOptions, Protocol } from "./types.ts";
import {
  IM_END,
  IM_START,
  MAX_ARGUMENT_DEPTH,
  chatPrompt,
  chatUserTurn,
  preview,
  promptParameters,
  readCall,
  toJsonLikeTemplate,
  tooDeepReason,
  tooManyCallsReason,
  unknownToolReason,
} from "./hermes.ts";

// Markers: case-insensitive, any whitespace inside and before the colon; `\b` so `transaction:` is no `Action:`.
const ACTION_RE = /\baction\s*:/gi;
const INPUT_RE = /\baction\s*input\s*:/gi;
const FINAL_RE = /\bfinal\s*answer\s*:/gi;

/** Start and end of every match of a global regex in `text`. */
function hits(re: RegExp, text: string): Array<{ start: number; end: number }> {
  return [...text.matchAll(re)].map((m) => ({ start: m.index ?? 0, end: (m.index ?? 0) + m[0].length }));
}

/**
 * The end index (exclusive) of the JSON object starting at `text[start] === "{"`, by brace matching outside strings,
 * or -1 when it never closes.
 */
function objectEnd(text: string, start: number): number {
  let depth = 0;
  let inString = false;
  for (let i = start; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === "\\") i++;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === "{" || c === "[") depth++;
    else if (c === "}" || c === "]") {
      depth--;
      if (depth === 0) return i + 1;
    }
  }
  return -1;
}

const WORD_CHAR_RE = /\w/;
const SPACE_RE = /\s/;

/**
 * `text` without trailing whitespace, `<|im_end|>` and a trailing `Observation:` (the stop string; any case, any
 * whitespace before the colon, not preceded by a word character), in any order and any number of them. Moves an end
 * index back over what it strips — every step removes characters — so a turn of a million `Observation:`s takes
 * linear time (re-running a `$`-anchored regex over the whole text for each one took 30–80 s per megabyte).
 */
export function stripReactEnd(text: string): string {
  const OBSERVATION = "observation";
  let end = text.length;
  for (;;) {
    while (end > 0 && SPACE_RE.test(text[end - 1])) end--;
    if (text.startsWith(IM_END, end - IM_END.length) && end >= IM_END.length) {
      end -= IM_END.length;
      continue;
    }
    if (end === 0 || text[end - 1] !== ":") return text.slice(0, end);
    let j = end - 1;
    while (j > 0 && SPACE_RE.test(text[j - 1])) j--;
    const start = j - OBSERVATION.length;
    if (start < 0 || text.slice(start, j).toLowerCase() !== OBSERVATION || (start > 0 && WORD_CHAR_RE.test(text[start - 1]))) {
      return text.slice(0, end);
    }
    end = start;
  }
}

/**
 * Parses one ReAct turn (never throws).
 *
 * - A trailing `<|im_end|>` and a trailing `Observation:` (the stop strings) are dropped; complete
 *   `<think>…</think>` blocks are ignored. Markers `Action:`, `Action Input:` and `Final Answer:` are matched
 *   case-insensitively with any whitespace inside, so the word tokenizer's `action : get_airports \n action input :
 *   {" city ": " shanghai "}` parses. Text before the markers (`Thought: …`) is allowed.
 * - `Action: <tool>` then `Action Input: <JSON object>` → one call; the tool name is the trimmed text between the two
 *   markers (surrounding quotes/backticks dropped); the object's keys are trimmed recursively (see `hermes`'
 *   `trimKeys`), values kept. Nothing but whitespace may follow the object. Markers inside the object (a string
 *   value `"Action: x"`) do not count.
 * - `Final Answer: <text>` → the answer: the trimmed text after the last `Final Answer:` (LangChain's rule).
 *
 * Invalid, each with its reason: both an Action and a Final Answer; neither; more than one `Action:` (ReAct takes
 * one action per turn, whatever `maxCallsPerTurn`: `2 calls where at most 1 is allowed (one Action per ReAct turn)`);
 * an Action without an Action Input (or an Action Input without, or before, its Action, or two of them); an
 * empty tool name; an Action Input that is not a JSON object, never closes (`unclosed JSON object`), is malformed or
 * nests deeper than `MAX_ARGUMENT_DEPTH` (hermes); text after the Action Input; an unknown tool; an empty Final
 * Answer. Linear time in the turn's length.
 */
export function parseReact(turnText: string, options: ParseOptions): Action {
  const invalid = (reason: string): Action => ({ type: "invalid", reason });
  const text = stripReactEnd(turnText);
  // Markers are searched in `markers`, of the same length as `text`: complete think blocks and the first Action
  // Input's JSON object (an argument value "Action: x") blanked out. Contents are sliced from `text`.
  let markers = stripThink(text, true);
  const first = hits(INPUT_RE, markers)[0];
  if (first !== undefined) {
    const lead = first.end + (text.slice(first.end).length - text.slice(first.end).trimStart().length);
    const end = text[lead] === "{" ? objectEnd(text, lead) : -1;
    if (end > 0) markers = markers.slice(0, lead) + " ".repeat(end - lead) + markers.slice(end);
  }
  const actions = hits(ACTION_RE, markers);
  const inputs = hits(INPUT_RE, markers);
  const finals = hits(FINAL_RE, markers);
  if (actions.length > 0 && finals.length > 0) return invalid("both an Action and a Final Answer in one turn");
  if (finals.length > 0) {
    if (inputs.length > 0) return invalid("both an Action Input and a Final Answer in one turn");
    const answer = text.slice(finals[finals.length - 1].end).trim();
    return answer === "" ? invalid("empty Final Answer") : { type: "answer", answer };
  }
  if (actions.length === 0) {
    if (inputs.length > 0) return invalid("Action Input without an Action: write Action: <tool name> first");
    return invalid("no action: expected Action: <tool name> and Action Input: <JSON object>, or Final Answer: <answer>");
  }
  // One call per ReAct turn; a larger maxCallsPerTurn does not allow a second Action (the observation answers one).
  if (actions.length > 1) return invalid(`${tooManyCallsReason(actions.length, 1)} (one Action per ReAct turn)`);
  const action = actions[0];
  if (inputs.length === 0) return invalid("Action without an Action Input: write Action Input: <JSON object> after it");
  if (inputs.length > 1) return invalid(`${inputs.length} Action Inputs for one Action`);
  const input = inputs[0];
  if (input.start < action.end) return invalid("Action Input before its Action");
  const name = text.slice(action.end, input.start).trim().replace(/^[`"']+|[`"']+$/g, "").trim();
  if (name === "") return invalid("empty tool name after Action:");
  const rest = text.slice(input.end);
  const lead = rest.length - rest.trimStart().length;
  if (rest[lead] !== "{") return invalid(`Action Input must be a JSON object {…}, got ${preview(rest)}`);
  const end = objectEnd(rest, lead);
  if (end < 0) return invalid(`malformed JSON in Action Input: unclosed JSON object in ${preview(rest)}`);
  const after = rest.slice(end);
  if (after.trim() !== "") return invalid(`text after the Action Input: ${preview(after)}`);
  if (jsonTextDeeperThan(rest.slice(lead, end), MAX_ARGUMENT_DEPTH)) return invalid(tooDeepReason("Action Input"));
  let args: unknown;
  try {
    args = JSON.parse(rest.slice(lead, end)) as unknown;
  } catch (e) {
    return invalid(`malformed JSON in Action Input (${(e as Error).message}) in ${preview(rest)}`);
  }
  const call = readCall({ name, arguments: args }, "Action Input");
  if (typeof call === "string") return invalid(call);
  if (!options.tools.some((t) => t.name === call.name)) return invalid(unknownToolReason(call.name, options.tools));
  const calls: ToolCall[] = [call];
  return { type: "tool_call", calls };
}

/** The tool list and format instructions (adapted from LangChain's MRKL `PREFIX` / `FORMAT_INSTRUCTIONS`). */
function toolsSection(tools: readonly ToolJsonSchema[]): string {
  const list = tools
    .map((t) => `${t.name}: ${t.description}\n  arguments (JSON Schema): ${toJsonLikeTemplate(promptParameters(t))}`)
    .join("\n");
  return (
    `You have access to the following tools:\n\n${list}\n\n` +
    "Use the following format:\n\n" +
    "Thought: you should always think about what to do\n" +
    `Action: the action to take, one of [${tools.map((t) => t.name).join(", ")}]\n` +
    "Action Input: the arguments of the action, as a JSON object\n" +
    "Observation: the result of the action\n" +
    "... (this Thought/Action/Action Input/Observation can repeat N times; write one Action per turn, then stop)\n" +
    "Thought: I now know the final answer\n" +
    "Final Answer: the final answer to the original input question"
  );
}

/**
 * The ReAct protocol (see the file doc for sources). Strings, with `⏎` for `\n`:
 * - `system(tools, instructions)`: `instructions` + `⏎⏎` (when non-empty) + `You have access to the following
 *   tools:⏎⏎` + per tool `{name}: {description}⏎  arguments (JSON Schema): {schema JSON}` + the format description
 *   (`Thought: …⏎Action: …⏎Action Input: …⏎Observation: …⏎…⏎Final Answer: …`). No tools: `instructions` +
 *   `Answer with Final Answer: <answer>.`;
 * - `prompt(system, user)`: ChatML, as `hermes`: `<|im_start|>system⏎{system}<|im_end|>⏎<|im_start|>user⏎{user}
 *   <|im_end|>⏎<|im_start|>assistant⏎`;
 * - `observation(results)`: `⏎<|im_start|>user⏎Observation: {content}<|im_end|>⏎<|im_start|>assistant⏎` (several
 *   results: one `Observation:` line each, joined by `⏎`); `close` = `<|im_end|>⏎<|im_start|>assistant⏎`;
 * - `invalidObservation(reason)`: the same framing around `Observation: error: {reason}`;
 * - `format`: a call → `Action: {name}⏎Action Input: {arguments JSON}<|im_end|>`; an answer →
 *   `Final Answer: {answer}<|im_end|>`; an invalid action → `Thought: {reason with ":" → " -"}<|im_end|>` (parses as
 *   invalid: no marker survives). Turns end with `<|im_end|>`; `stops` = `<|im_end|>` and `Observation:` (a model
 *   that writes its own observation is cut there).
 *
 * `format` throws (an Error naming the count) for a tool_call action without exactly one call: ReAct cannot write it,
 * and the action comes from code (a scripted agent), not from a model.
 */
export const reactProtocol: Protocol = {
  name: "react",
  system(tools: readonly ToolJsonSchema[], instructions: string): string {
    const head = instructions === "" ? "" : `${instructions}\n\n`;
    return tools.length === 0 ? `${head}Answer with Final Answer: <answer>.` : head + toolsSection(tools);
  },
  prompt: chatPrompt,
  parse: parseReact,
  observation(results: readonly ToolCallResult[]): { text: string; close: string } {
    const contents = results.length === 0 ? ["error: no tool results"] : results.map((r) => r.content);
    return { text: chatUserTurn(contents.map((c) => `Observation: ${c}`).join("\n")), close: `${IM_END}\n${IM_START}assistant\n` };
  },
  invalidObservation(reason: string): string {
    return chatUserTurn(`Observation: error: ${reason}`);
  },
  format(action: Action): string {
    switch (action.type) {
      case "tool_call": {
        if (action.calls.length !== 1) {
          throw new Error(`reactProtocol.format: ReAct writes one call per turn, got ${action.calls.length}`);
        }
        const c = action.calls[0];
        return `Action: ${c.name}\nAction Input: ${toJsonLikeTemplate(c.arguments)}${IM_END}`;
      }
      case "answer":
        return `Final Answer: ${action.answer}${IM_END}`;
      case "invalid":
        return `Thought: ${action.reason.replace(/:/g, " -")}${IM_END}`;
    }
  },
  stops: [IM_END, "Observation:"],
  specialTokens: [IM_START, IM_END],
};
