/**
 * Envs from the command line: `arl envs`, `arl train --env NAME` (the travel recipe's smoke run, twice with one seed:
 * byte-identical metrics.jsonl; the summary breaks success down by decisions (i)–(v)), and config errors that name
 * the field (`--env`, `env.protocol`, `env.options.<field>`).
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";

const repo = resolve(import.meta.dirname, "..");
const arl = (...args: string[]) => {
  const r = spawnSync(process.execPath, [join(repo, "bin", "arl.mjs"), ...args], { cwd: repo, encoding: "utf8", timeout: 300_000 });
  return { code: r.status, out: r.stdout, err: r.stderr };
};

describe("arl envs / --env", () => {
  it("lists every env with its tools, protocols and task counts", () => {
    const r = arl("envs");
    expect(r.code, r.err).toBe(0);
    expect(r.out).toMatch(/^search\n/m);
    expect(r.out).toMatch(/^travel\n/m);
    expect(r.out).toContain("tools: get_airports, search_flights, search_hotels, book");
    expect(r.out).toContain("protocols: hermes, react (default hermes)");
    expect(r.out).toMatch(/tasks: 304 train \/ 60 test/);
  });

  it("an env file importing \"agentic-rl\" loads in the repo without a build (the import resolves to src/, not dist/)", () => {
    // A fresh clone has no dist/; the package's exports point there (bin/arl.mjs maps the name to the source).
    const r = arl("train", "--env", "examples/own-env/weather.ts", "--smoke", "--print-config");
    expect(r.code, r.err).toBe(0);
    expect(JSON.parse(r.out).env.name).toBe("weather");
  });

  it("an env file outside an ES-module package gets an error saying what to change, not a loader trace", () => {
    const dir = mkdtempSync(join(tmpdir(), "arl-cjs-env-"));
    writeFileSync(join(dir, "env.ts"), readFileSync(join(repo, "examples", "own-env", "weather.ts"), "utf8"));
    const r = arl("train", "--env", join(dir, "env.ts"), "--smoke", "--print-config");
    expect(r.code).toBe(2);
    expect(r.err).toContain('was loaded as CommonJS and cannot import the library (an ES module); add "type": "module"');
  });

  it("config errors name the field and the allowed values (exit 2)", () => {
    const unknown = arl("train", "--env", "nope", "--dry-run");
    expect(unknown.code).toBe(2);
    expect(unknown.err).toContain('--env: unknown env "nope"; allowed: search, travel');
    const protocol = arl("train", "--env", "travel", "--env.protocol", "search-r1", "--dry-run");
    expect(protocol.code).toBe(2);
    expect(protocol.err).toContain("env.protocol: the travel env speaks hermes, react; got search-r1");
    const option = arl("train", "--env", "travel", "--env.options.failRate", "0.2", "--dry-run");
    expect(option.code).toBe(2);
    expect(option.err).toContain("env.options");
    expect(option.err).toContain("failRate");
  });

  it("a travel dry run builds the env, the vocabulary and the memory estimate and writes nothing", () => {
    const dir = mkdtempSync(join(tmpdir(), "arl-envs-"));
    const r = arl("train", "--env", "travel", "--dry-run", "--run.dir", dir);
    expect(r.code, r.err).toBe(0);
    expect(r.out).toContain("env travel (hermes)");
    expect(r.out).toMatch(/memory: training needs ≈ [\d.]+ [MG]iB of native memory \(onnx trainer: a \d+-token micro-batch at length \d+/);
    // travel starts from the base, whose RoPE and token shift run on the onnx engines only: the jax trainer is a from-scratch run
    const jax = arl("train", "--env", "travel", "--dry-run", "--run.dir", dir, "--policy.trainer", "jax", "--policy.init", "scratch");
    expect(jax.out).toMatch(/memory: a long run can grow the embedded backend's wasm heap to ≈ [\d.]+ [MG]iB/);
    expect(r.out).toContain("(new)");
  });

  it("the travel smoke run is deterministic (byte-identical metrics.jsonl) and reports decisions (i)–(v)", () => {
    const dir = mkdtempSync(join(tmpdir(), "arl-envs-"));
    // One demonstration per training task (the recipe's default is 3, in each of 4 worlds): a quarter less work per run.
    const flags = ["train", "--env", "travel", "--smoke", "--run.dir", dir, "--sft.steps", "6", "--sft.demosPerTask", "1", "--eval.maxTasks", "3"];
    const a = arl(...flags, "--run.name", "a");
    expect(a.code, a.err).toBe(0);
    const b = arl(...flags, "--run.name", "b");
    expect(b.code, b.err).toBe(0);
    const metrics = (name: string) => readFileSync(join(dir, name, "metrics.jsonl"), "utf8");
    expect(metrics("a").length).toBeGreaterThan(0);
    expect(metrics("b")).toBe(metrics("a"));
    expect(a.out).toContain("env travel (hermes)");
    for (const label of ["(i)", "(ii)", "(iii)", "(iv)", "(v)"]) expect(a.out).toContain(label);
    const summary = JSON.parse(readFileSync(join(dir, "a", "summary.json"), "utf8")) as { rows: Array<{ policy: string; success: number }>; breakdownLabels: Record<string, string> };
    expect(summary.rows.map((r) => r.policy)).toEqual(["Prompt-driven (careful, scripted)", "Warm start (SFT)", "RL (GRPO)"]);
    expect(Object.keys(summary.breakdownLabels)).toEqual(expect.arrayContaining(["decision/i_context", "decision/v_stop"]));
  }, 300_000);
});
