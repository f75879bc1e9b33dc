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
 * `INLINE_WORK_BYTES` runs in a `WorkLane` (src/http/limits.ts): one at a time, each in its own macrotask, so
 * `/healthz` and other rollouts' calls are answered between them. Rollout ids are `ROLLOUT_ID_RE` (never `.` or `..`).
 *
 * Tool calls: the completion is parsed by the hermes protocol (`<tool_call>{"name", "arguments"}</tool_call>`).
 * Malformed output (invalid JSON, an unknown tool, an unclosed block, no call under `tool_choice: "required"`) is
 * returned as plain content with `finish_reason: "stop"` (or `length`) and recorded `invalid: true` — the agent sees
 * the model's text, the trainer sees an invalid action; never a 5xx. `tool_choice: "none"` leaves the text unparsed.
 * `tool_choice` cannot constrain sampling (no guided decoding): it decides how the text is read. Tools are always
 * rendered when given, so a rollout's prompts keep one prefix whatever each call's `tool_choice`.
 *
 * Here: the options, the app and its routes. Requests are read in `./chatRequest.ts`, completions in
 * `./completion.ts`, answered in `./chatResponse.ts`; errors are `./errors.ts`'s.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { Tokenizer } from "../core/tokenizer.ts";
import type { SamplingClient } from "../core/sampling.ts";
import { IM_END, hermesProtocol } from "../protocol/hermes.ts";
import type { Protocol } from "../protocol/types.ts";
import { createApp, listen, type ServeOptions } from "../http/server.ts";
import { DEFAULT_MAX_BYTES_PER_TOKEN, WorkLane, contextBodyLimit, quoteShort } from "../http/limits.ts";
import { chatMessages, chatTools, toolChoice } from "./chatRequest.ts";
import { completionReply } from "./chatResponse.ts";
import { readTurn, stopsFor, type Turn } from "./completion.ts";
import { GatewayError, defaultCode, errorReply, openAIError, parseRequest } from "./errors.ts";
import { RolloutRegistry, checkRolloutId, type CallTicket } from "./registry.ts";
import { QWEN_DEFAULT_SYSTEM, encodePieces, renderPieces } from "./render.ts";
import { ChatCompletionBody, OpenBody, RewardBody } from "./schema.ts";
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
      turn = readTurn(s, { tokenizer, protocol, stops, tools, choice, parallel: body.parallel_tool_calls !== false });
      // A client that hung up never sees this completion (and may retry it): recording it would put a turn the
      // agent never had into the rollout.
      if (req.raw.socket?.destroyed === true) {
        throw new GatewayError(408, "the client closed the connection before the completion was ready; the call is not recorded", null, "client_closed");
      }
    } catch (e) {
      if (ticket) registry.abandonCall(ticket);
      throw e;
    }
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
    return completionReply(reply, { turn, prompt, body, model: policy.name, tokenizer });
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
