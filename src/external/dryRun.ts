/**
 * `arl train --agent … --dry-run`: what a run needs, checked in seconds without training or writing anything — and
 * one probe rollout of the agent against the scripted teacher.
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { startGateway } from "../gateway/server.ts";
import { emCheck } from "../reward/em.ts";
import { rewardConfigOf } from "../reward/config.ts";
import { ConfigError, type ExperimentConfig } from "../train/config.ts";
import { trainLengthBucket } from "../policy/config.ts";
import { silentReporter } from "../train/reporter.ts";
import { resumeIntent } from "../train/resume.ts";
import { lockHolder } from "../train/runDir.ts";
import { planRunFolder } from "../train/runFolder.ts";
import { evalTasks } from "../train/setup.ts";
import { agentUnusedFieldsWarning, checkAgentConfig, DEFAULT_AGENT_DEADLINE_MS } from "./config.ts";
import type { AgentExperimentOptions } from "./experiment.ts";
import { gradeTranscript, type RetrievalCall } from "./reward.ts";
import { DEFAULT_TEACHER_TOOL, teacherSampler } from "./teacher.ts";
import { runAgentRollout } from "./train.ts";
import { agentTokenizer, serveWorlds } from "./worlds.ts";

/** A search query as the probe compares them: a string lower-cased, whitespace-collapsed and trimmed; anything else "". */
function normalizeQuery(q: unknown): string {
  return typeof q === "string" ? q.toLowerCase().replace(/\s+/g, " ").trim() : "";
}

/**
 * `arl train --agent … --dry-run`: checks what a run needs without training or writing anything — the config
 * (`checkAgentConfig`), the tokenizer (the world's words, `policy.tinker.tokenizer`, the `warmStart` checkpoint or
 * the base of `policy.init: base`, loaded), the run folder (a run already there needs `overwrite` or `resume`, and
 * `resume` the same config and agent), and the agent itself: one **probe rollout** of a training question only
 * retrieval answers against the scripted careful teacher behind a gateway of its own (the warm start's teacher: no
 * model is trained or sampled), which must call the gateway and return, so a broken agent command, a wrong
 * `OPENAI_BASE_URL` use or a crash is found in seconds.
 * @returns lines of a short summary (world, tokenizer, sizes, reward, the probe's calls, searches, segments and answer)
 * @throws ConfigError naming the field or flag; `--agent` with the probe's drop reason when the probe was dropped
 */
