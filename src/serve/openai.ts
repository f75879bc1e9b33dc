/**
 * `arl serve openai`: the embedded policy as an OpenAI-compatible server, so the prompt-driven baseline agents
 * (src/baselines/) and the `OpenAISamplingClient` (src/policy/openai/) are tested through real HTTP with no external
 * model. Endpoints (non-streaming; `stream: true` is answered 400):
 *
 * - `GET /v1/models` → `{object: "list", data: [{id, object: "model", created, owned_by, max_model_len}]}`.
 * - `POST /v1/completions` — OpenAI's legacy completions plus vLLM's extras: `prompt` as text or token ids,
 *   `max_tokens`, `temperature`, `n`, `seed`, `stop`, `stop_token_ids`, `logprobs` (0 or 1), `return_token_ids`
 *   (adds `choices[i].token_ids` and `choices[i].prompt_token_ids`, as vLLM ≥ 0.10.2), `include_stop_str_in_output`.
 * - `POST /v1/chat/completions` — messages rendered into the policy's Search-R1 text (see `renderChat`), `tools`
 *   (a sampled `<search> q </search>` becomes a `search` tool call), `logprobs`, `return_token_ids` (adds
 *   `choices[i].token_ids` and a top-level `prompt_token_ids`, as vLLM).
 * - `GET /healthz` → `{status: "ok", model}` (no API key needed); `GET /v1/models/<id>` → the model card.
 *
 * Sampling goes through the backend's `samplingClient()`: the same prompt, seed and options give the same tokens and
 * logprobs as calling the embedded sampler directly. Logprobs are natural-log probabilities (nats) of the
 * distribution actually sampled from (temperature-scaled; at temperature 0 under softmax(logits)) — the values the
 * RL loop trains with. `top_logprobs` holds only the sampled token (the embedded sampler returns no alternatives).
 *
 * Work per request is bounded before it is done (as the training gateway's): the body by a limit derived from the
 * context (`contextBodyLimit`, unless `bodyLimit` is given) and `MAX_JSON_DEPTH` levels of nesting, a text prompt by
 * `contextLength × DEFAULT_MAX_BYTES_PER_TOKEN` bytes (400 naming the context, without tokenising), then tokens by
 * the context; a long prompt is tokenised in a `WorkLane`, so other requests are answered meanwhile.
 *
 * Sources: OpenAI API reference (Completions, Chat Completions, Models); vLLM
 * `vllm/entrypoints/openai/protocol.py` (`return_token_ids`, `stop_token_ids`, `include_stop_str_in_output`,
 * `prompt_token_ids`/`token_ids` in responses) and its test `tests/entrypoints/openai/test_return_token_ids.py`.
 */
import { randomInt } from "node:crypto";
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import { searchQuery, type StopReason } from "../core/types.ts";
import { INFORMATION_OPEN, informationObservation, parseSearchR1Action } from "../protocol/searchR1.ts";
import type { Tokenizer } from "../core/tokenizer.ts";
import type { SampledSequence, SamplingClient } from "../core/sampling.ts";
import { createApp, HttpError, listen, parseBody, type RunningServer, type ServeOptions } from "../http/server.ts";
import { DEFAULT_MAX_BYTES_PER_TOKEN, WorkLane, contextBodyLimit } from "../http/limits.ts";

/** The policy a server answers with. */
export interface ServedPolicy {
  /** The model id clients name in `model` (e.g. `default/final`). */
  name: string;
  /** Samples continuations (the embedded backend's `samplingClient()`). */
  sampler: SamplingClient;
  /** The policy's tokenizer (prompts in, text out). */
  tokenizer: Tokenizer;
  /** The model's context window (tokens); prompts must be shorter. */
  contextLength: number;
}

/** Most samples per request (`n`). */
export const MAX_N = 16;
/** Most stop sequences per request (OpenAI allows 4; vLLM more). */
export const MAX_STOP = 16;

const int = (what: string) => z.number({ error: `expected ${what}` }).int(`expected ${what}`);
const seedSchema = int("an integer seed").min(0, "expected an integer seed ≥ 0").max(2 ** 31 - 1, "expected a seed < 2^31");
const stopSchema = z
  .union([z.string().min(1, "a stop sequence cannot be empty"), z.array(z.string().min(1, "a stop sequence cannot be empty")).max(MAX_STOP, `at most ${MAX_STOP} stop sequences`)], {
    error: "expected a string or a list of strings",
  })
  .nullable()
  .optional();
