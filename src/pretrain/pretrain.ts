/**
 * `arl pretrain` (issue 32 part 3): trains the embedded base model from scratch on the generated corpus —
 * tokenizer first (`tokenizer.ts`), then next-token prediction over packed rows (`rows.ts`) with AdamW, linear
 * warm-up and cosine decay (`config.ts`), on the onnx trainer. Shaped like nanoGPT's `train.py`: one loop, a
 * checkpoint every `checkpointEvery` steps, held-out evaluation every `evalEvery`.
 *
 * Run folder (`config.run.dir`; this command creates and deletes nothing else):
 * - `config.json` — the resolved config (a `--resume` must match it);
 * - `tokenizer.json` — the trained tokenizer (HF format);
 * - `checkpoint-<step>/` + `state.json` (`{step, checkpoint}`, written after the checkpoint, atomically) — weights
 *   and Adam moments; the previous checkpoint folder is removed once the new one is recorded;
 * - `metrics.jsonl` — one line per step (`step`, `loss` nats/token, `lr`, `tokens`) and per evaluation
 *   (`heldOutLoss`, `heldOutTurnLoss`, nats/token); no wall-clock values, so reruns are byte-identical;
 * - `base/` at the end — weights only (`meta.json`, `tensors.bin`, `manifest.json`), `tokenizer.json` and
 *   `base.json` (`{format, config, fingerprint, steps, tokens}`). The fingerprint is the sha256 of the tokenizer
 *   file and the weights: same seed, same machine → same fingerprint, resumed or not.
 */
import { createHash } from "node:crypto";
import { appendFileSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Datum } from "../core/types.ts";
import { EmbeddedBackend } from "../policy/embedded/backend.ts";
import { HfTokenizer } from "../policy/hf/tokenizer.ts";
import { PROTOCOLS } from "../protocol/index.ts";
import { BASE_FORMAT } from "../train/base.ts";
import { ConfigError } from "../train/config.ts";
import { writeFileAtomic } from "../train/runDir.ts";
import { learningRateAt, type PretrainConfig } from "./config.ts";
import { encodeDocument, END_OF_TEXT, packedBatch, documentSegments } from "./rows.ts";
import { trainBaseTokenizer } from "./tokenizer.ts";
import { copyProbeCases, probeRates, runProbes, selectProbeCases } from "./probes.ts";
import { Rng } from "../core/rng.ts";
import type { TokenizerJsonDocument } from "../core/tokenizer.ts";

/** Format tag of `base.json` (defined beside the reader of base folders, src/train/base.ts). */
export { BASE_FORMAT } from "../train/base.ts";

/** What `base.json` says. */
export interface BaseInfo {
  format: typeof BASE_FORMAT;
  /** The model shape (GPTConfig, vocabulary included). */
  config: Record<string, unknown>;
  /** sha256 (hex) of `tokenizer.json`'s bytes followed by `tensors.bin`'s. */
  fingerprint: string;
  steps: number;
  /** Tokens trained on (positions of all rows). */
  tokens: number;
  /** The pretraining config that produced it. */
  pretrain: PretrainConfig;
  /** Reading probes on the finished base, per protocol (absent when `run.probesPerCell` is 0). */
  probes?: Record<string, ProbeSummary>;
}

/** Most tokens of a probed turn. */
const PROBE_TURN_TOKENS = 96;

const pct = (x: number) => `${(100 * x).toFixed(1)} %`;

/** Reading-probe rates of one protocol: overall, worst cell, and every cell (`probeRates`). */
export interface ProbeSummary {
  copy: number;
  copyWorst: number;
  select: number;
  selectWorst: number;
  cells: ReturnType<typeof probeRates>;
}

function summariseProbes(r: ReturnType<typeof probeRates>): ProbeSummary {
  const mean = (o: Record<string, number>) => Object.values(o).reduce((a, b) => a + b, 0) / Math.max(1, Object.values(o).length);
  const worst = (o: Record<string, number>) => Math.min(...Object.values(o));
  return { copy: mean(r.copy), copyWorst: worst(r.copy), select: mean(r.select), selectWorst: worst(r.select), cells: r };
}

/** Receives progress (the CLI prints it). */
export interface PretrainReporter {
  /** After each step: `step` done of `total`, its loss (nats/token), learning rate, tokens so far. */
  step?(step: number, total: number, info: { loss: number; lr: number; tokens: number }): void;
  /** A stage or event worth a line (tokenizer trained, resumed at step n, evaluation, checkpoint). */
  line?(text: string): void;
}

/** Options of {@link runPretrain}. */
export interface PretrainOptions {
  /** Continue from the folder's last checkpoint (the config must equal the saved one). */
  resume?: boolean;
  /** Replace the files of an earlier run in the folder (only the files this command writes). */
  overwrite?: boolean;
  reporter?: PretrainReporter;
  /** Stop after the next checkpoint when aborted (the run resumes with `resume`). */
  signal?: AbortSignal;
}

