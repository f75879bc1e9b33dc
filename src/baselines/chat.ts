/**
 * Prompt-driven baseline agents: a chat model behind any OpenAI-compatible `chat.completions` endpoint (vLLM,
 * SGLang, llama.cpp server, Ollama, the OpenAI API, or `arl serve openai`) runs a whole episode against our `Env`.
 * Each agent is a `ChatProtocol` — how the env's prompt and observations become messages, and how a reply becomes
 * an env action — and `ChatAgent` runs the loop and keeps the books, so the result is an ordinary `Trajectory`
 * that the reward (`computeReward`) and the evaluation metrics (`summarizeEval`) score unchanged.
 *
 * These agents work on text, not tokens: their trajectories are untrainable (`trainable: false`, loss mask all 0,
 * logprobs all 0). `tokens` are the run's tokenizer applied to the prompt, each turn's env action text and each
 * observation — token accounting only (e.g. the `gen_tokens` / `obs_tokens` cost terms), not what the chat model
 * saw. Train from an OpenAI-compatible server with `OpenAISamplingClient` (src/policy/openai/) instead.
 *
 * Why a folder of its own (not src/policy/openai/): a policy samples tokens for the rollout engine's turns; these
 * agents own the whole episode and its message protocol (instructions, tool schemas, ReAct parsing), and only need a
 * chat endpoint — one concept, "prompt-driven baseline agents", independent of which server runs the model.
 */
import OpenAI from "openai";
import { searchQuery, type Action, type StepResult, type Task, type Trajectory, type Turn } from "../core/types.ts";
import { describeValue } from "../core/values.ts";
import { INFORMATION_CLOSE, INFORMATION_OPEN } from "../protocol/searchR1.ts";
import type { EnvFactory } from "../env/types.ts";
import type { Tokenizer } from "../core/tokenizer.ts";

/** The three prompt-driven baselines. */
export type AgentKind = "prompt" | "function-calling" | "react";

/** All agent kinds, in table order. */
export const AGENT_KINDS: readonly AgentKind[] = ["prompt", "function-calling", "react"];

/** A chat message as sent to the server (the `openai` client's type). */
export type ChatMessage = OpenAI.Chat.Completions.ChatCompletionMessageParam;

/** What a protocol makes of one assistant reply. */
export interface ParsedReply {
  /**
   * The text given to `env.step`, in the env's Search-R1 form (`<search> q </search>`, `<answer> a </answer>`), or,
   * for a reply invalid in the agent's protocol, the reply with protocol tags removed (which the env counts as an
   * invalid action and penalises).
   */
  envText: string;
  /** Set when the reply is invalid in the agent's protocol: the turn's action is `{type: "invalid", reason}`. */
  invalidReason?: string;
  /** The assistant message appended to the conversation (the reply as the server sent it). */
  assistant: ChatMessage;
}

/** How one agent talks to the model. */
export interface ChatProtocol {
  readonly kind: AgentKind;
  /** The system message; the conversation opens with it, then the env's prompt text as the user message. */
  readonly instructions: string;
  /** Fields added to every chat request (`tools`, `stop`, …). */
  readonly requestFields: Readonly<Record<string, unknown>>;
  /**
   * One reply → the env action. Never throws: malformed output (bad JSON arguments, no ReAct action, an empty reply)
   * is an invalid action.
   * @param finishReason the choice's `finish_reason`
   */
  parse(message: OpenAI.Chat.Completions.ChatCompletionMessage, finishReason: string | null): ParsedReply;
  /** The messages that give the model the env's reply to its turn (not called after the last turn). */
  feedback(reply: ParsedReply, result: StepResult): ChatMessage[];
}

/** A turn of a chat agent: the env turn plus the model's own reply text. */
export interface AgentTurn extends Turn {
  /** The reply as the model wrote it (content, and tool calls as `search({…})`). */
  modelText: string;
}

/**
 * A trajectory of a prompt-driven agent. Untrainable: `lossMask` and `logprobs` are all 0 `[seq]`, `tokens` are
 * text re-tokenised with the run's tokenizer (accounting only).
 */