const temperatureSchema = z
  .number({ error: "expected a number in [0, 2]" })
  .min(0, "expected a number in [0, 2]")
  .max(2, "expected a number in [0, 2]")
  .nullable()
  .optional();
const topPSchema = z
  .literal(1, { error: "only top_p = 1 is supported (the embedded sampler samples the full distribution)" })
  .nullable()
  .optional();
const streamSchema = z
  .literal(false, { error: "streaming is not supported by this server; send stream: false (or omit it)" })
  .nullable()
  .optional();
const tokenIds = z.array(int("a token id (integer ≥ 0)").min(0, "expected a token id ≥ 0"));

/** Sampling fields both endpoints take (OpenAI + vLLM's `stop_token_ids`). */
const samplingFields = {
  max_tokens: int("an integer ≥ 0").min(0, "expected an integer ≥ 0").nullable().optional(),
  temperature: temperatureSchema,
  top_p: topPSchema,
  n: int(`an integer in [1, ${MAX_N}]`).min(1, `expected an integer in [1, ${MAX_N}]`).max(MAX_N, `expected an integer in [1, ${MAX_N}]`).nullable().optional(),
  seed: seedSchema.nullable().optional(),
  stop: stopSchema,
  stop_token_ids: tokenIds.nullable().optional(),
};

/**
 * Body of `POST /v1/completions` (OpenAI `CompletionCreateParams` + vLLM extras). Unknown fields are ignored, as
 * vLLM does.
 */
export const CompletionRequest = z.looseObject({
  model: z.string({ error: "expected the model id (see GET /v1/models)" }),
  prompt: z.union([z.string(), tokenIds.min(1, "expected at least one prompt token")], {
    error: "expected one prompt: a string or a list of token ids (one prompt per request)",
  }),
  ...samplingFields,
  logprobs: int("0 or 1").min(0, "expected 0 or 1").max(1, "expected 0 or 1 (only the sampled token's logprob is available)").nullable().optional(),
  echo: z.literal(false, { error: "echo is not supported by this server" }).nullable().optional(),
  stream: streamSchema,
  return_token_ids: z.boolean({ error: "expected true or false" }).nullable().optional(),
  include_stop_str_in_output: z.boolean({ error: "expected true or false" }).nullable().optional(),
});

const textPart = z.object({ type: z.literal("text", { error: 'only content parts of type "text" are supported' }), text: z.string() });
const contentSchema = z.union([z.string(), z.array(textPart)], { error: "expected a string or a list of text parts" }).nullable().optional();
const toolCallSchema = z.object({
  id: z.string({ error: "expected the tool call id" }),
  type: z.literal("function", { error: 'expected "function"' }),
  function: z.object({ name: z.string({ error: "expected the function name" }), arguments: z.string({ error: "expected the arguments as a JSON string" }) }),
});
const messageSchema = z.discriminatedUnion(
  "role",
  [
    z.looseObject({ role: z.literal("system"), content: contentSchema }),
    z.looseObject({ role: z.literal("developer"), content: contentSchema }),
    z.looseObject({ role: z.literal("user"), content: z.union([z.string(), z.array(textPart)], { error: "a user message needs content: a string or a list of text parts" }) }),
    z.looseObject({ role: z.literal("assistant"), content: contentSchema, tool_calls: z.array(toolCallSchema).nullable().optional() }),
    z.looseObject({ role: z.literal("tool"), content: contentSchema, tool_call_id: z.string({ error: "expected the id of the tool call answered" }) }),
  ],
  { error: 'expected a message with role "system", "developer", "user", "assistant" or "tool"' },
);
const toolSchema = z.object({
  type: z.literal("function", { error: 'only tools of type "function" are supported' }),
  function: z.looseObject({ name: z.string({ error: "expected the function name" }), description: z.string().optional(), parameters: z.record(z.string(), z.unknown()).optional() }),
});

