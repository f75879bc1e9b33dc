/**
 * The tool-env helper: a user gives tools, a `reset(task)` that builds the episode's state, a grader and limits, and
 * gets a multi-turn `Env` — protocol parsing (malformed text → a penalised invalid action, never a crash), tool
 * calls with timeouts / retries / a shared concurrency limit / fault injection (`callTool`, `withFaults`),
 * observation formatting in the protocol's framing, and the episode's grade on its last step. The rollout does the
 * exact token bookkeeping (loss mask 1 on sampled tokens only) for every env alike.
 * Modelled on verifiers' `ToolEnv`, skyrl-gym's `BaseTextEnv` and tinker-cookbook's `Env`
 * (`tinker_cookbook/rl/types.py`): the env owns its state; the loop owns tokens.
 */
import type { Action, Grade, StepResult, Task, ToolCallResult } from "../core/types.ts";
import type { Protocol, ToolJsonSchema } from "../protocol/types.ts";
import { validateFaultOptions, withFaults, type FaultOptions } from "./faults.ts";
import { describeValue } from "../core/values.ts";
import { callTool, DEFAULT_MAX_OUTPUT_CHARS, toolJsonSchema, ToolLimiter, truncateChars, type Tool } from "./tool.ts";
import type { Env, EnvFactory, EpisodeInfo } from "./types.ts";

/** One finished turn as the grader sees it: the parsed action and, for a tool-call turn, every call's result. */
export interface ToolEnvTurn {
  action: Action;
  results: ToolCallResult[];
}

/** What a grader reads: the task, the episode's final state, its turns, the final answer and how it ended. */
export interface GradeInput<D, S> {
  task: Task<D>;
  state: S;
  turns: readonly ToolEnvTurn[];
  /** The final answer text, or null when the episode ended without one. */
  answer: string | null;
  /** True when the turn budget ran out before an answer. */
  truncated: boolean;
}

/**
 * Tool-call settings (all optional): per-attempt `timeoutMs` (ms, default 10 000), `retries` of errors a tool
 * marks retryable (default 0), `backoffMs` / `maxBackoffMs` (ms), `maxConcurrency` (calls of one tool at once
 * across every episode of the factory; 0 = unlimited), `maxOutputChars` (the soft cap, characters),
 * `maxResultBytes` (the hard limit, UTF-8 bytes). See `CallToolOptions`.
 */
export interface ToolCallSettings {
  timeoutMs?: number;
  retries?: number;
  backoffMs?: number;
  maxBackoffMs?: number;
  maxConcurrency?: number;
  maxOutputChars?: number;
  maxResultBytes?: number;
}

/**
 * What a user gives `toolEnv`. `D` is the task payload (`Task.data`), `S` the episode's state.
 * - `protocol`: how the policy writes calls and sees results (`src/protocol`);
 * - `instructions(task)`: the system prompt's text before the protocol's tool section (a string for every task);
 * - `user(task)`: the first user message (default `task.question`);
 * - `reset(task, episode)`: the episode's fresh state (default `undefined`);
 * - `tools(state, task)`: the episode's tools, bound to its state (or one fixed list). Names and schemas must be the
 *   same for every episode (they are rendered into the system prompt);
 * - `grade(input)`: the episode's grade (score in [0, 1] with named parts), run on the step that ends it;
 * - `maxTurns`: policy turns per episode (default 8); the episode ends truncated when the last is not an answer;
 * - `maxCallsPerTurn`: calls one turn may make (default 1); more is an invalid action;
 * - `call`: tool-call settings; `faults`: fault injection on every tool (off when absent or `rate` 0);
 * - `latencyMs`: simulated latency of one call (ms) per tool name or for all (default 0), recorded on the step for
 *   cost rewards; deterministic, never slept;
 * - `formatResult(name, value)`: the text a successful call shows (default: the value's JSON, a string as it is); a
 *   longer text than `call.maxOutputChars` (default 100 000) is cut to it with a marker, as a tool's own output is.
 */
export interface ToolEnvSpec<D = unknown, S = unknown> {
  protocol: Protocol;
  instructions: string | ((task: Task<D>) => string);
  user?: (task: Task<D>) => string;
  reset?: (task: Task<D>, episode: EpisodeInfo) => S | Promise<S>;
  tools: readonly Tool[] | ((state: S, task: Task<D>) => readonly Tool[]);
  grade?: (input: GradeInput<D, S>) => Grade;
  maxTurns?: number;
  maxCallsPerTurn?: number;
  call?: ToolCallSettings;
  faults?: FaultOptions;
  latencyMs?: number | Record<string, number>;
  formatResult?: (name: string, value: unknown) => string;
}