export interface AgentTrajectory extends Trajectory {
  /** Always false: never feed these trajectories to `trajectoryToDatum` / RL. */
  trainable: false;
  agent: AgentKind;
  /** The model id on the server. */
  model: string;
  turns: AgentTurn[];
  /** The whole conversation as sent to the server, final reply included. */
  messages: ChatMessage[];
}

/** Options of `ChatAgent`. */
export interface ChatAgentOptions {
  /** Base URL of the OpenAI API, e.g. `http://127.0.0.1:8000/v1`. */
  baseURL: string;
  /** Model id on the server (`GET /v1/models`). */
  model: string;
  /** API key (default `EMPTY`, for servers that need none). */
  apiKey?: string;
  /** Makes the env of each episode. */
  makeEnv: EnvFactory;
  /** The run's tokenizer, for token accounting. */
  tokenizer: Tokenizer;
  /** Sampling temperature (0 = greedy). */
  temperature: number;
  /** `max_tokens` of each reply (the server's tokens). */
  maxTokens: number;
  /** Limit of one request (ms; default 600 000). */
  timeoutMs?: number;
  /** Retries of a failed request (default 2). */
  maxRetries?: number;
  /** Further fields for every request (e.g. `{top_p: 0.95}`). */
  extraBody?: Record<string, unknown>;
}

/** Search-R1's protocol tags; removed from text that must not be read as an action. */
const PROTOCOL_TAG_RE = /<\/?(?:search|answer|think|information)>/g;

/** Removes Search-R1 protocol tags (so model text cannot smuggle an action past the agent's own parser). */
export function stripProtocolTags(text: string): string {
  return text.replace(PROTOCOL_TAG_RE, " ");
}

/** `<search> q </search>` for the env (tags inside `q` removed, whitespace collapsed). */
export function searchAction(query: string): string {
  return `<search> ${stripProtocolTags(query).replace(/\s+/g, " ").trim()} </search>`;
}

/** `<answer> a </answer>` for the env (tags inside `a` removed, whitespace collapsed). */
export function answerAction(answer: string): string {
  return `<answer> ${stripProtocolTags(answer).replace(/\s+/g, " ").trim()} </answer>`;
}

/** True for a server's reply that the conversation no longer fits the model's context window. */
function isContextOverflow(e: unknown): boolean {
  return e instanceof OpenAI.BadRequestError && /maximum context length|context length|context window/i.test(e.message);
}

/**
 * Runs episodes of one chat protocol against a server. Concurrent `runEpisode` calls are concurrent requests.
 */
export class ChatAgent {
  readonly kind: AgentKind;
  private readonly client: OpenAI;

  /** @throws Error when baseURL is not an http(s) URL, model is empty, or maxTokens is not a positive integer */
  constructor(
    private readonly protocol: ChatProtocol,
    private readonly options: ChatAgentOptions,
  ) {
    if (!/^https?:\/\//.test(options.baseURL)) {
      throw new Error(`${protocol.kind} agent: baseURL must be an http(s) URL such as http://127.0.0.1:8000/v1, got ${JSON.stringify(options.baseURL)}`);
    }
    if (options.model.trim() === "") throw new Error(`${protocol.kind} agent: model must be a non-empty model id`);
    if (!Number.isInteger(options.maxTokens) || options.maxTokens <= 0) {
      throw new Error(`${protocol.kind} agent: maxTokens must be a positive integer, got ${describeValue(options.maxTokens)}`);
    }
    this.kind = protocol.kind;
    this.client = new OpenAI({
      baseURL: options.baseURL,
      apiKey: options.apiKey || "EMPTY",
      timeout: options.timeoutMs ?? 600_000,
      maxRetries: options.maxRetries ?? 2,
    });
  }

  /** This agent as an `EpisodeRunner` for `evaluateEpisodes`. */
  get runner(): (task: Task, seed: number) => Promise<AgentTrajectory> {
    return (task, seed) => this.runEpisode(task, seed);
  }

