/**
 * `arl train --agent <command>` (issue 15 part 4): RL on the user's own agent over the search env's tasks. The
 * trainer serves the env's retrieval as a Search-R1 `/retrieve` server (`ARL_RETRIEVAL_URL`: the agent's `search`
 * tool calls it), the policy behind the OpenAI-compatible gateway (`OPENAI_BASE_URL`, one per rollout), evaluates the
 * agent on held-out tasks, trains it with `trainAgent`, evaluates again, and writes the run folder (`config.yaml`,
 * `metrics.jsonl`, `checkpoints/final`, `agent-summary.json`).
 */
import type { Metrics, Task } from "../core/types.ts";
import { buildWorld, worldTexts } from "../envs/search/world.ts";
import { startGateway } from "../gateway/server.ts";
import type { RolloutRecord } from "../gateway/types.ts";
import { EmbeddedBackend } from "../policy/embedded/backend.ts";
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
import { runAgentRollout, trainAgent } from "./agentRun.ts";
import { RunDir } from "./runDir.ts";

/** Options of `runAgentExperiment`. */
export interface AgentExperimentOptions {
  /** The agent: a shell command (env contract in examples/agents/README.md) or a function in this process. */
  agent: AgentFunction | string;
  reporter?: Reporter;
  overwrite?: boolean;
  /** Extra texts for the word tokenizer's vocabulary (the agent's system prompt and tool descriptions). */
  agentTexts?: string[];
  /** A rollout's deadline (ms; default 120 000). */
  rolloutDeadlineMs?: number;
}

/** Held-out success before and after training. */
export interface AgentExperimentSummary {
  run: string;
  /** EM % of the agent's answers on the held-out tasks, with the initial and with the trained policy. */
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
  const reporter = options.reporter ?? silentReporter;
  const world = buildWorld({ seed: config.run.seed, ...config.env.world });
  const tokenizer = WordTokenizer.fromTexts([...worldTexts(world), ...(options.agentTexts ?? [])], hermesProtocol.specialTokens);
  const gpt = gptConfigOf(config, tokenizer.vocabSize);
  const run = new RunDir(config.run.dir, config.run.name, { overwrite: options.overwrite ?? false, log: (m) => reporter.log(m) });
  run.writeConfig(config);
  const backend = await EmbeddedBackend.create(gpt, { seed: config.run.seed, samplerEngine: config.policy.sampler });
  const retrieval = await listen(createRetrievalApp(new BM25Index([...world.passages])));
  const gateway = await startGateway({
    policy: { name: "arl/policy", sampler: backend.samplingClient(), tokenizer, contextLength: gpt.contextLength, maxTokens: config.rl.maxTokensPerTurn },
    seed: config.run.seed,
  });
  const previous = process.env.ARL_RETRIEVAL_URL;
  process.env.ARL_RETRIEVAL_URL = retrieval.url; // the agent's search tool (children inherit the environment)
  const deadlineMs = options.rolloutDeadlineMs ?? 120_000;
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
    const rewarded = records.filter((r) => r.status === "rewarded");
    return { success: held.length > 0 ? (100 * rewarded.reduce((a, r) => a + r.reward!.value, 0)) / held.length : 0, n: held.length, dropped: records.length - rewarded.length };
  };
  try {
    const before = await evaluate("before");
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
      onStep: (step, m) => {
        run.logMetrics("rl", step, m);
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
