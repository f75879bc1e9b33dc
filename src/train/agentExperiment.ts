/**
 * `arl train --agent <command>` (issue 15 part 4): RL on the user's own agent over the search env's tasks. The
 * trainer serves the env's retrieval as a Search-R1 `/retrieve` server (`ARL_RETRIEVAL_URL`: the agent's `search`
 * tool calls it), the policy behind the OpenAI-compatible gateway (`OPENAI_BASE_URL`, one per rollout), evaluates the
 * agent on held-out tasks, trains it with `trainAgent`, evaluates again, and writes the run folder as `arl train`
 * does (`config.yaml`, `metrics.jsonl`, `detectors.jsonl`, `samples/step-<n>.jsonl`, `checkpoints/{sft,step-<n>,final}`
 * with `trainer-state.json`, `eval-warm.json`, `agent-summary.json`, and `rollouts.jsonl`: one line per rollout), and
 * `--resume` continues it from its last good checkpoint.
 *
 * Counterfactual worlds (as the search recipe's `sft.counterfactualWorlds` / `rl.counterfactualWorlds`): copies of
 * the world whose unknown facts are permuted, each served at its own retrieval URL (`ARL_RETRIEVAL_URL` of a rollout
 * is its world's), so the same training question has a different answer in each world and only reading what the
 * search tool returns pays — memorising the training answers cannot.
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Metrics, Task } from "../core/types.ts";
import { buildWorld, counterfactualWorld, valuesOf, worldTexts, type CountryAttribute, type World } from "../envs/search/world.ts";
import { PERSONAS, pickPersona, type Persona } from "../envs/search/scripted.ts";
import type { Datum } from "../core/types.ts";
import { Rng } from "../core/rng.ts";
import { startGateway, type RunningGateway } from "../gateway/server.ts";
import type { RolloutRecord } from "../gateway/types.ts";
import { EmbeddedBackend } from "../policy/embedded/backend.ts";
import type { GPTConfig } from "../policy/embedded/gpt.ts";
import { loadTokenizer } from "../policy/hf/index.ts";
import type { TrainingBackend } from "../policy/types.ts";
import { closeBackend, createBackend } from "./backends.ts";
import { WordTokenizer, type Tokenizer } from "../policy/tokenizer.ts";
import { DetectorMonitor, defaultDetectors, type DetectorFiring } from "../reward/detectors.ts";
import { hermesProtocol } from "../protocol/hermes.ts";
import { emCheck } from "../reward/em.ts";
import { createWorldsRetrievalApp } from "../serve/retrieval.ts";
import { listen } from "../serve/http.ts";
import { BM25Index } from "../retrieval/bm25.ts";
import { TRAINER_STATE_FORMAT, loadPolicy, savePolicy, trainerStateText, type TrainerState } from "./checkpoint.ts";
import { ConfigError, SEARCH_PERSONAS, resolveConfig, rewardConfigOf, type ExperimentConfig } from "./config.ts";
import { RetrievalLog, gradeTranscript, type RetrievalCall } from "./agentReward.ts";
import type { RolloutSnapshot } from "../gateway/registry.ts";
import { checkReward, evalTasks, gptConfigOf, openRun, resumeIntent, silentReporter, type Reporter } from "./experiment.ts";
import type { AgentFunction } from "./agentRollouts.ts";
import { limited, runAgentRollout, trainAgent, type AgentResumeState, type AgentRolloutRecord, type TrainAgentOptions } from "./agentRun.ts";
import { ToolLimiter } from "../env/tool.ts";
import { AGENT_ESTIMATORS, segmentToDatum, type AgentEstimator } from "./agentRollouts.ts";
import { DEFAULT_TEACHER_TOOL, teacherSampler, type TeacherTool } from "./agentTeacher.ts";
import { RunDir, lockHolder } from "./runDir.ts";
import { planRunFolder } from "./runFolder.ts";
import { MIN_AGENT_CONTEXT } from "./agentDefaults.ts";

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

/**
 * Config fields `--agent` does not use (the agent sends its own sampling parameters; the update is one importance-
 * sampling or PPO step on the rollouts, without a KL term, PPO-ptx replay or minibatches): a warning names any set away
 * from its default, so a flag that changes nothing is never silent.
 */
export const AGENT_UNUSED_RL_FIELDS = [
  "temperature", "klCoef", "ptxCoef", "ptxBatchSize", "minibatches", "maskObservations", "maxNonFiniteSteps",
  // issue 16's algorithms run in `arl train`'s loop (src/train/rl.ts), not yet in trainAgent's
  "lossAggMode", "gamma", "lam", "turnRewards", "tis", "tisCap", "filterGroups", "maxGenBatches", "overlongBuffer", "overlongPenalty", "clipRatioC",
] as const;

