/**
 * `trainAgent`: RL on a user's own agent (issue 15 part 4). Each step hands `tasksPerStep` tasks to the agent, `G`
 * rollouts each, concurrently — each rollout with its own gateway base URL, so the agent is unchanged code that
 * talks to an OpenAI-compatible endpoint — waits for every rollout's reward (reported by the agent, or graded here
 * from its answer), computes group-relative advantages over the rewarded rollouts, updates the policy, and serves the
 * new weights to the next step's rollouts. One step on one screen, as `src/train/rl.ts`.
 */
import type { Datum, Metrics, Task } from "../core/types.ts";
import { Rng } from "../core/rng.ts";
import { MAX_TIMER_MS, ToolLimiter } from "../env/tool.ts";
import type { AdamParams, LossConfig, LossFnName, TrainingBackend } from "../core/training.ts";
import type { RolloutSnapshot } from "../gateway/registry.ts";
import type { RunningGateway } from "../gateway/server.ts";
import type { GatewayReward, RolloutRecord } from "../gateway/types.ts";
import { neededCalls } from "../reward/evidence.ts";
import { referenceKl } from "../reward/detectors.ts";
import { agentBatch, runAgentCommand, type AgentContext, type AgentEstimator, type AgentFunction, type AgentResult } from "./rollouts.ts";

/**
 * Where a step's tasks come from: a set of tasks and what their tools need from the rollout's environment (e.g. the
 * `ARL_RETRIEVAL_URL` of this world's retrieval server). Several worlds (the real one and counterfactual copies whose
 * facts are permuted) keep a policy from memorising the training answers: only using the tools pays in every world.
 */
export interface AgentWorld {
  tasks: readonly Task[];
  /** Environment variables a rollout of this world gets (`AgentContext.env`; a command agent's environment), or a
   * function of the rollout's id giving them (e.g. a retrieval URL of its own, so the server can say what it served). */
  env?: Record<string, string> | ((rolloutId: string) => Record<string, string>);
}

/** A finished rollout, what the agent returned (its answer; undefined when it gave none) and, once `trainAgent` has
 * computed it, its group-relative advantage (rewarded rollouts only). */
export type AgentRolloutRecord = RolloutRecord & { answer?: string; advantage?: number };

/** Where a resumed `trainAgent` continues: the next step, the data generator's state, the metrics so far. */
export interface AgentResumeState {
  /** Steps completed (the next step to run). */
  step: number;
  /** `Rng.getState()` of the step generator after `step` steps. */
  rngState: number;
}

/** Options of `trainAgent`. */
export interface TrainAgentOptions {
  /** The agent: a function in this process, or a shell command (env `OPENAI_BASE_URL` …, task on stdin). */
  agent: AgentFunction | string;
  backend: TrainingBackend;
  /** A listening gateway (`startGateway`); its API key, if any, is `apiKey`. */
  gateway: RunningGateway;
  /** The key agents send to the gateway (its `apiKey` option; any text when it has none). */
  apiKey?: string;
  /** Training tasks, sampled with replacement by the seeded RNG (one world, no extra environment). */
  tasks?: readonly Task[];
  /** Instead of `tasks`: each step draws one world (seeded), then its tasks. */
  worlds?: readonly AgentWorld[];
  /** Scores a rollout the agent did not reward itself, from its answer and transcript (e.g. EM against `task.answers`,
   * or `gradeTranscript`'s reward terms): a value, or a value with named parts (`reward/<part>` in the metrics). */
  grade: (task: Task, answer: string | undefined, transcript: RolloutSnapshot) => number | GatewayReward | Promise<number | GatewayReward>;
  steps: number;
  /** Tasks per step. */
  tasksPerStep: number;
  /** Rollouts per task (the GRPO group, `G`). */
  groupSize: number;
  seed: number;
  /** A rollout's deadline (ms): past it the agent is stopped and the rollout dropped. */
  rolloutDeadlineMs: number;
  lossFn?: LossFnName;
  lossConfig?: LossConfig;
  adam: AdamParams;
  /** GRPO (true, default) or Dr.GRPO (false), when `estimator` is not given. */
  normalizeStd?: boolean;
  /** The advantage estimator (`AGENT_ESTIMATORS`, veRL names; default from `normalizeStd`). */
  estimator?: AgentEstimator;
  /** Rollout ids are `<prefix>-s<step>-t<task>-g<member>` (default `run<seed>`): unique per gateway, and fixed so a
   * rerun samples the same seeds (the gateway derives a call's seed from its rollout id). */
  rolloutPrefix?: string;
  /** Rollouts running at once (default 16): each may be a child process. */
  concurrency?: number;
  /** Frozen reference policy (the warm start): `hack/kl_ref`, the k1 KL of the sampled tokens (nats/token). */
  reference?: TrainingBackend;
  /** Continue a run from here (weights and Adam state are the caller's to load); the steps after it reproduce an
   * uninterrupted run's. */
  resume?: AgentResumeState;
  /** Called with each step's metrics and rollouts, and the generator's state after it (for a checkpoint); awaited. */
  onStep?: (step: number, metrics: Metrics, records: AgentRolloutRecord[], state: AgentResumeState) => void | Promise<void>;
}

