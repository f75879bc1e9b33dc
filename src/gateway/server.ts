/**
 * The training gateway: an OpenAI-compatible chat-completions server in front of the policy being trained, so an
 * agent written with the `openai` npm client or the AI SDK can be trained unchanged — point its `baseURL` at
 * `<gateway>/rollout/<id>/v1`, report a reward at `POST <gateway>/rollout/<id>/reward`. Every call is recorded
 * exactly as sampled (prompt ids, completion ids, logprobs; src/gateway/types.ts), and a rollout's calls merge into
 * exact multi-turn segments (`./records.ts`) because an assistant turn the gateway returned is re-rendered from its
 * sampled tokens (`./render.ts`).
 *
 * Routes (bearer token on all but `/healthz` when `apiKey` is set; bodies are JSON; errors are OpenAI's
 * `{error: {message, type, param, code}}` with a 4xx for every client mistake):
 * - `POST /rollout/:id/v1/chat/completions` — recorded under rollout `id`;
 * - `POST /v1/chat/completions` — recorded under the `x-rollout-id` header's rollout when given; without the header
 *   it is plain inference: answered the same way, recorded nowhere (an agent's side calls, smoke checks);
 * - `GET /rollout/:id/v1/models`, `GET /v1/models` (and `…/models/<name>`) — the served model;
 * - `POST /rollout/:id/reward` `{value, parts?}` — rewards and resolves the rollout;
 * - `POST /rollout/:id/open` `{meta?, deadline_ms?}` — opens a rollout over HTTP (for an external trainer);
 * - `GET /rollout/:id` — the rollout's status, calls and segments so far;
 * - `GET /healthz` — `{status: "ok", model, rollouts}`.
 * A reward for an unknown rollout is a 404 even with `openOnDemand` (only chat calls open rollouts). A call whose
 * completion was read as invalid carries the reason in the `x-arl-invalid` response header (URI-encoded), for
 * debugging an agent; the body stays OpenAI's.
 *
 * Chat completions follow OpenAI's "Create chat completion" (OpenAI API reference) and the `openai` client's types
 * (`node_modules/openai/resources/chat/completions/completions.d.ts`: `ChatCompletion`, `ChatCompletionChunk`);
 * streaming follows the AI SDK's openai-compatible provider as well
 * (`node_modules/@ai-sdk/openai-compatible/dist/index.mjs`: `chunkBaseSchema`, `processToolCallDelta` — each tool
 * call is sent whole in one delta with `index`, `id`, `type`, `function.name` and `function.arguments`). Limits, each a
 * 400 naming the field: `n` must be 1, `top_p` 1, penalties 0, `response_format` text; `logprobs` gives the sampled
 * token only. The sampler is not incremental, so a stream is the finished completion cut into chunks at token
 * boundaries: streaming and non-streaming give identical records for the same seed by construction.
 *
 * Work per request is bounded before it is done: the body by `bodyLimit` (413; default `contextBodyLimit` of the
 * context, 1-16 MiB) and by `MAX_JSON_DEPTH` levels of nesting (400 naming the field; tool-call `arguments` too), the
 * rendered prompt's text by `contextLength × maxBytesPerToken` bytes (400 `context_length_exceeded`, not tokenised),
 * then its tokens by `contextLength`; each stop sequence by `MAX_STOP_CHARS`. Tokenising a prompt over
 * `INLINE_WORK_BYTES` runs in a `WorkLane` (src/serve/limits.ts): one at a time, each in its own macrotask, so
 * `/healthz` and other rollouts' calls are answered between them. Rollout ids are `ROLLOUT_ID_RE` (never `.` or `..`).
 *
 * Tool calls: the completion is parsed by the hermes protocol (`<tool_call>{"name", "arguments"}</tool_call>`).
 * Malformed output (invalid JSON, an unknown tool, an unclosed block, no call under `tool_choice: "required"`) is
 * returned as plain content with `finish_reason: "stop"` (or `length`) and recorded `invalid: true` — the agent sees
 * the model's text, the trainer sees an invalid action; never a 5xx. `tool_choice: "none"` leaves the text unparsed.
 * `tool_choice` cannot constrain sampling (no guided decoding): it decides how the text is read. Tools are always
 * rendered when given, so a rollout's prompts keep one prefix whatever each call's `tool_choice`.
 */
