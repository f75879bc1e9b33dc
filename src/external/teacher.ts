/**
 * Warm-start demonstrations for a user's own agent: a scripted "teacher" policy stands behind the gateway while the
 * unchanged agent runs, so the demonstrations are recorded in exactly the token format the agent produces with the
 * trained policy later (its own system prompt, its tools' schemas, its message history, the gateway's chat template) —
 * nothing is re-rendered for SFT. The teacher plays one of the env's scripted personas (the search env's: careful,
 * guesser, over-searcher, poor query — `RetrievalWorld.scriptedTurn`), speaking Hermes tool calls instead of the
 * persona's Search-R1 tags. It simulates its episode from the task alone: its own earlier turns are deterministic, and
 * what its queries retrieved it looks up in the same BM25 index the agent's search tool calls (the agent's `topk` must
 * be `RETRIEVAL_TOPK`).
 */
import type { Action, Task, Turn } from "../core/types.ts";
import type { TurnContext } from "../env/episode.ts";
import { parseSearchR1Action } from "../protocol/searchR1.ts";
import type { SampledSequence, SampleOptions, SamplingClient } from "../core/sampling.ts";
import type { Tokenizer } from "../core/tokenizer.ts";
import type { BM25Index } from "../retrieval/bm25.ts";

/** Passages per search the teacher assumes the agent's tool asks for (the example agents' `topk`). */
export const RETRIEVAL_TOPK = 3;

/** How the teacher's tool call is written: the tool's name and its query argument (the example agents' `search`/`query`). */
export interface TeacherTool {
  name: string;
  queryArg: string;
}

/** The example agents' search tool: `search({"query": "…"})`. */
export const DEFAULT_TEACHER_TOOL: Readonly<TeacherTool> = { name: "search", queryArg: "query" };

/**
 * `--agent-tool NAME:ARG` → the teacher's tool (the agent's own search tool and its query argument, e.g.
 * `lookup:q` for a tool `lookup({"q": "…"})`).
 * @throws Error naming the flag and the expected form, for anything but two identifiers joined by `:`
 */
export function parseTeacherTool(spec: string): TeacherTool {
  const m = /^([A-Za-z_][A-Za-z0-9_.-]{0,63}):([A-Za-z_][A-Za-z0-9_]{0,63})$/.exec(spec.trim());
  if (m === null) throw new Error(`--agent-tool: expected NAME:ARG — your agent's search tool and its query argument, e.g. search:query (the default) or lookup:q — got ${JSON.stringify(spec)}`);
  return { name: m[1], queryArg: m[2] };
}

const normalise = (s: string) => s.toLowerCase().replace(/\s+/g, " ").trim();

/** How `teacherSampler` plays its persona. */
export interface TeacherOptions {
  /** The persona's turn for `ctx` as Search-R1 text (e.g. `(ctx) => world.scriptedTurn("careful", ctx)`). */
  turn: (ctx: TurnContext) => string;
  /** The agent's search tool (default `DEFAULT_TEACHER_TOOL`). */
  tool?: TeacherTool;
  /** The end-of-turn text appended to every reply (default Hermes' `<|im_end|>`). */
  imEnd?: string;
  /** The episode seed's base (a task's episode is seeded `seed + hash(task.id)`, turn i with `+ i`). */
  seed: number;
  /** The task of a rollout id (the teacher's own rollouts), else undefined: then the prompt's question decides. */
  taskOf?: (rolloutId: string) => Task | undefined;
}

/**
 * A sampling client that answers as `options.turn`'s persona would on the call's task: the one `taskOf` gives for the
 * call's rollout (`SampleOptions.rolloutId`, so an agent may word the question its own way), else the task whose
 * question the prompt holds.
 * @param tasks the tasks the agent will be given (found in the prompt by their question when `taskOf` has none)
 * @returns a `SamplingClient`; `sample` throws when neither finds the task
 */
export function teacherSampler(
  tasks: readonly Task[],
  tokenizer: Tokenizer,
  index: BM25Index,
  options: TeacherOptions,
): SamplingClient {
  const tool = options.tool ?? DEFAULT_TEACHER_TOOL;
  const imEnd = options.imEnd ?? "<|im_end|>";
  // Longest questions first, so a question that contains another is matched as itself.
  const byQuestion = [...tasks].map((t) => [normalise(tokenizer.decode(tokenizer.encode(t.question))), t] as const).sort((a, b) => b[0].length - a[0].length);
  return {
    async sample(promptTokens: number[], opts: SampleOptions): Promise<SampledSequence[]> {
      const prompt = normalise(tokenizer.decode(promptTokens));
      const task = (opts.rolloutId !== undefined ? options.taskOf?.(opts.rolloutId) : undefined) ?? byQuestion.find(([q]) => prompt.includes(q))?.[1];
      if (task === undefined) throw new Error(`teacher: ${opts.rolloutId !== undefined ? `rollout ${opts.rolloutId} is not one of the teacher's, and ` : ""}the prompt holds none of the tasks' questions`);
      // The turns it already took: one per tool response the agent has sent back.
      const turnIndex = (prompt.match(/<tool_response>/g) ?? []).length;
      const seed = options.seed + hashOf(task.id);
      const history: Turn[] = [];
      let text = "";
      for (let i = 0; i <= turnIndex; i++) {
        text = options.turn({ task, turnIndex: i, history, seed: seed + i, budget: 1 << 20 });
        const action = parseSearchR1Action(text);
        if (i === turnIndex) break;
        const query = action.type === "tool_call" ? action.calls[0]?.arguments.query : undefined;
        history.push(turnOf(text, action, typeof query === "string" ? index.search(query, RETRIEVAL_TOPK) : []));
      }
      const action = parseSearchR1Action(text);
      const out =
        action.type === "tool_call"
          ? // Hermes' spacing (`{"name": …, "arguments": {…}}`, as Qwen writes calls): the word tokenizer's vocabulary has it.
            `<tool_call>\n{"name": ${JSON.stringify(tool.name)}, "arguments": {${JSON.stringify(tool.queryArg)}: ${JSON.stringify(String(action.calls[0]?.arguments.query ?? ""))}}}\n</tool_call>${imEnd}`
          : `${action.type === "answer" ? action.answer : "unknown"}${imEnd}`;
      const tokens = tokenizer.encode(out).slice(0, Math.max(1, opts.maxTokens));
      return Array.from({ length: opts.n }, () => ({ tokens: [...tokens], logprobs: tokens.map(() => 0), stopReason: "stop" as const }));
    },
  };
}

function turnOf(actionText: string, action: Action, passages: Turn["passages"]): Turn {
  return { actionText, action, passages } as Turn;
}

function hashOf(s: string): number {
  let h = 2166136261;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 16777619) >>> 0;
  return h % 1_000_000;
}