/** The default text of a tool's value: a string as it is, anything else as compact JSON. */
export function defaultFormatResult(_name: string, value: unknown): string {
  return typeof value === "string" ? value : JSON.stringify(value);
}

/**
 * Checks a grade: an object with a finite number `score` in [0, 1] and `parts` mapping names to numbers in [0, 1].
 * @throws Error naming the field and quoting the value with its type (`grade: score must be a number in [0, 1], got
 *   "1" (a string)`), or saying the grade is not such an object
 */
export function checkGrade(g: Grade): Grade {
  const inUnit = (v: unknown) => typeof v === "number" && Number.isFinite(v) && v >= 0 && v <= 1;
  if (g === null || typeof g !== "object") throw new Error(`grade: expected {score, parts}, got ${describeValue(g)}`);
  if (!inUnit(g.score)) throw new Error(`grade: score must be a number in [0, 1], got ${describeValue(g.score)}`);
  if (g.parts === null || typeof g.parts !== "object") throw new Error(`grade: parts must be an object of numbers in [0, 1], got ${describeValue(g.parts)}`);
  for (const [k, v] of Object.entries(g.parts)) {
    if (!inUnit(v)) throw new Error(`grade: part ${JSON.stringify(k)} must be a number in [0, 1], got ${describeValue(v)}`);
  }
  return g;
}

/** One episode of a tool env (made by `toolEnv`'s factory). */
class ToolEnvEpisode<D, S> implements Env {
  /** Chat protocols (hermes, react) render the whole chat prompt; search-r1's prompt is the user message. */
  readonly renderedPrompt: boolean;
  private task: Task<D> | null = null;
  private state: S | undefined;
  private episode: EpisodeInfo = {};
  private tools = new Map<string, Tool>();
  private turns: ToolEnvTurn[] = [];
  private done = false;

  constructor(
    private readonly spec: ToolEnvSpec<D, S>,
    private readonly schemaCache: { schemas?: ToolJsonSchema[] },
    private readonly limiter: ToolLimiter | undefined,
    private readonly faults: FaultOptions | undefined,
  ) {
    this.renderedPrompt = spec.protocol.name !== "search-r1";
  }

  async reset(task: Task, episode: EpisodeInfo = {}): Promise<string> {
    if (typeof task?.question !== "string" || task.question.trim() === "") {
      throw new Error(`toolEnv.reset: task.question must be a non-empty string (task id ${task?.id})`);
    }
    const t = task as Task<D>;
    this.task = t;
    this.episode = episode;
    this.done = false;
    this.turns = [];
    this.state = this.spec.reset ? await this.spec.reset(t, episode) : (undefined as S);
    const list = typeof this.spec.tools === "function" ? this.spec.tools(this.state as S, t) : this.spec.tools;
    this.tools = new Map(list.map((x) => [x.name, this.faults ? withFaults(x, this.faults) : x]));
    // Rendered once per factory: every episode's tools have the same names and schemas (only their state differs).
    this.schemaCache.schemas ??= list.map(toolJsonSchema);
    const instructions = typeof this.spec.instructions === "function" ? this.spec.instructions(t) : this.spec.instructions;
    const system = this.spec.protocol.system(this.schemas(), instructions);
    return this.spec.protocol.prompt(system, this.spec.user ? this.spec.user(t) : t.question);
  }

