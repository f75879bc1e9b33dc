/**
 * The Hermes / Qwen2.5 / Qwen3 tool-call protocol: tools declared as JSON in the system prompt's `# Tools` section,
 * calls written as `<tool_call>\n{"name": …, "arguments": {…}}\n</tool_call>`, results shown as `<tool_response>`
 * blocks inside a user message — the format Qwen's chat template renders and veRL's / SkyRL's tool agent loops parse.
 *
 * Sources (read for this file):
 * - the Qwen2.5-7B-Instruct chat template (`tokenizer_config.json` `chat_template`), as vendored verbatim in
 *   huggingface/huggingface.js `packages/jinja/test/e2e.test.js` (key `"Qwen/Qwen2.5-7B-Instruct"`, commit
 *   fe42e68017ffc76d09922ea8f9b38a6964345710; copied into `test/fixtures/qwen25-template/`). The Qwen3-0.6B template
 *   in the same file renders the tools section, tool calls and tool responses identically (it differs in how it
 *   re-renders `<think>` reasoning of past turns);
 * - transformers `src/transformers/utils/chat_template_utils.py` (`tojson` = `json.dumps(x, ensure_ascii=False,
 *   indent=None, separators=None, sort_keys=False)`: separators `", "` and `": "`, non-ASCII kept);
 * - volcengine/verl `verl/experimental/agent_loop/tool_parser.py` `HermesToolParser` (commit
 *   17152ef7fa8ce673ef4d469b5ecfea9f076f36b3): regex `<tool_call>(.*?)</tool_call>` (DOTALL), `json.loads`, then
 *   `name` and `arguments` — adapted there from vLLM's `hermes_tool_parser.py`. This parser is stricter: a block that
 *   veRL logs and skips is an invalid action here, with the reason.
 */
import type { Action, ToolCall, ToolCallResult } from "../core/types.ts";
import { jsonTextDeeperThan, nestedDeeperThan, ownCopy } from "../core/values.ts";
import { stripThink } from "./think.ts";
import type { ToolJsonSchema, ParseOptions, Protocol } from "./types.ts";

/** ChatML's message start token (Qwen). */
export const IM_START = "<|im_start|>";
/** ChatML's message end token (Qwen's EOS of a chat turn); every protocol turn of a chat protocol ends with it. */
export const IM_END = "<|im_end|>";

const CALL_OPEN = "<tool_call>";
const CALL_CLOSE = "</tool_call>";

/**
 * The text after a policy turn that opens the next user message and, after `body`, hands the turn back to the
 * assistant: `\n<|im_start|>user\n{body}<|im_end|>\n<|im_start|>assistant\n`. (The policy's turn ended with
 * `<|im_end|>`; the template writes `<|im_end|>\n`, so the `\n` starts the observation.)
 */
export function chatUserTurn(body: string): string {
  return `\n${IM_START}user\n${body}${IM_END}\n${IM_START}assistant\n`;
}

/**
 * The first context of a ChatML conversation, as the Qwen template renders `[system, user]` with
 * `add_generation_prompt=True`: `<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n{user}<|im_end|>\n
 * <|im_start|>assistant\n` (no line break inside the last part).
 */
export function chatPrompt(system: string, user: string): string {
  return `${IM_START}system\n${system}${IM_END}\n${IM_START}user\n${user}${IM_END}\n${IM_START}assistant\n`;
}

/**
 * `value` as JSON text exactly as a chat template's `tojson` filter prints it (transformers: Python `json.dumps` with
 * its default separators `", "` / `": "`, `ensure_ascii=False`, keys in insertion order; @huggingface/jinja does the
 * same). Strings are escaped as `JSON.stringify` does (which matches `json.dumps(ensure_ascii=False)` except for lone
 * surrogates). Numbers print as JavaScript prints them — the unavoidable difference from Python: JavaScript has no
 * float/int distinction (`1.0` prints `1`, Python `1.0`) and writes exponents as `1e-7` / `1e+21` (Python `1e-07` /
 * `1e+21`, and an int `10**21` in full); non-finite numbers print `null` (as @huggingface/jinja; Python `NaN`).
 * Object entries whose value is `undefined`, a function or a symbol are skipped (as `JSON.stringify`); in arrays they
 * print `null`. A value with a `toJSON` method (a `Date`) prints its `toJSON()` result.
 * @throws Error on a cyclic value (a caller bug: JSON has no cycles)
 */