/** Body of `POST /v1/chat/completions` (OpenAI `ChatCompletionCreateParams` + vLLM extras; unknown fields ignored). */
export const ChatCompletionRequest = z.looseObject({
  model: z.string({ error: "expected the model id (see GET /v1/models)" }),
  messages: z.array(messageSchema, { error: "expected a list of messages" }).min(1, "expected at least one message"),
  tools: z.array(toolSchema, { error: "expected a list of tools" }).nullable().optional(),
  tool_choice: z
    .union([z.enum(["none", "auto", "required"]), z.object({ type: z.literal("function"), function: z.object({ name: z.string() }) })], {
      error: 'expected "none", "auto", "required" or {type: "function", function: {name}}',
    })
    .nullable()
    .optional(),
  ...samplingFields,
  max_completion_tokens: int("an integer ≥ 0").min(0, "expected an integer ≥ 0").nullable().optional(),
  logprobs: z.boolean({ error: "expected true or false" }).nullable().optional(),
  top_logprobs: int("0 or 1").min(0, "expected 0 or 1").max(1, "expected 0 or 1 (only the sampled token's logprob is available)").nullable().optional(),
  stream: streamSchema,
  return_token_ids: z.boolean({ error: "expected true or false" }).nullable().optional(),
  include_stop_str_in_output: z.boolean({ error: "expected true or false" }).nullable().optional(),
});

/** A parsed chat message. */
export type ChatRequestMessage = z.output<typeof ChatCompletionRequest>["messages"][number];

/** The text of a message's content (text parts joined), '' when null. */
function contentText(content: string | Array<{ text: string }> | null | undefined): string {
  if (content === null || content === undefined) return "";
  return typeof content === "string" ? content : content.map((p) => p.text).join("");
}

/** The query of a `search` tool call's JSON arguments (`{"query": "…"}`), else the raw arguments text. */
function toolCallQuery(args: string): string {
  try {
    const v: unknown = JSON.parse(args);
    if (typeof v === "object" && v !== null && typeof (v as { query?: unknown }).query === "string") return (v as { query: string }).query;
  } catch {
    // not JSON: the raw text is the best rendering of what the caller asked for
  }
  return args;
}

/**
 * Renders a chat conversation into the policy's Search-R1 token sequence `[prompt]`:
 * system/developer messages are dropped (the embedded policy was trained on the env's bare prompt, with the protocol
 * in its weights); the first user message is the episode prompt (`tokenizer.promptTokens`, as the env's `reset`
 * prompt is tokenised by the rollout); after it, assistant text is appended as is (each `search` tool call as
 * `<search> query </search>`), a tool result as `\n\n<information>…</information>\n\n` (Search-R1's observation;
 * kept as is when it already holds `<information>`), later user messages as is. Each piece is tokenised on its own
 * and appended, as the rollout appends observations.
 * @throws HttpError 400 when no user message comes before the first assistant or tool message
 */
export function renderChat(messages: readonly ChatRequestMessage[], tokenizer: Tokenizer): number[] {
  let tokens: number[] | null = null;
  messages.forEach((m, i) => {
    if (m.role === "system" || m.role === "developer") return;
    const text = contentText(m.content);
    if (tokens === null) {
      if (m.role !== "user") throw new HttpError(400, `messages.${i}: the conversation must start with a user message (the question), got role "${m.role}"`);
      tokens = tokenizer.promptTokens(text);
      return;
    }
    let piece = text;
    if (m.role === "assistant") {
      for (const call of m.tool_calls ?? []) piece += ` <search> ${toolCallQuery(call.function.arguments)} </search>`;
    } else if (m.role === "tool") {
      piece = text.includes(INFORMATION_OPEN.trim()) ? text : informationObservation(text);
    }
    for (const id of tokenizer.encode(piece)) tokens.push(id); // not push(...ids): a huge message would overflow the stack
  });
  if (tokens === null) throw new HttpError(400, "messages: expected at least one user message (the question)");
  return tokens;
}

/** UTF-8 bytes of the text a conversation renders from (contents and tool-call arguments; the template's few are left out). */
export function chatTextBytes(messages: readonly ChatRequestMessage[]): number {
  let n = 0;
  for (const m of messages) {
    n += Buffer.byteLength(contentText(m.content), "utf8");
    if (m.role === "assistant") for (const c of m.tool_calls ?? []) n += Buffer.byteLength(c.function.arguments, "utf8");
  }
  return n;
}

