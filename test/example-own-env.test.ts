/**
 * The README's own-env example (`examples/own-env/weather.ts`, ≤ 80 lines) as a new user runs it: a fresh folder
 * outside the repo installs the packed tarball (plus zod for the user's own schemas), the env file type-checks
 * against the installed package's types, and one command — `npx arl train --env ./weather.ts --smoke` — trains it
 * end to end (warm start → RL → summary) with the bin of the installed package (dist/, plain node; the .ts env file
 * is loaded through tsx, a dependency of agentic-rl).
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freshProject, packOnce, REPO_ROOT, type FreshProject } from "./pack-helpers.ts";

const EXAMPLE = join(REPO_ROOT, "examples", "own-env", "weather.ts");
const ORDERS = join(REPO_ROOT, "examples", "own-env", "orders.ts");

describe("examples/own-env from the packed package", () => {
  let project: FreshProject;
  beforeAll(async () => {
    const tarball = await packOnce();
    project = await freshProject([tarball, "zod@4.6.7", "typescript@5.9.3", "@types/node@20.19.43"]);
    project.write("weather.ts", readFileSync(EXAMPLE, "utf8"));
    project.write("orders.ts", readFileSync(ORDERS, "utf8"));
    project.write(
      "tsconfig.json",
      JSON.stringify({ compilerOptions: { target: "ES2022", module: "NodeNext", moduleResolution: "NodeNext", strict: true, skipLibCheck: true, noEmit: true, types: ["node"] }, include: ["weather.ts", "orders.ts"] }),
    );
  }, 600_000);
  afterAll(() => project?.remove());

  it("is at most 80 lines", () => {
    expect(readFileSync(EXAMPLE, "utf8").trimEnd().split("\n").length).toBeLessThanOrEqual(80);
  });

  it("ships the base model, and the examples list no vocabulary and normalise no tool argument (they start from the base)", () => {
    expect(existsSync(join(project.dir, "node_modules", "agentic-rl", "base", "base.json"))).toBe(true);
    for (const f of [EXAMPLE, ORDERS]) {
      const text = readFileSync(f, "utf8");
      expect(text).toContain(`"policy.init": "base"`);
      expect(text).not.toMatch(/texts:|toLowerCase|\.trim\(\)\.toLowerCase/);
    }
  });

  it("type-checks against the installed package", async () => {
    // exec rejects with the compiler's output on a non-zero exit.
    const r = await project.exec("npx", ["tsc", "--noEmit", "-p", "."], { timeoutMs: 120_000 });
    expect(r.stdout.trim()).toBe("");
  }, 180_000);

  it("trains with one command and writes the run folder", async () => {
    const r = await project.exec("npx", ["arl", "train", "--env", "./weather.ts", "--smoke", "--run.dir", "runs"], { timeoutMs: 300_000 });
    expect(r.stdout).toContain("env weather (hermes)");
    expect(r.stdout).toContain("looked both up");
    const summary = JSON.parse(readFileSync(join(project.dir, "runs", "smoke-weather", "summary.json"), "utf8")) as { env: string; rows: Array<{ policy: string; n: number; success: number }> };
    expect(summary.env).toBe("weather");
    expect(summary.rows.map((row) => row.policy)).toEqual(["Prompt-driven (careful, scripted)", "Warm start (SFT)", "RL (GRPO)"]);
    // The scripted careful persona looks both cities up, so it is always right: the env, tool and grader agree.
    expect(summary.rows[0].success).toBe(1);
    expect(existsSync(join(project.dir, "runs", "smoke-weather", "checkpoints", "final"))).toBe(true);
    expect(readFileSync(join(project.dir, "runs", "smoke-weather", "metrics.jsonl"), "utf8").split("\n").filter(Boolean).length).toBeGreaterThan(0);
  }, 360_000);

  it("rolls the trained checkpoint out on the env file (its recipe registered before the checkpoint's config names it)", async () => {
    // Issue 29's new-user pass: `arl rollout --env ./weather.ts --checkpoint …` failed with `unknown env "weather"`.
    const r = await project.exec("npx", ["arl", "rollout", "--env", "./weather.ts", "--checkpoint", "runs/smoke-weather/checkpoints/final", "-n", "1"], { timeoutMs: 120_000 });
    expect(r.stdout).toContain("Which is warmer today");
    expect(r.stdout).toContain("grade:");
    expect(r.stdout).not.toContain("searches 0");
  }, 180_000);

  it("the reading example (orders.ts) trains with one command: the careful persona orders every held-out product", async () => {
    const r = await project.exec("npx", ["arl", "train", "--env", "./orders.ts", "--smoke", "--run.dir", "runs"], { timeoutMs: 300_000 });
    expect(r.stdout).toContain("env orders (hermes)");
    expect(r.stdout).toContain("checked stock");
    const summary = JSON.parse(readFileSync(join(project.dir, "runs", "smoke-orders", "summary.json"), "utf8")) as { rows: Array<{ policy: string; success: number }> };
    expect(summary.rows[0]).toMatchObject({ policy: "Prompt-driven (careful, scripted)", success: 1 });
  }, 360_000);
});
