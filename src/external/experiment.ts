/**
 * `arl train --agent <command>` (issue 15 part 4): RL on the user's own agent over the search env's tasks. The
 * trainer serves the env's retrieval as a Search-R1 `/retrieve` server (`ARL_RETRIEVAL_URL`: the agent's `search`
 * tool calls it), the policy behind the OpenAI-compatible gateway (`OPENAI_BASE_URL`, one per rollout), evaluates the
 * agent on held-out tasks, trains it with `trainAgent`, evaluates again, and writes the run folder as `arl train`
 * does (`config.yaml`, `metrics.jsonl`, `detectors.jsonl`, `samples/step-<n>.jsonl`, `checkpoints/{sft,step-<n>,final}`
 * with `trainer-state.json`, `eval-warm.json`, `agent-summary.json`, and `rollouts.jsonl`: one line per rollout), and
 * `--resume` continues it from its last good checkpoint.
 *
 * Counterfactual worlds (the search recipe's, `RecipeInstance.retrievalWorld`: `sft.counterfactualWorlds` /
 * `rl.counterfactualWorlds`): copies of the world whose unknown facts are permuted, each served at its own retrieval
 * URL (`ARL_RETRIEVAL_URL` of a rollout is its world's), so the same training question has a different answer in each
 * world and only reading what the search tool returns pays — memorising the training answers cannot.
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { TrainingBackend } from "../core/training.ts";
import type { Tokenizer } from "../core/tokenizer.ts";
import type { Metrics, Task } from "../core/types.ts";
import { ToolLimiter } from "../env/tool.ts";
import type { RolloutSnapshot } from "../gateway/registry.ts";
import { startGateway, type RunningGateway } from "../gateway/server.ts";
import { EmbeddedBackend } from "../policy/embedded/backend.ts";
import { rewardConfigOf } from "../reward/config.ts";
import { DetectorMonitor, defaultDetectors, type DetectorFiring } from "../reward/detectors.ts";
import { emCheck } from "../reward/em.ts";
import { closeBackend, createBackend } from "../train/backends.ts";
import { savePolicy } from "../train/checkpoint.ts";
import { ConfigError, type ExperimentConfig } from "../train/config.ts";
import { silentReporter, type Reporter } from "../train/reporter.ts";
import { openRun, resumeIntent, type ResumePlan } from "../train/resume.ts";
import type { RunDir } from "../train/runDir.ts";
import { evalTasks, gptConfigOf } from "../train/setup.ts";
import { agentIdentityDiffs, agentUnusedFieldsWarning, checkAgentConfig, DEFAULT_AGENT_DEADLINE_MS, type AgentIdentity } from "./config.ts";
import { gradeTranscript } from "./reward.ts";
import { trainAgentSteps, type AgentRlContext } from "./rlStage.ts";
import type { AgentFunction } from "./rollouts.ts";
import { logRollouts, writeAgentSamples } from "./samples.ts";
import { DEFAULT_TEACHER_TOOL, type TeacherTool } from "./teacher.ts";
import { limited, runAgentRollout, type TrainAgentOptions } from "./train.ts";
import { agentWarmStart, DEMO_CONCURRENCY } from "./warmStart.ts";
import { agentTokenizer, runWorlds, serveWorlds, type ServedWorld, type ServedWorlds } from "./worlds.ts";

/** Options of `runAgentExperiment`. */
export interface AgentExperimentOptions {
  /** The agent: a shell command (env contract in examples/agents/README.md) or a function in this process. */
  agent: AgentFunction | string;
  reporter?: Reporter;
  overwrite?: boolean;
  /** Extra texts for the word tokenizer's vocabulary (the agent's system prompt and tool descriptions). */
  agentTexts?: string[];
  /** A checkpoint folder to start from instead of the warm start (e.g. an earlier run's `checkpoints/sft`); SFT is
   * skipped and the run speaks its tokenizer. With `policy.backend: tinker` the server's base model is taken to hold
   * these weights (`arl serve trainer --checkpoint <dir>`): only its tokenizer and shape are read here. */
  warmStart?: string;
  /** A rollout's deadline (ms; default 120 000). */
  rolloutDeadlineMs?: number;
  /** Continue the run in the folder from its last good checkpoint (same config, checked field by field, and the
   * same agent: `agentId`). */
  resume?: boolean;
  /** What the agent is, recorded in `agent.json` and checked on `resume` (default: the command, or `function`). */
  agentId?: string;
  /**
   * The agent's search tool and its query argument, which the warm start's teacher calls (`--agent-tool NAME:ARG`;
   * default `search` / `query`, the example agents'). Recorded in `agent.json` and checked on `resume`.
   */
  teacherTool?: TeacherTool;
}

