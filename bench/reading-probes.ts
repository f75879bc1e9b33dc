/**
 * Reading probes (issue 32 part 5) on a base model and, beside it, on today's from-scratch default at a warm-start
 * budget: can the model copy a held-out id of 1–12 tokens from a tool response 1–4 turns back, and select the record a
 * request asks for from a list of 2–8? Greedy, exact call (src/pretrain/probes.ts).
 *
 * The from-scratch row: the default policy's shape (`policy.dModel` 96, 2 layers, 4 heads, learned positions, no
 * token shift) trained from fresh weights with the warm start's optimiser on generated tool-use episodes (the
 * pretraining corpus's skills, loss on the policy's turns), `--scratch-steps` steps of `--scratch-batch` episodes (the
 * default SFT budget: 1 000 × 32), with the base's tokenizer — under the scratch default's word tokenizer every
 * held-out id would be `[UNK]` and no copy could be exact, so the row isolates what pretraining adds.
 *
 *   node --import tsx bench/reading-probes.ts --base runs/pretrain/base [--per-cell 4] [--scratch-steps 1000]
 *     [--scratch-batch 32] [--no-scratch]
 *
 * Writes bench/results/reading-probes.json (bench/results-quick/ with --no-scratch or other budgets).
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Rng } from "../src/core/rng.ts";
import type { Datum } from "../src/core/types.ts";
import { EmbeddedBackend } from "../src/policy/embedded/backend.ts";
import type { GPTConfig } from "../src/policy/embedded/gpt.ts";
import { baseDirOf, PolicyConfig } from "../src/policy/config.ts";
import { copyProbeCases, probeRates, runProbes, selectProbeCases, type ProbeResult } from "../src/pretrain/probes.ts";
import { generateEpisode } from "../src/pretrain/corpus.ts";
import { encodeDocument, END_OF_TEXT } from "../src/pretrain/rows.ts";
import { hermesProtocol } from "../src/protocol/hermes.ts";
import { reactProtocol } from "../src/protocol/react.ts";
import type { Tokenizer } from "../src/core/tokenizer.ts";
import { loadBaseWeights, readBase } from "../src/train/base.ts";
import { benchResult, flag, printResult, withContention, writeResult, type BenchRow } from "./lib.ts";

const args = process.argv.slice(2);
const baseDir = flag("--base") ?? baseDirOf({});
const perCell = Number(flag("--per-cell") ?? 4);
const scratchSteps = Number(flag("--scratch-steps") ?? 1000);
const scratchBatch = Number(flag("--scratch-batch") ?? 32);
const withScratch = !args.includes("--no-scratch");
const PROTOCOLS = [hermesProtocol, reactProtocol];
const MAX_TURN = 96;

/** Probes of one model in both protocols: results and wall time (s). */
async function probe(be: EmbeddedBackend, tok: Tokenizer, context: number): Promise<ProbeResult[]> {
  const out: ProbeResult[] = [];
  for (const p of PROTOCOLS) {
    const cases = [...copyProbeCases(tok, p, perCell, context - MAX_TURN), ...selectProbeCases(tok, p, perCell * 2, context - MAX_TURN)];
    out.push(...(await runProbes(be.samplingClient(), tok, cases, MAX_TURN)));
  }
  return out;
}

/** The from-scratch default trained on corpus episodes (one per row, loss on the turns) with the SFT optimiser. */
async function scratchModel(tok: Tokenizer, context: number): Promise<EmbeddedBackend> {
  const policy = PolicyConfig.parse({});
  const gpt: GPTConfig = { vocabSize: tok.vocabSize, contextLength: context, dModel: policy.dModel, nLayers: policy.nLayers, nHeads: policy.nHeads, mlpRatio: policy.mlpRatio };
  const be = await EmbeddedBackend.create(gpt, { seed: 0, trainerEngine: "onnx", samplerEngine: "onnx" });
  const sep = tok.encode(END_OF_TEXT)[0];
  const rng = new Rng(12345);
  for (let step = 0; step < scratchSteps; step++) {
    const datums: Datum[] = [];
    while (datums.length < scratchBatch) {
      const ep = generateEpisode(rng.seed(), PROTOCOLS[rng.int(PROTOCOLS.length)]);
      const { ids, weights } = encodeDocument(tok, ep.segments, "turns", sep);
      if (ids.length > context + 1) continue;
      datums.push({ modelInput: ids.slice(0, -1), targetTokens: ids.slice(1), weights: weights.slice(1) });
    }
    await be.forwardBackward(datums, "cross_entropy");
    await be.optimStep({ learningRate: 3e-3, gradClip: 1 });
    if ((step + 1) % 100 === 0) console.log(`scratch: step ${step + 1} of ${scratchSteps}`);
  }
  return be;
}