export function toJsonLikeTemplate(value: unknown): string {
  const seen = new Set<object>();
  const skip = (v: unknown) => v === undefined || typeof v === "function" || typeof v === "symbol";
  const go = (v: unknown): string => {
    if (v !== null && typeof v === "object" && typeof (v as { toJSON?: unknown }).toJSON === "function") {
      v = (v as { toJSON: () => unknown }).toJSON();
    }
    if (v === null || skip(v)) return "null";
    if (typeof v === "string") return JSON.stringify(v);
    if (typeof v === "number") return Number.isFinite(v) ? JSON.stringify(v) : "null";
    if (typeof v === "boolean") return v ? "true" : "false";
    if (typeof v === "bigint") return v.toString();
    const obj = v as object;
    if (seen.has(obj)) throw new Error("toJsonLikeTemplate: cyclic value");
    seen.add(obj);
    let out: string;
    if (Array.isArray(obj)) {
      out = `[${obj.map((x: unknown) => go(x)).join(", ")}]`;
    } else {
      const parts: string[] = [];
      for (const [k, x] of Object.entries(obj)) {
        if (skip(x)) continue;
        parts.push(`${JSON.stringify(k)}: ${go(x)}`);
      }
      out = `{${parts.join(", ")}}`;
    }
    seen.delete(obj);
    return out;
  };
  return go(value);
}

/**
 * `value` with every object key trimmed of surrounding whitespace, recursively (arrays and nested objects alike);
 * other values unchanged. The embedded word tokenizer decodes `{"city": "shanghai"}` as `{" city ": " shanghai "}`
 * (single spaces between tokens), so keys are trimmed to their names; values are left for the tool's schema to
 * normalise. Keys are written as own data properties (a key `__proto__` stays a plain key).
 * @throws RangeError on a value nested deeper than the stack allows (thousands of levels): the parsers check
 *   `MAX_ARGUMENT_DEPTH` before calling it
 */
export function trimKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(trimKeys);
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k.trim(), trimKeys(v)]));
  }
  return value;
}

/** `text` without trailing whitespace and one trailing `<|im_end|>` (with the whitespace before it). */
export function stripTurnEnd(text: string): string {
  let t = text.trimEnd();
  if (t.endsWith(IM_END)) t = t.slice(0, -IM_END.length).trimEnd();
  return t;
}

/** The JSON Schema of a tool's arguments as shown to a model: without zod's `$schema` draft marker. */
export function promptParameters(schema: ToolJsonSchema): Record<string, unknown> {
  const { $schema: _draft, ...rest } = schema.parameters;
  return rest;
}

/**
 * A tool declaration in the OpenAI / transformers shape that the Qwen template prints with `tool | tojson`:
 * `{type: "function", function: {name, description, parameters}}` (keys in that order; `parameters` without
 * `$schema`, as `src/baselines/functionCalling.ts` sends it to OpenAI-compatible servers). Structurally a
 * `ChatToolSpec` of `src/policy/hf`, so the same value can be given to `HfTokenizer.applyChatTemplate`.
 */
export function chatToolSpec(schema: ToolJsonSchema): {
  type: "function";
  function: { name: string; description: string; parameters: Record<string, unknown> };
} {
  return { type: "function", function: { name: schema.name, description: schema.description, parameters: promptParameters(schema) } };
}

/** `unknown tool {name}; available: a, b` (or `; no tools are available`); a name over 80 characters is cut with `…`. */
export function unknownToolReason(name: string, tools: readonly ToolJsonSchema[]): string {
  const avail = tools.length === 0 ? "no tools are available" : `available: ${tools.map((t) => t.name).join(", ")}`;
  return `unknown tool ${echo(name)}; ${avail}`;
}

/** The most calls a turn may make: `options.maxCallsPerTurn`, default 1 (NaN counts as the default). */
export function maxCalls(options: ParseOptions): number {
  const m = options.maxCallsPerTurn;
  return typeof m === "number" && !Number.isNaN(m) ? m : 1;
}

/** `N calls where at most M are allowed`. */
export function tooManyCallsReason(n: number, m: number): string {
  return `${n} calls where at most ${m} ${m === 1 ? "is" : "are"} allowed`;
}

