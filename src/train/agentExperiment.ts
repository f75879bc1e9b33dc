/**
 * `arl train --agent <command>` (issue 15 part 4): RL on the user's own agent over the search env's tasks. The
 * trainer serves the env's retrieval as a Search-R1 `/retrieve` server (`ARL_RETRIEVAL_URL`: the agent's `search`
 * tool calls it), the policy behind the OpenAI-compatible gateway (`OPENAI_BASE_URL`, one per rollout), evaluates the
 * agent on held-out tasks, trains it with `trainAgent`, evaluates again, and writes the run folder (`config.yaml`,
 * `metrics.jsonl`, `checkpoints/final`, `agent-summary.json`).
 */
import type { Metrics, Task } from "../core/types.ts";
import { buildWorld, valuesOf, worldTexts, type CountryAttribute } from "../envs/search/world.ts";
import { PERSONAS, pickPersona, type Persona } from "../envs/search/scripted.ts";
import type { Datum } from "../core/types.ts";
import { Rng } from "../core/rng.ts";
import { startGateway } from "../gateway/server.ts";
import type { RolloutRecord } from "../gateway/types.ts";
import type { EmbeddedBackend } from "../policy/embedded/backend.ts";
import { createBackend } from "./backends.ts";
import { WordTokenizer } from "../policy/tokenizer.ts";
import { hermesProtocol } from "../protocol/hermes.ts";
import { emCheck } from "../reward/em.ts";
import { createRetrievalApp } from "../serve/retrieval.ts";
import { listen } from "../serve/http.ts";
import { BM25Index } from "../retrieval/bm25.ts";
import { savePolicy } from "./checkpoint.ts";
import { ConfigError, type ExperimentConfig } from "./config.ts";
import { evalTasks, gptConfigOf, silentReporter, type Reporter } from "./experiment.ts";
import type { AgentFunction } from "./agentRollouts.ts";
import { limited, runAgentRollout, trainAgent } from "./agentRun.ts";
import { ToolLimiter } from "../env/tool.ts";
import { segmentToDatum } from "./agentRollouts.ts";
import { teacherSampler } from "./agentTeacher.ts";
import { RunDir } from "./runDir.ts";

/** Options of `runAgentExperiment`. */
export interface AgentExperimentOptions {
  /** The agent: a shell command (env contract in examples/agents/README.md) or a function in this process. */
  agent: AgentFunction | string;
  reporter?: Reporter;
  overwrite?: boolean;
  /** Extra texts for the word tokenizer's vocabulary (the agent's system prompt and tool descriptions). */
  agentTexts?: string[];
  /** A checkpoint folder to start from instead of the warm start (e.g. an earlier run's `checkpoints/sft`, same
   * world and vocabulary); SFT is skipped. */
  warmStart?: string;
  /** A rollout's deadline (ms; default 120 000). */
  rolloutDeadlineMs?: number;
}

/** The smallest context (tokens) `--agent` accepts: one search round of the example agents is ~300 tokens. */
export const MIN_AGENT_CONTEXT = 512;

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
  steps: Metrics[];
}

/** The reward of an answer: Search-R1's EM against the gold answers (the trainer grades; the agent may report its own). */
export const gradeAnswer = (task: Task, answer: string | undefined): number => (answer === undefined ? 0 : emCheck(answer, task.answers));

/**
 * Runs the experiment.
 * @throws ConfigError for an env other than search, or a run folder that exists without `overwrite`
 */