/** Held-out success before and after training. */
export interface AgentExperimentSummary {
  run: string;
  /** EM % of the agent's answers on the held-out tasks: with the warm start (or the initial policy when `sft.steps` is
   * 0) and after RL. */
  before: { success: number; n: number; dropped: number };
  after: { success: number; n: number; dropped: number };
  /** Metrics of every RL step (a resumed run's include the steps before the resume point). */
  steps: Metrics[];
  /** Hacking detectors firing at the end of RL (empty = quiet). */
  detectors: DetectorFiring[];
}

/** The reward of an answer: Search-R1's EM against the gold answers (the trainer grades; the agent may report its own). */
export const gradeAnswer = (task: Task, answer: string | undefined): number => (answer === undefined ? 0 : emCheck(answer, task.answers));

/** Held-out success of one evaluation. */
type EvalResult = AgentExperimentSummary["before"];

/** What a held-out evaluation needs from the experiment. */
interface EvalContext {
  config: ExperimentConfig;
  run: RunDir;
  reporter: Reporter;
  tokenizer: Tokenizer;
  base: Pick<TrainAgentOptions, "agent" | "gateway" | "grade" | "rolloutDeadlineMs">;
  real: ServedWorld;
  served: ServedWorlds;
  /** The held-out tasks (`evalTasks`). */
  held: readonly Task[];
}

/**
 * One held-out evaluation (`eval-<label>` in `rollouts.jsonl` and `samples/`): every held-out task once, in the real
 * world, without its gold answers; success is EM of the agent's answers, graded here — a reward the agent reports
 * itself trains it but never counts as success.
 * @throws Error when every held-out rollout was dropped
 */
async function evaluateAgent(ctx: EvalContext, label: string): Promise<EvalResult> {
  const { config, run, reporter, held } = ctx;
  const bar = reporter.bar(`eval ${label}`, held.length);
  let done = 0;
  const limit = new ToolLimiter(DEMO_CONCURRENCY);
  const records = await Promise.all(held.map((task, i) => limited(limit, async () => {
    // Held-out tasks reach the agent without their gold answers: success is graded here, never by the agent.
    const r = await runAgentRollout(ctx.base, `${label}-${config.run.seed}-${i}`, task, ctx.real.env, { hideAnswers: true });
    bar.update(++done);
    return r;
  })));
  bar.stop();
  logRollouts(run, `eval-${label}`, 0, records, reporter);
  for (const r of records) ctx.served.retrievals.take(r.id); // a dropped rollout was never graded: forget what it searched
  // The held-out transcripts, for the viewer's warm-start-vs-RL comparison (`arl view`).
  writeAgentSamples(run, `eval-${label}`, records, ctx.tokenizer, held);
  const rewarded = records.filter((r) => r.status === "rewarded");
  if (rewarded.length === 0 && records.length > 0) {
    throw new Error(`eval ${label}: every held-out rollout was dropped (first: ${records[0].dropReason}) — nothing the agent does reaches the policy; check the agent, and on a Tinker server that policy.tinker.baseModel is the model whose tokenizer this run uses`);
  }
  const em = records.reduce((a, r, i) => a + (r.status === "rewarded" ? gradeAnswer(held[i], r.answer) : 0), 0);
  return { success: held.length > 0 ? (100 * em) / held.length : 0, n: held.length, dropped: records.length - rewarded.length };
}

/** The run folder of an experiment, opened: where RL resumes and whether the warm start's evaluation is kept. */
interface OpenedRun {
  run: RunDir;
  plan: ResumePlan;
  resumeStep: number;
  warmEvaluated: boolean;
}