/**
 * The warning for `AGENT_UNUSED_RL_FIELDS` set away from their defaults (printed by the run and by `--dry-run`), or
 * undefined when none is.
 */
export function agentUnusedFieldsWarning(config: ExperimentConfig): string | undefined {
  const defaults = resolveConfig({}).rl;
  const unused = AGENT_UNUSED_RL_FIELDS.filter((k) => JSON.stringify(config.rl[k]) !== JSON.stringify(defaults[k]));
  if (unused.length === 0) return undefined;
  return `--agent does not use ${unused.map((k) => `rl.${k} (${JSON.stringify(config.rl[k])})`).join(", ")}: the agent sends its own sampling parameters and the update has no KL term, replay or minibatches`;
}

/** A search query as the probe compares them: a string lower-cased, whitespace-collapsed and trimmed; anything else "". */
function normalizeQuery(q: unknown): string {
  return typeof q === "string" ? q.toLowerCase().replace(/\s+/g, " ").trim() : "";
}

export { AGENT_DEFAULTS, MIN_AGENT_CONTEXT } from "./agentDefaults.ts";

/** A rollout's deadline unless `rolloutDeadlineMs` / `--agent-deadline` says otherwise (ms). */
export const DEFAULT_AGENT_DEADLINE_MS = 120_000;

/**
 * One line per rollout in `rollouts.jsonl` (stage, step, id, task, status, reward, drop reason, calls, segments,
 * mismatches), and the step's drop reasons on the reporter: why a rollout was dropped is never only a count.
 */
function logRollouts(run: RunDir, stage: string, step: number, records: readonly RolloutRecord[], reporter: Reporter): void {
  const reasons = new Map<string, number>();
  for (const r of records) {
    run.appendJsonl("rollouts.jsonl", { stage, step, id: r.id, task: r.meta.taskId, status: r.status, reward: r.reward?.value ?? null, dropReason: r.dropReason ?? null, calls: r.calls.length, segments: r.segments.length, mismatches: r.mismatches });
    if (r.dropReason) reasons.set(r.dropReason, (reasons.get(r.dropReason) ?? 0) + 1);
  }
  for (const [why, n] of reasons) reporter.log(`${stage} step ${step}: ${n} rollout(s) dropped: ${why}`);
}

/** Rollouts run at once while recording demonstrations. */
const DEMO_CONCURRENCY = 8;

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

/**
 * The tokenizer an `--agent` run's policy speaks: a real model's (`policy.tinker.tokenizer`) on a Tinker server; the
 * warm-start checkpoint's with `warmStart`; else the world's words, the Hermes template's and the teacher's tool-call
 * markup (the agent's own prompt words that the world lacks are [UNK]: a fixed prefix).
 * @throws ConfigError for a Tinker backend without either of the first two (the server's model fixes the vocabulary),
 *   or a `warmStart` checkpoint whose context is shorter than `MIN_AGENT_CONTEXT`
 */
export async function agentTokenizer(config: ExperimentConfig, world: World, options: Pick<AgentExperimentOptions, "agentTexts" | "warmStart" | "teacherTool">): Promise<{ tokenizer: Tokenizer; gpt?: GPTConfig }> {
  if (config.policy.backend === "tinker" && config.policy.tinker.tokenizer !== undefined) return { tokenizer: loadTokenizer(config.policy.tinker.tokenizer) };
  if (options.warmStart !== undefined) {
    const p = await loadPolicy(options.warmStart);
    const out = { tokenizer: p.tokenizer, gpt: p.gpt };
    if (p.backend instanceof EmbeddedBackend) p.backend.dispose();
    if (p.gpt.contextLength < MIN_AGENT_CONTEXT) {
      throw new ConfigError([`--agent-warm-start: ${options.warmStart} has a ${p.gpt.contextLength}-token context; an agent's calls need at least ${MIN_AGENT_CONTEXT} (use a checkpoint of an --agent run, e.g. runs/<name>/checkpoints/sft)`]);
    }
    return out;
  }
  if (config.policy.backend === "tinker") {
    throw new ConfigError([`policy.tinker.tokenizer: with policy.backend tinker, --agent needs the served model's tokenizer — policy.tinker.tokenizer <folder with tokenizer.json> for a real model, or --agent-warm-start <checkpoint> for a model the server serves from that checkpoint (arl serve trainer --checkpoint <checkpoint>, policy.tinker.baseModel arl/<run>-<checkpoint>)`]);
  }
  const tool = options.teacherTool ?? DEFAULT_TEACHER_TOOL;
  const markup = [
    hermesProtocol.system([{ name: tool.name, description: "Search the knowledge base.", parameters: { type: "object", properties: { [tool.queryArg]: { type: "string" } }, required: [tool.queryArg] } }], "Answer the question."),
    `<tool_call>\n${JSON.stringify({ name: tool.name, arguments: { [tool.queryArg]: "capital of france" } })}\n</tool_call><|im_end|>`,
    "Doc 1(Title: ) unknown search failed",
    // "search" stays in the vocabulary whatever the tool is called (the default's texts, so its ids, are unchanged)
    ...(tool.name === DEFAULT_TEACHER_TOOL.name && tool.queryArg === DEFAULT_TEACHER_TOOL.queryArg ? [] : [`{"name": ${JSON.stringify(tool.name)}, "arguments": {${JSON.stringify(tool.queryArg)}: "search"}}`]),
  ];
  return { tokenizer: WordTokenizer.fromTexts([...worldTexts(world), ...markup, ...(options.agentTexts ?? [])], hermesProtocol.specialTokens) };
}