  async step(actionText: string): Promise<StepResult> {
    if (this.task === null) throw new Error("toolEnv.step: call reset(task) first");
    if (this.done) throw new Error("toolEnv.step: the episode is done; call reset(task) to start another");
    const spec = this.spec;
    const protocol = spec.protocol;
    const action = protocol.parse(actionText, { tools: this.schemas(), maxCallsPerTurn: spec.maxCallsPerTurn ?? 1 });
    const turnIndex = this.turns.length;
    const maxTurns = spec.maxTurns ?? 8;
    if (action.type === "answer" || turnIndex + 1 >= maxTurns) {
      this.turns.push({ action, results: [] });
      return this.finish(action, action.type === "answer" ? action.answer : null, action.type !== "answer");
    }
    if (action.type === "invalid") {
      this.turns.push({ action, results: [] });
      // The error repeats the model's text, so it can be cut to the observation cap: it closes as a tool result
      // does (hermes, react), and that close is kept whole (a new-user pass found cut errors ending mid-tag).
      const text = protocol.invalidObservation(action.reason);
      const close = protocol.observation([]).close;
      return { observation: text, ...(text.endsWith(close) ? { observationClose: close } : {}), done: false, info: { action } };
    }
    const results: ToolCallResult[] = [];
    let latencyMs = 0;
    const call = spec.call ?? {};
    for (const [i, c] of action.calls.entries()) {
      const t = this.tools.get(c.name);
      latencyMs += typeof spec.latencyMs === "number" ? spec.latencyMs : (spec.latencyMs?.[c.name] ?? 0);
      if (t === undefined) {
        results.push({ name: c.name, ok: false, content: `error: unknown tool ${c.name}`, errorKind: "unknown_tool" });
        continue;
      }
      const callKey = this.episode.seed === undefined ? undefined : `${this.task.id}#${this.episode.seed}:${turnIndex}.${i}`;
      const res = await callTool(t, c.arguments, {
        timeoutMs: call.timeoutMs,
        retries: call.retries,
        backoffMs: call.backoffMs,
        maxBackoffMs: call.maxBackoffMs,
        maxOutputChars: call.maxOutputChars,
        maxResultBytes: call.maxResultBytes,
        limiter: this.limiter,
        deadlineAt: this.episode.deadlineAt,
        callKey,
      });
      if (res.ok) {
        // A user's formatter may lengthen the text past the cap the value was checked against (pretty JSON, framing).
        const content = truncateChars((spec.formatResult ?? defaultFormatResult)(c.name, res.value), call.maxOutputChars ?? DEFAULT_MAX_OUTPUT_CHARS);
        results.push({ name: c.name, ok: true, content, value: res.value });
      } else {
        results.push({ name: c.name, ok: false, content: `error: ${res.partial ?? res.error}`, errorKind: res.kind });
      }
    }
    this.turns.push({ action, results });
    const obs = protocol.observation(results);
    const failed = results.find((r) => !r.ok);
    return {
      observation: obs.text,
      observationClose: obs.close,
      done: false,
      info: {
        action,
        toolResults: results,
        tool: action.calls[0].name,
        latencyMs,
        ...(failed === undefined ? {} : { error: failed.content, toolError: failed.errorKind === "unknown_tool" ? "invalid_input" : failed.errorKind }),
      },
    };
  }

  private schemas(): ToolJsonSchema[] {
    return this.schemaCache.schemas ?? [];
  }

  private finish(action: Action, answer: string | null, truncated: boolean): StepResult {
    this.done = true;
    const info: StepResult["info"] = truncated ? { action, truncated: true } : { action };
    if (this.spec.grade) {
      info.grade = checkGrade(this.spec.grade({ task: this.task!, state: this.state as S, turns: this.turns, answer, truncated }));
    }
    return { observation: "", done: true, info };
  }
}

/**
 * Builds an env factory from a spec: every episode gets fresh state and tools; the factory's episodes share one
 * concurrency limiter per tool (`call.maxConcurrency`).
 * @throws Error naming the field when `maxTurns` / `maxCallsPerTurn` is not a positive integer, `maxConcurrency`
 *   is not an integer ≥ 0, or the fault options are invalid (`validateFaultOptions`)
 */
export function toolEnv<D = unknown, S = unknown>(spec: ToolEnvSpec<D, S>): EnvFactory {
  for (const [k, v] of Object.entries({ maxTurns: spec.maxTurns ?? 8, maxCallsPerTurn: spec.maxCallsPerTurn ?? 1 })) {
    if (!Number.isInteger(v) || v <= 0) throw new Error(`toolEnv: ${k} must be a positive integer, got ${describeValue(v)}`);
  }
  const maxConcurrency = spec.call?.maxConcurrency ?? 0;
  const limiter = new ToolLimiter(maxConcurrency); // throws on a bad value, naming the field
  const faults = spec.faults !== undefined && spec.faults.rate > 0 ? spec.faults : undefined;
  if (faults) validateFaultOptions(faults);
  const schemaCache: { schemas?: ToolJsonSchema[] } = {};
  return () => new ToolEnvEpisode<D, S>(spec, schemaCache, maxConcurrency > 0 ? limiter : undefined, faults);
}
