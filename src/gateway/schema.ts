/**
 * Request bodies the gateway accepts, as zod schemas: OpenAI's `ChatCompletionCreateParams` (OpenAI API reference,
 * "Create chat completion"; the `openai` npm client's `node_modules/openai/resources/chat/completions/completions.d.ts`)
 * restricted to what a sampled policy can honour, plus the gateway's own reward / open bodies.
 *
 * Unknown fields are ignored, as vLLM and OpenAI-compatible servers do (the `openai` client and the AI SDK send
 * fields such as `user`, `metadata`, `store`, `verbosity`, `reasoning_effort`); a known field with the wrong type or
 * a value the policy cannot honour (`n: 2`, `top_p: 0.9`, `frequency_penalty: 1`, JSON response formats) is a 400
 * naming the field, so an agent never silently gets something other than what it asked for.
 */
import { z } from "zod";

/** Most stop sequences per request (OpenAI allows 4; vLLM more). */
export const MAX_STOP = 16;
/** Most characters of one stop sequence: each is tokenised per request, so their size is bounded like the prompt's. */
export const MAX_STOP_CHARS = 1024;
/** OpenAI's rule for function names (`^[a-zA-Z0-9_-]{1,64}$`). */
export const TOOL_NAME_RE = /^[a-zA-Z0-9_-]{1,64}$/;

const int = (what: string) => z.number({ error: `expected ${what}` }).int(`expected ${what}`);

/** A text content part (`{type: "text", text}`); images, audio and files are refused (a text policy cannot read them). */
const textPart = z.looseObject({
  type: z.literal("text", { error: 'only content parts of type "text" are supported by this policy' }),
  text: z.string({ error: "expected the part's text" }),
});
const partsOrString = z.union([z.string(), z.array(textPart)], { error: "expected a string or a list of text parts" });

const toolCallSchema = z.looseObject({
  // Not rendered by the chat template, so optional (an agent that drops ids still works).
  id: z.string({ error: "expected the tool call id" }).nullish(),
  type: z.literal("function", { error: 'expected "function"' }).nullish(),
  function: z.looseObject({
    name: z.string({ error: "expected the function name" }),
    arguments: z.string({ error: "expected the arguments as a JSON string" }),
  }, { error: "expected {name, arguments}" }),
});

const messageSchema = z.discriminatedUnion(
  "role",
  [
    z.looseObject({ role: z.literal("system"), content: partsOrString }),
    z.looseObject({ role: z.literal("developer"), content: partsOrString }),
    z.looseObject({ role: z.literal("user"), content: partsOrString }),
    z.looseObject({
      role: z.literal("assistant"),
      content: partsOrString.nullish(),
      tool_calls: z.array(toolCallSchema, { error: "expected a list of tool calls" }).nullish(),
      function_call: z.null({ error: "function_call is deprecated and not supported; use tool_calls" }).optional(),
    }),
    z.looseObject({
      role: z.literal("tool"),
      content: partsOrString,
      tool_call_id: z.string({ error: "expected the id of the tool call answered" }),
    }),
  ],
  { error: 'expected a message with role "system", "developer", "user", "assistant" or "tool"' },
);

const toolSchema = z.looseObject({
  type: z.literal("function", { error: 'only tools of type "function" are supported' }),
  function: z.looseObject({
    name: z.string({ error: "expected the function name" }).regex(TOOL_NAME_RE, "expected a function name of 1-64 letters, digits, _ or -"),
    description: z.string({ error: "expected a string" }).nullish(),
    parameters: z.record(z.string(), z.unknown(), { error: "expected a JSON Schema object" }).nullish(),
    strict: z.boolean({ error: "expected true or false" }).nullish(),
  }, { error: "expected {name, description?, parameters?}" }),
});

const toolChoiceSchema = z.union(
  [
    z.enum(["none", "auto", "required"]),
    z.looseObject({ type: z.literal("function"), function: z.looseObject({ name: z.string() }) }),
  ],
  { error: 'expected "none", "auto", "required" or {type: "function", function: {name}}' },
);