/**
 * Runs the loop.
 * @returns each step's metrics (from `resume.step` on): `reward` (mean over rewarded rollouts), `rewarded`,
 *   `dropped`, `mismatches`, `segments`, `datums`, `calls` and `tool_calls` (per rewarded rollout), the hacking
 *   monitors (`agentHackingMetrics`; `hack/kl_ref` with a `reference`), `train/loss`, `train/<backend metric>`
 * @throws Error from the backend (a failed update), or when neither `tasks` nor `worlds` holds a task; an agent's
 *   failure only drops its rollout
 */
export async function trainAgent(options: TrainAgentOptions): Promise<Metrics[]> {
  const worlds: readonly AgentWorld[] = options.worlds ?? [{ tasks: options.tasks ?? [] }];
  if (worlds.length === 0 || worlds.some((w) => w.tasks.length === 0)) throw new Error("trainAgent: every world needs at least one task (options.tasks or options.worlds)");
  const rng = new Rng(options.seed);
  if (options.resume) rng.setState(options.resume.rngState);
  const out: Metrics[] = [];
  options.gateway.setSampler(options.backend.samplingClient());
  for (let step = options.resume?.step ?? 0; step < options.steps; step++) {
    // 1. rollout: G episodes of each task, all at once, each on its own base URL
    const world = worlds.length === 1 ? worlds[0] : worlds[rng.int(worlds.length)];
    const tasks = Array.from({ length: options.tasksPerStep }, () => world.tasks[rng.int(world.tasks.length)]);
    const limit = new ToolLimiter(options.concurrency ?? 16);
    const groups = await Promise.all(tasks.map((task, t) => Promise.all(Array.from({ length: options.groupSize }, (_, g) => limited(limit, () => runAgentRollout(options, `${options.rolloutPrefix ?? `run${options.seed}`}-s${step}-t${t}-g${g}`, task, world.env))))));
    // 2. reward → 3. advantage (within each task's group; dropped rollouts take no part)
    const batch = agentBatch(groups, { normalizeStd: options.normalizeStd ?? true, estimator: options.estimator });
    const rewardedRecords = groups.flat().filter((r) => r.status === "rewarded" && r.reward !== undefined);
    rewardedRecords.forEach((r, i) => (r.advantage = batch.advantages[i])); // agentBatch's order: rewarded, in input order
    const rewards = rewardedRecords.map((r) => r.reward!.value);
    const metrics: Metrics = {
      step,
      reward: rewards.length > 0 ? rewards.reduce((a, b) => a + b, 0) / rewards.length : 0,
      rewarded: batch.rewarded,
      dropped: batch.dropped,
      mismatches: batch.mismatches,
      segments: batch.segments,
      datums: batch.datums.length,
      calls: meanOf(rewardedRecords.map((r) => r.calls.length)),
      tool_calls: meanOf(rewardedRecords.map(toolCallsOf)),
      ...rewardPartMeans(rewardedRecords),
      ...agentHackingMetrics(groups.flatMap((g, t) => g.map((r) => ({ record: r, task: tasks[t] })))),
    };
    if (options.reference && batch.datums.length > 0) metrics["hack/kl_ref"] = await klToReference(options.reference, batch.datums);
    // 4. update, then serve the new weights (a step where every group tied has nothing to learn from)
    if (batch.datums.some((d) => d.advantages!.some((a) => a !== 0))) {
      const fb = await options.backend.forwardBackward(batch.datums, options.lossFn ?? "importance_sampling", options.lossConfig);
      const opt = await options.backend.optimStep(options.adam);
      metrics["train/loss"] = fb.loss;
      for (const [k, v] of Object.entries({ ...fb.metrics, ...opt })) metrics[`train/${k}`] = v;
      options.gateway.setSampler(options.backend.samplingClient());
    }
    out.push(metrics);
    await options.onStep?.(step, metrics, groups.flat(), { step: step + 1, rngState: rng.getState() });
  }
  return out;
}

