/**
 * The trainer's side of the gateway (issue 15): running a user's agent — a function in this process or a command in
 * a child process — on one task against a rollout's base URL, and turning the gateway's exact records into datums
 * with group-relative advantages. Names no environment: a task is a `Task`, a reward a number.
 */
import { spawn } from "node:child_process";
import type { Datum, Task } from "../core/types.ts";
import { grpoAdvantages, opoAdvantages, passkAdvantages, reinforcePlusPlusBaselineAdvantages, rlooAdvantages, tokenAdvantages } from "../algo/advantages.ts";
import type { GatewaySegment, RolloutRecord } from "../gateway/types.ts";

/** What an agent is given for one rollout. */
export interface AgentContext {
  /** The rollout's OpenAI base URL (`…/rollout/<id>/v1`): what `new OpenAI({ baseURL })` takes. */
  baseURL: string;
  /** Bearer key for the gateway. */
  apiKey: string;
  /** The rollout's id (also the last path part of `rewardURL`). */
  rolloutId: string;
  /** `POST {value, parts?}` here to report the rollout's reward (optional: the trainer can grade instead). */
  rewardURL: string;
  task: Task;
  /** Aborted when the rollout's deadline passes. */
  signal: AbortSignal;
  /**
   * What the task's tools need from this rollout's environment, e.g. `ARL_RETRIEVAL_URL` (the retrieval server of
   * the world the task was drawn from): a command agent gets them as environment variables, a function reads them here.
   */
  env: Record<string, string>;
}

/** What an agent may return: its final answer (graded by the trainer when it reports no reward itself). */
export interface AgentResult {
  answer?: string;
}

/** An agent in this process. */
export type AgentFunction = (ctx: AgentContext) => Promise<AgentResult | void>;

/**
 * The process groups of the command agents running now. Each agent is its own process group (so a kill reaches the
 * agent under the shell), which also means a terminal's Ctrl-C reaches only the trainer: while any agent runs, SIGINT
 * and SIGTERM to the trainer kill every live agent group first, then end the trainer by the same signal (its default
 * action, re-raised), and a normal exit kills any group still alive.
 */
const liveAgents = new Set<number>();

function killLiveAgents(): void {
  for (const pid of liveAgents) {
    try {
      process.kill(-pid, "SIGKILL");
    } catch {
      // already gone
    }
  }
  liveAgents.clear();
}

function onStopSignal(signal: NodeJS.Signals): void {
  const n = liveAgents.size;
  killLiveAgents();
  // The process ends by this signal right after: say what happened and how to go on (nothing else is printed).
  process.stderr.write(`\nstopped by ${signal}: ${n} running agent process group${n === 1 ? "" : "s"} killed; the run continues from its last checkpoint with --resume\n`);
  process.removeListener("SIGINT", onStopSignal);
  process.removeListener("SIGTERM", onStopSignal);
  process.kill(process.pid, signal);
}

function trackAgent(pid: number): void {
  if (liveAgents.size === 0) {
    process.on("SIGINT", onStopSignal);
    process.on("SIGTERM", onStopSignal);
    process.on("exit", killLiveAgents);
  }
  liveAgents.add(pid);
}

function untrackAgent(pid: number): void {
  if (!liveAgents.delete(pid) || liveAgents.size > 0) return;
  process.removeListener("SIGINT", onStopSignal);
  process.removeListener("SIGTERM", onStopSignal);
  process.removeListener("exit", killLiveAgents);
}

/**
 * Runs `command` (through the shell) as one rollout's agent: the environment gets `OPENAI_BASE_URL`,
 * `OPENAI_API_KEY`, `ARL_ROLLOUT_ID`, `ARL_REWARD_URL` and `ctx.env`; stdin gets the task as one JSON line; the last stdout line
 * that parses as a JSON object is its result (`{answer}`), any other output is ignored.
 * @returns the result, or `{error}` — a non-zero exit (with the end of stderr), a crash, or the deadline (the process
 *   is killed): the rollout is then dropped with that reason
 */
