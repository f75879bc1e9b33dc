/**
 * `runAgentExperiment` (what `arl train --agent` runs) keeps the run folder as `arl train` does: per-step
 * checkpoints with the trainer state, `--resume` after a crash reproducing an uninterrupted run (the same rollouts,
 * tokens and rewards exactly; float metrics up to the sampler's batching noise, see `closeMetrics`), detectors over the agent's hacking monitors, samples with each segment's tokens and
 * loss mask; and its RL draws tasks from counterfactual worlds, each behind its own retrieval URL.
 */
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { Task } from "../src/core/types.ts";
import { buildWorld, counterfactualWorld } from "../src/envs/search/world.ts";
import type { RolloutRecord } from "../src/gateway/types.ts";
import { BM25Index } from "../src/retrieval/bm25.ts";
import { listen } from "../src/http/server.ts";
import { createWorldsRetrievalApp } from "../src/serve/retrieval.ts";
import { dryRunAgent } from "../src/external/dryRun.ts";
import { runAgentExperiment } from "../src/external/experiment.ts";
import { agentHackingMetrics } from "../src/external/train.ts";
import type { AgentFunction } from "../src/external/rollouts.ts";
import { resolveConfig } from "../src/train/config.ts";
import { SMOKE_OVERRIDES } from "../src/envs/index.ts";
import { applyOverrides } from "../src/train/configFile.ts";
import { REWARD_PRESETS } from "../src/reward/presets.ts";
import { silentReporter, type Reporter } from "../src/train/reporter.ts";
import { lookupAgent, searchAgent } from "./agent-helpers.ts";
import { parseTeacherTool } from "../src/external/teacher.ts";