/**
 * Opens the run folder (`openRun`): on `resuming`, checks `agent.json` against `identity`, and keeps the warm start's
 * evaluation (eval-warm.json and its transcripts) when the warm start is whole; writes `config.yaml` and `agent.json`.
 * @throws ConfigError for a resumed folder of another agent, deadline or tool; what `openRun` throws
 */
function openAgentRun(config: ExperimentConfig, shape: Parameters<typeof openRun>[1], identity: AgentIdentity, options: { resuming: boolean; overwrite: boolean; reporter: Reporter }): OpenedRun {
  const { resuming, reporter } = options;
  const folder = join(config.run.dir, config.run.name);
  if (resuming && existsSync(join(folder, "agent.json"))) {
    const diffs = agentIdentityDiffs(JSON.parse(readFileSync(join(folder, "agent.json"), "utf8")) as Partial<AgentIdentity>, identity);
    if (diffs.length > 0) throw new ConfigError(diffs);
  }
  // The warm-start evaluation is reused on --resume (eval-warm.json); its transcripts go with it, though openRun's
  // truncation clears every sample file that is not an RL step's.
  const warmSamples = ["eval-warm", "eval-before"].map((n) => join(folder, "samples", `${n}.jsonl`)).map((f) => ({ f, text: resuming && existsSync(f) ? readFileSync(f, "utf8") : undefined }));
  const { run, plan } = openRun(config, shape, resuming, reporter, { overwrite: options.overwrite });
  run.writeConfig(config);
  run.writeText("agent.json", `${JSON.stringify(identity)}\n`);
  const unusedWarning = agentUnusedFieldsWarning(config);
  if (unusedWarning !== undefined) reporter.log(`warning: ${unusedWarning}`);
  const resumeStep = plan.rl?.state.step ?? 0;
  // rollouts.jsonl is cut back with the rest: demonstrations and the warm-start evaluation stay when the warm start is whole.
  if (!plan.sft) run.remove("eval-warm.json");
  const warmEvaluated = existsSync(join(run.path, "eval-warm.json"));
  if (warmEvaluated) for (const { f, text } of warmSamples) if (text !== undefined) writeFileSync(f, text);
  run.truncateJsonl("rollouts.jsonl", (row) => plan.sft && (row.stage === "rl" ? typeof row.step === "number" && row.step < resumeStep : row.stage !== "eval-after" && warmEvaluated));
  return { run, plan, resumeStep, warmEvaluated };
}

/**
 * Runs the experiment (or, with `resume`, continues the one in the run folder from its last good checkpoint; the
 * steps after it reproduce an uninterrupted run's metrics).
 * @throws ConfigError for an env other than search, a backend other than embedded/tinker, a context under
 *   `MIN_AGENT_CONTEXT`, a run folder that exists without `overwrite`/`resume`, or a resume with a different config
 */