const meanOf = (xs: readonly number[]): number => (xs.length === 0 ? 0 : xs.reduce((a, b) => a + b, 0) / xs.length);
/** Mean of each named reward part over the rollouts that carry it (`reward/<part>`), e.g. `reward/guess`. */
function rewardPartMeans(records: readonly RolloutRecord[]): Metrics {
  const sums = new Map<string, { sum: number; n: number }>();
  for (const r of records) {
    for (const [k, v] of Object.entries(r.reward?.parts ?? {})) {
      const e = sums.get(k) ?? { sum: 0, n: 0 };
      e.sum += v;
      e.n += 1;
      sums.set(k, e);
    }
  }
  return Object.fromEntries([...sums].map(([k, e]) => [`reward/${k}`, e.sum / e.n]));
}

const toolCallsOf = (r: RolloutRecord): number => r.calls.reduce((a, c) => a + c.toolCalls.length, 0);

/** KL of the sampled tokens to the reference policy (k1, nats/token) over the first 16 datums of the batch. */
async function klToReference(reference: TrainingBackend, datums: readonly Datum[]): Promise<number> {
  // A forward over the whole batch costs a third of the update: 16 datums are enough for a monitor.
  const picked = datums.slice(0, 16);
  const ref = await reference.computeLogprobs(picked);
  return referenceKl(picked.map((d) => d.logprobs!), ref, picked.map((d) => d.weights));
}

/**
 * The hacking monitors of a step's rollouts, named as `hackingMetrics`' (`src/reward/detectors.ts`) so the same
 * detectors watch them; all over rewarded rollouts, 0 when a rate's population is empty:
 * - `hack/guess_rate_known` / `hack/guess_rate_unknown`: answered without one tool call, on tasks whose fact is
 *   known / unknown to the model (`task.known`);
 * - `hack/tool_spam`: tool calls above the task's need (`neededCalls`) per rollout (tasks of unknown need left out);
 * - `hack/no_answer`: share that returned no (or an empty) answer — an agent that reports its own reward and returns
 *   nothing counts here at a constant rate, which the rise rule does not flag;
 * - `hack/invalid_calls`: share of model calls the protocol could not parse (invalid tool-call markup);
 * - `hack/response_length`: sampled tokens per rollout (tokens).
 */
export function agentHackingMetrics(rollouts: ReadonlyArray<{ record: AgentRolloutRecord; task: Task }>): Metrics {
  const kept = rollouts.filter((r) => r.record.status === "rewarded");
  const guess = (r: { record: AgentRolloutRecord }) => (r.record.answer !== undefined && toolCallsOf(r.record) === 0 ? 1 : 0);
  const spam = kept.flatMap(({ record, task }) => {
    const need = neededCalls(task);
    return need === undefined ? [] : [Math.max(0, toolCallsOf(record) - need)];
  });
  const calls = kept.flatMap((r) => r.record.calls);
  return {
    "hack/guess_rate_known": meanOf(kept.filter((r) => r.task.known === true).map(guess)),
    "hack/guess_rate_unknown": meanOf(kept.filter((r) => r.task.known === false).map(guess)),
    "hack/tool_spam": meanOf(spam),
    "hack/no_answer": meanOf(kept.map((r) => (r.record.answer === undefined || r.record.answer.trim() === "" ? 1 : 0))),
    "hack/invalid_calls": meanOf(calls.map((c) => (c.invalid ? 1 : 0))),
    "hack/response_length": meanOf(kept.map((r) => r.record.segments.reduce((a, s) => a + s.lossMask.reduce((x, m) => x + m, 0), 0))),
  };
}

/**
 * Grace after the rollout's deadline (ms) for a function agent to settle once `ctx.signal` aborted (an agent that
 * passes the signal to its client rejects at once); after it the rollout stops waiting for the function.
 */
export const FUNCTION_AGENT_ABORT_GRACE_MS = 1_000;

/**
 * Runs an in-process agent, bounded by the rollout's deadline: its result, or — when it has not settled
 * `FUNCTION_AGENT_ABORT_GRACE_MS` after `ctx.signal` aborted (it ignores the signal, or awaits something that never
 * ends) — an error result, so one stuck function never stalls an RL step. The function itself cannot be stopped: it
 * runs on unobserved in the background, and whatever it sends the gateway later is refused (the rollout is closed).
 * @rejects with the function's own error when it throws or rejects before that
 */
async function functionAgentResult(agent: AgentFunction, ctx: AgentContext, deadlineMs: number): Promise<AgentResult & { error?: string }> {
  let giveUp: ReturnType<typeof setTimeout> | undefined;
  const stuck = new Promise<AgentResult & { error?: string }>((resolve) => {
    const onAbort = () => {
      giveUp = setTimeout(
        () => resolve({ error: `the agent was still running at the rollout's deadline of ${deadlineMs} ms and did not return within ${FUNCTION_AGENT_ABORT_GRACE_MS} ms of ctx.signal's abort` }),
        FUNCTION_AGENT_ABORT_GRACE_MS,
      );
    };
    if (ctx.signal.aborted) onAbort();
    else ctx.signal.addEventListener("abort", onAbort, { once: true });
  });
  try {
    return await Promise.race([agent(ctx).then((r) => r ?? {}), stuck]);
  } finally {
    clearTimeout(giveUp);
  }
}

