/**
 * Chat messages + tools → the policy's prompt tokens, as the Qwen2.5 chat template renders them with tools (the
 * `hermes` protocol, src/protocol/hermes.ts), with one difference that makes records exact: an assistant message the
 * gateway itself returned earlier in the rollout is written with the tokens that were sampled for it
 * (token-in-token-out), never re-tokenised from its text. Then call k+1's prompt extends call k's prompt + completion
 * token for token, and the calls merge into one trajectory (`./records.ts`).
 *
 * Template: the Qwen2.5-7B-Instruct `chat_template` (huggingface/huggingface.js `packages/jinja/test/e2e.test.js`
 * @ fe42e68017ffc76d09922ea8f9b38a6964345710, copied into `test/fixtures/qwen25-template/`): system block (the first
 * system message, else Qwen's default) with the `# Tools` section when tools are given; `user`, later `system` and
 * plain `assistant` messages as `<|im_start|>{role}\n{content}<|im_end|>\n`; an assistant with tool calls as
 * `<|im_start|>assistant[\n{content}]` + `\n<tool_call>\n{"name": "…", "arguments": {…}}\n</tool_call>` per call +
 * `<|im_end|>\n`; consecutive `tool` messages in one user block of `\n<tool_response>\n{content}\n</tool_response>`;
 * then the generation prompt `<|im_start|>assistant\n`. `developer` messages are rendered as `system` (OpenAI's newer
 * name for it). Tool-call `arguments` (a JSON string on the wire) are parsed and printed with the template's `tojson`
 * (`toJsonLikeTemplate`), as vLLM does before applying a template; arguments that are not JSON are printed as a JSON
 * string. Tool declarations are printed through `hermesProtocol.system` (`chatToolSpec`: `{type, function: {name,
 * description, parameters}}`, `parameters` without `$schema`), exactly as the travel recipe's prompts are rendered.
 *
 * Tokenisation: the text between two reused assistant turns is one piece; the first piece is encoded with
 * `tokenizer.promptTokens(text, {rendered: true})` (BOS for the word tokenizer), later pieces with `encode`, the way
 * the rollout appends observations. Cutting at the same places in every call keeps earlier pieces' tokens identical.
 */
import { IM_END, IM_START, hermesProtocol, toJsonLikeTemplate } from "../protocol/hermes.ts";
import type { ToolJsonSchema } from "../protocol/types.ts";
import type { Tokenizer } from "../core/tokenizer.ts";

/** Qwen2.5's default system prompt (written by its template when the first message is not a system message). */
export const QWEN_DEFAULT_SYSTEM = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";

/** A tool call of an assistant message: name and `arguments` as OpenAI sends them (JSON text). */
export interface ChatCall {
  name: string;
  arguments: string;
}

/** A chat message after validation (content parts joined; `developer` already mapped to `system`). */
export interface ChatMsg {
  role: "system" | "user" | "assistant" | "tool";
  /** The text content ('' for a null content). */
  content: string;
  /** The assistant's tool calls (empty for other roles). */
  toolCalls: ChatCall[];
}

/** A tool as declared in a request (`tools[i].function`). */
export interface ChatTool {
  name: string;
  description?: string;
  parameters?: Record<string, unknown>;
}

/** What `renderChat` needs besides the messages. */
export interface RenderOptions {
  tokenizer: Tokenizer;
  /** System text written when the first message is not a system message (default `QWEN_DEFAULT_SYSTEM`). */
  defaultSystem?: string;
  /**
   * The sampled tokens `[completion]` of an assistant message this rollout's gateway returned, looked up by
   * `assistantKey`; undefined renders the message from its text. Called once per assistant message, in order.
   */
  recall?: (key: string) => number[] | undefined;
  /** Id of `<|im_end|>` when it is one token (a reused turn that did not end with it gets the text appended). */
  imEndId?: number;
}

/** A rendered prompt. */
export interface RenderedChat {
  /** The prompt token ids `[prompt]`. */
  tokens: number[];
  /** Assistant turns written with their sampled tokens. */
  reused: number;
}

/** `arguments` JSON text in one canonical spelling (parsed and re-serialised; text that is not JSON as it is). */
export function canonicalArguments(args: string): string {
  try {
    return JSON.stringify(JSON.parse(args));
  } catch {
    return args;
  }
}

/**
 * The identity of an assistant turn: its content (null and '' alike) and its calls' names and canonical arguments.
 * Tool-call ids are not part of it: the template does not render them, and agents may rewrite them.
 */
export function assistantKey(content: string | null, calls: readonly ChatCall[]): string {
  return JSON.stringify([content ?? "", calls.map((c) => [c.name, canonicalArguments(c.arguments)])]);
}

/** The declarations `hermesProtocol.system` prints (a missing description is left out, missing parameters are `{}`). */
export function toolSchemas(tools: readonly ChatTool[]): ToolJsonSchema[] {
  return tools.map((t) => ({ name: t.name, description: t.description as string, parameters: t.parameters ?? {} }));
}

/** A tool call as the template prints it (one block, with the `\n` the template writes before it). */
function callText(c: ChatCall): string {
  let args: string;
  try {
    args = toJsonLikeTemplate(JSON.parse(c.arguments));
  } catch {
    args = JSON.stringify(c.arguments); // the template's `tojson` of a string
  }
  return `\n<tool_call>\n{"name": "${c.name}", "arguments": ${args}}\n</tool_call>`;
}

