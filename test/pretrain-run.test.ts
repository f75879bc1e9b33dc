/**
 * `arl pretrain` (src/pretrain/pretrain.ts) at the smoke size: a run writes a base (weights, tokenizer, fingerprint)
 * that loads; the same seed gives the same fingerprint; a run stopped mid-way and resumed ends byte-identical to an
 * uninterrupted one (metrics and fingerprint); an existing run is refused without --resume/--overwrite, and
 * --overwrite deletes only the files a run writes.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { EmbeddedBackend } from "../src/policy/embedded/backend.ts";
import { loadCheckpoint } from "../src/policy/embedded/checkpoint.ts";
import { HfTokenizer } from "../src/policy/hf/tokenizer.ts";
import { PRETRAIN_SMOKE, resolvePretrainConfig, learningRateAt } from "../src/pretrain/config.ts";
import { baseFingerprint, PretrainInterrupted, runPretrain, type BaseInfo } from "../src/pretrain/pretrain.ts";
import { END_OF_TEXT } from "../src/pretrain/rows.ts";
import { applyOverrides } from "../src/train/configFile.ts";

const root = mkdtempSync(join(tmpdir(), "arl-pretrain-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const smoke = (dir: string, extra: Record<string, string> = {}) => resolvePretrainConfig(applyOverrides({}, { ...PRETRAIN_SMOKE, "run.dir": join(root, dir), ...extra }));

describe("arl pretrain (smoke size)", () => {
  it("writes a base that loads, with a reproducible fingerprint; stop + resume ends identical", async () => {
    const a = await runPretrain(smoke("a"));
    expect(a.steps).toBe(12);
    const info = JSON.parse(readFileSync(join(a.baseDir, "base.json"), "utf8")) as BaseInfo;
    expect(info.fingerprint).toBe(a.fingerprint);
    expect(baseFingerprint(a.baseDir)).toBe(a.fingerprint);
    expect(info.config).toMatchObject({ positional: "rope", tokenShift: true, shiftWindow: 3, dModel: 32 });
    // Reading probes ran on the finished base, per protocol (an untrained smoke model reads nothing: rates in [0, 1]).
    expect(Object.keys(info.probes!).sort()).toEqual(["hermes", "react"]);
    for (const p of Object.values(info.probes!)) {
      expect(Object.keys(p.cells.copy)).toHaveLength(48);
      expect(Object.keys(p.cells.select)).toHaveLength(7);
      for (const v of [p.copy, p.copyWorst, p.select, p.selectWorst]) expect(v >= 0 && v <= 1).toBe(true);
    }
    // Weights only: no Adam moments in the shipped form.
    const { tensors } = await loadCheckpoint(a.baseDir);
    expect([...tensors.keys()].every((k) => k.startsWith("params."))).toBe(true);
    const tok = new HfTokenizer({ json: JSON.parse(readFileSync(join(a.baseDir, "tokenizer.json"), "utf8")), config: undefined, source: "base" });
    for (const s of ['{"id": "QX-90417"}', "Zürich → 東京 🙂", `a${END_OF_TEXT}b`]) expect(tok.decode(tok.encode(s))).toBe(s);
    expect(tok.encode(END_OF_TEXT)).toHaveLength(1);
    const be = await EmbeddedBackend.create(info.config as never, { seed: 9, trainerEngine: "onnx", samplerEngine: "onnx" });
    await be.load(a.baseDir, { optimizer: false });
    be.dispose();

    // Stopped after step 7 (a checkpoint at 5 and one written on the stop), then resumed.
    const controller = new AbortController();
    const cfgB = smoke("b", { "run.probesPerCell": "0" });
    await expect(runPretrain(cfgB, { signal: controller.signal, reporter: { step: (s) => s === 7 && controller.abort() } })).rejects.toBeInstanceOf(PretrainInterrupted);
    expect(JSON.parse(readFileSync(join(cfgB.run.dir, "state.json"), "utf8"))).toMatchObject({ step: 7, checkpoint: "checkpoint-7" });
    expect(existsSync(join(cfgB.run.dir, "checkpoint-5"))).toBe(false); // the older checkpoint is removed once the new one is recorded
    const b = await runPretrain(cfgB, { resume: true });
    expect(b.fingerprint).toBe(a.fingerprint);
    expect(readFileSync(join(cfgB.run.dir, "metrics.jsonl"), "utf8")).toBe(readFileSync(join(root, "a", "metrics.jsonl"), "utf8"));
  }, 120_000);

  it("refuses an existing run without --resume/--overwrite, a changed config on --resume; --overwrite keeps other files", async () => {
    const cfg = smoke("c", { "optim.steps": "3", "run.probesPerCell": "0" });
    await runPretrain(cfg);
    await expect(runPretrain(cfg)).rejects.toThrow(/already holds a pretraining run: --resume to continue it, --overwrite/);
    await expect(runPretrain(smoke("c", { "optim.steps": "4", "run.probesPerCell": "0" }), { resume: true })).rejects.toThrow(/--resume: the config differs/);
    writeFileSync(join(cfg.run.dir, "notes.txt"), "mine");
    mkdirSync(join(cfg.run.dir, "checkpoint-99")); // as a crash between a checkpoint and state.json would leave it
    await runPretrain(cfg, { overwrite: true });
    expect(readFileSync(join(cfg.run.dir, "notes.txt"), "utf8")).toBe("mine");
    expect(existsSync(join(cfg.run.dir, "checkpoint-99"))).toBe(false);
    await expect(runPretrain(smoke("nothing-here"), { resume: true })).rejects.toThrow(/holds no pretraining run/);
  }, 120_000);

  it("config: errors name the field and the allowed values; the schedule warms up then decays to the minimum", () => {
    expect(() => resolvePretrainConfig({ model: { positional: "alibi" } })).toThrow(/model\.positional: expected one of "rope", "learned", got "alibi"/);
    expect(() => resolvePretrainConfig({ optim: { stepz: 3 } })).toThrow(/optim: unknown field\(s\) stepz \(allowed: steps, rowsPerStep/);
    expect(() => resolvePretrainConfig({ model: { dModel: 100, nHeads: 3 } })).toThrow(/model\.nHeads must divide model\.dModel/);
    const o = resolvePretrainConfig({ optim: { steps: 1000, warmupSteps: 10, learningRate: 1e-3, minLearningRate: 1e-4 } }).optim;
    expect(learningRateAt(o, 0)).toBeCloseTo(1e-4, 10);
    expect(learningRateAt(o, 9)).toBeCloseTo(1e-3, 10);
    expect(learningRateAt(o, 999)).toBeCloseTo(1e-4, 10);
    expect(learningRateAt(o, 500)).toBeLessThan(1e-3);
  });
});