/** OpenAI's `finish_reason` for a sample. */
function finishReason(stop: StopReason): "stop" | "length" {
  return stop === "stop" ? "stop" : "length";
}

/** A stop string and its token ids. */
interface StopSeq {
  text: string;
  ids: number[];
}

/**
 * The request's stop strings as token sequences (matched on token ids, since the word-level tokenizer's text is
 * normalised). A stop string containing a word outside the vocabulary would match any unknown word, so it is
 * skipped (never matches).
 */
function stopSequences(stop: string | string[] | null | undefined, tokenizer: Tokenizer): StopSeq[] {
  const list = stop === null || stop === undefined ? [] : typeof stop === "string" ? [stop] : stop;
  const out: StopSeq[] = [];
  for (const text of list) {
    if (text === "") continue;
    const ids = tokenizer.encode(text);
    if (ids.length === 0 || tokenizer.decode(ids).includes("[UNK]")) continue;
    out.push({ text, ids });
  }
  return out;
}

/** Index of the first occurrence of `seq` in `xs`, or -1. */
function indexOfSeq(xs: readonly number[], seq: readonly number[]): number {
  outer: for (let i = 0; i + seq.length <= xs.length; i++) {
    for (let j = 0; j < seq.length; j++) if (xs[i + j] !== seq[j]) continue outer;
    return i;
  }
  return -1;
}

/** A sample after stop handling. */
interface CutSample {
  /** Token ids returned as `token_ids` `[new]`. */
  tokens: number[];
  /** Their logprobs (nats) `[new]`. */
  logprobs: number[];
  /** The tokens whose decoding is the returned text. */
  textTokens: number[];
  stopReason: StopReason;
  /** The stop string or stop token id that ended the sample, else null (vLLM's `stop_reason`). */
  matched: string | number | null;
}

/**
 * Stop semantics as vLLM's: the earliest stop string ends the sample and is cut from the text and the token ids
 * unless `include` (`include_stop_str_in_output`); otherwise a final stop token id (`stopIds`) stays in the token
 * ids and is cut from the text unless `include` or it is in `keepInText` (the chat end-of-turn tags).
 */
function cutSample(s: SampledSequence, stopIds: readonly number[], seqs: readonly StopSeq[], include: boolean, keepInText: readonly number[]): CutSample {
  let best = -1;
  let hit: StopSeq | null = null;
  for (const q of seqs) {
    const at = indexOfSeq(s.tokens, q.ids);
    if (at >= 0 && (best < 0 || at < best)) {
      best = at;
      hit = q;
    }
  }
  if (hit !== null) {
    const end = include ? best + hit.ids.length : best;
    const tokens = s.tokens.slice(0, end);
    return { tokens, logprobs: s.logprobs.slice(0, end), textTokens: tokens, stopReason: "stop", matched: hit.text };
  }
  const last = s.tokens[s.tokens.length - 1];
  if (s.stopReason === "stop" && stopIds.includes(last)) {
    const textTokens = include || keepInText.includes(last) ? s.tokens : s.tokens.slice(0, -1);
    return { tokens: s.tokens, logprobs: s.logprobs, textTokens, stopReason: "stop", matched: last };
  }
  return { tokens: s.tokens, logprobs: s.logprobs, textTokens: s.tokens, stopReason: s.stopReason, matched: null };
}

/** The OpenAI usage block (tokens). */
function usage(promptTokens: number, samples: readonly CutSample[]) {
  const completion = samples.reduce((a, s) => a + s.tokens.length, 0);
  return { prompt_tokens: promptTokens, completion_tokens: completion, total_tokens: promptTokens + completion };
}

/**
 * The Fastify app of the OpenAI-compatible server (not listening; `serveOpenAI` listens).
 * Errors are `{error: reason}` with 400 (bad body, prompt too long, token id outside the vocabulary), 401 (API key),
 * 404 (unknown model or route), 413 (body over the limit); never 500 for a bad request.
 */
