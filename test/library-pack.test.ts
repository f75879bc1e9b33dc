/**
 * agentic-rl as an installed library: `npm pack` (which builds dist/ through `prepack`) makes a tarball; a fresh ESM
 * project outside the repo installs it, type-checks a script that imports from "agentic-rl" (tsc, NodeNext, strict,
 * library .d.ts files checked too), runs the compiled script under plain `node` (no tsx), and runs `npx arl --help`
 * (the bin, which in an installed package loads dist/). Takes ~1 min cold (build + install), less when the tarball is
 * cached (see `packOnce`).
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Rng } from "../src/core/rng.ts";
import { freshProject, packOnce, type FreshProject } from "./pack-helpers.ts";

/** The consumer's script: a zod tool called through `callTool`, a scripted rollout, its reward, and the config. */
const MAIN_TS = `import { z } from "zod";
import {
  BM25Index,
  ConfigError,
  DEFAULT_REWARD_CONFIG,
  Rng,
  ScriptedAgent,
  WordTokenizer,
  callTool,
  computeReward,
  grpoAdvantages,
  resolveConfig,
  rolloutGroups,
  tool,
  toolJsonSchema,
  type Env,
  type StepResult,
  type Task,
  type Trajectory,
} from "agentic-rl";

const add = tool({
  name: "add",
  description: "Adds two integers.",
  inputSchema: z.object({ a: z.number().int(), b: z.number().int() }),
  execute: ({ a, b }) => a + b,
});
const ok = await callTool(add, { a: 2, b: 3 });
if (!ok.ok) throw new Error(ok.error);
const sum: number = ok.value;
// @ts-expect-error the value is typed from execute (a number), so the library's types are not \`any\`
ok.value.toUpperCase;
console.log(\`add=\${sum}\`);
const bad = await callTool(add, { a: "two", b: 3 });
console.log(\`bad=\${bad.ok ? "ok" : bad.kind}\`);
console.log(\`schema=\${Object.keys(toolJsonSchema(add).parameters.properties as object).join(",")}\`);

console.log(\`rng=\${new Rng(7).int(1000)}\`);

class AnswerEnv implements Env {
  async reset(task: Task): Promise<string> {
    return task.question;
  }
  async step(text: string): Promise<StepResult> {
    const m = /<answer>([\\s\\S]*?)<\\/answer>/.exec(text);
    const action = m ? { type: "answer" as const, answer: m[1].trim() } : { type: "invalid" as const, reason: "no answer" };
    return { observation: "", done: true, info: { action } };
  }
}
const task: Task = { id: "sum:2+3", question: "What is 2 + 3 ?", answers: ["5"], kind: "arith" };
const tokenizer = WordTokenizer.fromTexts([task.question, "5 6"]);
const agent = new ScriptedAgent(tokenizer, (ctx) => (ctx.seed % 2 === 0 ? "<answer> 5 </answer>" : "<answer> 6 </answer>"));
const groups = await rolloutGroups([task], { makeEnv: () => new AnswerEnv(), agent, tokenizer, limits: { contextLength: 64, maxObservationTokens: 16 } }, { groupSize: 4, seed: 1 });
const trajs: Trajectory[] = groups[0].trajectories;
const rewards: number[] = [];
for (const traj of trajs) rewards.push((await computeReward(traj, { weights: { em: 1 } })).total);
console.log(\`answers=\${trajs.map((t) => t.answer).join(",")}\`);
console.log(\`rewards=\${rewards.join(",")}\`);
console.log(\`advantages=\${grpoAdvantages(rewards, { normalizeStd: false }).join(",")}\`);
console.log(\`default_terms=\${Object.keys(DEFAULT_REWARD_CONFIG.weights).join(",")}\`);

const hits = new BM25Index([
  { id: "p1", title: "Paris", text: "Paris is the capital of France." },
  { id: "p2", title: "Rome", text: "Rome is the capital of Italy." },
]).search("capital of italy", 1);
console.log(\`bm25=\${hits[0].id}\`);

console.log(\`groupSize=\${resolveConfig({ rl: { groupSize: 3 } }).rl.groupSize}\`);
try {
  resolveConfig({ rl: { groupSize: -3 } });
  console.log("config=accepted");
} catch (e) {
  console.log(\`config=\${e instanceof ConfigError ? "ConfigError" : "other"}\`);
}
`;