import { randomBytes } from "node:crypto";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type OpenAI from "openai";
import type { ToolCall } from "../core/types.ts";
import { stripThink } from "../env/searchR1.ts";
import type { Tokenizer } from "../policy/tokenizer.ts";
import type { SampledSequence, SamplingClient } from "../policy/types.ts";
import { IM_END, hermesProtocol } from "../protocol/hermes.ts";
import type { Protocol } from "../protocol/types.ts";
import { stopCut, protocolStops } from "../rollout/agent.ts";
import { HttpError, NestingError, createApp, listen, type ServeOptions } from "../serve/http.ts";
import { DEFAULT_MAX_BYTES_PER_TOKEN, MAX_JSON_DEPTH, WorkLane, contextBodyLimit, pathName, quoteShort, tooDeepPath } from "../serve/limits.ts";
import { GatewayError, defaultCode, openAIError, parseRequest } from "./errors.ts";
import { RolloutRegistry, checkRolloutId, type CallTicket } from "./registry.ts";
import { QWEN_DEFAULT_SYSTEM, encodePieces, renderPieces, toolSchemas, type ChatCall, type ChatMsg, type ChatTool } from "./render.ts";
import { ChatCompletionBody, OpenBody, RewardBody, type ChatCompletionRequest } from "./schema.ts";
import type { GatewayCall, RolloutRecord } from "./types.ts";

/** The policy the gateway serves. */
export interface GatewayPolicy {
  /** The model id the gateway reports (`model` in responses, `GET /v1/models`); requests may name any model. */
  name: string;
  /** Samples completions; replaced at run time with `Gateway.setSampler` (the trainer's new weights). */
  sampler: SamplingClient;
  /** The policy's tokenizer: the embedded `WordTokenizer` (with the protocol's tags) or a real model's `HfTokenizer`. */
  tokenizer: Tokenizer;
  /** How messages and tools become text and completions become tool calls; only `hermes` (default) is supported. */
  protocol?: Protocol;
  /** The model's context window (tokens): prompt + completion must fit. */
  contextLength: number;
  /** Completion tokens when a request gives no `max_tokens` / `max_completion_tokens` (tokens; default 512). */
  maxTokens?: number;
  /** System text when a request has no system message (default Qwen2.5's, as its template writes it). */
  defaultSystem?: string;
  /**
   * Most UTF-8 bytes of rendered prompt text per token of the context (default `DEFAULT_MAX_BYTES_PER_TOKEN`, 32): a
   * prompt whose text exceeds `contextLength × maxBytesPerToken` bytes is refused (400 `context_length_exceeded`)
   * without being tokenised. Exact (never refuses a prompt that fits) when no token of the tokenizer stands for more
   * bytes; otherwise a cap on the text one call may make the gateway tokenise.
   */
  maxBytesPerToken?: number;
}

/** Options of `gatewayApp` / `startGateway` (plus the shared `ServeOptions`: host, port, apiKey, body limit — by default `contextBodyLimit` of the policy's context). */
export interface GatewayOptions extends ServeOptions {
  policy: GatewayPolicy;
  /**
   * Base of the sampling seeds of requests that send no `seed` (default 0): call k of rollout `id` samples with a
   * seed derived from (seed, id, k), so a rerun of the same agent gives the same tokens.
   */
  seed?: number;
  /** Default deadline of a rollout: it is dropped unless rewarded within this time from its opening (ms; default 600 000). */
  deadlineMs?: number;
  /** Most time one sampling call may take (ms; default 120 000): past it the call is a 504 and is not recorded. */
  callTimeoutMs?: number;
  /** Open an unknown rollout on its first chat call (default false: 404). */
  openOnDemand?: boolean;
  /** Called once with every resolved rollout's record (e.g. to append it to a JSONL file). */
  onRecord?: (record: RolloutRecord) => void;
}

