/**
 * The warm start of an `arl train --agent` run: the unchanged agent runs against scripted teachers (the env's
 * personas, `teacherSampler`) behind the gateway, so the demonstrations are in exactly the agent's own token format;
 * then cross entropy on their completions.
 */
import { Rng } from "../core/rng.ts";
import type { TrainingBackend } from "../core/training.ts";
import type { Tokenizer } from "../core/tokenizer.ts";
import type { Datum, Task } from "../core/types.ts";
import { ToolLimiter } from "../env/tool.ts";
import type { RunningGateway } from "../gateway/server.ts";
import { ConfigError, type ExperimentConfig } from "../train/config.ts";
import type { Reporter } from "../train/reporter.ts";
import type { RunDir } from "../train/runDir.ts";
import { segmentToDatum } from "./rollouts.ts";
import { teacherSampler, type TeacherTool } from "./teacher.ts";
import { limited, runAgentRollout, type TrainAgentOptions } from "./train.ts";
import type { ServedWorld } from "./worlds.ts";

/** Rollouts run at once while recording demonstrations (and evaluating). */
export const DEMO_CONCURRENCY = 8;

/** What the warm start needs from the experiment. */
export interface WarmStartContext {
  backend: TrainingBackend;
  gateway: RunningGateway;
  tokenizer: Tokenizer;
  run: RunDir;
  reporter: Reporter;
  real: ServedWorld;
  demoWorlds: readonly ServedWorld[];
  base: Pick<TrainAgentOptions, "agent" | "gateway" | "grade" | "rolloutDeadlineMs">;
  /** The agent's search tool, which the teacher calls. */
  tool: TeacherTool;
  /** The env's personas in their declared order with the mixture's weights (`sft.personas`, else the recipe's). */
  personas: PersonaMix;
  /** The persona that writes the reading demonstrations in the counterfactual worlds (the recipe's careful one). */
  readingPersona: string;
}

/** Persona names in the recipe's order, and their weights. */
export interface PersonaMix {
  names: readonly string[];
  weights: Readonly<Record<string, number>>;
}

/**
 * A persona drawn by weight from an episode's seed (names in `mix.names`' order, so the draw and the float sum of the
 * weights are the same as the search env's own `pickPersona`).
 * @throws ConfigError when the weights do not sum to > 0
 */
function personaPicker(mix: PersonaMix): (seed: number) => string {
  const weights = mix.names.map((n) => mix.weights[n] ?? 0);
  const total = weights.reduce((a, b) => a + b, 0);
  if (!(total > 0)) throw new ConfigError([`sft.personas: at least one weight must be > 0 (got ${JSON.stringify(mix.weights)})`]);
  return (seed) => {
    let x = new Rng(seed ^ 0x2545f491).next() * total;
    for (let i = 0; i < mix.names.length; i++) if ((x -= weights[i]) < 0) return mix.names[i];
    return mix.names[mix.names.length - 1];
  };
}

/** One batch of demonstrations: a persona teaching in one world. */
interface DemoJob {
  persona: string;
  served: ServedWorld;
  tasks: Task[];
  tag: string;
}

/**
 * The demonstration jobs: in the real world the personas' mixture (`sft.demosPerTask` draws per training task) teaches
 * habits; in each counterfactual world the reading persona on the tasks only retrieval answers teaches reading the
 * retrieved passages (their answers differ from the real world's).
 */
function demoJobs(config: ExperimentConfig, ctx: WarmStartContext): DemoJob[] {
  const pick = personaPicker(ctx.personas);
  const byPersona = new Map<string, Task[]>();
  for (const [i, task] of ctx.real.world.train.entries()) {
    for (let d = 0; d < config.sft.demosPerTask; d++) {
      const p = pick(config.run.seed * 7919 + i * 31 + d);
      byPersona.set(p, [...(byPersona.get(p) ?? []), task]);
    }
  }
  const jobs: DemoJob[] = [];
  for (const persona of ctx.personas.names) if (byPersona.has(persona)) jobs.push({ persona, served: ctx.real, tasks: byPersona.get(persona)!, tag: persona });
  ctx.demoWorlds.forEach((w, k) => jobs.push({ persona: ctx.readingPersona, served: w, tasks: w.world.retrievalTasks, tag: `cf${k + 1}` }));
  return jobs;
}