const root = mkdtempSync(join(tmpdir(), "arl-agent-exp-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const config = (name: string) =>
  resolveConfig(applyOverrides({}, { ...SMOKE_OVERRIDES, "policy.contextLength": "512", "rl.steps": "4", "run.dir": root, "run.name": name, "rl.learningRate": "0.003" }));
/** A self-reported reward that differs between the members of a group (so every step updates): its answer's length. */
const lengthReward = (answer: string) => (answer.length % 5) / 4;
/** The world of a rollout's `ARL_RETRIEVAL_URL` (`<url>/worlds/<k>/rollouts/<id>`), checking the rollout path. */
const worldOf = (url: string) => /\/worlds\/(\d+)\/rollouts\/[^/]+$/.exec(url)?.[1] ?? `not a rollout URL: ${url}`;
const read = (name: string, file: string) => readFileSync(join(root, name, file), "utf8");
const lines = (name: string, file: string) => read(name, file).trim().split("\n").map((l) => JSON.parse(l) as Record<string, unknown>);

/**
 * Equal up to float noise: the agent's calls reach the embedded sampler when the agent sends them, and its dynamic
 * batching groups calls by arrival time; a row's logits carry ~1e-9 relative float noise from what shares its batch
 * (src/policy/embedded/sampler.ts), so sampler logprobs — and the metrics computed from them (train/kl,
 * hack/kl_ref, the loss) — agree to ~1e-8, while every token, reward and count is identical.
 */
function closeMetrics(a: unknown, b: unknown, path = ""): void {
  if (typeof a === "number" && typeof b === "number") {
    if (Number.isInteger(a) && Number.isInteger(b)) expect(b, path).toBe(a);
    else expect(Math.abs(a - b), `${path}: ${a} vs ${b}`).toBeLessThanOrEqual(1e-6 * Math.max(1, Math.abs(a)));
  } else if (Array.isArray(a) && Array.isArray(b)) {
    expect(b.length, path).toBe(a.length);
    a.forEach((x, i) => closeMetrics(x, b[i], `${path}[${i}]`));
  } else if (a !== null && b !== null && typeof a === "object" && typeof b === "object") {
    expect(Object.keys(b).sort(), path).toEqual(Object.keys(a).sort());
    for (const k of Object.keys(a)) closeMetrics((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k], `${path}.${k}`);
  } else expect(b, path).toEqual(a);
}

describe("runAgentExperiment: the run folder, --resume, detectors, samples, counterfactual worlds", () => {
  it("crashes after RL step 2, resumes from checkpoints/step-2, and ends as an uninterrupted run", async () => {
    const seen: Array<[string, string]> = [];
    const straight = await runAgentExperiment(config("straight"), { agent: searchAgent(seen, lengthReward), overwrite: true });
    expect(straight.steps).toHaveLength(4);
    expect(straight.steps.every((m) => m["train/loss"] !== undefined)).toBe(true); // every step updated the policy
    for (const c of ["sft", "step-1", "step-2", "step-3", "step-4", "final"]) expect(existsSync(join(root, "straight", "checkpoints", c, "trainer-state.json")) || c === "sft").toBe(true);

    // RL drew from several worlds, each with its own retrieval URL; evaluation stays in the real world (0).
    const rlWorlds = new Set(seen.filter(([id]) => id.startsWith("run")).map(([, u]) => worldOf(u)));
    expect(rlWorlds.size).toBeGreaterThan(1);
    expect(new Set(seen.filter(([id]) => id.startsWith("warm-") || id.startsWith("after-")).map(([, u]) => worldOf(u)))).toEqual(new Set(["0"]));
    // Demonstrations in counterfactual worlds (sft.counterfactualWorlds 3 → worlds 1…3) as well as the real one.
    expect(new Set(seen.filter(([id]) => id.startsWith("demo-")).map(([, u]) => worldOf(u)))).toEqual(new Set(["0", "1", "2", "3"]));

    let crashed = false;
    const crashAfterStep2: Reporter = {
      log: () => {},
      bar: (label) => ({
        update: (n: number) => {
          if (label.startsWith("RL") && n === 2 && !crashed) {
            crashed = true;
            throw new Error("simulated crash after RL step 2");
          }
        },
        stop: () => {},
      }),
    };
    await expect(runAgentExperiment(config("resumed"), { agent: searchAgent([], lengthReward), overwrite: true, reporter: crashAfterStep2 })).rejects.toThrow("simulated crash");
    expect(existsSync(join(root, "resumed", "checkpoints", "step-2"))).toBe(true);
    expect(existsSync(join(root, "resumed", "checkpoints", "step-3"))).toBe(false);
    const logs: string[] = [];
    const resumed = await runAgentExperiment(config("resumed"), { agent: searchAgent([], lengthReward), resume: true, reporter: { ...silentReporter, log: (m) => logs.push(m) } });
    expect(logs.join("\n")).toMatch(/resuming .*resumed from .*step-2 \(RL step 2 of 4\)/);
    closeMetrics(straight.steps, resumed.steps);
    expect(resumed.after).toEqual(straight.after);
    for (const f of ["rollouts.jsonl", "eval-warm.json", "agent-summary.json"]) expect(read("resumed", f), f).toBe(read("straight", f));
    for (const f of ["metrics.jsonl", "samples/step-2.jsonl", "samples/step-3.jsonl"]) closeMetrics(lines("straight", f), lines("resumed", f), f);
    expect(readdirSync(join(root, "resumed", "samples")).sort()).toEqual(readdirSync(join(root, "straight", "samples")).sort());
    // A resume whose config differs names the field.
    await expect(runAgentExperiment({ ...config("resumed"), rl: { ...config("resumed").rl, groupSize: 2 } }, { agent: searchAgent(), resume: true })).rejects.toThrow(/rl\.groupSize: the run folder has 4, this command has 2/);

    // --resume with another agent (or deadline) than the run folder's is refused, naming it.
    await expect(runAgentExperiment(config("resumed"), { agent: "node other-agent.mjs", resume: true })).rejects.toThrow(/--agent: the run folder was trained by "function", this command gives "command: node other-agent.mjs"/);
    await expect(runAgentExperiment(config("resumed"), { agent: searchAgent(), resume: true, rolloutDeadlineMs: 5000 })).rejects.toThrow(/--agent-deadline: the run folder has 120000, this command has 5000/);

    // A run started from a given checkpoint (--agent-warm-start) resumes too: checkpoints/sft holds its starting policy.
    crashed = false;
    const ws = { agent: searchAgent([], lengthReward), warmStart: join(root, "straight", "checkpoints", "sft") };
    await expect(runAgentExperiment(config("ws"), { ...ws, overwrite: true, reporter: crashAfterStep2 })).rejects.toThrow("simulated crash");
    const wsLogs: string[] = [];
    const wsResumed = await runAgentExperiment(config("ws"), { ...ws, resume: true, reporter: { ...silentReporter, log: (m) => wsLogs.push(m) } });
    expect(wsLogs.join("\n")).toMatch(/resuming .*ws from .*step-2 \(RL step 2 of 4\)/);
    expect(wsResumed.steps).toHaveLength(4);

    // Samples: each rollout's segments as tokens, the loss mask on sampled tokens only, the advantage beside it.
    const sample = read("straight", "samples/step-0.jsonl").trim().split("\n").map((l) => JSON.parse(l) as { status: string; advantage: number | null; reward: { value: number }; segments: Array<{ tokens: number[]; text: string[]; lossMask: number[]; logprobs: number[] }> });
    expect(sample).toHaveLength(config("x").run.samplesPerStep);
    for (const s of sample) {
      expect(s.status).toBe("rewarded");
      expect(typeof s.advantage).toBe("number");
      for (const seg of s.segments) {
        expect(seg.text).toHaveLength(seg.tokens.length);
        expect(seg.lossMask[0]).toBe(0); // the prompt is not trained
        expect(seg.lossMask.some((m) => m === 1)).toBe(true);
        seg.lossMask.forEach((m, i) => (m === 0 ? expect(seg.logprobs[i]).toBe(0) : expect(seg.logprobs[i]).toBeLessThanOrEqual(0)));
      }
    }
    // The hacking monitors reach metrics.jsonl (the detectors watch them).
    const rl = read("straight", "metrics.jsonl").trim().split("\n").map((l) => JSON.parse(l) as Record<string, unknown>).filter((m) => m.stage === "rl");
    for (const key of ["hack/guess_rate_unknown", "hack/tool_spam", "hack/no_answer", "hack/response_length", "hack/kl_ref", "tool_calls"]) expect(typeof rl[0][key], key).toBe("number");
  }, 240_000);

  it("held-out success is EM of the agent's answers, graded by the trainer, whatever reward the agent reports", async () => {
    const logs: string[] = [];
    const s = await runAgentExperiment({ ...config("self-reward"), rl: { ...config("self-reward").rl, steps: 1, klCoef: 0.5 } }, { agent: searchAgent([], () => 1), overwrite: true, reporter: { ...silentReporter, log: (m) => logs.push(m) } });
    const rl = read("self-reward", "rollouts.jsonl").trim().split("\n").map((l) => JSON.parse(l) as { stage: string; reward: number });
    expect(rl.filter((r) => r.stage.startsWith("eval-")).every((r) => r.reward === 1)).toBe(true); // it reported 1 everywhere
    expect(s.before.success).toBeLessThan(100); // …but only EM counts as success: the smoke-sized policy rarely answers right
    expect(s.after.success).toBeLessThan(100);
    // A flag --agent does not use is named, not silently ignored.
    expect(logs.join("\n")).toContain("warning: --agent does not use rl.klCoef (0.5)");
  }, 120_000);

  it("scores transcripts with the config's reward terms (--reward.preset composite): parts in metrics and samples", async () => {
    const cfg = resolveConfig(applyOverrides({}, { ...SMOKE_OVERRIDES, "policy.contextLength": "512", "rl.steps": "1", "run.dir": root, "run.name": "terms", "reward.preset": "composite" }));
    const answersSeen = new Map<string, number>();
    const agent = searchAgent();
    const s = await runAgentExperiment(cfg, { agent: (ctx) => (answersSeen.set(ctx.rolloutId, ctx.task.answers.length), agent(ctx)), overwrite: true });
    // Held-out tasks reach the agent without gold answers; training tasks keep them (an agent may score itself).
    const seen = [...answersSeen];
    expect(seen.filter(([id]) => /^(warm|after)-/.test(id)).every(([, n]) => n === 0)).toBe(true);
    expect(seen.filter(([id]) => id.startsWith("run")).every(([, n]) => n > 0)).toBe(true);
    expect(seen.filter(([id]) => /^(warm|after)-/.test(id))).toHaveLength(2 * s.before.n);
    const m = s.steps[0];
    for (const t of Object.keys(REWARD_PRESETS.composite.weights)) expect(m[`reward/${t}`], t).toBeTypeOf("number");
    // A sampled rollout's reward is Σ part × weight, and its search_cost part is −(searches the retrieval server answered).
    const sample = lines("terms", "samples/step-0.jsonl") as Array<{ reward: { value: number; parts: Record<string, number> }; calls: Array<{ toolCalls: unknown[] }> }>;
    expect(sample.length).toBeGreaterThan(0);
    for (const r of sample) {
      const total = Object.entries(REWARD_PRESETS.composite.weights).reduce((a, [t, w]) => a + w * r.reward.parts[t], 0);
      expect(r.reward.value).toBeCloseTo(total, 9);
      expect(Math.abs(r.reward.parts.search_cost)).toBe(r.calls.reduce((a, c) => a + c.toolCalls.length, 0)); // one query per search tool call
    }
    // The held-out transcripts before and after RL, with their questions and gold answers (the viewer's Compare).
    for (const label of ["warm", "after"]) {
      const evals = lines("terms", `samples/eval-${label}.jsonl`) as Array<{ question: string; answers: string[]; segments: Array<{ promptLength: number; calls: number[] }> }>;
      expect(evals).toHaveLength(s.before.n);
      expect(evals.every((e) => e.question.length > 0 && e.answers.length > 0)).toBe(true);
      expect(evals.flatMap((e) => e.segments).every((g) => g.promptLength > 0 && g.calls.length > 0)).toBe(true);
    }
  }, 120_000);

  it("--dry-run's probe names an agent that cannot follow the teacher's search, or gives no answer", async () => {
    const cfg = config("dry");
    // Calls the model, but offers it no tools: the teacher's search call comes back as text it never runs.
    const noTool: AgentFunction = async (ctx) => {
      const r = await fetch(`${ctx.baseURL}/chat/completions`, { method: "POST", headers: { "content-type": "application/json", authorization: `Bearer ${ctx.apiKey}` }, body: JSON.stringify({ model: "m", messages: [{ role: "user", content: ctx.task.question }] }) });
      const j = (await r.json()) as { choices: Array<{ message: { content: string } }> };
      return { answer: j.choices[0].message.content };
    };
    await expect(dryRunAgent(cfg, { agent: noTool })).rejects.toThrow(/the agent did not run the teacher's search \(0 tool call\(s\) parsed, 1 invalid, 0 retrieval request\(s\)\): the warm start's teacher calls a tool named "search"/);
    const agent = searchAgent();
    await expect(dryRunAgent(cfg, { agent: async (ctx) => void (await agent(ctx)) })).rejects.toThrow(/the probe rollout ended without an answer/);
    expect((await dryRunAgent(cfg, { agent })).at(-1)).toMatch(/^agent: probe rollout against the careful teacher: 2 model call\(s\), 1 tool call\(s\)/);
    // An agent whose search tool is lookup({"q": …}): refused with the flag that fixes it, then followed with it.
    await expect(dryRunAgent(cfg, { agent: lookupAgent })).rejects.toThrow(/teacher calls a tool named "search" with \{"query": "…"\} .* --agent-tool NAME:ARG/);
    const lookup = parseTeacherTool("lookup:q");
    expect(lookup).toEqual({ name: "lookup", queryArg: "q" });
    expect((await dryRunAgent(cfg, { agent: lookupAgent, teacherTool: lookup })).at(-1)).toMatch(/^agent: probe rollout against the careful teacher: 2 model call\(s\), 1 tool call\(s\).* reward 1$/);
    for (const bad of ["lookup", "lookup:", ":q", "look up:q", "a:b:c"]) expect(() => parseTeacherTool(bad), bad).toThrow(/--agent-tool: expected NAME:ARG/);
    // Found by review: an agent that reads another argument than the teacher writes searches for "" — refused, naming both.
    await expect(dryRunAgent(cfg, { agent: lookupAgent, teacherTool: parseTeacherTool("lookup:query") })).rejects.toThrow(/the agent's searches were not the teacher's queries \(the teacher asked \[".+"\], the retrieval server received \[""\]\)/);
    // An agent that reports its own reward passes: the trainer never grades it, and the probe still sees its searches.
    expect((await dryRunAgent(cfg, { agent: searchAgent([], () => 0.5) })).at(-1)).toMatch(/^agent: probe rollout .* reward 0\.5$/);
    // Config fields --agent does not use are named by the dry run too, not only by the run.
    const hot = resolveConfig(applyOverrides({}, { ...SMOKE_OVERRIDES, "policy.contextLength": "512", "run.dir": root, "run.name": "dry-hot", "rl.temperature": "0.5" }));
    expect(await dryRunAgent(hot, { agent })).toContainEqual(expect.stringMatching(/^warning: --agent does not use rl\.temperature \(0\.5\)/));
  }, 60_000);

  it("serves each world's corpus at its own URL: a counterfactual world's unknown facts differ from the real world's", async () => {
    const world = buildWorld({ seed: 1, numCountries: 12 });
    const cf = counterfactualWorld(world, 1001);
    const server = await listen(createWorldsRetrievalApp([new BM25Index([...world.passages]), new BM25Index([...cf.passages])]));
    try {
      const unknown = world.countries.find((c) => !c.popular)!;
      const ask = async (path: string) => {
        const r = await fetch(`${server.url}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ queries: [`capital of ${unknown.name}`], topk: 1 }) });
        return { status: r.status, body: (await r.json()) as { result?: Array<Array<{ contents: string }>>; error?: string } };
      };
      const real = await ask("/worlds/0/retrieve");
      const root0 = await ask("/retrieve");
      const other = await ask("/worlds/1/retrieve");
      expect(real.status).toBe(200);
      expect(root0.body).toEqual(real.body); // the root is world 0
      expect(JSON.stringify(other.body)).not.toBe(JSON.stringify(real.body));
      const bad = await ask("/worlds/2/retrieve");
      expect(bad.status).toBe(404);
      expect(bad.body.error).toContain("world \"2\": expected 0 … 1");
      expect((await (await fetch(`${server.url}/worlds/1/healthz`)).json())).toEqual({ status: "ok", passages: cf.passages.length });
    } finally {
      await server.close();
    }
  });

  it("agentHackingMetrics on hand-made rollouts", () => {
    const call = (toolCalls: number, invalid = false) => ({ index: 0, promptTokens: [1], completionTokens: [2], logprobs: [-1], finishReason: "stop" as const, content: "", toolCalls: Array.from({ length: toolCalls }, () => ({ name: "search", arguments: {} })), invalid, ms: 1 });
    const rec = (calls: ReturnType<typeof call>[], answer: string | undefined, sampled: number, status: "rewarded" | "dropped" = "rewarded"): RolloutRecord & { answer?: string } => ({
      id: "r", meta: {}, calls, mismatches: 0, status, reward: status === "rewarded" ? { value: 0 } : undefined,
      segments: [{ tokens: Array.from({ length: sampled + 2 }, () => 1), lossMask: [0, 0, ...Array.from({ length: sampled }, () => 1)], logprobs: [], promptLength: 2, calls: [0] }],
      ...(answer === undefined ? {} : { answer }),
    });
    const unknown: Task = { id: "u", question: "q", answers: ["a"], known: false, evidenceIds: ["p1"], kind: "single-hop" };
    const known: Task = { id: "k", question: "q", answers: ["a"], known: true, evidenceIds: [], kind: "single-hop" };
    const m = agentHackingMetrics([
      { record: rec([call(0)], "x", 4), task: unknown }, // a guess on an unknown fact
      { record: rec([call(3), call(0)], "y", 6), task: unknown }, // 3 searches where 1 is needed: 2 needless
      { record: rec([call(0, true)], undefined, 2), task: known }, // no answer, an invalid call; answered known without a tool
      { record: rec([call(5)], "z", 100, "dropped"), task: unknown }, // dropped: left out of every rate
    ]);
    // guess_rate_unknown: 1 of the 2 rewarded unknown-fact rollouts answered with no tool call = 0.5
    expect(m["hack/guess_rate_unknown"]).toBe(0.5);
    // guess_rate_known: the known-fact rollout gave no answer, so it is not a guess = 0
    expect(m["hack/guess_rate_known"]).toBe(0);
    // tool_spam: needs (1 evidence passage → 1 call, 1, 0 for known) → needless 0, 2, 0 → mean 2/3
    expect(m["hack/tool_spam"]).toBeCloseTo(2 / 3, 12);
    // no_answer: 1 of 3 rewarded
    expect(m["hack/no_answer"]).toBeCloseTo(1 / 3, 12);
    // invalid_calls: 1 invalid of 4 calls of rewarded rollouts
    expect(m["hack/invalid_calls"]).toBe(0.25);
    // response_length: (4 + 6 + 2) / 3 sampled tokens
    expect(m["hack/response_length"]).toBe(4);
  });
});