  /**
   * Runs one episode: reset the env, then reply → env step → feedback until the env ends it (answer or turn
   * budget) or the conversation no longer fits the server's context (the episode ends truncated).
   * Request `t` (0-based) of the episode is sent with `seed + t`, as the rollout seeds its turns.
   * @returns the trajectory (`trainable: false`)
   * @throws Error naming the server and model when a request fails for another reason (network, auth, unknown
   *   model), or the reply has no choices; never for malformed model output
   */
  async runEpisode(task: Task, seed: number): Promise<AgentTrajectory> {
    const { tokenizer, model } = this.options;
    const env = this.options.makeEnv();
    const prompt = await env.reset(task);
    const messages: ChatMessage[] = [
      { role: "system", content: this.protocol.instructions },
      { role: "user", content: prompt },
    ];
    const tokens = tokenizer.promptTokens(prompt);
    const promptLength = tokens.length;
    const turns: AgentTurn[] = [];
    let answer: string | null = null;
    let searches = 0;
    let invalidActions = 0;
    let truncated = false;

    for (let turnIndex = 0; ; turnIndex++) {
      let completion: OpenAI.Chat.Completions.ChatCompletion;
      try {
        completion = await this.client.chat.completions.create({
          ...this.options.extraBody,
          ...this.protocol.requestFields,
          model,
          messages,
          temperature: this.options.temperature,
          max_tokens: this.options.maxTokens,
          seed: seed + turnIndex,
        } as OpenAI.Chat.Completions.ChatCompletionCreateParamsNonStreaming);
      } catch (e) {
        if (isContextOverflow(e)) {
          truncated = true; // the conversation no longer fits: the episode ends as a full context does in the rollout
          break;
        }
        throw new Error(`${this.kind} agent: ${this.options.baseURL} (model ${JSON.stringify(model)}): ${(e as Error).message}`, { cause: e });
      }
      const choice = completion.choices?.[0];
      if (!choice?.message) throw new Error(`${this.kind} agent: ${this.options.baseURL} (model ${JSON.stringify(model)}): reply has no choices[0].message`);
      const reply = this.protocol.parse(choice.message, choice.finish_reason ?? null);
      messages.push(reply.assistant);
      const result = await env.step(reply.envText);
      const action: Action = reply.invalidReason !== undefined ? { type: "invalid", reason: reply.invalidReason } : result.info.action;
      if (searchQuery(action) !== undefined) searches++;
      if (action.type === "invalid") invalidActions++;
      if (action.type === "answer") answer = action.answer;

      const actionTokens = tokenizer.encode(reply.envText);
      const observation = result.done ? "" : result.observation;
      const obsTokens = tokenizer.encode(observation);
      tokens.push(...actionTokens, ...obsTokens);
      turns.push({
        actionText: reply.envText,
        action,
        observation,
        passages: result.info.passages,
        sampledTokens: actionTokens.length,
        observationTokens: obsTokens.length,
        stopReason: choice.finish_reason === "length" ? "length" : "stop",
        ...(result.info.tool === undefined ? {} : { tool: result.info.tool, toolLatencyMs: result.info.latencyMs ?? 0 }),
        modelText: modelText(choice.message),
      });
      if (result.done) {
        truncated = result.info.truncated === true;
        break;
      }
      messages.push(...this.protocol.feedback(reply, result));
    }
    const zeros = tokens.map(() => 0);
    return {
      task,
      tokens,
      lossMask: zeros,
      logprobs: zeros.slice(),
      promptLength,
      turns,
      answer,
      searches,
      invalidActions,
      truncated,
      trainable: false,
      agent: this.kind,
      model,
      messages,
    };
  }
}

/** A reply as readable text: its content, then each tool call as `name(arguments)`. */
export function modelText(message: OpenAI.Chat.Completions.ChatCompletionMessage): string {
  const calls = (message.tool_calls ?? []).map((c) => (c.type === "function" ? `${c.function.name}(${c.function.arguments})` : `${c.type}()`));
  return [message.content ?? "", ...calls].filter((s) => s !== "").join("\n");
}

/** Strips Search-R1's `\n\n<information>…</information>\n\n` wrapper from an observation (for chat models). */
export function stripInformation(observation: string): string {
  const t = observation.trim();
  const open = INFORMATION_OPEN.trim();
  const close = INFORMATION_CLOSE.trim();
  return t.startsWith(open) && t.endsWith(close) ? t.slice(open.length, t.length - close.length).trim() : t;
}
