/**
 * A read completion as OpenAI's answer: a `ChatCompletion`, or with `stream: true` the chunk sequence the `openai`
 * client and the AI SDK read (role, content deltas at token boundaries, one delta per whole tool call, the finish with
 * the logprobs, usage, `[DONE]`). The sampler is not incremental, so a stream is the finished completion cut into
 * chunks: streaming and non-streaming give identical records.
 */
import { randomBytes } from "node:crypto";
import type { FastifyReply } from "fastify";
import type OpenAI from "openai";
import type { Tokenizer } from "../core/tokenizer.ts";
import type { Turn } from "./completion.ts";
import type { ChatCompletionRequest } from "./schema.ts";

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

/** What `completionReply` answers with. */
export interface CompletionAnswer {
  turn: Turn;
  /** The prompt's tokens (usage). */
  prompt: readonly number[];
  body: ChatCompletionRequest;
  /** The model id reported. */
  model: string;
  tokenizer: Tokenizer;
}

/** The answer to a chat call: the completion object, or the stream sent on `reply`. */
export function completionReply(reply: FastifyReply, a: CompletionAnswer): OpenAI.Chat.Completions.ChatCompletion | FastifyReply {
  const { turn, prompt, body, tokenizer } = a;
  const toolCalls: ToolCallOut[] = turn.toolCalls.map((c) => ({ id: callId(), type: "function", function: { name: c.name, arguments: JSON.stringify(c.arguments) } }));
  const completionId = `chatcmpl-${randomBytes(12).toString("hex")}`;
  const now = Math.floor(Date.now() / 1000);
  const usage = { prompt_tokens: prompt.length, completion_tokens: turn.completionTokens.length, total_tokens: prompt.length + turn.completionTokens.length };
  const lp = body.logprobs === true ? logprobsBlock(turn.completionTokens, turn.logprobs, tokenizer, (body.top_logprobs ?? 0) > 0) : null;
  if (body.stream !== true) {
    const res: OpenAI.Chat.Completions.ChatCompletion = {
      id: completionId,
      object: "chat.completion",
      created: now,
      model: a.model,
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
      model: a.model,
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
}