export function runAgentCommand(command: string, ctx: AgentContext, options: { timeoutMs: number; cwd?: string }): Promise<AgentResult & { error?: string }> {
  return new Promise((resolve) => {
    const child = spawn(command, {
      shell: true,
      // Its own process group: a kill must reach the agent under the shell, not only `sh` (else it outlives us).
      detached: process.platform !== "win32",
      cwd: options.cwd,
      stdio: ["pipe", "pipe", "pipe"],
      env: { ...process.env, ...ctx.env, OPENAI_BASE_URL: ctx.baseURL, OPENAI_API_KEY: ctx.apiKey, ARL_ROLLOUT_ID: ctx.rolloutId, ARL_REWARD_URL: ctx.rewardURL },
    });
    const pid = child.pid;
    if (pid !== undefined && process.platform !== "win32") trackAgent(pid);
    let stdout = "";
    let stderr = "";
    let settled = false;
    const done = (r: AgentResult & { error?: string }) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(r);
    };
    const kill = () => {
      try {
        if (child.pid !== undefined && process.platform !== "win32") process.kill(-child.pid, "SIGKILL");
        else child.kill("SIGKILL");
      } catch {
        // already gone
      }
    };
    const timer = setTimeout(() => {
      kill();
      done({ error: `agent timed out after ${options.timeoutMs} ms (killed)` });
    }, options.timeoutMs);
    const abort = () => {
      kill();
      done({ error: "rollout deadline passed (agent killed)" });
    };
    ctx.signal.addEventListener("abort", abort, { once: true });
    child.stdout.on("data", (b: Buffer) => (stdout = (stdout + b.toString("utf8")).slice(-65_536)));
    child.stderr.on("data", (b: Buffer) => (stderr = (stderr + b.toString("utf8")).slice(-2_048)));
    child.on("error", (e) => done({ error: `agent command failed to start: ${e.message}` }));
    child.on("close", (code, signal) => {
      if (pid !== undefined) untrackAgent(pid);
      ctx.signal.removeEventListener("abort", abort);
      if (code !== 0) {
        done({ error: `agent exited with ${code === null ? `signal ${signal}` : `code ${code}`}${stderrGist(stderr)}` });
        return;
      }
      for (const line of stdout.trim().split("\n").reverse()) {
        try {
          const o = JSON.parse(line) as unknown;
          if (o && typeof o === "object" && !Array.isArray(o)) {
            // A non-string answer is passed on, for the rollout to drop with its reason (`runAgentRollout`).
            const answer = (o as { answer?: unknown }).answer;
            done(answer === undefined ? {} : ({ answer } as AgentResult));
            return;
          }
        } catch {
          // not the result line
        }
      }
      done({});
    });
    child.stdin.on("error", () => {}); // an agent that never reads stdin closes it early
    child.stdin.end(`${JSON.stringify(ctx.task)}\n`);
  });
}

/**
 * One segment → a datum: `modelInput` `[seq-1]`, `targetTokens` `[seq-1]`, `weights` = the loss mask shifted,
 * `logprobs` (sampler's, nats), `advantages` = the rollout's advantage on sampled tokens.
 * @throws Error when the segment's arrays disagree in length or it has fewer than 2 tokens
 */
export function segmentToDatum(segment: GatewaySegment, advantage: number): Datum {
  const n = segment.tokens.length;
  if (segment.lossMask.length !== n || segment.logprobs.length !== n) {
    throw new Error(`segment: tokens ${n}, lossMask ${segment.lossMask.length}, logprobs ${segment.logprobs.length} — expected equal lengths`);
  }
  if (n < 2) throw new Error(`segment: needs at least 2 tokens to make a datum, has ${n}`);
  const weights = segment.lossMask.slice(1);
  return {
    modelInput: segment.tokens.slice(0, n - 1),
    targetTokens: segment.tokens.slice(1),
    weights,
    logprobs: segment.logprobs.slice(1),
    advantages: tokenAdvantages(advantage, weights),
  };
}

/** The datums and statistics of one step's rollouts. */
export interface AgentBatch {
  /** One datum per segment of each rewarded rollout, its group's advantage on every segment. */
  datums: Datum[];
  /** `[rollout]` advantages of the rewarded rollouts, in input order. */
  advantages: number[];
  rewarded: number;
  dropped: number;
  /** Drop reasons with their counts. */
  dropReasons: Record<string, number>;
  /** Segments per rewarded rollout, summed (1 each when every call extended the previous one). */
  segments: number;
  /** History mismatches, summed. */
  mismatches: number;
}

/**
 * The advantage estimators `trainAgent` computes from rollout rewards alone (veRL `algorithm.adv_estimator` names):
 * each gives every rewarded rollout one scalar, on all its trained tokens — an agent's calls are not turns the trainer
 * can value (`gae`) or group by state (`gigpo`), and without a per-token reward `reinforce_plus_plus` is not defined
 * on merged segments.
 */