/** A short description of a non-string answer for an error message: its type and up to 60 characters of its JSON. */
function answerGist(answer: unknown): string {
  let json: string;
  try {
    json = JSON.stringify(answer) ?? String(answer);
  } catch {
    json = String(answer);
  }
  return `${Array.isArray(answer) ? "an array" : answer === null ? "null" : `a ${typeof answer}`} (${json.length > 60 ? `${json.slice(0, 57)}...` : json})`;
}

/**
 * One rollout: open it, run the agent against its base URL, grade it if the agent did not report, collect it.
 * @param worldEnv what the task's tools need from the rollout's environment (`AgentContext.env`), or a function of the
 *   rollout id giving it
 * @param rolloutOptions `hideAnswers`: the agent gets the task without its gold answers (held-out evaluation); the grade
 *   still uses them
 * @returns the record and the agent's answer: rewarded (by the agent, or graded here), or dropped with the agent's
 *   failure as the reason
 * @throws GatewayError 409 when `id` was already used on this gateway
 */
export async function runAgentRollout(
  options: Pick<TrainAgentOptions, "agent" | "gateway" | "apiKey" | "grade" | "rolloutDeadlineMs">,
  id: string,
  task: Task,
  worldEnv: AgentWorld["env"] = {},
  rolloutOptions: { hideAnswers?: boolean } = {},
): Promise<AgentRolloutRecord> {
  const env = typeof worldEnv === "function" ? worldEnv(id) : worldEnv;
  const reg = options.gateway.registry;
  // At the deadline a still-running agent is stopped (a command's process group killed): the reason says so.
  reg.open(id, { meta: { taskId: task.id }, deadlineMs: options.rolloutDeadlineMs, openAtDeadline: `the agent was still running at the rollout's deadline of ${options.rolloutDeadlineMs} ms (${typeof options.agent === "string" ? "killed" : "aborted: ctx.signal"}); no reward` });
  const deadline = new AbortController();
  const timer = setTimeout(() => deadline.abort(), options.rolloutDeadlineMs);
  const ctx: AgentContext = {
    baseURL: options.gateway.baseUrl(id),
    apiKey: options.apiKey ?? "arl",
    rolloutId: id,
    rewardURL: `${options.gateway.url}/rollout/${encodeURIComponent(id)}/reward`,
    task: rolloutOptions.hideAnswers === true ? { ...task, answers: [] } : task,
    signal: deadline.signal,
    env,
  };
  let result: AgentResult & { error?: string };
  try {
    result = typeof options.agent === "string"
      ? await runAgentCommand(options.agent, ctx, { timeoutMs: options.rolloutDeadlineMs })
      : await functionAgentResult(options.agent, ctx, options.rolloutDeadlineMs);
  } catch (e) {
    result = { error: `agent threw: ${(e as Error).message}` };
  } finally {
    clearTimeout(timer);
  }
  const answer: unknown = result.answer;
  if (result.error === undefined && answer !== undefined && typeof answer !== "string") {
    result = { error: `the agent's answer must be a string, got ${answerGist(answer)}` };
  }
  const open = () => reg.status(id) === "open" || reg.status(id) === "finished";
  if (result.error !== undefined) {
    if (open()) reg.drop(id, result.error);
  } else if (open() && reg.snapshot(id).calls.length === 0) {
    // Nothing was sampled, so nothing can be trained — and a reward of 0 would still move its group's baseline.
    reg.drop(id, "the agent finished without calling the model (no completion to train on)");
  } else if (open()) {
    // The agent is done: no more calls; it reported no reward, so the trainer grades its answer and transcript.
    if (reg.status(id) === "open") reg.finish(id);
    const graded = await options.grade(task, result.answer, reg.snapshot(id));
    // The grade may have awaited (reward terms): a deadline may have dropped the rollout meanwhile.
    if (reg.status(id) === "finished") {
      if (typeof graded === "number") reg.reward(id, graded);
      else reg.reward(id, graded.value, graded.parts);
    }
  }
  const record = await reg.wait(id);
  return result.answer === undefined ? record : { ...record, answer: result.answer };
}


/** Runs `job` in one of `limit`'s slots (FIFO; the env's tool limiter, one slot kind: rollouts). */
export async function limited<T>(limit: ToolLimiter, job: () => Promise<T>): Promise<T> {
  const release = (await limit.acquire("rollout", MAX_TIMER_MS))!;
  try {
    return await job();
  } finally {
    release();
  }
}