export function createOpenAIApp(policy: ServedPolicy, options: ServeOptions = {}): FastifyInstance {
  const { tokenizer, sampler, contextLength: C, name } = policy;
  const app = createApp({ ...options, bodyLimit: options.bodyLimit ?? contextBodyLimit(C, DEFAULT_MAX_BYTES_PER_TOKEN) });
  const lane = new WorkLane();
  const textCap = C * DEFAULT_MAX_BYTES_PER_TOKEN;
  /** @throws HttpError 400 naming the context when `bytes` of prompt text exceed `textCap` (checked before tokenising) */
  const checkTextBytes = (bytes: number, field: "prompt" | "messages"): void => {
    if (bytes > textCap) {
      throw new HttpError(400, `This model's maximum context length is ${C} tokens; the ${field} ${field === "prompt" ? "is" : "are"} ${bytes} bytes of text, more than this server tokenizes for it (${C} tokens × ${DEFAULT_MAX_BYTES_PER_TOKEN} bytes = ${textCap} bytes)`);
    }
  };
  const created = Math.floor(Date.now() / 1000);
  let counter = 0;
  const vocab = tokenizer.vocabSize;
  const endOfTurn = ["</search>", "</answer>"].flatMap((t) => {
    try {
      return [tokenizer.id(t)];
    } catch {
      return [];
    }
  });

  const checkModel = (model: string): void => {
    if (model !== name) throw new HttpError(404, `model ${JSON.stringify(model)} does not exist; this server serves ${JSON.stringify(name)} (GET /v1/models)`);
  };
  const checkPrompt = (prompt: number[], field: string): void => {
    for (const t of prompt) if (t >= vocab) throw new HttpError(400, `${field}: token id ${t} outside the vocabulary [0, ${vocab})`);
    if (prompt.length >= C) {
      throw new HttpError(400, `This model's maximum context length is ${C} tokens; the prompt is ${prompt.length} tokens (${field})`);
    }
  };
  const sample = (prompt: number[], o: { n: number; maxTokens: number; temperature: number; seed: number | null | undefined; stop: number[] }) =>
    sampler.sample(prompt, {
      n: o.n,
      maxTokens: o.maxTokens,
      temperature: o.temperature,
      stop: o.stop,
      // Without a seed each request draws one (OpenAI: sampling is random unless seeded).
      seed: o.seed ?? randomInt(2 ** 31 - 1),
    });

  app.get("/healthz", async () => ({ status: "ok", model: name }));
  const modelCard = () => ({ id: name, object: "model", created, owned_by: "agentic-rl", max_model_len: C });
  app.get("/v1/models", async () => ({ object: "list", data: [modelCard()] }));
  // The OpenAI SDK's models.retrieve(id); ids contain "/", so the route takes the rest of the path.
  app.get("/v1/models/*", async (req) => {
    const id = decodeURIComponent((req.params as { "*": string })["*"]);
    if (id !== name) throw new HttpError(404, `model ${JSON.stringify(id)} does not exist; this server serves ${JSON.stringify(name)}`);
    return modelCard();
  });

  app.post("/v1/completions", async (req) => {
    const body = parseBody(CompletionRequest, req.body);
    checkModel(body.model);
    let prompt: number[];
    if (typeof body.prompt === "string") {
      const text = body.prompt;
      const bytes = Buffer.byteLength(text, "utf8");
      checkTextBytes(bytes, "prompt");
      prompt = await lane.run(bytes, () => tokenizer.promptTokens(text));
    } else prompt = body.prompt;
    checkPrompt(prompt, "prompt");
    const seqs = stopSequences(body.stop, tokenizer);
    const stopIds = [...(body.stop_token_ids ?? []), ...seqs.filter((q) => q.ids.length === 1).map((q) => q.ids[0])];
    const samples = await sample(prompt, {
      n: body.n ?? 1,
      maxTokens: body.max_tokens ?? 16,
      temperature: body.temperature ?? 1,
      seed: body.seed,
      stop: stopIds,
    });
    const include = body.include_stop_str_in_output === true;
    const cut = samples.map((s) => cutSample(s, body.stop_token_ids ?? [], seqs, include, []));
    const withLogprobs = body.logprobs !== null && body.logprobs !== undefined;
    const withIds = body.return_token_ids === true;
    return {
      id: `cmpl-${++counter}`,
      object: "text_completion",
      created: Math.floor(Date.now() / 1000),
      model: name,
      choices: cut.map((c, index) => ({
        index,
        text: tokenizer.decode(c.textTokens),
        logprobs: withLogprobs
          ? {
              tokens: c.tokens.map((t) => tokenizer.decode([t])),
              token_logprobs: c.logprobs,
              top_logprobs: body.logprobs === 0 ? null : c.tokens.map((t, i) => ({ [tokenizer.decode([t])]: c.logprobs[i] })),
            }
          : null,
        finish_reason: finishReason(c.stopReason),
        stop_reason: c.matched,
        ...(withIds ? { token_ids: c.tokens, prompt_token_ids: prompt } : {}),
      })),
      usage: usage(prompt.length, cut),
    };
  });

  app.post("/v1/chat/completions", async (req) => {
    const body = parseBody(ChatCompletionRequest, req.body);
    checkModel(body.model);
    const bytes = chatTextBytes(body.messages);
    checkTextBytes(bytes, "messages");
    const prompt = await lane.run(bytes, () => renderChat(body.messages, tokenizer));
    checkPrompt(prompt, "messages");
    const seqs = stopSequences(body.stop, tokenizer);
    // The policy's turn ends at `</search>` or `</answer>` (its end-of-turn tokens, kept in the content).
    const stopIds = [...endOfTurn, ...(body.stop_token_ids ?? []), ...seqs.filter((q) => q.ids.length === 1).map((q) => q.ids[0])];
    const samples = await sample(prompt, {
      n: body.n ?? 1,
      maxTokens: body.max_completion_tokens ?? body.max_tokens ?? C,
      temperature: body.temperature ?? 1,
      seed: body.seed,
      stop: stopIds,
    });
    const include = body.include_stop_str_in_output === true;
    const cut = samples.map((s) => cutSample(s, [...endOfTurn, ...(body.stop_token_ids ?? [])], seqs, include, endOfTurn));
    const searchTool = (body.tools ?? []).some((t) => t.function.name === "search") && body.tool_choice !== "none";
    const withIds = body.return_token_ids === true;
    const id = ++counter;
    return {
      id: `chatcmpl-${id}`,
      object: "chat.completion",
      created: Math.floor(Date.now() / 1000),
      model: name,
      choices: cut.map((c, index) => {
        const text = tokenizer.decode(c.textTokens);
        let message: { role: "assistant"; content: string | null; tool_calls?: unknown[] } = { role: "assistant", content: text };
        let finish: string = finishReason(c.stopReason);
        if (searchTool) {
          // With tools, the policy's protocol is translated: a search is a tool call, an answer is the content.
          const action = parseSearchR1Action(text);
          const query = searchQuery(action);
          if (query !== undefined) {
            message = {
              role: "assistant",
              content: null,
              tool_calls: [{ id: `call_${id}_${index}`, type: "function", function: { name: "search", arguments: JSON.stringify({ query }) } }],
            };
            finish = "tool_calls";
          } else if (action.type === "answer") {
            message = { role: "assistant", content: action.answer };
          }
        }
        return {
          index,
          message,
          logprobs: body.logprobs
            ? {
                content: c.tokens.map((t, i) => {
                  const token = tokenizer.decode([t]);
                  const bytes = [...Buffer.from(token, "utf8")];
                  return { token, logprob: c.logprobs[i], bytes, top_logprobs: body.top_logprobs ? [{ token, logprob: c.logprobs[i], bytes }] : [] };
                }),
              }
            : null,
          finish_reason: finish,
          ...(withIds ? { token_ids: c.tokens } : {}),
        };
      }),
      usage: usage(prompt.length, cut),
      ...(withIds ? { prompt_token_ids: prompt } : {}),
    };
  });
  return app;
}

/**
 * Serves `policy` over HTTP (see the module doc) on `options.host`:`options.port` (127.0.0.1, port 0 = any free).
 * @returns the running server; its `url` + `/v1` is the base URL OpenAI clients take
 * @throws Error when the port is taken or the host cannot be bound
 */
export async function serveOpenAI(policy: ServedPolicy, options: ServeOptions = {}): Promise<RunningServer> {
  return listen(createOpenAIApp(policy, options), options);
}