/** Table rows of one model's probe results. */
function rows(label: string, results: ProbeResult[], seconds: number): BenchRow[] {
  const r = probeRates(results);
  const out: BenchRow[] = [];
  const cells = Object.entries(r.copy);
  const byDistance = new Map<string, number[]>();
  for (const [k, v] of cells) (byDistance.get(k.split("x")[1]) ?? byDistance.set(k.split("x")[1], []).get(k.split("x")[1])!).push(v);
  const worstCopy = Math.min(...cells.map(([, v]) => v));
  for (const [d, vs] of byDistance) out.push({ name: `${label}: copy, distance ${d} (mean over 1–12 tokens)`, ours: (100 * vs.reduce((a, b) => a + b, 0)) / vs.length, reference: null, unit: "%", speedup: null, target: "", met: null, note: `${perCell} cases per cell per protocol` });
  out.push({ name: `${label}: copy, worst cell (length × distance)`, ours: 100 * worstCopy, reference: null, unit: "%", speedup: null, target: label === "base" ? "≥ 95 %" : "", met: label === "base" ? worstCopy >= 0.95 : null, note: cells.filter(([, v]) => v === worstCopy).map(([k]) => k).slice(0, 6).join(" ") });
  const sel = Object.entries(r.select);
  const worstSelect = Math.min(...sel.map(([, v]) => v));
  out.push({ name: `${label}: select, worst list length`, ours: 100 * worstSelect, reference: null, unit: "%", speedup: null, target: label === "base" ? "≥ 90 %" : "", met: label === "base" ? worstSelect >= 0.9 : null, note: sel.map(([k, v]) => `${k}: ${(100 * v).toFixed(0)} %`).join(", ") });
  out.push({ name: `${label}: probe wall time`, ours: seconds, reference: null, unit: "s", speedup: null, target: "", met: null, note: `${results.length} greedy calls` });
  return out;
}

const { value, others } = await withContention(async () => {
  const base = readBase(baseDir);
  const be = await EmbeddedBackend.create(base.gpt, { seed: 0, trainerEngine: "onnx", samplerEngine: "onnx" });
  await loadBaseWeights(be, baseDir);
  let t0 = performance.now();
  const baseResults = await probe(be, base.tokenizer, base.gpt.contextLength);
  const out = rows("base", baseResults, (performance.now() - t0) / 1000);
  be.dispose();
  const raw: Record<string, unknown> = { base: { dir: baseDir, fingerprint: base.fingerprint, rates: probeRates(baseResults) } };
  if (withScratch) {
    t0 = performance.now();
    const scratch = await scratchModel(base.tokenizer, base.gpt.contextLength);
    const trainS = (performance.now() - t0) / 1000;
    t0 = performance.now();
    const scratchResults = await probe(scratch, base.tokenizer, base.gpt.contextLength);
    out.push(...rows("from scratch", scratchResults, (performance.now() - t0) / 1000));
    out.push({ name: "from scratch: training wall time", ours: trainS, reference: null, unit: "s", speedup: null, target: "", met: null, note: `${scratchSteps} steps × ${scratchBatch} episodes` });
    raw.scratch = { steps: scratchSteps, batch: scratchBatch, rates: probeRates(scratchResults) };
    scratch.dispose();
  }
  return { rows: out, raw };
});

const info = JSON.parse(readFileSync(join(baseDir, "base.json"), "utf8")) as { steps?: number; tokens?: number };
const partial = !withScratch || scratchSteps !== 1000 || scratchBatch !== 32 || perCell !== 4;
const result = benchResult(
  { script: "bench/reading-probes.ts", args },
  {
    bench: "reading-probes",
    title: `Reading probes: the base (${info.steps ?? "?"} steps) beside the from-scratch default`,
    reference: "none: the issue's bars (copy ≥ 95 % per cell, select ≥ 90 % per length)",
    rows: value.rows,
    contention: others,
    extra: value.raw,
  },
);
printResult(result);
console.log(`written: ${writeResult(result, partial)}`);
process.exit(0);