export async function runAgentExperiment(config: ExperimentConfig, options: AgentExperimentOptions): Promise<AgentExperimentSummary> {
  const env = checkAgentConfig(config);
  const reporter = options.reporter ?? silentReporter;
  const overwrite = options.overwrite ?? false;
  const tok = await agentTokenizer(config, env.world("rl", 0).texts(), options);
  const tokenizer = tok.tokenizer;
  const gpt = tok.gpt ?? gptConfigOf(config, tokenizer.vocabSize);
  const resuming = resumeIntent(config, reporter, { overwrite, resume: options.resume });
  const tool = options.teacherTool ?? DEFAULT_TEACHER_TOOL;
  const identity: AgentIdentity = {
    agent: options.agentId ?? (typeof options.agent === "string" ? `command: ${options.agent}` : "function"),
    deadlineMs: options.rolloutDeadlineMs ?? DEFAULT_AGENT_DEADLINE_MS,
    tool: `${tool.name}:${tool.queryArg}`,
  };
  const { run, plan, resumeStep, warmEvaluated } = openAgentRun(config, { gpt, tokenizer }, identity, { resuming, overwrite, reporter });

  // The real world (0), the demonstrations' counterfactual worlds, RL's, each at a retrieval URL of its own.
  const served = await serveWorlds(runWorlds(config, env));
  const real = served.worlds[0];
  const demoWorlds = served.worlds.slice(1, 1 + config.sft.counterfactualWorlds);
  const rlWorlds = served.worlds.slice(1 + config.sft.counterfactualWorlds);

  // The policy: the last good RL checkpoint, the warm start, a given checkpoint, or fresh or the base (then SFT below).
  const tinkerBase = config.policy.backend === "tinker" && options.warmStart !== undefined && config.policy.tinker.tokenizer === undefined;
  const from = plan.rl?.dir ?? (plan.sft ? run.checkpoint("sft") : tinkerBase ? undefined : options.warmStart);
  let backend: TrainingBackend | undefined;
  let reference: TrainingBackend | undefined;
  let gateway: RunningGateway | undefined;
  try {
    if (config.policy.backend === "tinker") reporter.log(`tinker: connecting to ${config.policy.tinker.baseUrl} (model ${config.policy.tinker.baseModel}; each request retries for ${config.policy.tinker.retryForMs} ms while the server is unreachable)`);
    backend = await createBackend(config, gpt, from);
    gateway = await startGateway({
      // A base's context may be longer than the config's (policyBaseOf): the agent's calls get policy.contextLength.
      policy: { name: "arl/policy", sampler: backend.samplingClient(), tokenizer, contextLength: tok.base !== undefined ? config.policy.contextLength : gpt.contextLength, maxTokens: config.rl.maxTokensPerTurn },
      seed: config.run.seed,
    });
    // A rollout the agent does not reward itself is scored by the config's reward terms over its transcript (the
    // `--agent` default preset, outcome-only, is EM alone).
    const reward = rewardConfigOf(config);
    const grade = (t: Task, a: string | undefined, transcript: RolloutSnapshot) => gradeTranscript(t, a, transcript, served.retrievals.take(transcript.id), { reward, searchTool: tool.name });
    const base = { agent: options.agent, gateway, grade, rolloutDeadlineMs: identity.deadlineMs };
    const evalCtx: EvalContext = { config, run, reporter, tokenizer, base, real, served, held: evalTasks(env, config) };

    const warm = config.sft.steps > 0 || options.warmStart !== undefined;
    if (!plan.sft) {
      if (config.sft.steps > 0 && options.warmStart === undefined) {
        const { instance } = env;
        const personas = { names: Object.keys(instance.personas), weights: config.sft.personas ?? instance.personas };
        await agentWarmStart(config, { backend, gateway, tokenizer, run, reporter, real, demoWorlds, base, tool, personas, readingPersona: instance.baselinePersona });
      }
      // checkpoints/sft is the policy RL starts from (warm-started, given, or fresh): the reference policy, and what
      // --resume needs to find before any RL checkpoint.
      await savePolicy(run.checkpoint("sft"), backend, tokenizer, gpt);
    }
    let before: EvalResult;
    if (plan.sft && warmEvaluated) before = JSON.parse(readFileSync(join(run.path, "eval-warm.json"), "utf8")) as EvalResult;
    else {
      gateway.setSampler(backend.samplingClient());
      before = await evaluateAgent(evalCtx, warm ? "warm" : "before");
      run.writeText("eval-warm.json", `${JSON.stringify(before)}\n`);
    }

    // The reference policy for hack/kl_ref: the warm start, frozen.
    const d = config.detectors;
    if (d.enabled && d.referenceKl) reference = await createBackend(config, gpt, run.checkpoint("sft"));
    const monitor = new DetectorMonitor(d.enabled ? defaultDetectors(d) : [], d);
    const rl: AgentRlContext = { config, run, reporter, tokenizer, gpt, backend, reference, base, plan, resumeStep, monitor, retrievals: served.retrievals, worlds: [real, ...rlWorlds] };
    const steps = await trainAgentSteps(rl);
    gateway.setSampler(backend.samplingClient());
    const after = await evaluateAgent(evalCtx, "after");
    const summary: AgentExperimentSummary = { run: run.path, before, after, steps, detectors: monitor.firing() };
    run.writeText("agent-summary.json", `${JSON.stringify({ before, after, detectors: summary.detectors }, null, 2)}\n`);
    return summary;
  } finally {
    await gateway?.close();
    await served.close();
    for (const x of [backend, reference]) {
      if (x === undefined) continue;
      closeBackend(x);
      if (x instanceof EmbeddedBackend) x.dispose();
    }
  }
}