const stopString = z.string().min(1, "a stop sequence cannot be empty").max(MAX_STOP_CHARS, `a stop sequence is at most ${MAX_STOP_CHARS} characters`);

const unsupported = (what: string) => ({ error: `${what} is not supported by this policy` });

/** Body of `POST …/v1/chat/completions`. */
export const ChatCompletionBody = z.looseObject({
  // Any name is accepted: the gateway serves the policy being trained whatever the agent's code calls it.
  model: z.string({ error: "expected the model id (a string)" }).nullish(),
  messages: z.array(messageSchema, { error: "expected a list of messages" }).min(1, "expected at least one message"),
  tools: z.array(toolSchema, { error: "expected a list of tools" }).nullish(),
  tool_choice: toolChoiceSchema.nullish(),
  parallel_tool_calls: z.boolean({ error: "expected true or false" }).nullish(),
  temperature: z.number({ error: "expected a number in [0, 2]" }).min(0, "expected a number in [0, 2]").max(2, "expected a number in [0, 2]").nullish(),
  top_p: z.literal(1, unsupported("top_p other than 1 (the policy samples its full distribution)")).nullish(),
  n: z.literal(1, { error: "only n = 1 is supported (send one request per sample)" }).nullish(),
  max_tokens: int("an integer ≥ 1").min(1, "expected an integer ≥ 1").nullish(),
  max_completion_tokens: int("an integer ≥ 1").min(1, "expected an integer ≥ 1").nullish(),
  stop: z
    .union([stopString, z.array(stopString).max(MAX_STOP, `at most ${MAX_STOP} stop sequences`)], {
      error: "expected a string or a list of strings",
    })
    .nullish(),
  seed: int("an integer seed").refine(Number.isSafeInteger, "expected a safe integer seed").nullish(),
  stream: z.boolean({ error: "expected true or false" }).nullish(),
  stream_options: z.looseObject({ include_usage: z.boolean({ error: "expected true or false" }).nullish() }, { error: "expected {include_usage?}" }).nullish(),
  logprobs: z.boolean({ error: "expected true or false" }).nullish(),
  top_logprobs: int("0 or 1").min(0, "expected 0 or 1").max(1, "expected 0 or 1 (only the sampled token's logprob is available)").nullish(),
  frequency_penalty: z.literal(0, unsupported("a frequency_penalty other than 0")).nullish(),
  presence_penalty: z.literal(0, unsupported("a presence_penalty other than 0")).nullish(),
  response_format: z.looseObject({ type: z.literal("text", unsupported("a response_format other than {type: \"text\"}")) }, { error: 'expected {type: "text"}' }).nullish(),
  logit_bias: z.record(z.string(), z.unknown()).refine((o) => Object.keys(o).length === 0, unsupported("logit_bias")).nullish(),
  functions: z.undefined({ error: "functions is deprecated and not supported; use tools" }).optional(),
  function_call: z.undefined({ error: "function_call is deprecated and not supported; use tool_choice" }).optional(),
});

/** A parsed chat-completion request. */
export type ChatCompletionRequest = z.output<typeof ChatCompletionBody>;

/** Body of `POST /rollout/<id>/reward`: `{value, parts?}` (finite numbers; zod 4 refuses ±Infinity, JSON has no NaN). */
export const RewardBody = z.looseObject({
  value: z.number({ error: "expected a finite number" }),
  parts: z.record(z.string(), z.number({ error: "expected a finite number" }), { error: "expected an object of named finite numbers" }).optional(),
});

/** Body of `POST /rollout/<id>/open`: `{meta?, deadline_ms?}` (`deadline_ms` in ms). */
export const OpenBody = z.looseObject({
  meta: z.record(z.string(), z.unknown(), { error: "expected an object" }).optional(),
  deadline_ms: int("an integer number of ms in [1, 2^31 - 1]").min(1, "expected an integer number of ms ≥ 1").max(2 ** 31 - 1, "expected at most 2^31 - 1 ms (Node's timer limit)").optional(),
});
