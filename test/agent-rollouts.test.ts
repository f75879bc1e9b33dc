/**
 * The trainer's side of the gateway: a user's agent as a child process (its environment, stdin task, result line,
 * failures as drop reasons) and rollout records → datums with group-relative advantages.
 */
import { describe, expect, it } from "vitest";
import type { Task } from "../src/core/types.ts";
import type { GatewaySegment, RolloutRecord } from "../src/gateway/types.ts";
import { agentBatch, runAgentCommand, segmentToDatum, type AgentContext } from "../src/external/rollouts.ts";

const task: Task = { id: "t1", question: "capital of peru?", answers: ["lima"], kind: "single-hop" };
const ctx = (signal = new AbortController().signal): AgentContext => ({
  baseURL: "http://127.0.0.1:1/rollout/r7/v1", apiKey: "k", rolloutId: "r7", rewardURL: "http://127.0.0.1:1/rollout/r7/reward", task, signal, env: { ARL_WORLD: "w3" },
});
const node = (src: string) => `${JSON.stringify(process.execPath)} -e ${JSON.stringify(src)}`;

describe("runAgentCommand", () => {
  it("gives the agent its base URL, key and rollout id in the environment and the task on stdin; reads its last JSON line", async () => {
    const script = `let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{const t=JSON.parse(s);console.log("noise");console.log(JSON.stringify({answer:[process.env.OPENAI_BASE_URL,process.env.OPENAI_API_KEY,process.env.ARL_ROLLOUT_ID,process.env.ARL_REWARD_URL,process.env.ARL_WORLD,t.question].join(" ")}));});`;
    const r = await runAgentCommand(node(script), ctx(), { timeoutMs: 20_000 });
    expect(r).toEqual({ answer: "http://127.0.0.1:1/rollout/r7/v1 k r7 http://127.0.0.1:1/rollout/r7/reward w3 capital of peru?" });
  });

  it("turns a crash, a timeout and a passed deadline into the reasons the rollout is dropped with", async () => {
    expect((await runAgentCommand(node(`console.error("boom: no tools");process.exit(3)`), ctx(), { timeoutMs: 20_000 })).error).toBe("agent exited with code 3: boom: no tools");
    expect((await runAgentCommand(node(`setTimeout(()=>{},60000)`), ctx(), { timeoutMs: 300 })).error).toBe("agent timed out after 300 ms (killed)");
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 200);
    expect((await runAgentCommand(node(`setTimeout(()=>{},60000)`), ctx(ac.signal), { timeoutMs: 20_000 })).error).toBe("rollout deadline passed (agent killed)");
    expect(await runAgentCommand(node(`console.log("no json here")`), ctx(), { timeoutMs: 20_000 })).toEqual({});
    // An uncaught error: its error line, not the end of the stack trace.
    expect((await runAgentCommand(node(`function f(){ throw new TypeError("tools undefined") } f()`), ctx(), { timeoutMs: 20_000 })).error).toBe("agent exited with code 1: TypeError: tools undefined");
  }, 30_000);

  it("kills the agent itself, not only the shell in front of it, when its time is up", async () => {
    const { mkdtempSync, readFileSync } = await import("node:fs");
    const { tmpdir } = await import("node:os");
    const { join } = await import("node:path");
    const pidFile = join(mkdtempSync(join(tmpdir(), "arl-agent-pid-")), "pid");
    // `; true` keeps the shell alive as the agent's parent (a lone command may be exec'd in its place).
    const command = `${node(`require("fs").writeFileSync(${JSON.stringify(pidFile)}, String(process.pid)); setInterval(() => {}, 1000)`)}; true`;
    expect((await runAgentCommand(command, ctx(), { timeoutMs: 1_000 })).error).toBe("agent timed out after 1000 ms (killed)");
    await new Promise((r) => setTimeout(r, 200));
    const pid = Number(readFileSync(pidFile, "utf8"));
    // Gone, or dead and waiting to be reaped (a zombie: in a container PID 1 may reap late).
    let state = "gone";
    try {
      state = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.[0] ?? "gone";
    } catch {
      // no such process
    }
    expect(["gone", "Z", "X"]).toContain(state);
  }, 30_000);

  it("Ctrl-C (SIGINT) to the trainer kills its running agents' process groups, then ends the trainer by SIGINT", async () => {
    const { mkdtempSync, readdirSync, readFileSync, writeFileSync } = await import("node:fs");
    const { spawn } = await import("node:child_process");
    const { tmpdir } = await import("node:os");
    const { join, resolve } = await import("node:path");
    const dir = mkdtempSync(join(tmpdir(), "arl-agent-sigint-"));
    // Each agent (under its shell, in its own process group) writes its pid, then runs "forever".
    const agent = `${node(`require("fs").writeFileSync(require("path").join(${JSON.stringify(dir)}, "agent-" + process.pid), ""); setInterval(() => {}, 1000)`)}; true`;
    const trainer = join(dir, "trainer.mts");
    writeFileSync(trainer, [
      `import { runAgentCommand } from ${JSON.stringify(resolve("src/external/rollouts.ts"))};`,
      `const ctx = (id) => ({ baseURL: "http://127.0.0.1:1/v1", apiKey: "k", rolloutId: id, rewardURL: "http://127.0.0.1:1/r", task: { id, question: "q", answers: [], kind: "x" }, signal: new AbortController().signal, env: {} });`,
      `await Promise.all(["a", "b"].map((id) => runAgentCommand(${JSON.stringify(agent)}, ctx(id), { timeoutMs: 120000 })));`,
    ].join("\n"));
    const child = spawn(process.execPath, ["--import", "tsx", trainer], { stdio: ["ignore", "ignore", "pipe"] });
    let stderr = "";
    child.stderr!.on("data", (d: Buffer) => (stderr += d.toString()));
    const pids = (): number[] => readdirSync(dir).filter((f) => f.startsWith("agent-")).map((f) => Number(f.slice(6)));
    for (let i = 0; i < 600 && pids().length < 2; i++) await new Promise((r) => setTimeout(r, 100));
    expect(pids()).toHaveLength(2);
    const exited = new Promise<NodeJS.Signals | null>((r) => child.on("exit", (_code, signal) => r(signal)));
    child.kill("SIGINT");
    expect(await exited).toBe("SIGINT");
    expect(stderr).toContain("stopped by SIGINT: 2 running agent process groups killed; the run continues from its last checkpoint with --resume");
    await new Promise((r) => setTimeout(r, 300));
    const state = (pid: number) => {
      try {
        return readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.[0] ?? "gone";
      } catch {
        return "gone";
      }
    };
    for (const pid of pids()) expect(["gone", "Z", "X"], `agent ${pid}`).toContain(state(pid));
  }, 90_000);
});