/**
 * Most levels of arrays / objects a call's `arguments` may nest (`{"a": {"b": [1]}}` is 3). `JSON.parse` builds a value
 * nested a million levels deep, but every later walk of it — key trimming, the tool's schema, rendering the call,
 * `JSON.stringify` of the trajectory — is recursive and overflowed the stack (`RangeError`) at about 10 000 levels
 * (issue 29); a call nested deeper than this is an invalid action instead. Real tool arguments nest a few levels.
 */
export const MAX_ARGUMENT_DEPTH = 64;

/** Longest model-written value (a tool name, a JSON value) a reason repeats whole; longer ones are cut with `…`. */
const MAX_ECHO_CHARS = 80;

/** `text` as a reason repeats it: whole up to `MAX_ECHO_CHARS`, else its head and `…` (an own copy, see `ownCopy`). */
function echo(text: string): string {
  return text.length <= MAX_ECHO_CHARS ? text : `${ownCopy(text.slice(0, MAX_ECHO_CHARS))}…`;
}

/** Why a call nested too deep is invalid (`where` names the call). */
export function tooDeepReason(where: string): string {
  return `${where}: nested deeper than ${MAX_ARGUMENT_DEPTH} levels of arrays and objects in "arguments"`;
}

/** A parsed JSON value as a reason shows it: its JSON, cut by `echo`. */
function echoJson(v: unknown): string {
  return echo(JSON.stringify(v) ?? String(v));
}

/** A short quoted preview of model text for a reason (at most 40 characters). */
export function preview(text: string): string {
  const t = text.trim();
  return JSON.stringify(t.length > 40 ? `${t.slice(0, 40)}…` : t);
}

/**
 * Reads one call object (already `JSON.parse`d): keys trimmed (`trimKeys`), a string `name` (trimmed, non-empty) and
 * `arguments` given as an object, or as a JSON string holding an object (OpenAI's `function.arguments`), nested at
 * most `MAX_ARGUMENT_DEPTH` levels. Never throws, whatever the value's depth or size: model-written values a reason
 * repeats are cut to 80 characters.
 * @returns the call, or the reason it is invalid (`where` names the call, e.g. `tool call 2`)
 */
export function readCall(raw: unknown, where: string): ToolCall | string {
  if (raw === null || typeof raw !== "object" || Array.isArray(raw)) {
    return `${where}: expected a JSON object {"name": …, "arguments": {…}}, got ${Array.isArray(raw) ? "an array" : echoJson(raw)}`;
  }
  // Checked before any recursive walk (trimKeys first): the call object is one level above its arguments.
  if (nestedDeeperThan(raw, MAX_ARGUMENT_DEPTH + 1)) return tooDeepReason(where);
  const rec = trimKeys(raw) as Record<string, unknown>;
  if (typeof rec.name !== "string" || rec.name.trim() === "") {
    return `${where}: "name" must be a non-empty string, got ${rec.name === undefined ? "nothing" : echoJson(rec.name)}`;
  }
  let args = rec.arguments;
  if (typeof args === "string") {
    if (jsonTextDeeperThan(args, MAX_ARGUMENT_DEPTH)) return tooDeepReason(where);
    let parsed: unknown;
    try {
      parsed = JSON.parse(args) as unknown;
    } catch (e) {
      return `${where}: "arguments" is a string that is not JSON (${(e as Error).message})`;
    }
    args = trimKeys(parsed);
  }
  if (args === null || typeof args !== "object" || Array.isArray(args)) {
    return `${where}: "arguments" must be a JSON object, got ${args === undefined ? "nothing" : Array.isArray(args) ? "an array" : echoJson(args)}`;
  }
  return { name: rec.name.trim(), arguments: args as Record<string, unknown> };
}