/** A gateway app (not listening). */
export interface Gateway {
  /** The fastify app (routes registered; `app.inject` works without listening). */
  app: FastifyInstance;
  /** Its rollouts: the trainer opens, waits for, rewards and drops them here. */
  registry: RolloutRegistry;
  /** The sampler calls use now. */
  readonly sampler: SamplingClient;
  /** Replaces the sampler (e.g. after an update); calls already sampling finish with the old one. */
  setSampler(sampler: SamplingClient): void;
}

/** A listening gateway. */
export interface RunningGateway extends Gateway {
  /** Base URL, e.g. `http://127.0.0.1:8500`; a rollout's OpenAI base URL is `${url}/rollout/${id}/v1`. */
  url: string;
  /** The OpenAI base URL of rollout `id`: `${url}/rollout/${encodeURIComponent(id)}/v1`. */
  baseUrl(id: string): string;
  /** Stops listening (in-flight requests finish first), then drops every unresolved rollout. */
  close(): Promise<void>;
}

/** Default completion length when a request gives none (tokens). */
export const DEFAULT_MAX_TOKENS = 512;
/** Default bound of one sampling call (ms). */
export const DEFAULT_CALL_TIMEOUT_MS = 120_000;
const SEED_MOD = 2 ** 31 - 1;

