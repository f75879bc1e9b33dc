/**
 * `arl train --agent <command>`: the CLI trains a user's agent (here a plain script calling the per-rollout
 * OpenAI base URL with fetch) on the search env — held-out evaluation before and after, RL steps in
 * metrics.jsonl, a loadable final checkpoint — and refuses what it does not support, naming it.
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { loadPolicy } from "../src/train/checkpoint.ts";

const repo = join(import.meta.dirname, "..");
const dir = mkdtempSync(join(tmpdir(), "arl-cli-agent-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const arl = (...args: string[]) => spawnSync(process.execPath, [join(repo, "bin", "arl.mjs"), ...args], { cwd: repo, encoding: "utf8", timeout: 300_000 });

const agent = join(dir, "agent.mjs");
writeFileSync(agent, `
let s = ""; for await (const c of process.stdin) s += c;
const task = JSON.parse(s);
const r = await fetch(process.env.OPENAI_BASE_URL + "/chat/completions", { method: "POST", headers: { "content-type": "application/json", authorization: "Bearer " + process.env.OPENAI_API_KEY }, body: JSON.stringify({ model: "p", messages: [{ role: "user", content: task.question }], max_tokens: 8 }) });
const j = await r.json();
if (!r.ok || !process.env.ARL_RETRIEVAL_URL) { console.error(JSON.stringify(j)); process.exit(2); }
console.log(JSON.stringify({ answer: j.choices[0].message.content }));
`);

describe("arl train --agent", () => {
  it("evaluates, trains and re-evaluates the agent, writing metrics, a summary and a loadable checkpoint", async () => {
    // --sft.counterfactualWorlds 0: the warm start records its demonstrations in the real world only (40 runs of the
    // agent's process instead of 121; they were half of this file's time). The counterfactual demonstrations are
    // recorded in-process by agent-experiment.test.ts.
    const r = arl("train", "--smoke", "--policy.contextLength", "512", "--sft.counterfactualWorlds", "0", "--agent", `${JSON.stringify(process.execPath)} ${JSON.stringify(agent)}`, "--run.dir", dir, "--run.name", "mine");
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/Held-out success of your agent \(EM %, 8 questions\): warm start \d+\.\d \(dropped 0\) → after RL \d+\.\d \(dropped 0\)/);
    const rows = readFileSync(join(dir, "mine", "metrics.jsonl"), "utf8").trim().split("\n").map((l) => JSON.parse(l) as Record<string, number>);
    const rl = rows.filter((m) => (m as { stage?: string }).stage === "rl");
    expect(rl).toHaveLength(2); // --smoke: rl.steps 2
    for (const m of rl) expect(m.rewarded).toBe(16); // rl.tasksPerStep 4 × rl.groupSize 4
    expect(rows.filter((m) => (m as { stage?: string }).stage === "sft")).toHaveLength(4); // --smoke: sft.steps 4, on the teacher's demonstrations
    const summary = JSON.parse(readFileSync(join(dir, "mine", "agent-summary.json"), "utf8")) as { before: { n: number } };
    expect(summary.before.n).toBe(8);
    expect(existsSync(join(dir, "mine", "checkpoints", "final"))).toBe(true);
    // Every rollout, with its status and (for dropped ones) its reason.
    const rollouts = readFileSync(join(dir, "mine", "rollouts.jsonl"), "utf8").trim().split("\n").map((l) => JSON.parse(l) as { stage: string; status: string });
    expect(rollouts.filter((x) => x.stage === "rl")).toHaveLength(32);
    expect(rollouts.filter((x) => x.stage.startsWith("eval-"))).toHaveLength(16);
    const p = await loadPolicy(join(dir, "mine", "checkpoints", "final"));
    expect(p.tokenizer.vocabSize).toBeGreaterThan(0);

    // A later run starts from this run's warm start instead of recording and training a new one.
    const again = arl("train", "--smoke", "--policy.contextLength", "512", "--agent", `${JSON.stringify(process.execPath)} ${JSON.stringify(agent)}`, "--agent-warm-start", join(dir, "mine", "checkpoints", "sft"), "--run.dir", dir, "--run.name", "again");
    expect(again.status, again.stderr).toBe(0);
    const stages = readFileSync(join(dir, "again", "metrics.jsonl"), "utf8").trim().split("\n").map((l) => (JSON.parse(l) as { stage: string }).stage);
    expect(stages).toEqual(["rl", "rl"]);
  }, 300_000);

  it("--agent-module: an agent function in the trainer's process (examples/agents/openai-search-function.mjs)", () => {
    const r = arl("train", "--smoke", "--policy.contextLength", "512", "--rl.steps", "1", "--sft.counterfactualWorlds", "0", "--agent-module", join(repo, "examples", "agents", "openai-search-function.mjs"), "--run.dir", dir, "--run.name", "fn");
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/Held-out success of your agent \(EM %, 8 questions\): warm start \d+\.\d \(dropped 0\) → after RL \d+\.\d \(dropped 0\)/);
    const rl = readFileSync(join(dir, "fn", "rollouts.jsonl"), "utf8").trim().split("\n").map((l) => JSON.parse(l) as { stage: string; status: string }).filter((x) => x.stage === "rl");
    expect(rl.map((x) => x.status)).toEqual(Array.from({ length: 16 }, () => "rewarded"));
    const noFn = join(dir, "no-agent.mjs");
    writeFileSync(noFn, "export const x = 1;\n");
    const bad = arl("train", "--smoke", "--policy.contextLength", "512", "--agent-module", noFn, "--run.dir", dir, "--run.name", "nofn");
    expect(bad.status).toBe(2);
    expect(bad.stderr).toContain(`--agent-module: ${noFn} exports no agent function`);
  }, 300_000);

  it("refuses another env, a Tinker backend without the served model's tokenizer, an agent that fails the --dry-run probe and a context too small for an agent's calls, naming them (exit 2)", () => {
    const c = arl("train", "--smoke", "--policy.contextLength", "256", "--agent", "true", "--run.dir", dir);
    expect(c.status).toBe(2);
    expect(c.stderr).toContain("policy.contextLength: an agent's calls (chat template, its tool schemas, its messages, retrieved passages) need at least 512 tokens; got 256");
    const r = arl("train", "--smoke", "--policy.contextLength", "512", "--env", "travel", "--agent", "true", "--run.dir", dir);
    expect(r.status).toBe(2);
    expect(r.stderr).toContain("env.name: arl train --agent trains on the search env");
    const t = arl("train", "--smoke", "--policy.contextLength", "512", "--agent", "true", "--policy.backend", "tinker", "--run.dir", dir);
    expect(t.status).toBe(2);
    expect(t.stderr).toContain("policy.tinker.tokenizer: with policy.backend tinker, --agent needs the served model's tokenizer");
    const e = arl("train", "--smoke", "--policy.contextLength", "512", "--agent", " ", "--run.dir", dir);
    expect(e.status).toBe(2);
    expect(e.stderr).toContain("--agent: an empty command");
    const o = arl("train", "--smoke", "--agent-deadline", "2000", "--run.dir", dir);
    expect(o.status).toBe(2);
    expect(o.stderr).toContain("--agent-deadline: only with --agent or --agent-module");
    // --dry-run probes the agent once against the scripted teacher: `true` never calls the model.
    const q = arl("train", "--smoke", "--agent", "true", "--dry-run", "--run.dir", dir);
    expect(q.status).toBe(2);
    expect(q.stderr).toMatch(/--agent: the probe rollout \(the careful teacher answering through the gateway, question ".+"\) was dropped: the agent finished without calling the model/);
  }, 120_000);

  it("applies --agent's measured defaults (AGENT_DEFAULTS) under the flags; --smoke keeps a 512-token context", () => {
    const cfg = (...a: string[]) => {
      const r = arl("train", "--agent", "true", "--print-config", ...a);
      expect(r.status, r.stderr).toBe(0);
      return JSON.parse(r.stdout) as { run: { name: string }; policy: { contextLength: number; lengthBucket?: number; jaxLengthBucket: number }; sft: { steps: number }; rl: { steps: number; tasksPerStep: number; groupSize: number }; reward: { preset: string } };
    };
    const d = cfg("--rl.steps", "7");
    // The jax-js trainer's coarse bucket only; the onnx trainer's is its own default (16, policy.lengthBucket unset).
    expect(d.policy.lengthBucket).toBeUndefined();
    expect([d.run.name, d.policy.contextLength, d.policy.jaxLengthBucket, d.sft.steps, d.rl.tasksPerStep, d.rl.groupSize, d.reward.preset]).toEqual(["agent", 512, 256, 1000, 8, 8, "outcome-only"]);
    expect(d.rl.steps).toBe(7); // a flag wins over the default
    const s = cfg("--smoke");
    expect([s.run.name, s.policy.contextLength, s.sft.steps]).toEqual(["smoke-agent", 512, 4]);
    // --dry-run: the checks and one probe rollout of the example agent (it searches an unknown fact), nothing written.
    const dry = arl("train", "--agent-module", join(repo, "examples", "agents", "openai-search-function.mjs"), "--dry-run", "--run.dir", join(dir, "dry"));
    expect(dry.status, dry.stderr).toBe(0);
    expect(dry.stdout).toContain("dry run: OK — nothing trained, nothing written");
    expect(dry.stdout).toMatch(/agent: probe rollout against the careful teacher: 2 model call\(s\), 1 tool call\(s\), 1 segment\(s\), 0 mismatch\(es\); answer "(.+)" \(gold "\1"\), reward 1/);
    expect(existsSync(join(dir, "dry"))).toBe(false);
  }, 120_000);
});