/**
 * Parses one Hermes / Qwen turn (never throws).
 *
 * - A trailing `<|im_end|>` and whitespace are dropped. Complete `<think>…</think>` blocks are reasoning: tags inside
 *   them do not count.
 * - Every `<tool_call>…</tool_call>` block holds one JSON object `{"name": string, "arguments": object}`
 *   (`arguments` may also be a JSON string of an object, as OpenAI writes it). After `JSON.parse` every object key is
 *   trimmed, recursively, and so is `name` — the embedded word tokenizer decodes text with single spaces between
 *   lower-cased tokens, e.g. `<tool_call> {" name ": " get_airports ", " arguments ": {" city ": " shanghai "}}
 *   </tool_call>`; argument values are left as they are (the tool's zod schema normalises them). Arguments are not
 *   checked against the tool's JSON Schema here: the env's `callTool` does that and observes an error.
 * - Text before the first call (reasoning, `<think>…</think>`) is allowed; between calls and after the last only
 *   whitespace is.
 * - A turn without `<tool_call>` is the final answer: the text after the last `</think>` (as Qwen3's template splits
 *   a turn's content), trimmed.
 *
 * Invalid, each with its reason: an unclosed `<tool_call>` (no `</tool_call>`, or another `<tool_call>` first);
 * a `</tool_call>` without its `<tool_call>`; text between calls or after the last (`text after the tool call: …`);
 * more calls than `options.maxCallsPerTurn` (default 1; `N calls where at most M are allowed`); malformed JSON; JSON
 * that is not such an object; arguments nested deeper than `MAX_ARGUMENT_DEPTH`; a tool not in `options.tools`
 * (`unknown tool …`); an unclosed `<think>` or an empty answer. Model-written values a reason repeats are cut to 80
 * characters, so a reason stays short whatever the turn holds.
 *
 * Like veRL's regex, a call cannot hold the text `</tool_call>` in an argument string (the block ends there; the JSON
 * is then malformed).
 */
export function parseHermes(turnText: string, options: ParseOptions): Action {
  const invalid = (reason: string): Action => ({ type: "invalid", reason });
  const body = stripTurnEnd(turnText);
  const scan = stripThink(body, true); // same length as body: positions carry over
  let open = scan.indexOf(CALL_OPEN);
  if (open < 0) {
    if (scan.includes(CALL_CLOSE)) return invalid(`${CALL_CLOSE} without an opening ${CALL_OPEN}`);
    if (scan.includes("<think>")) return invalid("unclosed <think>: no </think> follows");
    const cut = body.lastIndexOf("</think>");
    const answer = (cut < 0 ? body : body.slice(cut + "</think>".length)).trim();
    if (answer === "") return invalid(`empty answer: expected ${CALL_OPEN}{"name": …, "arguments": {…}}${CALL_CLOSE} or the final answer`);
    return { type: "answer", answer };
  }
  const blocks: string[] = [];
  for (;;) {
    const start = open + CALL_OPEN.length;
    const close = scan.indexOf(CALL_CLOSE, start);
    const next = scan.indexOf(CALL_OPEN, start);
    if (close < 0) return invalid(`unclosed ${CALL_OPEN}: no ${CALL_CLOSE} follows`);
    if (next >= 0 && next < close) return invalid(`unclosed ${CALL_OPEN}: another ${CALL_OPEN} opens before its ${CALL_CLOSE}`);
    blocks.push(body.slice(start, close));
    const after = close + CALL_CLOSE.length;
    open = scan.indexOf(CALL_OPEN, after);
    const gap = scan.slice(after, open < 0 ? scan.length : open);
    if (gap.includes(CALL_CLOSE)) return invalid(`${CALL_CLOSE} without an opening ${CALL_OPEN}`);
    if (gap.trim() !== "") {
      return invalid(open < 0 ? `text after the tool call: ${preview(gap)}` : `text between tool calls: ${preview(gap)}`);
    }
    if (open < 0) break;
  }
  const m = maxCalls(options);
  if (blocks.length > m) return invalid(tooManyCallsReason(blocks.length, m));
  const names = new Set(options.tools.map((t) => t.name));
  const calls: ToolCall[] = [];
  for (const [i, block] of blocks.entries()) {
    const where = blocks.length === 1 ? "tool call" : `tool call ${i + 1}`;
    // The call object is one level above its arguments; refused before JSON.parse builds a million levels.
    if (jsonTextDeeperThan(block, MAX_ARGUMENT_DEPTH + 1)) return invalid(tooDeepReason(where));
    let raw: unknown;
    try {
      raw = JSON.parse(block) as unknown;
    } catch (e) {
      return invalid(`${where}: malformed JSON (${(e as Error).message}) in ${preview(block)}`);
    }
    const call = readCall(raw, where);
    if (typeof call === "string") return invalid(call);
    if (!names.has(call.name)) return invalid(unknownToolReason(call.name, options.tools));
    calls.push(call);
  }
  return { type: "tool_call", calls };
}