/** A 31-bit seed from parts (FNV-1a over their text; deterministic across processes). */
export function deriveSeed(...parts: Array<string | number>): number {
  let h = 0x811c9dc5;
  for (const ch of parts.join("\u0000")) {
    h ^= ch.codePointAt(0)!;
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h % SEED_MOD;
}

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
function chatMessages(body: ChatCompletionRequest): ChatMsg[] {
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
function chatTools(body: ChatCompletionRequest): ChatTool[] {
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
type Choice = { kind: "none" } | { kind: "auto" } | { kind: "required" } | { kind: "named"; name: string };

/** @throws GatewayError 400 for `required` / a named tool without tools, or a name not among them */
function toolChoice(body: ChatCompletionRequest, tools: readonly ChatTool[]): Choice {
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

/** One completion read back: what is recorded and what is returned. */
interface Turn {
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
interface Stops {
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
function stopsFor(tokenizer: Tokenizer, protocol: Protocol, stop: string | string[] | null | undefined): Stops {
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

/**
 * Cuts a sample at its first stop (kept in the completion, as sampled) and reads it with the protocol (see the module
 * doc for malformed output).
 */
function readTurn(s: SampledSequence, tokenizer: Tokenizer, protocol: Protocol, stops: Stops, tools: readonly ChatTool[], choice: Choice, parallel: boolean): Turn {
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

/** A tool call id (`call_` + 24 hex digits, as OpenAI's are opaque strings). */
function callId(): string {
  return `call_${randomBytes(12).toString("hex")}`;
}

type ToolCallOut = OpenAI.Chat.Completions.ChatCompletionMessageFunctionToolCall;

/**
 * The content split into stream deltas at token boundaries: a delta ends after token i when the decoded prefix is a
 * prefix of the content (so multi-byte characters and protocol cuts never split wrongly). At most ~64 deltas.
 */
function contentDeltas(content: string, textTokens: readonly number[], tokenizer: Tokenizer): string[] {
  if (content === "") return [];
  const out: string[] = [];
  let sent = 0;
  const step = Math.max(1, Math.ceil(textTokens.length / 64));
  for (let i = step; i < textTokens.length && sent < content.length; i += step) {
    const prefix = tokenizer.decode(textTokens.slice(0, i)).trimStart();
    if (prefix.length > sent && content.startsWith(prefix)) {
      out.push(content.slice(sent, prefix.length));
      sent = prefix.length;
    }
  }
  if (sent < content.length) out.push(content.slice(sent));
  return out;
}

/** The OpenAI `logprobs` block of a completion: every sampled token with its logprob (nats). */
function logprobsBlock(tokens: readonly number[], logprobs: readonly number[], tokenizer: Tokenizer, top: boolean): OpenAI.Chat.Completions.ChatCompletion.Choice.Logprobs {
  return {
    content: tokens.map((t, i) => {
      const token = tokenizer.decode([t]);
      const bytes = [...Buffer.from(token, "utf8")];
      return { token, logprob: logprobs[i], bytes, top_logprobs: top ? [{ token, logprob: logprobs[i], bytes }] : [] };
    }),
    refusal: null,
  };
}

/** Races a promise against a timeout. @throws GatewayError 504 when `ms` passes first */
async function bounded<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new GatewayError(504, `${what} did not finish within ${Math.max(0, Math.round(ms))} ms`, null, "timeout")), Math.max(0, ms));
  });
  p.catch(() => {}); // a late rejection after the timeout is not unhandled
  try {
    return await Promise.race([p, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** An error thrown inside a route → the OpenAI error body and status (`bodyLimit`: bytes, named in a 413). */
function errorReply(err: Error & { statusCode?: number; code?: string }, reply: FastifyReply, bodyLimit: number): FastifyReply {
  if (err instanceof GatewayError) {
    if (err.status === 409) void reply.header("x-should-retry", "false"); // the openai client retries 409 otherwise
    return reply.code(err.status).send(err.body());
  }
  if (err instanceof NestingError) return reply.code(400).send(openAIError(400, err.message, err.field, "invalid_value"));
  if (err instanceof HttpError) return reply.code(err.status).send(openAIError(err.status, err.message));
  const status = err.statusCode !== undefined && err.statusCode >= 400 && err.statusCode < 500 ? err.statusCode : 500;
  if (err.code === "FST_ERR_CTP_INVALID_JSON_BODY" || (status === 400 && err instanceof SyntaxError)) {
    return reply.code(400).send(openAIError(400, `the request body is not valid JSON (${err.message})`, null, "invalid_json"));
  }
  if (err.code === "FST_ERR_CTP_BODY_TOO_LARGE") {
    return reply.code(413).send(openAIError(413, `the request body is over this gateway's limit of ${bodyLimit} bytes (for its context; serve with a larger bodyLimit / --max-body to raise it)`, null, "request_too_large"));
  }
  if (err.code === "FST_ERR_CTP_EMPTY_JSON_BODY") return reply.code(400).send(openAIError(400, "the request body is empty; expected a JSON object", null, "invalid_json"));
  return reply.code(status).send(openAIError(status, status === 500 ? `internal error: ${err.message}` : err.message));
}

/**
 * The gateway's fastify app (not listening; `startGateway` listens). See the module doc for routes and semantics.
 * @throws Error when the policy's protocol is not hermes, or `contextLength` / `maxTokens` / `maxBytesPerToken` /
 *   timeouts are not positive integers
 */
export function gatewayApp(options: GatewayOptions): Gateway {
  const policy = options.policy;
  const protocol = policy.protocol ?? hermesProtocol;
  if (protocol.name !== "hermes") throw new Error(`gateway: only the hermes protocol (Qwen2.5's chat template with tools) renders chat messages; got ${protocol.name}`);
  const C = policy.contextLength;
  const defaultMax = policy.maxTokens ?? DEFAULT_MAX_TOKENS;
  const callTimeout = options.callTimeoutMs ?? DEFAULT_CALL_TIMEOUT_MS;
  const bytesPerToken = policy.maxBytesPerToken ?? DEFAULT_MAX_BYTES_PER_TOKEN;
  for (const [k, v] of Object.entries({ contextLength: C, maxTokens: defaultMax, callTimeoutMs: callTimeout, maxBytesPerToken: bytesPerToken })) {
    if (!Number.isInteger(v) || v <= 0) throw new Error(`gateway: ${k} must be a positive integer, got ${v}`);
  }
  const baseSeed = options.seed ?? 0;
  const tokenizer = policy.tokenizer;
  const defaultSystem = policy.defaultSystem ?? QWEN_DEFAULT_SYSTEM;
  let imEndId: number | undefined;
  try {
    imEndId = tokenizer.id(IM_END);
  } catch {
    imEndId = undefined; // the tokenizer spells it in several tokens: reused turns get it appended as text
  }
  const registry = new RolloutRegistry({ deadlineMs: options.deadlineMs, onRecord: options.onRecord });
  let sampler = policy.sampler;
  let plainCalls = 0;
  const lane = new WorkLane();
  const created = Math.floor(Date.now() / 1000);
  const bodyLimit = options.bodyLimit ?? contextBodyLimit(C, bytesPerToken);
  const app = createApp({ ...options, bodyLimit }, (status, message) => openAIError(status, message));

  // Every error body is OpenAI's, including those sent outside the gateway's routes (createApp's 401, unknown routes).
  app.addHook("onSend", async (_req, reply, payload) => {
    if (reply.statusCode < 400 || typeof payload !== "string") return payload;
    try {
      const body = JSON.parse(payload) as { error?: unknown };
      if (typeof body.error === "string") return JSON.stringify(openAIError(reply.statusCode, body.error, null, defaultCode(reply.statusCode)));
    } catch {
      // not JSON: leave it
    }
    return payload;
  });

  const modelCard = () => ({ id: policy.name, object: "model" as const, created, owned_by: "agentic-rl" });

  /** The rollout of a request: the path's `:id`, else the `x-rollout-id` header, else none (plain inference). */
  const rolloutOf = (req: FastifyRequest): string | undefined => {
    const fromPath = (req.params as { id?: string }).id;
    if (fromPath !== undefined) return checkId(fromPath);
    const h = req.headers["x-rollout-id"];
    if (h === undefined) return undefined;
    if (Array.isArray(h)) throw new GatewayError(400, "x-rollout-id: give one rollout id, not several headers", "x-rollout-id", "invalid_value");
    return checkId(h);
  };
  const checkId = (id: string): string => checkRolloutId(id);
  const tooLong = (detail: string) =>
    new GatewayError(400, `This model's maximum context length is ${C} tokens. However, ${detail}. Please reduce the length of the messages or tools.`, "messages", "context_length_exceeded");

  const chat = async (req: FastifyRequest, reply: FastifyReply) => {
    const started = Date.now();
    const id = rolloutOf(req);
    const body = parseRequest(ChatCompletionBody, req.body);
    const messages = chatMessages(body);
    const tools = chatTools(body);
    const choice = toolChoice(body, tools);
    const stops = stopsFor(tokenizer, protocol, body.stop);
    const ticket: CallTicket | undefined = id !== undefined ? registry.beginCall(id, options.openOnDemand === true) : undefined;
    let turn: Turn;
    let prompt: number[];
    try {
      const rendered = renderPieces(messages, tools, { defaultSystem, imEndId, ...(ticket ? { recall: registry.recaller(ticket.rolloutId) } : {}) });
      // Sizes before work: the reused turns' tokens are counted exactly; the text is bounded by bytes before it is
      // tokenised (tokenising megabytes takes seconds, during which nothing else is answered).
      if (rendered.reusedTokens >= C) throw tooLong(`the assistant turns your messages send back already hold ${rendered.reusedTokens} tokens, leaving no room for a completion`);
      const textCap = (C - rendered.reusedTokens) * bytesPerToken;
      if (rendered.textBytes > textCap) {
        throw tooLong(
          `your messages and tools are ${rendered.textBytes} bytes of text, more than this gateway tokenizes for the context (${C - rendered.reusedTokens} tokens × ${bytesPerToken} bytes = ${textCap} bytes)`,
        );
      }
      prompt = await lane.run(rendered.textBytes, () => {
        // Waited in the lane: a client that hung up meanwhile is not worth tokenising for.
        if (req.raw.socket?.destroyed === true) throw new GatewayError(408, "the client closed the connection before its prompt was read; the call is not recorded", null, "client_closed");
        return encodePieces(rendered.pieces, tokenizer);
      });
      if (prompt.length >= C) throw tooLong(`your messages resulted in ${prompt.length} tokens, leaving no room for a completion (at least 1 token)`);
      const maxTokens = Math.min(body.max_completion_tokens ?? body.max_tokens ?? defaultMax, C - prompt.length);
      const seed =
        body.seed !== null && body.seed !== undefined
          ? ((body.seed % SEED_MOD) + SEED_MOD) % SEED_MOD
          : ticket
            ? deriveSeed(baseSeed, ticket.rolloutId, ticket.seq)
            : deriveSeed(baseSeed, "plain", plainCalls++);
      const limit = Math.min(callTimeout, (ticket?.deadlineAt ?? Number.POSITIVE_INFINITY) - Date.now());
      const current = sampler;
      const samples = await bounded(
        current.sample(prompt, {
          n: 1,
          maxTokens,
          temperature: body.temperature ?? 1,
          stop: stops.ids,
          ...(stops.samplerStrings ? { stopStrings: stops.samplerStrings } : {}),
          seed,
          ...(ticket ? { rolloutId: ticket.rolloutId } : {}),
        }),
        limit,
        limit < callTimeout ? "sampling (bounded by the rollout's deadline)" : "sampling",
      );
      const s = samples[0];
      if (s === undefined || s.tokens.length !== s.logprobs.length) throw new Error(`the sampler returned ${s === undefined ? "no sample" : `${s.tokens.length} tokens with ${s.logprobs.length} logprobs`}`);
      turn = readTurn(s, tokenizer, protocol, stops, tools, choice, body.parallel_tool_calls !== false);
      // A client that hung up never sees this completion (and may retry it): recording it would put a turn the
      // agent never had into the rollout.
      if (req.raw.socket?.destroyed === true) {
        throw new GatewayError(408, "the client closed the connection before the completion was ready; the call is not recorded", null, "client_closed");
      }
    } catch (e) {
      if (ticket) registry.abandonCall(ticket);
      throw e;
    }
    const toolCalls: ToolCallOut[] = turn.toolCalls.map((c) => ({ id: callId(), type: "function", function: { name: c.name, arguments: JSON.stringify(c.arguments) } }));
    if (ticket) {
      const call: Omit<GatewayCall, "index"> = {
        promptTokens: prompt,
        completionTokens: turn.completionTokens,
        logprobs: turn.logprobs,
        finishReason: turn.finishReason,
        content: turn.content,
        toolCalls: turn.toolCalls,
        invalid: turn.invalid,
        ms: Date.now() - started,
      };
      registry.completeCall(ticket, call, messages);
    }
    if (turn.reason !== undefined) void reply.header("x-arl-invalid", encodeURIComponent(turn.reason).slice(0, 512));
    const completionId = `chatcmpl-${randomBytes(12).toString("hex")}`;
    const now = Math.floor(Date.now() / 1000);
    const usage = { prompt_tokens: prompt.length, completion_tokens: turn.completionTokens.length, total_tokens: prompt.length + turn.completionTokens.length };
    const lp = body.logprobs === true ? logprobsBlock(turn.completionTokens, turn.logprobs, tokenizer, (body.top_logprobs ?? 0) > 0) : null;
    if (body.stream !== true) {
      const res: OpenAI.Chat.Completions.ChatCompletion = {
        id: completionId,
        object: "chat.completion",
        created: now,
        model: policy.name,
        choices: [
          {
            index: 0,
            message: {
              role: "assistant",
              content: toolCalls.length > 0 && turn.content === "" ? null : turn.content,
              refusal: null,
              ...(toolCalls.length > 0 ? { tool_calls: toolCalls } : {}),
            },
            logprobs: lp,
            finish_reason: turn.finishReason,
          },
        ],
        usage,
      };
      return res;
    }
    // Streaming: OpenAI's chunk sequence — role, content deltas, one delta per tool call, the finish, usage, [DONE].
    const withUsage = body.stream_options?.include_usage === true;
    const chunk = (choices: OpenAI.Chat.Completions.ChatCompletionChunk["choices"], u?: OpenAI.Completions.CompletionUsage): string => {
      const c: OpenAI.Chat.Completions.ChatCompletionChunk = {
        id: completionId,
        object: "chat.completion.chunk",
        created: now,
        model: policy.name,
        choices,
        ...(withUsage ? { usage: u ?? null } : {}),
      };
      return `data: ${JSON.stringify(c)}\n\n`;
    };
    let out = chunk([{ index: 0, delta: { role: "assistant", content: "" }, logprobs: null, finish_reason: null }]);
    for (const d of contentDeltas(turn.content, turn.textTokens, tokenizer)) out += chunk([{ index: 0, delta: { content: d }, logprobs: null, finish_reason: null }]);
    toolCalls.forEach((c, index) => {
      out += chunk([{ index: 0, delta: { tool_calls: [{ index, id: c.id, type: "function", function: { name: c.function.name, arguments: c.function.arguments } }] }, logprobs: null, finish_reason: null }]);
    });
    // The sampled tokens' logprobs ride on the finishing chunk: every token once, whatever the content chunking.
    out += chunk([{ index: 0, delta: {}, logprobs: lp, finish_reason: turn.finishReason }]);
    if (withUsage) out += chunk([], usage);
    out += "data: [DONE]\n\n";
    return reply.header("content-type", "text/event-stream; charset=utf-8").header("cache-control", "no-cache").send(out);
  };

  /** @throws GatewayError 404 when a rollout is named that does not exist (and is not opened on demand) */
  const knownRollout = (req: FastifyRequest): void => {
    const id = rolloutOf(req);
    if (id !== undefined && !registry.has(id) && options.openOnDemand !== true) {
      throw new GatewayError(404, `rollout ${JSON.stringify(id)} does not exist (open it first, or serve with open-on-demand)`, null, "rollout_not_found");
    }
  };
  const models = async (req: FastifyRequest) => {
    knownRollout(req);
    return { object: "list", data: [modelCard()] };
  };
  const model = async (req: FastifyRequest) => {
    knownRollout(req);
    const name = decodeURIComponent((req.params as { "*": string })["*"]);
    if (name !== policy.name) throw new GatewayError(404, `model ${quoteShort(name)} does not exist; this gateway serves ${JSON.stringify(policy.name)}`, "model", "model_not_found");
    return modelCard();
  };

  void app.register(async (scope) => {
    scope.setErrorHandler((err: Error, _req, reply) => errorReply(err, reply, bodyLimit));
    scope.get("/healthz", async () => ({ status: "ok", model: policy.name, rollouts: { pending: registry.pending().length } }));
    scope.post("/rollout/:id/v1/chat/completions", chat);
    scope.post("/v1/chat/completions", chat);
    scope.get("/rollout/:id/v1/models", models);
    scope.get("/v1/models", models);
    scope.get("/rollout/:id/v1/models/*", model);
    scope.get("/v1/models/*", model);
    scope.post("/rollout/:id/reward", async (req) => {
      const id = rolloutOf(req)!;
      const body = parseRequest(RewardBody, req.body);
      const record = registry.reward(id, body.value, body.parts);
      return { id, status: record.status, reward: record.reward, calls: record.calls.length, mismatches: record.mismatches };
    });
    scope.post("/rollout/:id/open", async (req) => {
      const id = rolloutOf(req)!;
      const body = parseRequest(OpenBody, req.body ?? {});
      registry.open(id, { meta: body.meta, deadlineMs: body.deadline_ms });
      return { id, status: "open" };
    });
    scope.get("/rollout/:id", async (req) => {
      const snap = registry.snapshot(rolloutOf(req)!);
      const record = registry.status(snap.id) === "rewarded" || registry.status(snap.id) === "dropped" ? await registry.wait(snap.id) : undefined;
      return { ...snap, ...(record ? { reward: record.reward, dropReason: record.dropReason } : {}) };
    });
  });

  return {
    app,
    registry,
    get sampler() {
      return sampler;
    },
    setSampler(s: SamplingClient) {
      sampler = s;
    },
  };
}

/**
 * Serves a gateway on `options.host`:`options.port` (127.0.0.1; port 0 = any free one).
 * @returns the running gateway (`baseUrl(id)` is the OpenAI base URL of a rollout)
 * @throws Error when the port is taken or the host cannot be bound; what `gatewayApp` throws
 */
export async function startGateway(options: GatewayOptions): Promise<RunningGateway> {
  const g = gatewayApp(options);
  const server = await listen(g.app, options);
  return {
    app: g.app,
    registry: g.registry,
    get sampler() {
      return g.sampler;
    },
    setSampler: (s) => g.setSampler(s),
    url: server.url,
    baseUrl: (id) => `${server.url}/rollout/${encodeURIComponent(id)}/v1`,
    close: async () => {
      await server.close();
      g.registry.close();
    },
  };
}