/** One world an `--agent` run uses: its tasks, its BM25 index and where its retrieval is served. */
interface ServedWorld {
  world: World;
  index: BM25Index;
  /** `ARL_RETRIEVAL_URL` of a rollout: this world's retrieval, at the rollout's own path (`RetrievalLog`). */
  env: (rolloutId: string) => Record<string, string>;
}

/**
 * Runs the experiment (or, with `resume`, continues the one in the run folder from its last good checkpoint; the
 * steps after it reproduce an uninterrupted run's metrics).
 * @throws ConfigError for an env other than search, a backend other than embedded/tinker, a context under
 *   `MIN_AGENT_CONTEXT`, a run folder that exists without `overwrite`/`resume`, or a resume with a different config
 */
export async function runAgentExperiment(config: ExperimentConfig, options: AgentExperimentOptions): Promise<AgentExperimentSummary> {
  checkAgentConfig(config);
  const reporter = options.reporter ?? silentReporter;
  const overwrite = options.overwrite ?? false;
  const world = buildWorld({ seed: config.run.seed, ...config.env.world });
  const tok = await agentTokenizer(config, world, options);
  const tokenizer = tok.tokenizer;
  const gpt = tok.gpt ?? gptConfigOf(config, tokenizer.vocabSize);
  const resuming = resumeIntent(config, reporter, { overwrite, resume: options.resume });
  const agentId = options.agentId ?? (typeof options.agent === "string" ? `command: ${options.agent}` : "function");
  const deadlineMs = options.rolloutDeadlineMs ?? DEFAULT_AGENT_DEADLINE_MS;
  const tool = options.teacherTool ?? DEFAULT_TEACHER_TOOL;
  const toolSpec = `${tool.name}:${tool.queryArg}`;
  const agentFile = join(config.run.dir, config.run.name, "agent.json");
  if (resuming && existsSync(agentFile)) {
    const saved = JSON.parse(readFileSync(agentFile, "utf8")) as { agent?: string; deadlineMs?: number; tool?: string };
    const savedTool = saved.tool ?? `${DEFAULT_TEACHER_TOOL.name}:${DEFAULT_TEACHER_TOOL.queryArg}`; // folders from before --agent-tool
    const diffs = [
      ...(saved.agent !== agentId ? [`--agent: the run folder was trained by ${JSON.stringify(saved.agent)}, this command gives ${JSON.stringify(agentId)} (--resume continues the same agent)`] : []),
      ...(saved.deadlineMs !== deadlineMs ? [`--agent-deadline: the run folder has ${saved.deadlineMs}, this command has ${deadlineMs}`] : []),
      ...(savedTool !== toolSpec ? [`--agent-tool: the run folder has ${savedTool}, this command has ${toolSpec}`] : []),
    ];
    if (diffs.length > 0) throw new ConfigError(diffs);
  }
  // The warm-start evaluation is reused on --resume (eval-warm.json); its transcripts go with it, though openRun's
  // truncation clears every sample file that is not an RL step's.
  const warmSamples = ["eval-warm", "eval-before"].map((n) => join(config.run.dir, config.run.name, "samples", `${n}.jsonl`)).map((f) => ({ f, text: resuming && existsSync(f) ? readFileSync(f, "utf8") : undefined }));
  const { run, plan } = openRun(config, { gpt, tokenizer }, resuming, reporter, { overwrite });
  run.writeConfig(config);
  run.writeText("agent.json", `${JSON.stringify({ agent: agentId, deadlineMs, tool: toolSpec })}\n`);
  const unusedWarning = agentUnusedFieldsWarning(config);
  if (unusedWarning !== undefined) reporter.log(`warning: ${unusedWarning}`);
  const resumeStep = plan.rl?.state.step ?? 0;
  // rollouts.jsonl is cut back with the rest: demonstrations and the warm-start evaluation stay when the warm start is whole.
  if (!plan.sft) run.remove("eval-warm.json");
  const warmEvaluated = existsSync(join(run.path, "eval-warm.json"));
  if (warmEvaluated) for (const { f, text } of warmSamples) if (text !== undefined) writeFileSync(f, text);
  run.truncateJsonl("rollouts.jsonl", (row) => plan.sft && (row.stage === "rl" ? typeof row.step === "number" && row.step < resumeStep : row.stage !== "eval-after" && warmEvaluated));

  // The real world (0), the demonstrations' counterfactual worlds, RL's (seeds as the search recipe's).
  const demoWorlds = Array.from({ length: config.sft.counterfactualWorlds }, (_, k) => counterfactualWorld(world, config.run.seed * 1000 + k + 1));
  const rlWorlds = Array.from({ length: config.rl.counterfactualWorlds }, (_, k) => counterfactualWorld(world, config.run.seed * 1000 + 500 + k + 1));
  const all = [world, ...demoWorlds, ...rlWorlds];
  const indexes = all.map((w) => new BM25Index([...w.passages]));
  // Each rollout searches at a URL of its own, so the reward terms see exactly the passages its search tool was served.
  const retrievals = new RetrievalLog();
  const retrieval = await listen(createWorldsRetrievalApp(indexes, { onRetrieve: (id, _k, queries, hits) => retrievals.record(id, queries, hits) }));
  const served: ServedWorld[] = all.map((w, k) => ({ world: w, index: indexes[k], env: (id: string) => ({ ARL_RETRIEVAL_URL: `${retrieval.url}/worlds/${k}/rollouts/${encodeURIComponent(id)}` }) }));
  const real = served[0];

  // The policy: the last good RL checkpoint, the warm start, a given checkpoint, or fresh (then SFT below).
  const tinkerBase = config.policy.backend === "tinker" && options.warmStart !== undefined && config.policy.tinker.tokenizer === undefined;
  const from = plan.rl?.dir ?? (plan.sft ? run.checkpoint("sft") : tinkerBase ? undefined : options.warmStart);
  let backend: TrainingBackend | undefined;
  let reference: TrainingBackend | undefined;
  let gateway: RunningGateway | undefined;
  try {
    if (config.policy.backend === "tinker") reporter.log(`tinker: connecting to ${config.policy.tinker.baseUrl} (model ${config.policy.tinker.baseModel}; each request retries for ${config.policy.tinker.retryForMs} ms while the server is unreachable)`);
    backend = await createBackend(config, gpt, from);
    gateway = await startGateway({
      policy: { name: "arl/policy", sampler: backend.samplingClient(), tokenizer, contextLength: gpt.contextLength, maxTokens: config.rl.maxTokensPerTurn },
      seed: config.run.seed,
    });
    // A rollout the agent does not reward itself is scored by the config's reward terms over its transcript (the
    // `--agent` default preset, outcome-only, is EM alone).
    const rewardSpec = rewardConfigOf(config);
    const grade = (t: Task, a: string | undefined, transcript: RolloutSnapshot) => gradeTranscript(t, a, transcript, retrievals.take(transcript.id), rewardSpec, tool.name);
    const base = { agent: options.agent, gateway, grade, rolloutDeadlineMs: deadlineMs };
    const held = evalTasks(world, config);
    const evaluate = async (label: string): Promise<AgentExperimentSummary["before"]> => {
      const bar = reporter.bar(`eval ${label}`, held.length);
      let done = 0;
      const limit = new ToolLimiter(DEMO_CONCURRENCY);
      const records = await Promise.all(held.map((task, i) => limited(limit, async () => {
        // Held-out tasks reach the agent without their gold answers: success is graded here, never by the agent.
        const r = await runAgentRollout(base, `${label}-${config.run.seed}-${i}`, task, real.env, { hideAnswers: true });
        bar.update(++done);
        return r;
      })));
      bar.stop();
      logRollouts(run, `eval-${label}`, 0, records, reporter);
      for (const r of records) retrievals.take(r.id); // a dropped rollout was never graded: forget what it searched
      // The held-out transcripts, for the viewer's warm-start-vs-RL comparison (`arl view`).
      writeAgentSamples(run, `eval-${label}`, records, tokenizer, held);
      const rewarded = records.filter((r) => r.status === "rewarded");
      if (rewarded.length === 0 && records.length > 0) {
        throw new Error(`eval ${label}: every held-out rollout was dropped (first: ${records[0].dropReason}) — nothing the agent does reaches the policy; check the agent, and on a Tinker server that policy.tinker.baseModel is the model whose tokenizer this run uses`);
      }
      // Held-out success is EM of the agent's answers, graded here: a reward the agent reports itself trains it but
      // never counts as success.
      const em = records.reduce((a, r, i) => a + (r.status === "rewarded" ? gradeAnswer(held[i], r.answer) : 0), 0);
      return { success: held.length > 0 ? (100 * em) / held.length : 0, n: held.length, dropped: records.length - rewarded.length };
    };

    const warm = config.sft.steps > 0 || options.warmStart !== undefined;
    if (!plan.sft) {
      if (config.sft.steps > 0 && options.warmStart === undefined) {
        await agentWarmStart(config, { backend, gateway, tokenizer, run, reporter, real, demoWorlds: served.slice(1, 1 + demoWorlds.length), base, tool });
      }
      // checkpoints/sft is the policy RL starts from (warm-started, given, or fresh): the reference policy, and what
      // --resume needs to find before any RL checkpoint.
      await savePolicy(run.checkpoint("sft"), backend, tokenizer, gpt);
    }
    let before: AgentExperimentSummary["before"];
    if (plan.sft && warmEvaluated) before = JSON.parse(readFileSync(join(run.path, "eval-warm.json"), "utf8")) as AgentExperimentSummary["before"];
    else {
      gateway.setSampler(backend.samplingClient());
      before = await evaluate(warm ? "warm" : "before");
      run.writeText("eval-warm.json", `${JSON.stringify(before)}\n`);
    }

    // The reference policy for hack/kl_ref: the warm start, frozen.
    const d = config.detectors;
    if (d.enabled && d.referenceKl) {
      reference = await createBackend(config, gpt, run.checkpoint("sft"));
    }
    const monitor = new DetectorMonitor(d.enabled ? defaultDetectors(d) : [], d);
    const steps: Metrics[] = [];
    for (const [i, m] of (plan.rl?.state.steps ?? []).entries()) {
      const metrics = Object.fromEntries(Object.entries(m).map(([k, v]) => [k, v ?? NaN])) as Metrics;
      steps.push(metrics);
      monitor.observe(i, metrics); // its state is a pure function of the metrics it has seen (firings were logged)
    }
    const trainerState = (state: AgentResumeState): string =>
      trainerStateText({ format: TRAINER_STATE_FORMAT, step: state.step, rngState: state.rngState, replayRngState: 0, steps, nonFiniteRun: 0, warnedRewardErrors: false } satisfies TrainerState);
    const bar = reporter.bar("RL (agent)", config.rl.steps);
    bar.update(resumeStep);
    let last: AgentResumeState = { step: resumeStep, rngState: plan.rl?.state.rngState ?? 0 };
    const b = backend;
    await trainAgent({
      ...base,
      backend: b,
      reference,
      worlds: [real, ...served.slice(1 + demoWorlds.length)].map((w) => ({ tasks: w.world.train, env: w.env })),
      steps: config.rl.steps,
      tasksPerStep: config.rl.tasksPerStep,
      groupSize: config.rl.groupSize,
      seed: config.run.seed,
      resume: plan.rl ? { step: plan.rl.state.step, rngState: plan.rl.state.rngState } : undefined,
      lossFn: config.rl.lossFn,
      lossConfig: { clipLow: config.rl.clipLow, clipHigh: config.rl.clipHigh, ...(config.rl.lossFn === "dro" ? { droBeta: config.rl.droBeta } : {}), normalization: config.rl.advantage === "drgrpo" ? "constant" : "tokens", constantLength: config.rl.maxTokensPerTurn * config.env.maxTurns },
      adam: { learningRate: config.rl.learningRate, gradClip: config.rl.gradClip },
      estimator: config.rl.advantage as AgentEstimator,
      onStep: async (step, m, records, state) => {
        steps.push(m);
        last = state;
        run.logMetrics("rl", step, m);
        logRollouts(run, "rl", step, records, reporter);
        for (const r of records) retrievals.take(r.id); // a dropped rollout was never graded: forget what it searched
        for (const firing of monitor.observe(step, m)) {
          run.appendJsonl("detectors.jsonl", firing);
          reporter.log(`warning: reward-hacking detector fired: ${firing.message}`);
        }
        if (config.run.samplesPerStep > 0) writeAgentSamples(run, `step-${step}`, records.slice(0, config.run.samplesPerStep), tokenizer);
        if (config.run.checkpointEvery > 0 && (step + 1) % config.run.checkpointEvery === 0) {
          await savePolicy(run.checkpoint(`step-${step + 1}`), b, tokenizer, gpt, { "trainer-state.json": trainerState(state) });
        }
        bar.update(step + 1, { reward: m.reward.toFixed(3) });
      },
    });
    bar.stop();
    await savePolicy(run.checkpoint("final"), b, tokenizer, gpt, { "trainer-state.json": trainerState({ ...last, step: config.rl.steps }) });
    gateway.setSampler(b.samplingClient());
    const after = await evaluate("after");
    const summary: AgentExperimentSummary = { run: run.path, before, after, steps, detectors: monitor.firing() };
    run.writeText("agent-summary.json", `${JSON.stringify({ before, after, detectors: summary.detectors }, null, 2)}\n`);
    return summary;
  } finally {
    await gateway?.close();
    await retrieval.close();
    for (const x of [backend, reference]) {
      if (x === undefined) continue;
      closeBackend(x);
      if (x instanceof EmbeddedBackend) x.dispose();
    }
  }
}