/** The Qwen2.5 template's tools section after the system message (without the `<|im_end|>` that `prompt` adds). */
function toolsSection(tools: readonly ToolJsonSchema[]): string {
  return (
    "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n" +
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>" +
    tools.map((t) => `\n${toJsonLikeTemplate(chatToolSpec(t))}`).join("") +
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments within " +
    '<tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
  );
}

/** One tool response as the template renders a `tool` message inside the user block: `\n<tool_response>\n…\n</tool_response>`. */
function toolResponse(content: string): string {
  return `\n<tool_response>\n${content}\n</tool_response>`;
}

/** The end of every Hermes observation: the last response's close, the user message's end, the assistant header. */
const OBSERVATION_CLOSE = `\n</tool_response>${IM_END}\n${IM_START}assistant\n`;

/**
 * The Hermes protocol (see the file doc for sources). Strings, with `⏎` for `\n`:
 * - `system(tools, instructions)`: `instructions` + `⏎⏎# Tools⏎⏎You may call one or more functions…<tools>` + one
 *   `⏎{"type": "function", "function": {"name": …, "description": …, "parameters": {…}}}` per tool (`tojson`
 *   separators, `parameters` without `$schema`) + `⏎</tools>⏎⏎For each function call, return a json object…⏎
 *   <tool_call>⏎{"name": <function-name>, "arguments": <args-json-object>}⏎</tool_call>` — the Qwen2.5 template's
 *   system message with tools. No tools: `instructions` unchanged (the template's plain system message);
 * - `prompt(system, user)`: `<|im_start|>system⏎{system}<|im_end|>⏎<|im_start|>user⏎{user}<|im_end|>⏎
 *   <|im_start|>assistant⏎`;
 * - `observation(results)`: `⏎<|im_start|>user` + `⏎<tool_response>⏎{content}⏎</tool_response>` per result +
 *   `<|im_end|>⏎<|im_start|>assistant⏎`; `close` = `⏎</tool_response><|im_end|>⏎<|im_start|>assistant⏎` (so a capped
 *   observation is the template's rendering of the cut content). No results: one response `error: no tool results`;
 * - `invalidObservation(reason)`: the same framing around `error: {reason}`;
 * - `format`: a call → `<tool_call>⏎{"name": "…", "arguments": {…}}⏎</tool_call>` (blocks joined by `⏎`) +
 *   `<|im_end|>`; an answer → `{answer}<|im_end|>`; an invalid action → an unclosed `<tool_call>` holding the reason
 *   (parses as invalid, with its own reason).
 *
 * Rendered with the template, `[system, user, assistant(tool_calls), tool…, assistant]` equals `prompt + format(call)
 * + observation + format(answer)` plus the template's final `⏎` after the last `<|im_end|>` (a turn ends at its stop
 * token, so that `⏎` is never the policy's; the next observation writes it). Checked in `test/protocol-hermes.test.ts`.
 */
export const hermesProtocol: Protocol = {
  name: "hermes",
  system(tools: readonly ToolJsonSchema[], instructions: string): string {
    return tools.length === 0 ? instructions : instructions + toolsSection(tools);
  },
  prompt: chatPrompt,
  parse: parseHermes,
  observation(results: readonly ToolCallResult[]): { text: string; close: string } {
    const contents = results.length === 0 ? ["error: no tool results"] : results.map((r) => r.content);
    const text = `\n${IM_START}user${contents.map(toolResponse).join("")}${IM_END}\n${IM_START}assistant\n`;
    return { text, close: OBSERVATION_CLOSE };
  },
  invalidObservation(reason: string): string {
    return `\n${IM_START}user${toolResponse(`error: ${reason}`)}${IM_END}\n${IM_START}assistant\n`;
  },
  format(action: Action): string {
    switch (action.type) {
      case "tool_call":
        return (
          action.calls
            .map((c) => `${CALL_OPEN}\n{"name": ${JSON.stringify(c.name)}, "arguments": ${toJsonLikeTemplate(c.arguments)}}\n${CALL_CLOSE}`)
            .join("\n") + IM_END
        );
      case "answer":
        return `${action.answer}${IM_END}`;
      case "invalid":
        return `${CALL_OPEN}\n${action.reason.split(CALL_OPEN).join("").split(CALL_CLOSE).join("")}${IM_END}`;
    }
  },
  stops: [IM_END],
  specialTokens: [IM_START, IM_END, CALL_OPEN, CALL_CLOSE, "<tool_response>", "</tool_response>", "<think>", "</think>"],
};
