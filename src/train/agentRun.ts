/**
 * `trainAgent`: RL on a user's own agent (issue 15 part 4). Each step hands `tasksPerStep` tasks to the agent, `G`
 * rollouts each, concurrently — each rollout with its own gateway base URL, so the agent is unchanged code that
 * talks to an OpenAI-compatible endpoint — waits for every rollout's reward (reported by the agent, or graded here
 * from its answer), computes group-relative advantages over the rewarded rollouts, updates the policy, and serves the
 * new weights to the next step's rollouts. One step on one screen, as `src/train/rl.ts`.
 */
import type { Metrics, Task } from "../core/types.ts";
import { Rng } from "../core/rng.ts";
import { MAX_TIMER_MS, ToolLimiter } from "../env/tool.ts";
import type { AdamParams, LossConfig, LossFnName, TrainingBackend } from "../policy/types.ts";
import type { RolloutSnapshot } from "../gateway/registry.ts";
import type { RunningGateway } from "../gateway/server.ts";
import type { RolloutRecord } from "../gateway/types.ts";
import { agentBatch, runAgentCommand, type AgentContext, type AgentFunction, type AgentResult } from "./agentRollouts.ts";

/** Options of `trainAgent`. */
export interface TrainAgentOptions {
  /** The agent: a function in this process, or a shell command (env `OPENAI_BASE_URL` …, task on stdin). */
  agent: AgentFunction | string;
  backend: TrainingBackend;
  /** A listening gateway (`startGateway`); its API key, if any, is `apiKey`. */
  gateway: RunningGateway;
  /** The key agents send to the gateway (its `apiKey` option; any text when it has none). */
  apiKey?: string;
  /** Training tasks, sampled with replacement by the seeded RNG. */
  tasks: readonly Task[];
  /** Scores a rollout the agent did not reward itself, from its answer and transcript (e.g. EM against `task.answers`). */
  grade: (task: Task, answer: string | undefined, transcript: RolloutSnapshot) => number;
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
  /** GRPO (true, default) or Dr.GRPO (false). */
  normalizeStd?: boolean;
  /** Rollout ids are `<prefix>-s<step>-t<task>-g<member>` (default `run<seed>`): unique per gateway, and fixed so a
   * rerun samples the same seeds (the gateway derives a call's seed from its rollout id). */
  rolloutPrefix?: string;
  /** Rollouts running at once (default 16): each may be a child process. */
  concurrency?: number;
  /** Called with each step's metrics. */
  onStep?: (step: number, metrics: Metrics, records: RolloutRecord[]) => void;
}

/**
 * Runs the loop.
 * @returns each step's metrics: `reward` (mean over rewarded rollouts), `rewarded`, `dropped`, `mismatches`,
 *   `segments`, `datums`, `train/loss`, `train/<backend metric>`
 * @throws Error from the backend (a failed update); an agent's failure only drops its rollout
 */
export async function trainAgent(options: TrainAgentOptions): Promise<Metrics[]> {
  const rng = new Rng(options.seed);
  const out: Metrics[] = [];
  options.gateway.setSampler(options.backend.samplingClient());
  for (let step = 0; step < options.steps; step++) {
    // 1. rollout: G episodes of each task, all at once, each on its own base URL
    const tasks = Array.from({ length: options.tasksPerStep }, () => options.tasks[rng.int(options.tasks.length)]);
    const limit = new ToolLimiter(options.concurrency ?? 16);
    const groups = await Promise.all(tasks.map((task, t) => Promise.all(Array.from({ length: options.groupSize }, (_, g) => limited(limit, () => runAgentRollout(options, `${options.rolloutPrefix ?? `run${options.seed}`}-s${step}-t${t}-g${g}`, task))))));
    // 2. reward → 3. advantage (within each task's group; dropped rollouts take no part)
    const batch = agentBatch(groups, { normalizeStd: options.normalizeStd ?? true });
    const rewards = groups.flat().filter((r) => r.status === "rewarded").map((r) => r.reward!.value);
    const metrics: Metrics = {
      step,
      reward: rewards.length > 0 ? rewards.reduce((a, b) => a + b, 0) / rewards.length : 0,
      rewarded: batch.rewarded,
      dropped: batch.dropped,
      mismatches: batch.mismatches,
      segments: batch.segments,
      datums: batch.datums.length,
    };
    // 4. update, then serve the new weights (a step where every group tied has nothing to learn from)
    if (batch.datums.some((d) => d.advantages!.some((a) => a !== 0))) {
      const fb = await options.backend.forwardBackward(batch.datums, options.lossFn ?? "importance_sampling", options.lossConfig);
      const opt = await options.backend.optimStep(options.adam);
      metrics["train/loss"] = fb.loss;
      for (const [k, v] of Object.entries({ ...fb.metrics, ...opt })) metrics[`train/${k}`] = v;
      options.gateway.setSampler(options.backend.samplingClient());
    }
    out.push(metrics);
    options.onStep?.(step, metrics, groups.flat());
  }
  return out;
}

/**
 * One rollout: open it, run the agent against its base URL, grade it if the agent did not report, collect it.
 * @returns the record: rewarded (by the agent, or graded here), or dropped with the agent's failure as the reason
 * @throws GatewayError 409 when `id` was already used on this gateway
 */
export async function runAgentRollout(
  options: Pick<TrainAgentOptions, "agent" | "gateway" | "apiKey" | "grade" | "rolloutDeadlineMs">,
  id: string,
  task: Task,
): Promise<RolloutRecord> {
  const reg = options.gateway.registry;
  reg.open(id, { meta: { taskId: task.id }, deadlineMs: options.rolloutDeadlineMs });
  const deadline = new AbortController();
  const timer = setTimeout(() => deadline.abort(), options.rolloutDeadlineMs);
  const ctx: AgentContext = {
    baseURL: options.gateway.baseUrl(id),
    apiKey: options.apiKey ?? "arl",
    rolloutId: id,
    rewardURL: `${options.gateway.url}/rollout/${encodeURIComponent(id)}/reward`,
    task,
    signal: deadline.signal,
  };
  let result: AgentResult & { error?: string };
  try {
    result = typeof options.agent === "string"
      ? await runAgentCommand(options.agent, ctx, { timeoutMs: options.rolloutDeadlineMs })
      : ((await options.agent(ctx)) ?? {});
  } catch (e) {
    result = { error: `agent threw: ${(e as Error).message}` };
  } finally {
    clearTimeout(timer);
  }
  const open = () => reg.status(id) === "open" || reg.status(id) === "finished";
  if (result.error !== undefined) {
    if (open()) reg.drop(id, result.error);
  } else if (open()) {
    // The agent is done: no more calls; it reported no reward, so the trainer grades its answer and transcript.
    if (reg.status(id) === "open") reg.finish(id);
    reg.reward(id, options.grade(task, result.answer, reg.snapshot(id)));
  }
  return reg.wait(id);
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
