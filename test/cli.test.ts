import { spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";

const repo = resolve(import.meta.dirname, "..");
const shared = resolve(repo, "data");
const arl = (...args: string[]) => {
  const r = spawnSync(process.execPath, [join(repo, "bin", "arl.mjs"), ...args], { cwd: repo, encoding: "utf8", timeout: 240_000 });
  return { code: r.status, out: r.stdout, err: r.stderr };
};

describe("arl CLI", () => {
  it("every command has --help", () => {
    for (const cmd of ["train", "lab", "eval", "rollout", "search"]) {
      const r = arl(cmd, "--help");
      expect(r.code, r.err).toBe(0);
      expect(r.out).toContain(`Usage: arl ${cmd}`);
    }
  });

  it("config errors name the field and the allowed values, exit code 2", () => {
    const r = arl("train", "--rl.lossFn", "dpo", "--print-config");
    expect(r.code).toBe(2);
    expect(r.err).toContain('rl.lossFn: expected one of "ppo", "importance_sampling", "cispo", "dro", "gspo", got "dpo"');
    const trailing = arl("train", "--rl.groupSize");
    expect(trailing.code).toBe(2);
    expect(trailing.err).toContain("--rl.groupSize: missing value");
    const term = arl("train", "--reward.weights.bogus", "1", "--print-config");
    expect(term.code).toBe(2);
    expect(term.err).toContain("reward.weights.bogus: unknown reward term; allowed: em, f1, cover_em, judge, format");
    const preset = arl("train", "--reward.preset", "medicine", "--print-config");
    expect(preset.code).toBe(2);
    expect(preset.err).toContain("reward.preset: unknown preset; allowed: default, tool-env, outcome-only");
    const judgeDir = mkdtempSync(join(tmpdir(), "arl-judge-"));
    const judge = arl("train", "--smoke", "--run.dir", judgeDir, "--reward.weights.judge", "1");
    expect(judge.code).toBe(2);
    expect(judge.err).toContain("reward.options.judge: required when the `judge` term is weighted");
    expect(existsSync(join(judgeDir, "smoke"))).toBe(false); // nothing left behind
    const snake = arl("train", "--reward.weights.search_cost", "0.3", "--print-config");
    expect(snake.code, snake.err).toBe(0);
    expect(JSON.parse(snake.out).reward.weights).toEqual({ search_cost: 0.3 });
    const design = arl("lab", "--designs", "composite,bogus", "--quick");
    expect(design.code).toBe(2);
    expect(design.err).toContain('lab.designs: unknown design "bogus" for the search env; allowed: outcome-only, per-call-bonus');
    const ok = arl("train", "--rl.groupSize=4", "--print-config");
    expect(ok.code, ok.err).toBe(0);
    expect(JSON.parse(ok.out).rl.groupSize).toBe(4);
  });

  it("lab --list names the designs, presets and terms", () => {
    const r = arl("lab", "--list");
    expect(r.code, r.err).toBe(0);
    expect(r.out).toMatch(/search env designs \(arl lab --env search\):\n  outcome-only +EM only/);
    expect(r.out).toMatch(/presets:[\s\S]*  composite +em 1, format 0.1, invalid 0.1, guess 0.3/);
    expect(r.out).toMatch(/terms:[\s\S]*  needless_search +\[necessity\]/);
  });

  it("lab --quick trains the chosen designs and prints the table, the claims and the report's path", () => {
    const dir = mkdtempSync(join(tmpdir(), "arl-lab-cli-"));
    const r = arl("lab", "--quick", "--designs", "per-call-bonus,composite", "--run.dir", dir);
    expect(r.code, r.err).toBe(0);
    expect(r.out).toContain("Reward lab lab-quick on env search: 2 designs × 4 RL steps, 8 held-out tasks");
    expect(r.out).toMatch(/│ per-call-bonus +│/);
    expect(r.out).toMatch(/│ warm start \(SFT\) +│/);
    expect(r.out).toContain("(c) The composite design's EM and needless-search rate vs the others");
    expect(r.out).toContain(`report: ${join(dir, "lab-quick", "report.html")}`);
    expect(r.err).toContain("RL per-call-bonus"); // one progress bar per design
    expect(existsSync(join(dir, "lab-quick", "report.html"))).toBe(true);
  });

  it("search ranks the real wiki-18 sample", () => {
    const r = arl("search", "--corpus", join(shared, "wiki18-sample-1000.jsonl"), "-k", "2", "radio");
    expect(r.code, r.err).toBe(0);
    expect(r.out).toMatch(/^1\. \[\d+\.\d+\] /m);
    expect(r.out).toMatch(/^2\. /m);
    expect(r.out.toLowerCase()).toContain("radio");
  });

  it("rollout prints scripted episodes readably", () => {
    const r = arl("rollout", "--persona", "careful", "-n", "2");
    expect(r.code, r.err).toBe(0);
    expect(r.out).toContain("question:");
    expect(r.out).toContain("reward:");
  });

  it("train --smoke, then eval of Direct and RAG on NQ-open and Bamboogle with the wiki-18 corpus", () => {
    const dir = mkdtempSync(join(tmpdir(), "arl-cli-"));
    const t = arl("train", "--smoke", "--run.dir", dir);
    expect(t.code, t.err).toBe(0);
    expect(t.out).toContain("RL (GRPO)");
    expect(t.out).toContain("reward-hacking detectors: not evaluated (they need ≥ 20 RL steps: detectors.baselineSteps + detectors.window; this run had 2)");
    const ckpt = join(dir, "smoke", "checkpoints", "final");
    expect(existsSync(ckpt)).toBe(true);
    for (const data of ["nq-open-dev.jsonl", "bamboogle.jsonl"]) {
      const e = arl("eval", "--checkpoint", ckpt, "--data", join(shared, data), "--corpus", join(shared, "wiki18-sample-1000.jsonl"), "--modes", "direct,rag", "--limit", "10");
      expect(e.code, e.err).toBe(0);
      expect(e.out).toContain("10 questions from");
      expect(e.out).toContain("Direct");
      expect(e.out).toContain("RAG");
    }
    const w = arl("eval", "--checkpoint", ckpt, "--limit", "5");
    expect(w.code, w.err).toBe(0);
    expect(w.out).toContain("agent (checkpoint)");
    expect(w.out).not.toContain("\u001b["); // no colour codes when piped

    // Bad inputs get clear errors, and an existing run is never silently replaced.
    const badLimit = arl("eval", "--checkpoint", ckpt, "--limit", "-5");
    expect(badLimit.code).toBe(2);
    expect(badLimit.err).toContain('--limit: expected a positive integer, got "-5"');
    expect(arl("eval", "--checkpoint", join(dir, "nope")).err).toContain("no such folder");
    const again = arl("train", "--smoke", "--run.dir", dir);
    expect(again.code).toBe(2); // refused as a config error naming run.name (issue 29)
    expect(again.err).toContain("already holds a run; choose another name");
    expect(existsSync(ckpt)).toBe(true);
    const copy = join(dir, "edited");
    cpSync(ckpt, copy, { recursive: true });
    const tokFile = join(copy, "tokenizer.json");
    writeFileSync(tokFile, readFileSync(tokFile, "utf8").replace('"question"', '"questionx"'));
    const edited = arl("eval", "--checkpoint", copy, "--limit", "2");
    expect(edited.code).toBe(1);
    expect(edited.err).toContain("tokenizer.json does not match its checksum");
  });
});