const TSCONFIG = {
  compilerOptions: {
    target: "ES2022",
    module: "NodeNext",
    moduleResolution: "NodeNext",
    strict: true,
    // As \`tsc --init\` writes it; the library's own .d.ts files are checked separately (see the test).
    skipLibCheck: true,
    types: ["node"],
    outDir: "out",
    noEmitOnError: true,
  },
  include: ["main.ts"],
};

describe("agentic-rl from its npm tarball", () => {
  let project: FreshProject;
  let tarball: string;
  let installed: string;

  beforeAll(async () => {
    const t0 = performance.now();
    tarball = await packOnce();
    const t1 = performance.now();
    project = await freshProject([tarball, "typescript@5.9.3", "@types/node@20.19.43", "zod@4.6.7"]);
    installed = join(project.dir, "node_modules", "agentic-rl");
    console.log(`library-pack: pack ${((t1 - t0) / 1000).toFixed(1)} s, install ${((performance.now() - t1) / 1000).toFixed(1)} s`);
  }, 600_000);

  afterAll(() => project?.remove());

  it("installs only the built package: dist (js + d.ts), bin, README — no sources or tests", () => {
    expect(existsSync(join(installed, "dist", "index.js"))).toBe(true);
    expect(existsSync(join(installed, "dist", "index.d.ts"))).toBe(true);
    expect(existsSync(join(installed, "dist", "cli", "main.js"))).toBe(true);
    expect(existsSync(join(installed, "bin", "arl.mjs"))).toBe(true);
    expect(existsSync(join(installed, "src"))).toBe(false);
    expect(existsSync(join(installed, "test"))).toBe(false);
    // Relative imports were rewritten to .js (plain node cannot load .ts). The .d.ts files keep `./x.ts` specifiers
    // (tsc does not rewrite declarations; TypeScript ≥ 5.0 resolves them to the .d.ts next to them).
    const js = readFileSync(join(installed, "dist", "index.js"), "utf8");
    expect(js).toMatch(/^export \{ Rng \} from "\.\/core\/rng\.js";$/m);
    expect(js).not.toMatch(/^(?:export|import)\b[^\n]*from "\.[^"]*\.ts";$/m);
  });

  it("type-checks a NodeNext strict script against the package and runs it with plain node", async () => {
    project.write("tsconfig.json", JSON.stringify(TSCONFIG, null, 2) + "\n");
    project.write("main.ts", MAIN_TS);
    await project.exec("npx", ["--no-install", "tsc", "-p", "."], { timeoutMs: 120_000 });
    // With skipLibCheck off (a consumer's tsc as a new user wrote it, issue 29), every .d.ts the package brings in
    // must be clean — @jax-js/jax's included: it names Float16Array and WebGPU types outside the node + ES2022 libs,
    // which our jax.d.ts provides (src/policy/embedded/jax.ts).
    const strict = await project.exec("npx", ["--no-install", "tsc", "-p", ".", "--noEmit", "--skipLibCheck", "false"], { timeoutMs: 120_000 }).then(
      () => "",
      (e: Error) => e.message,
    );
    const errors = strict.split("\n").filter((l) => /error TS\d+/.test(l));
    expect(errors).toEqual([]);
    const { stdout } = await project.exec("node", ["out/main.js"], { timeoutMs: 60_000 });
    const lines = Object.fromEntries(
      stdout
        .trim()
        .split("\n")
        .map((l) => l.split(/=(.*)/s).slice(0, 2) as [string, string]),
    );
    expect(lines.add).toBe("5");
    expect(lines.bad).toBe("invalid_input");
    expect(lines.schema).toBe("a,b");
    expect(lines.rng).toBe(String(new Rng(7).int(1000)));
    const answers = lines.answers.split(",");
    const rewards = lines.rewards.split(",").map(Number);
    expect(answers).toHaveLength(4);
    expect(rewards).toEqual(answers.map((a) => (a === "5" ? 1 : 0)));
    const mean = rewards.reduce((a, b) => a + b, 0) / rewards.length;
    lines.advantages.split(",").forEach((a, i) => expect(Number(a)).toBeCloseTo(rewards[i] - mean, 12));
    expect(lines.default_terms).toBe("em,format,search_cost,invalid");
    expect(lines.bm25).toBe("p2");
    expect(lines.groupSize).toBe("3");
    expect(lines.config).toBe("ConfigError");
  }, 240_000);

  it("runs the arl bin from the installed package (dist, no tsx loader)", async () => {
    const { stdout } = await project.exec("npx", ["--no-install", "arl", "--help"], { timeoutMs: 60_000 });
    expect(stdout).toContain("Usage: arl");
    expect(stdout).toMatch(/\btrain\b/);
  }, 120_000);
});