/**
 * The config checks an `--agent` run makes before it starts anything.
 * @throws ConfigError naming `env.name` (only search), `policy.contextLength` (< `MIN_AGENT_CONTEXT`), `rl.advantage`
 *   (only `AGENT_ESTIMATORS`), or the reward (`checkReward`: an unknown term, a judge without `reward.options.judge`)
 */
function checkAgentConfig(config: ExperimentConfig): void {
  if (config.env.name !== "search") {
    throw new ConfigError([`env.name: arl train --agent trains on the search env (its retrieval is served to the agent as ARL_RETRIEVAL_URL); got ${config.env.name}`]);
  }
  if (config.policy.contextLength < MIN_AGENT_CONTEXT) {
    throw new ConfigError([`policy.contextLength: an agent's calls (chat template, its tool schemas, its messages, retrieved passages) need at least ${MIN_AGENT_CONTEXT} tokens; got ${config.policy.contextLength} (e.g. --policy.contextLength ${MIN_AGENT_CONTEXT})`]);
  }
  if (!(AGENT_ESTIMATORS as readonly string[]).includes(config.rl.advantage)) {
    throw new ConfigError([`rl.advantage: arl train --agent computes advantages from each rollout's reward: ${AGENT_ESTIMATORS.join(", ")}; got ${config.rl.advantage} (gae, gigpo and reinforce_plus_plus need the policy's own turns: arl train's loop)`]);
  }
  checkReward(config);
}

