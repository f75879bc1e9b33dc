/**
 * Crash safety of `arl train`: a child killed with SIGKILL at a random RL step (a seeded choice) and resumed with
 * `--resume` ends with a `metrics.jsonl` byte-identical to an uninterrupted run's; a truncated checkpoint file is
 * detected, named, and the previous checkpoint used (still byte-identical); a torn last metrics line is dropped.
 */
import { spawn, spawnSync } from "node:child_process";
import { appendFileSync, cpSync, existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, truncateSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { Rng } from "../src/core/rng.ts";
import { checkpointProblem, lastGoodCheckpoint } from "../src/train/checkpoint.ts";

const repo = resolve(import.meta.dirname, "..");
const STEPS = 6;
const ARGS = ["train", "--smoke", "--rl.steps", String(STEPS), "--run.checkpointEvery", "1"];
const arl = (...args: string[]) => {
  const r = spawnSync(process.execPath, [join(repo, "bin", "arl.mjs"), ...args], { cwd: repo, encoding: "utf8", timeout: 240_000 });
  return { code: r.status, out: r.stdout, err: r.stderr };
};
const rlLines = (file: string): number => (existsSync(file) ? readFileSync(file, "utf8").split("\n").filter((l) => l.includes('"stage":"rl"')).length : 0);
const rowsOf = (dir: string) => (JSON.parse(readFileSync(join(dir, "summary.json"), "utf8")) as { rows: unknown }).rows;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Starts `arl train`, waits until metrics.jsonl holds `killAfter` RL lines (+ `delayMs`), then SIGKILLs it. */
async function killAt(root: string, killAfter: number, delayMs: number): Promise<{ linesAtKill: number; signal: string | null }> {
  const child = spawn(process.execPath, [join(repo, "bin", "arl.mjs"), ...ARGS, "--run.dir", root], { cwd: repo, stdio: "ignore" });
  const exited = new Promise<string | null>((r) => child.on("exit", (_code, signal) => r(signal)));
  const metrics = join(root, "smoke", "metrics.jsonl");
  const deadline = Date.now() + 120_000;
  while (rlLines(metrics) < killAfter && Date.now() < deadline && child.exitCode === null) await sleep(20);
  await sleep(delayMs);
  child.kill("SIGKILL");
  const signal = await exited;
  return { linesAtKill: rlLines(metrics), signal };
}

describe("arl train --resume after SIGKILL (smoke configuration, 6 RL steps, a checkpoint every step)", () => {
  const root = mkdtempSync(join(tmpdir(), "arl-resume-"));
  const whole = join(root, "whole");

  it("an uninterrupted run, then a run killed at a random step and resumed: byte-identical metrics.jsonl", async () => {
    const u = arl(...ARGS, "--run.dir", whole);
    expect(u.code, u.err).toBe(0);
    const reference = readFileSync(join(whole, "smoke", "metrics.jsonl"), "utf8");
    expect(rlLines(join(whole, "smoke", "metrics.jsonl"))).toBe(STEPS);

    // Seeded choice: kill after 1..STEPS-1 RL lines, 0–400 ms later (so inside the next step or a checkpoint save).
    const rng = new Rng(Number(process.env.ARL_RESUME_SEED ?? 5));
    const killAfter = 1 + rng.int(STEPS - 1);
    const delayMs = rng.int(400);
    const killed = join(root, "killed");
    const k = await killAt(killed, killAfter, delayMs);
    expect(k.signal).toBe("SIGKILL");
    expect(k.linesAtKill).toBeLessThan(STEPS); // it really died mid-run

    const r = arl(...ARGS, "--run.dir", killed, "--resume");
    expect(r.code, r.err).toBe(0);
    expect(r.out + r.err).toMatch(/resuming .*smoke from .*(step-\d|the warm start)/);
    expect(readFileSync(join(killed, "smoke", "metrics.jsonl"), "utf8")).toBe(reference);
    expect(rowsOf(join(killed, "smoke"))).toEqual(rowsOf(join(whole, "smoke")));
    for (const f of readdirSync(join(whole, "smoke", "samples"))) {
      expect(readFileSync(join(killed, "smoke", "samples", f), "utf8"), f).toBe(readFileSync(join(whole, "smoke", "samples", f), "utf8"));
    }
  });

  it("a truncated checkpoint file is detected and named, the previous checkpoint used, and a torn metrics line dropped", () => {
    const copy = join(root, "corrupt");
    cpSync(whole, copy, { recursive: true });
    const ckpts = join(copy, "smoke", "checkpoints");
    rmSync(join(ckpts, "final"), { recursive: true }); // as if killed before the final save
    const bin = join(ckpts, `step-${STEPS}`, "tensors.bin");
    truncateSync(bin, Math.floor(statSync(bin).size / 2));
    expect(checkpointProblem(join(ckpts, `step-${STEPS}`))).toBe("tensors.bin does not match its checksum in manifest.json (corrupt or truncated)");
    const trainerState = join(ckpts, `step-${STEPS - 1}`, "trainer-state.json");
    expect(checkpointProblem(join(ckpts, `step-${STEPS - 1}`))).toBeUndefined();
    const warnings: string[] = [];
    const point = lastGoodCheckpoint(ckpts, (m) => warnings.push(m));
    expect(point?.dir).toBe(join(ckpts, `step-${STEPS - 1}`));
    expect(point?.state.step).toBe(STEPS - 1);
    expect(warnings).toEqual([`checkpoint ${join(ckpts, `step-${STEPS}`)}: tensors.bin does not match its checksum in manifest.json (corrupt or truncated); using step-${STEPS - 1}`]);
    // A truncated trainer state is caught by its checksum in policy-manifest.json too.
    const saved = readFileSync(trainerState);
    truncateSync(trainerState, 10);
    expect(checkpointProblem(join(ckpts, `step-${STEPS - 1}`))).toBe("trainer-state.json does not match its checksum in policy-manifest.json (corrupt or truncated)");
    appendFileSync(trainerState, saved.subarray(10));
    expect(checkpointProblem(join(ckpts, `step-${STEPS - 1}`))).toBeUndefined();

    appendFileSync(join(copy, "smoke", "metrics.jsonl"), '{"stage":"rl","step":6,"em":0.'); // killed mid-append
    const r = arl(...ARGS, "--run.dir", copy, "--resume");
    expect(r.code, r.err).toBe(0);
    expect(r.err + r.out).toContain(`checkpoint ${join(ckpts, `step-${STEPS}`)}: tensors.bin does not match its checksum in manifest.json (corrupt or truncated); using step-${STEPS - 1}`);
    expect(readFileSync(join(copy, "smoke", "metrics.jsonl"), "utf8")).toBe(readFileSync(join(whole, "smoke", "metrics.jsonl"), "utf8"));
    expect(checkpointProblem(join(ckpts, `step-${STEPS}`))).toBeUndefined(); // rewritten whole
  });

  it("--resume refuses a different config, naming the fields", () => {
    const r = arl(...ARGS, "--run.dir", whole, "--resume", "--rl.learningRate", "0.01", "--run.seed", "3");
    expect(r.code).toBe(2);
    expect(r.err).toContain("rl.learningRate: the run folder has 0.001, this command has 0.01");
    expect(r.err).toContain("run.seed: the run folder has 0, this command has 3");
  });
});

describe("checkSameConfig and the per-trainer length bucket", () => {
  it("compares the bucket each trainer applies: a folder naming 64 resumes under jax-js, not under onnx (16 now)", async () => {
    const { checkSameConfig } = await import("../src/train/resume.ts");
    const { resolveConfig } = await import("../src/train/config.ts");
    const { writeFileSync } = await import("node:fs");
    const dir = mkdtempSync(join(tmpdir(), "arl-bucket-"));
    try {
      const file = join(dir, "config.json");
      // A run folder written before the per-trainer defaults: the bucket spelled out.
      writeFileSync(file, JSON.stringify({ policy: { trainer: "jax", lengthBucket: 64 } }));
      expect(() => checkSameConfig(file, resolveConfig({ policy: { trainer: "jax" } }))).not.toThrow();
      writeFileSync(file, JSON.stringify({ policy: { lengthBucket: 64 } }));
      expect(() => checkSameConfig(file, resolveConfig({}))).toThrow("policy.lengthBucket: the run folder has 64, this command has 16");
      expect(() => checkSameConfig(file, resolveConfig({ policy: { lengthBucket: 64 } }))).not.toThrow();
      // jaxLengthBucket feeds only the jax-js trainer's default: no refusal for it under onnx.
      writeFileSync(file, JSON.stringify({}));
      expect(() => checkSameConfig(file, resolveConfig({ policy: { jaxLengthBucket: 128 } }))).not.toThrow();
      expect(() => checkSameConfig(file, resolveConfig({ policy: { trainer: "jax", jaxLengthBucket: 128 } }))).toThrow("policy.lengthBucket: the run folder has 16, this command has 128");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