/**
 * Warm start: records the agent's demonstrations with the teachers (`demoJobs`), then `sft.steps` cross-entropy steps
 * on batches drawn from them (metrics `sft` in the run folder).
 * @throws Error when the agent produced no demonstration (every rollout dropped, or none called the gateway)
 */
export async function agentWarmStart(config: ExperimentConfig, ctx: WarmStartContext): Promise<void> {
  const { backend, gateway, tokenizer, run, reporter } = ctx;
  const rng = new Rng(config.run.seed ^ 0x5f7a);
  const jobs = demoJobs(config, ctx);
  const datums: Datum[] = [];
  let firstDrop: string | undefined;
  let demoCalls = 0;
  let demoInvalid = 0;
  let demoToolCalls = 0;
  const bar = reporter.bar("demonstrations", jobs.reduce((a, j) => a + j.tasks.length, 0));
  let done = 0;
  for (const job of jobs) {
    const w = job.served.world;
    const demoId = (j: number) => `demo-${job.tag}-${config.run.seed}-${j}`;
    const taskById = new Map(job.tasks.map((t, j) => [demoId(j), t]));
    gateway.setSampler(teacherSampler(w.train, tokenizer, job.served.index, { turn: (turn) => w.scriptedTurn(job.persona, turn), seed: config.run.seed, tool: ctx.tool, taskOf: (id) => taskById.get(id) }));
    const limit = new ToolLimiter(DEMO_CONCURRENCY);
    const records = await Promise.all(
      job.tasks.map((t, j) =>
        limited(limit, async () => {
          const r = await runAgentRollout(ctx.base, demoId(j), t, job.served.env);
          bar.update(++done);
          return r;
        }),
      ),
    );
    firstDrop ??= records.find((r) => r.status === "dropped")?.dropReason;
    for (const r of records) {
      demoCalls += r.calls.length;
      demoInvalid += r.calls.filter((c) => c.invalid).length;
      demoToolCalls += r.calls.reduce((a, c) => a + c.toolCalls.length, 0);
    }
    for (const r of records) for (const seg of r.status === "rewarded" ? r.segments : []) if (seg.tokens.length >= 2 && seg.lossMask.includes(1)) datums.push(segmentToDatum(seg, 0));
  }
  bar.stop();
  // The teacher's demonstrations search unknown facts; an agent without the teacher's tool cannot follow them.
  if (demoToolCalls === 0 || demoInvalid > 0.2 * demoCalls) {
    reporter.log(`warning: warm start: the agent parsed ${demoToolCalls} of the teacher's tool calls (${demoInvalid} of ${demoCalls} calls invalid): the teacher calls a tool named ${JSON.stringify(ctx.tool.name)} with {${JSON.stringify(ctx.tool.queryArg)}: "…"} (--agent-tool NAME:ARG names yours); an agent without that tool learns from demonstrations it cannot run (check with --dry-run; examples/agents/README.md)`);
  }
  if (datums.length === 0) {
    throw new Error(`warm start: the agent produced no demonstrations with the teacher: ${firstDrop ? `rollouts were dropped (first: ${firstDrop})` : "no rollout"} — check the agent against the gateway (examples/agents/README.md)`);
  }
  const sft = reporter.bar("warm start (SFT)", config.sft.steps);
  for (let step = 0; step < config.sft.steps; step++) {
    const batch = Array.from({ length: Math.min(config.sft.batchSize, datums.length) }, () => datums[rng.int(datums.length)]);
    const fb = await backend.forwardBackward(batch, "cross_entropy");
    await backend.optimStep({ learningRate: config.sft.learningRate, gradClip: config.rl.gradClip });
    run.logMetrics("sft", step, { loss: fb.loss, demos: datums.length });
    sft.update(step + 1);
  }
  sft.stop();
}
