/**
 * `arl train --dry-run` and input validation: everything is checked without training or writing, and every bad
 * input gets an error naming the field, file or checkpoint and what was expected (exit code 2 at the CLI).
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { createServer, type AddressInfo } from "node:net";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { EmbeddedBackend } from "../src/policy/embedded/backend.ts";
import { WordTokenizer } from "../src/policy/tokenizer.ts";
import { savePolicy } from "../src/train/checkpoint.ts";
import { ConfigError, resolveConfig } from "../src/train/config.ts";
import { SMOKE_OVERRIDES, searchRecipe } from "../src/envs/index.ts";
import { applyOverrides } from "../src/train/configFile.ts";
import { checkDataFile, dryRun } from "../src/train/dryRun.ts";
import { setupExperiment } from "../src/train/setup.ts";
import { RunDir } from "../src/train/runDir.ts";

const repo = resolve(import.meta.dirname, "..");
const arl = (...args: string[]) => {
  const r = spawnSync(process.execPath, [join(repo, "bin", "arl.mjs"), ...args], { cwd: repo, encoding: "utf8", timeout: 120_000 });
  return { code: r.status, out: r.stdout, err: r.stderr };
};
const smoke = (root: string, extra: Record<string, string> = {}) =>
  resolveConfig(applyOverrides({}, { ...SMOKE_OVERRIDES, "run.dir": root, "run.name": "smoke", ...extra }));

describe("arl train --dry-run", () => {
  it("validates a good config, prints a summary, writes nothing, exits 0", () => {
    const dir = mkdtempSync(join(tmpdir(), "arl-dry-"));
    const r = arl("train", "--smoke", "--dry-run", "--run.dir", dir);
    expect(r.code, r.err).toBe(0);
    expect(r.out).toContain("dry run: OK — nothing trained, nothing written");
    expect(r.out).toMatch(/env search \(search-r1\): 12 countries, \d+ passages; \d+ train \/ \d+ test tasks/);
    expect(r.out).toMatch(/warm start: \d+ demonstrations, 4 SFT steps/);
    expect(readdirSync(dir)).toEqual([]);
  });

  it("names the field of an unknown preset and a missing tokenizer folder (exit 2)", () => {
    const preset = arl("train", "--smoke", "--dry-run", "--reward.preset", "banking");
    expect(preset.code).toBe(2);
    expect(preset.err).toContain("reward.preset: unknown preset; allowed: default, tool-env, outcome-only");
    const tok = arl("train", "--smoke", "--dry-run", "--policy.backend", "tinker", "--policy.tinker.tokenizer", "/nonexistent/tok");
    expect(tok.code).toBe(2);
    expect(tok.err).toContain("policy.tinker.tokenizer: no such folder /nonexistent/tok (expected a folder with tokenizer.json and tokenizer_config.json)");
  });

  it("names an unreachable Tinker server (exit 2)", async () => {
    const server = createServer();
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const port = (server.address() as AddressInfo).port;
    await new Promise((r) => server.close(r)); // a port nobody listens on now
    const base = `http://127.0.0.1:${port}`;
    const url = arl("train", "--smoke", "--dry-run", "--policy.backend", "tinker", "--policy.tinker.baseUrl", base);
    expect(url.code).toBe(2);
    expect(url.err).toContain(`policy.tinker.baseUrl: ${base} is not reachable: GET ${base}/api/v1/healthz failed (ECONNREFUSED) (expected a Tinker API server, e.g. \`arl serve trainer\`)`);
  });
});

describe("dry-run checks as functions", () => {
  it("an empty or missing data file is named with what was expected", async () => {
    const dir = mkdtempSync(join(tmpdir(), "arl-dry-data-"));
    const empty = join(dir, "empty.jsonl");
    writeFileSync(empty, "");
    await expect(checkDataFile(empty, "data")).rejects.toThrow(ConfigError);
    await expect(checkDataFile(empty, "data")).rejects.toThrow(`--data: ${empty} is empty (expected a QA JSONL file (FlashRAG, NQ-open or Bamboogle lines), at least one line)`);
    await expect(checkDataFile(empty, "corpus")).rejects.toThrow(`--corpus: ${empty} is empty (expected a wiki-18 JSONL file ({id, contents} lines), at least one line)`);
    await expect(checkDataFile(join(dir, "nope.jsonl"), "corpus")).rejects.toThrow(`--corpus: no such file ${join(dir, "nope.jsonl")}`);
    await expect(dryRun(smoke(dir), searchRecipe, { data: empty })).rejects.toThrow("--data:");
    expect(await checkDataFile(join(repo, "data", "bamboogle.jsonl"), "data")).toBeGreaterThan(0);
  });

  it("an existing run without --overwrite/--resume, a changed config and a checkpoint of another tokenizer are named", async () => {
    const root = mkdtempSync(join(tmpdir(), "arl-dry-resume-"));
    const config = smoke(root);
    new RunDir(root, "smoke").writeConfig(config);
    writeFileSync(join(root, "smoke", "summary.json"), "{}\n"); // a finished run (one that stopped before its first checkpoint would be reused)
    await expect(dryRun(config, searchRecipe)).rejects.toThrow(`run.name: run folder ${join(root, "smoke")} already holds a run; choose another name`);
    expect((await dryRun(config, searchRecipe, { resume: true })).at(-1)).toBe(`resume: would continue ${join(root, "smoke")} from scratch (no whole warm-start checkpoint)`);
    await expect(dryRun(smoke(root, { "rl.groupSize": "6" }), searchRecipe, { resume: true })).rejects.toThrow("rl.groupSize: the run folder has 4, this command has 6");

    // A warm-start checkpoint whose tokenizer has other words than this config's world.
    const s = setupExperiment(config, searchRecipe);
    const other = WordTokenizer.fromTexts(["only a few other words"]);
    const gpt = { ...s.gpt, vocabSize: other.vocabSize };
    const sftDir = join(root, "smoke", "checkpoints", "sft");
    mkdirSync(sftDir, { recursive: true });
    await savePolicy(sftDir, await EmbeddedBackend.create(gpt, 0), other, gpt);
    await expect(dryRun(config, searchRecipe, { resume: true })).rejects.toThrow(
      `checkpoint ${sftDir}: gpt.json does not match this config (vocabSize ${other.vocabSize} vs ${s.tokenizer.vocabSize}; checkpoint vs config) — the tokenizer differs`,
    );
    expect(existsSync(join(root, "smoke", "metrics.jsonl"))).toBe(false); // still nothing written
  });
});