/**
 * `arl train --agent … --dry-run`: checks what a run needs without training or writing anything — the config
 * (`checkAgentConfig`), the tokenizer (the world's words, `policy.tinker.tokenizer`, or the `warmStart` checkpoint,
 * loaded), the run folder (a run already there needs `overwrite` or `resume`, and `resume` the same config and
 * agent), and the agent itself: one **probe rollout** of an unknown-fact training question against the scripted careful
 * teacher behind a gateway of its own (the warm start's teacher: no model is trained or sampled), which must call the
 * gateway and return, so a broken agent command, a wrong `OPENAI_BASE_URL` use or a crash is found in seconds.
 * @returns lines of a short summary (world, tokenizer, sizes, reward, the probe's calls, searches, segments and answer)
 * @throws ConfigError naming the field or flag; `--agent` with the probe's drop reason when the probe was dropped
 */
export async function dryRunAgent(config: ExperimentConfig, options: AgentExperimentOptions): Promise<string[]> {
  checkAgentConfig(config);
  const world = buildWorld({ seed: config.run.seed, ...config.env.world });
  if (world.train.length === 0 || world.test.length === 0) throw new ConfigError([`env.world: the world has ${world.train.length} training and ${world.test.length} held-out questions (expected ≥ 1 each; change env.world.numCountries or env.world.testFraction)`]);
  const { tokenizer } = await agentTokenizer(config, world, options);
  const folder = join(config.run.dir, config.run.name);
  const agentId = options.agentId ?? (typeof options.agent === "string" ? `command: ${options.agent}` : "function");
  const holder = existsSync(join(folder, "config.yaml")) ? lockHolder(folder) : undefined;
  if (holder !== undefined) throw new ConfigError([`run.name: run folder ${folder} is in use by process ${holder}; wait for it or stop it`]);
  planRunFolder(config.run.dir, config.run.name, { overwrite: options.overwrite, resume: options.resume === true && existsSync(join(folder, "config.yaml")), resumable: true }); // RunDir's decision
  if (resumeIntent(config, silentReporter, { overwrite: options.overwrite ?? false, resume: options.resume }) && existsSync(join(folder, "agent.json"))) {
    const saved = JSON.parse(readFileSync(join(folder, "agent.json"), "utf8")) as { agent?: string };
    if (saved.agent !== agentId) throw new ConfigError([`--agent: the run folder was trained by ${JSON.stringify(saved.agent)}, this command gives ${JSON.stringify(agentId)} (--resume continues the same agent)`]);
  }
  const lines = [
    `world: ${world.countries.length} countries, ${world.passages.length} passages, ${world.train.length} train / ${world.test.length} held-out questions (${evalTasks(world, config).length} evaluated)`,
    `tokenizer: ${tokenizer.vocabSize} tokens${options.warmStart !== undefined ? ` from ${options.warmStart}` : config.policy.backend === "tinker" ? ` from ${config.policy.tinker.tokenizer}` : " (the world's words and the chat template's)"}; context ${config.policy.contextLength}, training lengths padded to multiples of ${config.policy.lengthBucket}`,
    `warm start: ${options.warmStart !== undefined ? `from ${options.warmStart}` : `${config.sft.steps} SFT steps on teacher demonstrations (${config.sft.counterfactualWorlds} counterfactual worlds)`}; RL: ${config.rl.steps} steps × ${config.rl.tasksPerStep} tasks × ${config.rl.groupSize} rollouts over the real world and ${config.rl.counterfactualWorlds} counterfactual ones`,
    `reward: ${Object.entries(rewardConfigOf(config).weights).map(([t, w]) => `${t} ${w}`).join(", ")} (unless the agent reports its own); held-out success: EM graded by the trainer`,
  ];
  const unusedWarning = agentUnusedFieldsWarning(config);
  if (unusedWarning !== undefined) lines.push(`warning: ${unusedWarning}`);
  const index = new BM25Index([...world.passages]);
  const retrievals = new RetrievalLog();
  const retrieval = await listen(createWorldsRetrievalApp([index], { onRetrieve: (id, _k, queries, hits) => retrievals.record(id, queries, hits) }));
  const tool = options.teacherTool ?? DEFAULT_TEACHER_TOOL;
  // An unknown-fact question, so the probe exercises the agent's search tool as well as its model calls.
  const task = world.train.find((t) => t.known === false) ?? world.train[0];
  const id = `dry-run-${config.run.seed}`;
  const teacher = teacherSampler(world.train, tokenizer, index, { persona: "careful", valuesOf: (a) => valuesOf(world, a as CountryAttribute), seed: config.run.seed, tool, taskOf: (r) => (r === id ? task : undefined) });
  const gateway = await startGateway({ policy: { name: "arl/policy", sampler: teacher, tokenizer, contextLength: config.policy.contextLength, maxTokens: config.rl.maxTokensPerTurn }, seed: config.run.seed });
  try {
    const rewardSpec = rewardConfigOf(config);
    // What the agent's search tool sent, taken by the grade — or after the rollout when the agent reported its own
    // reward (then the trainer never grades it, and the probe must still see its retrievals).
    let served: RetrievalCall[] | undefined;
    const r = await runAgentRollout(
      { agent: options.agent, gateway, rolloutDeadlineMs: options.rolloutDeadlineMs ?? DEFAULT_AGENT_DEADLINE_MS, grade: (t, a, transcript) => {
        served = retrievals.take(transcript.id);
        return gradeTranscript(t, a, transcript, served, rewardSpec, tool.name);
      } },
      id, task, { ARL_RETRIEVAL_URL: `${retrieval.url}/worlds/0/rollouts/${id}` },
    );
    served ??= retrievals.take(id);
    if (r.status !== "rewarded") throw new ConfigError([`--agent: the probe rollout (the careful teacher answering through the gateway, question ${JSON.stringify(task.question)}) was dropped: ${r.dropReason} — see examples/agents/README.md for the contract`]);
    const searches = r.calls.reduce((a, c) => a + c.toolCalls.length, 0);
    const retrievalsSeen = served.reduce((n, c) => n + c.queries.length, 0);
    const fixTool = `the warm start's teacher calls a tool named ${JSON.stringify(tool.name)} with {${JSON.stringify(tool.queryArg)}: "…"} and the agent must send that query to ARL_RETRIEVAL_URL's /retrieve (top 3) — name your agent's search tool and its query argument with --agent-tool NAME:ARG, give your agent that tool (examples/agents/README.md), or start from a checkpoint of your own with --agent-warm-start`;
    // The warm start's teacher speaks one tool: a problem here means demonstrations the agent cannot follow.
    if (r.calls.some((c) => c.invalid) || searches === 0 || retrievalsSeen === 0) {
      throw new ConfigError([`--agent: in the probe rollout the agent did not run the teacher's search (${searches} tool call(s) parsed, ${r.calls.filter((c) => c.invalid).length} invalid, ${retrievalsSeen} retrieval request(s)): ${fixTool}`]);
    }
    // …and the queries it sent must be the teacher's: an agent that reads another argument searches for "" or junk,
    // and every demonstration would then read passages that do not answer its question.
    const asked = r.calls.flatMap((c) => c.toolCalls.filter((t) => t.name === tool.name).map((t) => normalizeQuery(t.arguments[tool.queryArg])));
    const sent = served.flatMap((c) => c.queries.map(normalizeQuery));
    const lost = asked.filter((q) => !sent.includes(q));
    if (asked.length === 0 || lost.length > 0) {
      throw new ConfigError([`--agent: in the probe rollout the agent's searches were not the teacher's queries (the teacher asked ${JSON.stringify(asked)}, the retrieval server received ${JSON.stringify(served.flatMap((c) => c.queries))}): ${fixTool}`]);
    }
    if (r.answer === undefined) {
      throw new ConfigError([`--agent: the probe rollout ended without an answer: a command agent prints {"answer": "…"} as its last stdout line, a module returns {answer} (examples/agents/README.md); without one every rollout scores as unanswered`]);
    }
    if (!emCheck(r.answer, task.answers)) {
      lines.push(`warning: the probe's answer ${JSON.stringify(r.answer)} is not the teacher's (gold ${JSON.stringify(task.answers[0])}): the agent may rewrite or drop the model's final text, and then no demonstration teaches it the answer`);
    }
    lines.push(`agent: probe rollout against the careful teacher: ${r.calls.length} model call(s), ${searches} tool call(s), ${r.segments.length} segment(s), ${r.mismatches} mismatch(es); answer ${JSON.stringify(r.answer ?? null)} (gold ${JSON.stringify(task.answers[0])}), reward ${r.reward!.value}`);
    return lines;
  } finally {
    await gateway.close();
    await retrieval.close();
  }
}