/** What a finished run reports. */
export interface PretrainSummary {
  dir: string;
  baseDir: string;
  fingerprint: string;
  steps: number;
  tokens: number;
  finalLoss: number;
  heldOutLoss: number;
}

interface State {
  step: number;
  checkpoint: string;
  tokens: number;
}

const RUN_FILES = ["config.json", "tokenizer.json", "state.json", "metrics.jsonl", "base"];

/** sha256 of the tokenizer file's bytes then the weights file's. */
export function baseFingerprint(baseDir: string): string {
  return createHash("sha256").update(readFileSync(join(baseDir, "tokenizer.json"))).update(readFileSync(join(baseDir, "tensors.bin"))).digest("hex");
}

/** Held-out documents (a seed stream no training step draws from), encoded once. */
function heldOut(config: PretrainConfig, tok: HfTokenizer, sep: number, n: number): { all: Datum[]; turns: Datum[] } {
  const rng = new Rng(config.run.seed ^ 0x5eed0ff);
  const protocols = config.data.protocols.map((p) => PROTOCOLS[p]);
  const all: Datum[] = [];
  const turns: Datum[] = [];
  for (let i = 0; i < n; i++) {
    const segs = documentSegments(rng, protocols, config.data.drillFraction);
    const a = encodeDocument(tok, segs, "all", sep);
    const t = encodeDocument(tok, segs, "turns", sep);
    const C = config.model.contextLength;
    if (a.ids.length > C + 1) continue;
    all.push({ modelInput: a.ids.slice(0, -1), targetTokens: a.ids.slice(1), weights: a.weights.slice(1) });
    turns.push({ modelInput: t.ids.slice(0, -1), targetTokens: t.ids.slice(1), weights: t.weights.slice(1) });
  }
  return { all, turns };
}

async function meanLoss(be: EmbeddedBackend, data: Datum[]): Promise<number> {
  const lps = await be.computeLogprobs(data);
  let s = 0;
  let n = 0;
  lps.forEach((lp, i) => lp.forEach((x, t) => {
    if (data[i].weights[t] > 0) {
      s -= x;
      n++;
    }
  }));
  return n > 0 ? s / n : NaN;
}

/**
 * Runs (or resumes) a pretraining run (see the file comment).
 * @throws ConfigError when the folder holds another run (without `overwrite`/`resume`), when `resume` finds no run or
 *   a different config; Error when the tokenizer's training or a checkpoint fails
 */
