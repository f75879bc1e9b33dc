/**
 * The trainer's side of the gateway (issue 15): running a user's agent — a function in this process or a command in
 * a child process — on one task against a rollout's base URL, and turning the gateway's exact records into datums
 * with group-relative advantages. Names no environment: a task is a `Task`, a reward a number.
 */
import { spawn } from "node:child_process";
import type { Datum, Task } from "../core/types.ts";
import { grpoAdvantages, tokenAdvantages } from "../algo/advantages.ts";
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
      ctx.signal.removeEventListener("abort", abort);
      if (code !== 0) {
        done({ error: `agent exited with ${code === null ? `signal ${signal}` : `code ${code}`}${stderrGist(stderr)}` });
        return;
      }
      for (const line of stdout.trim().split("\n").reverse()) {
        try {
          const o = JSON.parse(line) as unknown;
          if (o && typeof o === "object" && !Array.isArray(o)) {
            const answer = (o as { answer?: unknown }).answer;
            done(typeof answer === "string" ? { answer } : {});
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
 * GRPO over groups of rollouts (one group = the G rollouts of one task): advantages from the rewarded rollouts of
 * each group (`grpoAdvantages`; dropped rollouts take no part), then every segment of a rollout becomes a datum with
 * that rollout's advantage — the calls of one episode share its credit, merged or not.
 * @param groups `[task][G]` records
 * @throws Error from `grpoAdvantages` on a non-finite reward
 */
export function agentBatch(groups: readonly (readonly RolloutRecord[])[], options: { normalizeStd: boolean }): AgentBatch {
  const batch: AgentBatch = { datums: [], advantages: [], rewarded: 0, dropped: 0, dropReasons: {}, segments: 0, mismatches: 0 };
  for (const group of groups) {
    const kept = group.filter((r) => r.status === "rewarded" && r.reward !== undefined);
    for (const r of group) {
      if (r.status === "dropped" || r.reward === undefined) {
        batch.dropped++;
        const why = r.dropReason ?? "no reward";
        batch.dropReasons[why] = (batch.dropReasons[why] ?? 0) + 1;
      }
    }
    const adv = grpoAdvantages(kept.map((r) => r.reward!.value), { normalizeStd: options.normalizeStd });
    kept.forEach((r, i) => {
      batch.rewarded++;
      batch.advantages.push(adv[i]);
      batch.mismatches += r.mismatches;
      for (const s of r.segments) {
        if (s.tokens.length < 2 || !s.lossMask.some((m) => m === 1)) continue;
        batch.segments++;
        batch.datums.push(segmentToDatum(s, adv[i]));
      }
    });
  }
  return batch;
}

/** The informative part of an agent's stderr: its error line (`TypeError: …`, `error: …`) if any, else its last lines. */
function stderrGist(stderr: string): string {
  const lines = stderr.trim().split("\n").map((l) => l.trim()).filter((l) => l !== "");
  if (lines.length === 0) return "";
  const error = lines.find((l) => /^(\w*Error\b|error\b)/i.test(l));
  return `: ${error ?? lines.slice(-3).join(" | ")}`;
}