/** What the warm start needs from the experiment. */
interface WarmStartContext {
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
}

/**
 * Warm start: the unchanged agent runs against scripted teachers (the search env's personas) behind the gateway, so
 * the demonstrations are in exactly the agent's own token format; then cross entropy on their completions. In the
 * real world the personas' mixture (`sft.personas`) teaches habits; in each counterfactual world the careful persona
 * on the unknown-fact questions teaches reading the retrieved passages (their answers differ from the real world's).
 * @throws Error when the agent produced no demonstration (every rollout dropped, or none called the gateway)
 */
async function agentWarmStart(config: ExperimentConfig, ctx: WarmStartContext): Promise<void> {
  const { backend, gateway, tokenizer, run, reporter } = ctx;
  const rng = new Rng(config.run.seed ^ 0x5f7a);
  const jobs: Array<{ persona: Persona; served: ServedWorld; tasks: Task[]; tag: string }> = [];
  const byPersona = new Map<Persona, Task[]>();
  for (const [i, task] of ctx.real.world.train.entries()) {
    for (let d = 0; d < config.sft.demosPerTask; d++) {
      const p = pickPersona(config.sft.personas ?? SEARCH_PERSONAS, config.run.seed * 7919 + i * 31 + d);
      byPersona.set(p, [...(byPersona.get(p) ?? []), task]);
    }
  }
  for (const persona of PERSONAS) if (byPersona.has(persona)) jobs.push({ persona, served: ctx.real, tasks: byPersona.get(persona)!, tag: persona });
  ctx.demoWorlds.forEach((w, k) => jobs.push({ persona: "careful", served: w, tasks: w.world.train.filter((t) => t.known === false), tag: `cf${k + 1}` }));
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
    gateway.setSampler(teacherSampler(w.train, tokenizer, job.served.index, { persona: job.persona, valuesOf: (a) => valuesOf(w, a as CountryAttribute), seed: config.run.seed, tool: ctx.tool, taskOf: (id) => taskById.get(id) }));
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

/**
 * `samples/<name>.jsonl`: one line per rollout — task (with `tasks`, aligned with `records`: its question and gold
 * answers), status, reward (and parts), advantage, the agent's answer, each call (content, tool calls, finish reason,
 * invalid) and each segment as tokens (`[seq]` ids, their text, the loss mask and the sampler's logprobs in nats, the
 * first prompt's length in tokens, the indices of the calls it holds), so what was trained is visible token by token.
 * Written per RL step (`step-<n>`) and per held-out evaluation (`eval-warm` / `eval-before`, `eval-after`).
 */
export function writeAgentSamples(run: RunDir, name: string, records: readonly AgentRolloutRecord[], tokenizer: Tokenizer, tasks?: readonly Task[]): void {
  const lines = records.map((r, i) =>
    JSON.stringify({
      id: r.id,
      task: r.meta.taskId,
      ...(tasks?.[i] !== undefined ? { question: tasks[i].question, answers: tasks[i].answers } : {}),
      status: r.status,
      reward: r.reward ?? null,
      advantage: r.advantage ?? null,
      answer: r.answer ?? null,
      dropReason: r.dropReason ?? null,
      mismatches: r.mismatches,
      calls: r.calls.map((c) => ({ content: c.content, toolCalls: c.toolCalls, finishReason: c.finishReason, invalid: c.invalid })),
      segments: r.segments.map((s) => ({ tokens: s.tokens, text: s.tokens.map((t) => tokenizer.decode([t])), lossMask: s.lossMask, logprobs: s.logprobs, promptLength: s.promptLength, calls: s.calls })),
    }),
  );
  run.writeText(join("samples", `${name}.jsonl`), lines.join("\n") + "\n");
}