export async function runAgentExperiment(config: ExperimentConfig, options: AgentExperimentOptions): Promise<AgentExperimentSummary> {
  if (config.env.name !== "search") {
    throw new ConfigError([`env.name: arl train --agent trains on the search env (its retrieval is served to the agent as ARL_RETRIEVAL_URL); got ${config.env.name}`]);
  }
  if (config.policy.backend !== "embedded") {
    throw new ConfigError([`policy.backend: arl train --agent trains the embedded policy only (a Tinker sampler behind the gateway is not wired yet); got ${config.policy.backend}`]);
  }
  if (config.policy.contextLength < MIN_AGENT_CONTEXT) {
    throw new ConfigError([`policy.contextLength: an agent's calls (chat template, its tool schemas, its messages, retrieved passages) need at least ${MIN_AGENT_CONTEXT} tokens; got ${config.policy.contextLength} (e.g. --policy.contextLength ${MIN_AGENT_CONTEXT})`]);
  }
  const reporter = options.reporter ?? silentReporter;
  const world = buildWorld({ seed: config.run.seed, ...config.env.world });
  // The world's words, the Hermes template's and the teacher's tool-call markup (the agent's own prompt words that
  // the world lacks are [UNK]: a fixed prefix).
  const markup = [
    hermesProtocol.system([{ name: "search", description: "Search the knowledge base.", parameters: { type: "object", properties: { query: { type: "string" } }, required: ["query"] } }], "Answer the question."),
    `<tool_call>\n${JSON.stringify({ name: "search", arguments: { query: "capital of france" } })}\n</tool_call><|im_end|>`,
    "Doc 1(Title: ) unknown search failed",
  ];
  const tokenizer = WordTokenizer.fromTexts([...worldTexts(world), ...markup, ...(options.agentTexts ?? [])], hermesProtocol.specialTokens);
  const gpt = gptConfigOf(config, tokenizer.vocabSize);
  const run = new RunDir(config.run.dir, config.run.name, { overwrite: options.overwrite ?? false, log: (m) => reporter.log(m) });
  run.writeConfig(config);
  // createBackend: the config's micro-batching (policy.microBatchTokens) keeps a 64-rollout update inside the wasm heap.
  const backend = (await createBackend(config, gpt, options.warmStart)) as EmbeddedBackend;
  const index = new BM25Index([...world.passages]);
  const retrieval = await listen(createRetrievalApp(index));
  const gateway = await startGateway({
    policy: { name: "arl/policy", sampler: backend.samplingClient(), tokenizer, contextLength: gpt.contextLength, maxTokens: config.rl.maxTokensPerTurn },
    seed: config.run.seed,
  });
  const previous = process.env.ARL_RETRIEVAL_URL;
  process.env.ARL_RETRIEVAL_URL = retrieval.url; // the agent's search tool (children inherit the environment)
  const deadlineMs = options.rolloutDeadlineMs ?? DEFAULT_AGENT_DEADLINE_MS;
  const base = { agent: options.agent, gateway, grade: (t: Task, a: string | undefined) => gradeAnswer(t, a), rolloutDeadlineMs: deadlineMs };
  const held = evalTasks(world, config);
  const evaluate = async (label: string): Promise<AgentExperimentSummary["before"]> => {
    const bar = reporter.bar(`eval ${label}`, held.length);
    const records: RolloutRecord[] = [];
    for (const [i, task] of held.entries()) {
      records.push(await runAgentRollout(base, `${label}-${config.run.seed}-${i}`, task));
      bar.update(i + 1);
    }
    bar.stop();
    logRollouts(run, `eval-${label}`, 0, records, reporter);
    const rewarded = records.filter((r) => r.status === "rewarded");
    return { success: held.length > 0 ? (100 * rewarded.reduce((a, r) => a + r.reward!.value, 0)) / held.length : 0, n: held.length, dropped: records.length - rewarded.length };
  };
  try {
    if (config.sft.steps > 0 && options.warmStart === undefined) {
      // Warm start: the unchanged agent runs against scripted teachers (the search env's personas), so the
      // demonstrations are in exactly the agent's own token format; then cross entropy on their completions.
      const rng = new Rng(config.run.seed ^ 0x5f7a);
      const byPersona = new Map<Persona, Task[]>();
      for (const [i, task] of world.train.entries()) {
        for (let d = 0; d < config.sft.demosPerTask; d++) {
          const p = pickPersona(config.sft.personas, config.run.seed * 7919 + i * 31 + d);
          byPersona.set(p, [...(byPersona.get(p) ?? []), task]);
        }
      }
      const datums: Datum[] = [];
      let firstDrop: string | undefined;
      let noCalls = 0;
      const bar = reporter.bar("demonstrations", world.train.length * config.sft.demosPerTask);
      let done = 0;
      for (const persona of PERSONAS) {
        const tasks = byPersona.get(persona) ?? [];
        if (tasks.length === 0) continue;
        gateway.setSampler(teacherSampler(world.train, tokenizer, index, { persona, valuesOf: (a) => valuesOf(world, a as CountryAttribute), seed: config.run.seed }));
        const limit = new ToolLimiter(DEMO_CONCURRENCY);
        const records = await Promise.all(
          tasks.map((t, j) =>
            limited(limit, async () => {
              const r = await runAgentRollout(base, `demo-${persona}-${config.run.seed}-${j}`, t);
              bar.update(++done);
              return r;
            }),
          ),
        );
        firstDrop ??= records.find((r) => r.status === "dropped")?.dropReason;
        noCalls += records.filter((r) => r.status === "rewarded" && r.calls.length === 0).length;
        for (const r of records) for (const seg of r.status === "rewarded" ? r.segments : []) if (seg.tokens.length >= 2 && seg.lossMask.includes(1)) datums.push(segmentToDatum(seg, 0));
      }
      bar.stop();
      if (datums.length === 0) {
        throw new Error(`warm start: the agent produced no demonstrations with the teacher: ${firstDrop ? `rollouts were dropped (first: ${firstDrop})` : ""}${firstDrop && noCalls ? "; " : ""}${noCalls ? `${noCalls} rollout(s) finished without calling ${"$"}OPENAI_BASE_URL/chat/completions` : ""} — check the agent against the gateway (examples/agents/README.md)`);
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
      gateway.setSampler(backend.samplingClient());
      await savePolicy(run.checkpoint("sft"), backend, tokenizer, gpt);
    }
    const before = await evaluate(config.sft.steps > 0 || options.warmStart ? "warm" : "before");
    const bar = reporter.bar("RL (agent)", config.rl.steps);
    const steps = await trainAgent({
      ...base,
      backend,
      tasks: world.train,
      steps: config.rl.steps,
      tasksPerStep: config.rl.tasksPerStep,
      groupSize: config.rl.groupSize,
      seed: config.run.seed,
      lossFn: config.rl.lossFn,
      lossConfig: { clipLow: config.rl.clipLow, clipHigh: config.rl.clipHigh, normalization: config.rl.advantage === "drgrpo" ? "constant" : "tokens", constantLength: config.rl.maxTokensPerTurn * config.env.maxTurns },
      adam: { learningRate: config.rl.learningRate, gradClip: config.rl.gradClip },
      normalizeStd: config.rl.advantage === "grpo",
      onStep: (step, m, records) => {
        run.logMetrics("rl", step, m);
        logRollouts(run, "rl", step, records, reporter);
        bar.update(step + 1);
      },
    });
    bar.stop();
    await savePolicy(run.checkpoint("final"), backend, tokenizer, gpt);
    const after = await evaluate("after");
    const summary: AgentExperimentSummary = { run: run.path, before, after, steps };
    run.writeText("agent-summary.json", `${JSON.stringify({ before, after }, null, 2)}\n`);
    return summary;
  } finally {
    if (previous === undefined) delete process.env.ARL_RETRIEVAL_URL;
    else process.env.ARL_RETRIEVAL_URL = previous;
    await gateway.close();
    await retrieval.close();
    backend.dispose();
  }
}