/**
 * A conversation rendered but not yet tokenised: text pieces, each encoded on its own, between the sampled tokens of
 * reused assistant turns. `renderChat` = `encodePieces(renderPieces(…))`; the gateway checks `textBytes` against the
 * context between the two, so an over-long prompt is refused before the costly tokenisation.
 */
export interface RenderedPieces {
  /** Text (to encode) and token ids `[tokens]` (reused turns, as sampled), in order; the first is text. */
  pieces: Array<string | number[]>;
  /** Assistant turns written with their sampled tokens. */
  reused: number;
  /** Tokens in the reused pieces. */
  reusedTokens: number;
  /** UTF-8 bytes of the text pieces. */
  textBytes: number;
}

/**
 * Renders a conversation into pieces (see the module doc and `RenderedPieces`); no tokenisation.
 * @param messages `[messages]`, at least one
 * @param tools the request's tools (none: no tools section)
 * @param options `recall` and `imEndId` are used; `tokenizer` is not
 */
export function renderPieces(messages: readonly ChatMsg[], tools: readonly ChatTool[], options: Omit<RenderOptions, "tokenizer">): RenderedPieces {
  const pieces: Array<string | number[]> = [];
  let buf = "";
  let reused = 0;
  let reusedTokens = 0;
  const first = messages[0];
  const system = first?.role === "system" ? first.content : (options.defaultSystem ?? QWEN_DEFAULT_SYSTEM);
  buf += `${IM_START}system\n${tools.length > 0 ? hermesProtocol.system(toolSchemas(tools), system) : system}${IM_END}\n`;
  messages.forEach((m, i) => {
    if (m.role === "system" && i === 0) return;
    if (m.role === "assistant") {
      const sampled = options.recall?.(assistantKey(m.content, m.toolCalls));
      if (sampled !== undefined) {
        // The header is the generation prompt the turn was sampled after; the body is the sampled tokens themselves.
        buf += `${IM_START}assistant\n`;
        pieces.push(buf, sampled);
        buf = "";
        reused++;
        reusedTokens += sampled.length;
        const last = sampled[sampled.length - 1];
        if (options.imEndId === undefined || last !== options.imEndId) buf += IM_END;
        buf += "\n";
        return;
      }
      if (m.toolCalls.length === 0) {
        buf += `${IM_START}assistant\n${m.content}${IM_END}\n`;
      } else {
        buf += `${IM_START}assistant${m.content ? `\n${m.content}` : ""}${m.toolCalls.map(callText).join("")}${IM_END}\n`;
      }
      return;
    }
    if (m.role === "tool") {
      if (i === 0 || messages[i - 1].role !== "tool") buf += `${IM_START}user`;
      buf += `\n<tool_response>\n${m.content}\n</tool_response>`;
      if (i === messages.length - 1 || messages[i + 1].role !== "tool") buf += `${IM_END}\n`;
      return;
    }
    buf += `${IM_START}${m.role}\n${m.content}${IM_END}\n`;
  });
  buf += `${IM_START}assistant\n`;
  pieces.push(buf);
  let textBytes = 0;
  for (const p of pieces) if (typeof p === "string") textBytes += Buffer.byteLength(p, "utf8");
  return { pieces, reused, reusedTokens, textBytes };
}

/**
 * Tokenises rendered pieces: the first text piece with `tokenizer.promptTokens(text, {rendered: true})`, later text
 * pieces with `encode`, reused token pieces as they are.
 * @returns the prompt tokens `[prompt]`
 */
export function encodePieces(pieces: ReadonlyArray<string | readonly number[]>, tokenizer: Tokenizer): number[] {
  // Appended element by element: `push(...ids)` passes every id as an argument and overflows the call stack past
  // ~10⁵ ids (a 1 MB prompt), which must reach the context check as a 400, not throw a RangeError.
  const tokens: number[] = [];
  const append = (ids: readonly number[]) => {
    for (const id of ids) tokens.push(id);
  };
  pieces.forEach((p, i) => {
    if (typeof p !== "string") append(p);
    else if (i === 0) append(tokenizer.promptTokens(p, { rendered: true }));
    else if (p !== "") append(tokenizer.encode(p));
  });
  return tokens;
}

/**
 * Renders a conversation (see the module doc).
 * @param messages `[messages]`, at least one
 * @param tools the request's tools (none: no tools section)
 * @returns the prompt tokens `[prompt]` and how many assistant turns were reused token for token
 */
export function renderChat(messages: readonly ChatMsg[], tools: readonly ChatTool[], options: RenderOptions): RenderedChat {
  const r = renderPieces(messages, tools, options);
  return { tokens: encodePieces(r.pieces, options.tokenizer), reused: r.reused };
}

/** The rendered text of a conversation with no reused turns (what `renderChat` encodes; for tests and debugging). */
export function renderChatText(messages: readonly ChatMsg[], tools: readonly ChatTool[], defaultSystem: string = QWEN_DEFAULT_SYSTEM): string {
  let text = "";
  const capture: Tokenizer = {
    vocabSize: 0,
    bos: -1,
    pad: -1,
    encode: (t) => ((text += t), []),
    promptTokens: (t) => ((text += t), []),
    decode: () => "",
    id: () => -1,
    toJSON: () => {
      throw new Error("renderChatText: no tokenizer");
    },
  };
  renderChat(messages, tools, { tokenizer: capture, defaultSystem });
  return text;
}