export async function runPretrain(config: PretrainConfig, options: PretrainOptions = {}): Promise<PretrainSummary> {
  const dir = config.run.dir;
  const report = options.reporter ?? {};
  const configText = `${JSON.stringify(config, null, 2)}\n`;
  const statePath = join(dir, "state.json");
  let state: State | undefined;
  if (options.resume) {
    if (!existsSync(join(dir, "config.json"))) throw new ConfigError([`--resume: ${dir} holds no pretraining run (no config.json)`]);
    if (readFileSync(join(dir, "config.json"), "utf8") !== configText) throw new ConfigError([`--resume: the config differs from ${join(dir, "config.json")} (resume with the same flags and config)`]);
    if (existsSync(statePath)) state = JSON.parse(readFileSync(statePath, "utf8")) as State;
  } else if (RUN_FILES.some((f) => existsSync(join(dir, f)))) {
    if (!options.overwrite) throw new ConfigError([`${dir} already holds a pretraining run: --resume to continue it, --overwrite to replace it, or --dir elsewhere`]);
    // Only what a run writes: its files and its checkpoint-<step> folders (one a crash left unrecorded included).
    for (const f of [...RUN_FILES, ...readdirSync(dir).filter((n) => /^checkpoint-\d+$/.test(n))]) rmSync(join(dir, f), { recursive: true, force: true });
  }
  mkdirSync(dir, { recursive: true });
  writeFileAtomic(join(dir, "config.json"), configText);

  // Tokenizer.
  const tokPath = join(dir, "tokenizer.json");
  if (!existsSync(tokPath)) {
    report.line?.(`tokenizer: training a ${config.tokenizer.vocabSize}-token byte-level BPE…`);
    const doc = await trainBaseTokenizer(config, dir);
    writeFileAtomic(tokPath, JSON.stringify(doc));
  }
  const tokJson = JSON.parse(readFileSync(tokPath, "utf8")) as TokenizerJsonDocument;
  const tok = new HfTokenizer({ json: tokJson, config: undefined, source: tokPath });
  const sep = tok.encode(END_OF_TEXT);
  if (sep.length !== 1) throw new Error(`arl pretrain: ${tokPath} does not hold ${END_OF_TEXT} as one token`);
  const protocols = config.data.protocols.map((p) => PROTOCOLS[p]);

  // Model.
  const { dModel, nLayers, nHeads, mlpRatio, contextLength, positional, tokenShift, shiftWindow } = config.model;
  const gpt = { vocabSize: tok.vocabSize, contextLength, dModel, nLayers, nHeads, mlpRatio, positional, tokenShift, shiftWindow };
  const be = await EmbeddedBackend.create(gpt, { seed: config.run.seed, trainerEngine: "onnx", samplerEngine: "onnx" });
  let step = 0;
  let tokens = 0;
  if (state) {
    await be.load(join(dir, state.checkpoint));
    step = state.step;
    tokens = state.tokens;
    report.line?.(`resumed at step ${step} of ${config.optim.steps} (${state.checkpoint})`);
  }
  const metricsPath = join(dir, "metrics.jsonl");
  // Lines after the checkpoint resumed from are dropped: the run rewrites them identically.
  const kept = existsSync(metricsPath) ? readFileSync(metricsPath, "utf8").split("\n").filter((l) => l && (JSON.parse(l) as { step: number }).step <= step) : [];
  writeFileAtomic(metricsPath, kept.map((l) => `${l}\n`).join(""));
  const held = heldOut(config, tok, sep[0], 48);
  let finalLoss = NaN;
  let heldOutLoss = NaN;
  const evaluate = async (): Promise<void> => {
    heldOutLoss = await meanLoss(be, held.all);
    const turnLoss = await meanLoss(be, held.turns);
    appendFileSync(metricsPath, `${JSON.stringify({ step, heldOutLoss, heldOutTurnLoss: turnLoss })}\n`);
    report.line?.(`step ${step}: held-out loss ${heldOutLoss.toFixed(3)} nats/token (turns ${turnLoss.toFixed(3)})`);
  };
  const checkpoint = async (): Promise<void> => {
    const name = `checkpoint-${step}`;
    await be.save(join(dir, name));
    const old = state?.checkpoint;
    state = { step, checkpoint: name, tokens };
    writeFileAtomic(statePath, `${JSON.stringify(state)}\n`);
    if (old && old !== name) rmSync(join(dir, old), { recursive: true, force: true });
  };
  const { optim } = config;
  while (step < optim.steps) {
    const batch = packedBatch(config, tok, protocols, sep[0], step);
    const fb = await be.forwardBackward(batch.datums, "cross_entropy");
    const lr = learningRateAt(optim, step);
    await be.optimStep({ learningRate: lr, weightDecay: optim.weightDecay, gradClip: optim.gradClip });
    step++;
    tokens += batch.datums.length * contextLength;
    finalLoss = fb.loss;
    appendFileSync(metricsPath, `${JSON.stringify({ step, loss: fb.loss, lr, tokens })}\n`);
    report.step?.(step, optim.steps, { loss: fb.loss, lr, tokens });
    if (step % config.run.evalEvery === 0 || step === optim.steps) await evaluate();
    if (step % config.run.checkpointEvery === 0 || step === optim.steps) await checkpoint();
    if (options.signal?.aborted && step < optim.steps) {
      if (state?.step !== step) await checkpoint();
      be.dispose();
      throw new PretrainInterrupted(dir, step);
    }
  }

  // The base: weights only, with its tokenizer and fingerprint.
  const baseDir = join(dir, "base");
  rmSync(baseDir, { recursive: true, force: true });
  await be.saveWeights(baseDir);
  writeFileSync(join(baseDir, "tokenizer.json"), readFileSync(tokPath));
  const fingerprint = baseFingerprint(baseDir);
  let probes: BaseInfo["probes"];
  if (config.run.probesPerCell > 0) {
    report.line?.("reading probes…");
    const C = contextLength - PROBE_TURN_TOKENS;
    probes = {};
    for (const name of config.data.protocols) {
      const p = PROTOCOLS[name];
      const cases = [...copyProbeCases(tok, p, config.run.probesPerCell, C), ...selectProbeCases(tok, p, 2 * config.run.probesPerCell, C)];
      probes[name] = summariseProbes(probeRates(await runProbes(be.samplingClient(), tok, cases, PROBE_TURN_TOKENS)));
      report.line?.(`reading probes (${name}): copy ${pct(probes[name].copy)} (worst cell ${pct(probes[name].copyWorst)}), select ${pct(probes[name].select)} (worst list length ${pct(probes[name].selectWorst)})`);
    }
  }
  const info: BaseInfo = { format: BASE_FORMAT, config: { ...be.config }, fingerprint, steps: step, tokens, pretrain: config, ...(probes ? { probes } : {}) };
  writeFileAtomic(join(baseDir, "base.json"), `${JSON.stringify(info, null, 2)}\n`);
  be.dispose();
  return { dir, baseDir, fingerprint, steps: step, tokens, finalLoss, heldOutLoss };
}

/** Thrown when a run stops on its abort signal after checkpointing (resume with `resume: true`). */
export class PretrainInterrupted extends Error {
  constructor(
    readonly dir: string,
    readonly step: number,
  ) {
    super(`pretraining stopped at step ${step}; checkpoint saved — continue with --resume`);
    this.name = "PretrainInterrupted";
  }
}
