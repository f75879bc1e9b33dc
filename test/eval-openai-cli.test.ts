import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { EmbeddedBackend } from "../src/policy/embedded/backend.ts";
import type { RunningServer } from "../src/http/server.ts";
import { serveOpenAI } from "../src/serve/openai.ts";
import { savePolicy } from "../src/train/checkpoint.ts";
import { SMOKE_OVERRIDES } from "../src/envs/index.ts";
import { ScriptedSampler, tinySetup } from "./openai-helpers.ts";

const repo = resolve(import.meta.dirname, "..");
/** Runs `arl` without blocking the event loop (the server under test lives in this process). */
const arl = (...args: string[]) =>
  new Promise<{ code: number | null; out: string; err: string }>((done) => {
    const p = spawn(process.execPath, [join(repo, "bin", "arl.mjs"), ...args], { cwd: repo, env: { ...process.env, OPENAI_BASE_URL: "", OPENAI_API_KEY: "" } });
    let out = "";
    let err = "";
    p.stdout.on("data", (d: Buffer) => (out += d.toString()));
    p.stderr.on("data", (d: Buffer) => (err += d.toString()));
    p.on("close", (code) => done({ code, out, err }));
  });

const { config, s, tasks } = tinySetup();
/** The tiny world as dotted flags, so `arl eval` without a checkpoint builds the same world and tasks. */
const worldFlags = Object.entries({ ...SMOKE_OVERRIDES, "policy.contextLength": "512" }).flatMap(([k, v]) => [`--${k}`, v]);
let server: RunningServer;
let ckpt: string;

beforeAll(async () => {
  server = await serveOpenAI({ name: "scripted", sampler: new ScriptedSampler(s.tokenizer, tasks), tokenizer: s.tokenizer, contextLength: 512 });
  const dir = mkdtempSync(join(tmpdir(), "arl-eval-openai-"));
  ckpt = join(dir, "tiny", "checkpoints", "final");
  mkdirSync(ckpt, { recursive: true });
  const be = await EmbeddedBackend.create(s.gpt, 1);
  await savePolicy(ckpt, be, s.tokenizer, s.gpt);
  be.dispose();
  writeFileSync(join(dir, "tiny", "config.yaml"), stringify(config));
});
afterAll(async () => server?.close());

describe("arl eval --policy openai:MODEL", () => {
  it("puts the prompt-driven agents in the summary table (no checkpoint needed)", async () => {
    const r = await arl("eval", "--policy", "openai:scripted", "--base-url", `${server.url}/v1`, "--agent", "all", "--max-tokens", "32", ...worldFlags);
    expect(r.code, r.err).toBe(0);
    expect(r.out).toContain(`${tasks.length} questions from the built-in world (test):`);
    // The scripted policy searches once and answers right: the prompt and function-calling agents get EM 100 %.
    expect(r.out).toMatch(/│ openai:scripted \(prompt\) +│ 100\.0 │ 100\.0 +│ 100\.0 +│ 1\.00 +│/);
    expect(r.out).toMatch(/│ openai:scripted \(function-calling\) +│ 100\.0 │/);
    // It never writes `Action: …[…]`: the ReAct agent answers nothing.
    expect(r.out).toMatch(/│ openai:scripted \(react\) +│ 0\.0 +│/);
    expect(r.err).toContain("eval openai:scripted (react)");
  });

  it("with --checkpoint, the agents' rows join the checkpoint's agent, Direct and RAG rows", async () => {
    const r = await arl("eval", "--checkpoint", ckpt, "--modes", "agent,direct", "--policy", "openai:scripted", "--base-url", `${server.url}/v1`, "--agent", "prompt", "--limit", "3");
    expect(r.code, r.err).toBe(0);
    expect(r.out).toContain("3 questions from the built-in world (test):");
    const rows = r.out.split("\n").filter((l) => l.startsWith("│ ") && !l.startsWith("│ policy"));
    expect(rows.map((l) => l.split("│")[1].trim())).toEqual(["agent (checkpoint)", "Direct", "openai:scripted (prompt)"]);
  });

  it("flag errors name the flag and the allowed values (exit code 2)", async () => {
    const cases: Array<[string[], string]> = [
      [[], "--checkpoint or --policy: at least one is required"],
      [["--policy", "openai:m"], "--base-url: required with --policy openai:MODEL"],
      [["--policy", "openai:m", "--policy", "vllm:m", "--base-url", "http://x/v1"], '--policy: expected openai:MODEL (a model on an OpenAI-compatible server, with --base-url), got "vllm:m"'],
      [["--policy", "openai:m", "--base-url", "http://x/v1", "--agent", "cot"], '--agent: expected one of prompt, function-calling, react or all (comma-separated), got "cot"'],
    ];
    const results = await Promise.all(cases.map(([args]) => arl("eval", ...args)));
    results.forEach((r, i) => {
      expect(r.code, r.err).toBe(2);
      expect(r.err).toContain(cases[i][1]);
    });
  });
});