export async function dryRunAgent(config: ExperimentConfig, options: AgentExperimentOptions): Promise<string[]> {
  const env = checkAgentConfig(config);
  const { instance } = env;
  const world = env.world("rl", 0);
  if (world.train.length === 0 || instance.test.length === 0) throw new ConfigError([`env.options: the world has ${world.train.length} training and ${instance.test.length} held-out questions (expected ≥ 1 each; change env.options.numCountries or env.options.testFraction)`]);
  const { tokenizer, base } = await agentTokenizer(config, world.texts(), options);
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
    `world: ${instance.describe()}, ${world.train.length} train / ${instance.test.length} held-out questions (${evalTasks({ instance }, config).length} evaluated)`,
    `tokenizer: ${tokenizer.vocabSize} tokens${options.warmStart !== undefined ? ` from ${options.warmStart}` : config.policy.backend === "tinker" ? ` from ${config.policy.tinker.tokenizer}` : base !== undefined ? ` from the base ${base.dir} (fingerprint ${base.fingerprint.slice(0, 12)})` : " (the world's words and the chat template's)"}; context ${config.policy.contextLength}, training lengths padded to multiples of ${trainLengthBucket(config.policy)}`,
    `warm start: ${options.warmStart !== undefined ? `from ${options.warmStart}` : `${config.sft.steps} SFT steps on teacher demonstrations (${config.sft.counterfactualWorlds} counterfactual worlds)`}; RL: ${config.rl.steps} steps × ${config.rl.tasksPerStep} tasks × ${config.rl.groupSize} rollouts over the real world and ${config.rl.counterfactualWorlds} counterfactual ones`,
    `reward: ${Object.entries(rewardConfigOf(config).weights).map(([t, w]) => `${t} ${w}`).join(", ")} (unless the agent reports its own); held-out success: EM graded by the trainer`,
  ];
  const unusedWarning = agentUnusedFieldsWarning(config);
  if (unusedWarning !== undefined) lines.push(`warning: ${unusedWarning}`);
  const served = await serveWorlds([world]);
  const { retrievals } = served;
  const tool = options.teacherTool ?? DEFAULT_TEACHER_TOOL;
  // A question only retrieval answers, so the probe exercises the agent's search tool as well as its model calls.
  const task = world.retrievalTasks[0] ?? world.train[0];
  const id = `dry-run-${config.run.seed}`;
  const teacher = teacherSampler(world.train, tokenizer, served.worlds[0].index, { turn: (turn) => world.scriptedTurn(instance.baselinePersona, turn), seed: config.run.seed, tool, taskOf: (r) => (r === id ? task : undefined) });
  const gateway = await startGateway({ policy: { name: "arl/policy", sampler: teacher, tokenizer, contextLength: config.policy.contextLength, maxTokens: config.rl.maxTokensPerTurn }, seed: config.run.seed });
  try {
    const reward = rewardConfigOf(config);
    // What the agent's search tool sent, taken by the grade — or after the rollout when the agent reported its own
    // reward (then the trainer never grades it, and the probe must still see its retrievals).
    let sent: RetrievalCall[] | undefined;
    const r = await runAgentRollout(
      { agent: options.agent, gateway, rolloutDeadlineMs: options.rolloutDeadlineMs ?? DEFAULT_AGENT_DEADLINE_MS, grade: (t, a, transcript) => {
        sent = retrievals.take(transcript.id);
        return gradeTranscript(t, a, transcript, sent, { reward, searchTool: tool.name });
      } },
      id, task, served.worlds[0].env,
    );
    sent ??= retrievals.take(id);
    if (r.status !== "rewarded") throw new ConfigError([`--agent: the probe rollout (the careful teacher answering through the gateway, question ${JSON.stringify(task.question)}) was dropped: ${r.dropReason} — see examples/agents/README.md for the contract`]);
    const searches = r.calls.reduce((a, c) => a + c.toolCalls.length, 0);
    const retrievalsSeen = sent.reduce((n, c) => n + c.queries.length, 0);
    const fixTool = `the warm start's teacher calls a tool named ${JSON.stringify(tool.name)} with {${JSON.stringify(tool.queryArg)}: "…"} and the agent must send that query to ARL_RETRIEVAL_URL's /retrieve (top 3) — name your agent's search tool and its query argument with --agent-tool NAME:ARG, give your agent that tool (examples/agents/README.md), or start from a checkpoint of your own with --agent-warm-start`;
    // The warm start's teacher speaks one tool: a problem here means demonstrations the agent cannot follow.
    if (r.calls.some((c) => c.invalid) || searches === 0 || retrievalsSeen === 0) {
      throw new ConfigError([`--agent: in the probe rollout the agent did not run the teacher's search (${searches} tool call(s) parsed, ${r.calls.filter((c) => c.invalid).length} invalid, ${retrievalsSeen} retrieval request(s)): ${fixTool}`]);
    }
    // …and the queries it sent must be the teacher's: an agent that reads another argument searches for "" or junk,
    // and every demonstration would then read passages that do not answer its question.
    const asked = r.calls.flatMap((c) => c.toolCalls.filter((t) => t.name === tool.name).map((t) => normalizeQuery(t.arguments[tool.queryArg])));
    const received = sent.flatMap((c) => c.queries.map(normalizeQuery));
    const lost = asked.filter((q) => !received.includes(q));
    if (asked.length === 0 || lost.length > 0) {
      throw new ConfigError([`--agent: in the probe rollout the agent's searches were not the teacher's queries (the teacher asked ${JSON.stringify(asked)}, the retrieval server received ${JSON.stringify(sent.flatMap((c) => c.queries))}): ${fixTool}`]);
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
    await served.close();
  }
}