export const AGENT_ESTIMATORS = ["grpo", "drgrpo", "rloo", "opo", "grpo_passk", "reinforce_plus_plus_baseline"] as const;
/** A name in `AGENT_ESTIMATORS`. */
export type AgentEstimator = (typeof AGENT_ESTIMATORS)[number];

/**
 * Advantages over groups of rollouts (one group = the G rollouts of one task) from the rewarded rollouts of each
 * group (dropped rollouts take no part), then every segment of a rollout becomes a datum with that rollout's advantage
 * — the calls of one episode share its credit, merged or not. `estimator` (default: `grpo` when `normalizeStd`, else
 * `drgrpo`): `grpo` / `drgrpo` (`grpoAdvantages` with / without the std division), `rloo` (`rlooAdvantages`), `opo`
 * (`opoAdvantages`, lengths = the rollout's trained tokens), `grpo_passk` (`passkAdvantages`; a group of one rewarded
 * rollout gets 0), `reinforce_plus_plus_baseline` (`reinforcePlusPlusBaselineAdvantages`: group-centred, whitened
 * over every trained token of the batch; a rollout's tokens share one value, which is its scalar here).
 * @param groups `[task][G]` records
 * @throws Error from the estimator on a non-finite reward
 */
export function agentBatch(groups: readonly (readonly RolloutRecord[])[], options: { normalizeStd: boolean; estimator?: AgentEstimator }): AgentBatch {
  const estimator = options.estimator ?? (options.normalizeStd ? "grpo" : "drgrpo");
  const batch: AgentBatch = { datums: [], advantages: [], rewarded: 0, dropped: 0, dropReasons: {}, segments: 0, mismatches: 0 };
  const trained = (r: RolloutRecord) => r.segments.filter((s) => s.tokens.length >= 2 && s.lossMask.some((m) => m === 1));
  const keptGroups = groups.map((group) => group.filter((r) => r.status === "rewarded" && r.reward !== undefined));
  for (const group of groups) {
    for (const r of group) {
      if (r.status === "dropped" || r.reward === undefined) {
        batch.dropped++;
        const why = r.dropReason ?? "no reward";
        batch.dropReasons[why] = (batch.dropReasons[why] ?? 0) + 1;
      }
    }
  }
  const rewardsOf = (kept: readonly RolloutRecord[]) => kept.map((r) => r.reward!.value);
  // A datum's trained tokens are its weights: the loss mask shifted by one (segmentToDatum).
  const masksOf = (r: RolloutRecord) => trained(r).flatMap((s) => s.lossMask.slice(1));
  let perGroup: number[][];
  if (estimator === "reinforce_plus_plus_baseline") {
    const masks = keptGroups.map((kept) => kept.map(masksOf));
    const white = reinforcePlusPlusBaselineAdvantages(keptGroups.map(rewardsOf), masks);
    perGroup = white.map((g, gi) => g.map((row, i) => row[masks[gi][i].indexOf(1)] ?? 0));
  } else {
    perGroup = keptGroups.map((kept) => {
      const rewards = rewardsOf(kept);
      if (estimator === "rloo") return rlooAdvantages(rewards);
      if (estimator === "opo") {
        const lengths = kept.map((r) => masksOf(r).reduce((a, m) => a + m, 0));
        return lengths.some((n) => n > 0) ? opoAdvantages(rewards, lengths) : rewards.map(() => 0);
      }
      if (estimator === "grpo_passk") return rewards.length >= 2 ? passkAdvantages(rewards, { normalizeStd: true }) : rewards.map(() => 0);
      return grpoAdvantages(rewards, { normalizeStd: estimator === "grpo" });
    });
  }
  keptGroups.forEach((kept, g) => {
    kept.forEach((r, i) => {
      const adv = perGroup[g][i];
      batch.rewarded++;
      batch.advantages.push(adv);
      batch.mismatches += r.mismatches;
      for (const s of trained(r)) {
        batch.segments++;
        batch.datums.push(segmentToDatum(s, adv));
      }
    });
  });
  return batch;
}

/** The informative part of an agent's stderr: its error line (`TypeError: …`, `error: …`) if any, else its last lines. */
function stderrGist(stderr: string): string {
  const lines = stderr.trim().split("\n").map((l) => l.trim()).filter((l) => l !== "");
  if (lines.length === 0) return "";
  const error = lines.find((l) => /^(\w*Error\b|error\b)/i.test(l));
  return `: ${error ?? lines.slice(-3).join(" | ")}`;
}