const seg = (tokens: number[], lossMask: number[], calls: number[]): GatewaySegment => ({
  tokens, lossMask, logprobs: lossMask.map((m, i) => (m ? -0.1 * (i + 1) : 0)), promptLength: lossMask.indexOf(1), calls,
});
const rec = (id: string, value: number | undefined, segments: GatewaySegment[], mismatches = 0): RolloutRecord => ({
  id, meta: {}, calls: [], segments, mismatches,
  ...(value === undefined ? { status: "dropped" as const, dropReason: "no reward within 1000 ms" } : { status: "rewarded" as const, reward: { value } }),
});

describe("agentBatch", () => {
  it("shifts a segment into a datum with the advantage on sampled tokens only", () => {
    const d = segmentToDatum(seg([1, 2, 3, 4, 5], [0, 0, 1, 0, 1], [0, 1]), 0.5);
    expect(d).toEqual({ modelInput: [1, 2, 3, 4], targetTokens: [2, 3, 4, 5], weights: [0, 1, 0, 1], logprobs: [0, -0.30000000000000004, 0, -0.5], advantages: [0, 0.5, 0, 0.5] });
    expect(() => segmentToDatum(seg([1], [0], [0]), 1)).toThrow(/at least 2 tokens/);
  });

  it("computes GRPO within each task's group from rewarded rollouts; dropped ones are counted with their reason, and every segment of a rollout shares its advantage", () => {
    const g1 = [
      rec("a", 1, [seg([1, 2, 3], [0, 1, 1], [0]), seg([1, 9, 3], [0, 1, 1], [1])], 1),
      rec("b", 0, [seg([1, 2, 4], [0, 1, 1], [0, 1])]),
      rec("c", undefined, [seg([1, 2, 5], [0, 1, 1], [0])]),
    ];
    const g2 = [rec("d", 1, [seg([4, 5, 6], [0, 1, 1], [0])]), rec("e", 1, [seg([4, 5, 7], [0, 1, 1], [0])])];
    const b = agentBatch([g1, g2], { normalizeStd: false });
    expect(b.advantages).toEqual([0.5, -0.5, 0, 0]);
    expect(b.datums.map((d) => d.advantages!.filter((a) => a !== 0))).toEqual([[0.5, 0.5], [0.5, 0.5], [-0.5, -0.5], [], []]);
    expect([b.rewarded, b.dropped, b.segments, b.mismatches]).toEqual([4, 1, 5, 1]);
    expect(b.dropReasons).toEqual({ "no reward within 1000 ms": 1 });
  });
});
