/**
 * A sampled completion read back for the gateway: cut at its first stop (the protocol's end of turn or a request's
 * `stop` string), then parsed by the protocol into content and tool calls — or recorded invalid (malformed tool
 * calls, no call under `tool_choice: "required"`), never an error.
 */
import type { ToolCall } from "../core/types.ts";
import { stripThink } from "../protocol/think.ts";
import type { Tokenizer } from "../core/tokenizer.ts";
import type { SampledSequence } from "../core/sampling.ts";
import type { Protocol } from "../protocol/types.ts";
import { stopCut, protocolStops } from "../rollout/agent.ts";
import type { Choice } from "./chatRequest.ts";
import { toolSchemas, type ChatTool } from "./render.ts";
import type { GatewayCall } from "./types.ts";

/** One completion read back: what is recorded and what is returned. */
export interface Turn {
  completionTokens: number[];
  logprobs: number[];
  finishReason: GatewayCall["finishReason"];
  content: string;
  toolCalls: ToolCall[];
  invalid: boolean;
  /** Why the turn is invalid (logged in the response's `x-arl-invalid` header), or undefined. */
  reason?: string;
  /** The tokens whose decoding starts the content (for stream chunking). */
  textTokens: number[];
}

/** Stop conditions of a call: the protocol's end-of-turn and the request's `stop` strings. */
export interface Stops {
  ids: number[];
  /** End-of-turn ids (kept in the completion, never in the content). */
  turnEnd: Set<number>;
  /** Every string that ends a completion (protocol's and request's), with the request's normalised spellings. */
  strings: string[];
  /** Strings sent to the sampler (undefined when the protocol and request need none). */
  samplerStrings: string[] | undefined;
}

/**
 * A request's stops. A `stop` string that is one token also becomes a stop id (the embedded engine stops on ids
 * only); a longer one is matched in the decoded text after sampling, in both its spelling and the tokenizer's
 * decoding of it (the word tokenizer decodes lower-cased and space-separated).
 */
export function stopsFor(tokenizer: Tokenizer, protocol: Protocol, stop: string | string[] | null | undefined): Stops {
  const base = protocolStops(tokenizer, protocol.stops);
  const user = stop === null || stop === undefined ? [] : typeof stop === "string" ? [stop] : stop;
  const ids = [...base.stop];
  const strings = [...protocol.stops];
  for (const s of user) {
    strings.push(s);
    const enc = tokenizer.encode(s);
    const dec = enc.length > 0 ? tokenizer.decode(enc) : "";
    if (dec !== "" && dec !== s && !dec.includes("[UNK]")) strings.push(dec);
    if (enc.length === 1 && !dec.includes("[UNK]")) ids.push(enc[0]);
  }
  const samplerStrings = base.stopStrings.length > 0 || user.length > 0 ? [...protocol.stops, ...user] : undefined;
  return { ids, turnEnd: new Set(base.stop), strings, samplerStrings };
}

/** The earliest occurrence of any of `strings` in `s`: its index, or -1. */
function firstOf(s: string, strings: readonly string[]): number {
  let best = -1;
  for (const x of strings) {
    const at = s.indexOf(x);
    if (at >= 0 && (best < 0 || at < best)) best = at;
  }
  return best;
}

/** How `readTurn` reads a sample: the policy's tokenizer and protocol, the call's stops, tools and tool choice. */
export interface TurnReading {
  tokenizer: Tokenizer;
  protocol: Protocol;
  stops: Stops;
  tools: readonly ChatTool[];
  choice: Choice;
  /** Several tool calls in one completion allowed (`parallel_tool_calls`, default true). */
  parallel: boolean;
}

/**
 * Cuts a sample at its first stop (kept in the completion, as sampled) and reads it with the protocol (see the module
 * doc for malformed output).
 */
export function readTurn(s: SampledSequence, r: TurnReading): Turn {
  const { tokenizer, protocol, stops, tools, choice, parallel } = r;
  const cut = stopCut(tokenizer, s.tokens, stops.ids, stops.strings);
  const completionTokens = cut >= 0 ? s.tokens.slice(0, cut + 1) : s.tokens.slice();
  const logprobs = cut >= 0 ? s.logprobs.slice(0, cut + 1) : s.logprobs.slice();
  const endsTurn = cut >= 0 && stops.turnEnd.has(completionTokens[completionTokens.length - 1]);
  const textTokens = endsTurn ? completionTokens.slice(0, -1) : completionTokens;
  let body = tokenizer.decode(textTokens);
  if (cut >= 0 && !endsTurn) {
    const at = firstOf(body, stops.strings);
    if (at >= 0) body = body.slice(0, at); // OpenAI: the stop sequence is not returned
  }
  const length = cut < 0 && s.stopReason !== "stop";
  const plain = (invalid: boolean, reason?: string): Turn => ({
    completionTokens,
    logprobs,
    finishReason: length ? "length" : "stop",
    content: body.trim(),
    toolCalls: [],
    invalid,
    ...(reason !== undefined ? { reason } : {}),
    textTokens,
  });
  if (choice.kind === "none") return plain(false);
  const schemas = toolSchemas(choice.kind === "named" ? tools.filter((t) => t.name === choice.name) : tools);
  const action = protocol.parse(body, { tools: schemas, maxCallsPerTurn: parallel ? Number.POSITIVE_INFINITY : 1 });
  if (action.type === "invalid") return plain(true, action.reason);
  if (action.type === "answer") {
    return choice.kind === "auto" ? plain(false) : plain(true, `tool_choice ${choice.kind === "named" ? choice.name : "required"}: the completion called no tool`);
  }
  const at = stripThink(body, true).indexOf("<tool_call>");
  return {
    completionTokens,
    logprobs,
    finishReason: "tool_calls",
    content: (at >= 0 ? body.slice(0, at) : "").trim(),
    toolCalls: action.calls,
    invalid: false,
    textTokens,
  };
}
