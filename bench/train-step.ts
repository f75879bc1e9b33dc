/**
 * Benchmark 1: the embedded backend's training step vs PyTorch on the same GPT shapes.
 *
 *   node --import tsx bench/train-step.ts [--only base|small|sft] [--engines onnx,jax] [--steps N] [--no-torch] [--max-wait S]
 *     [--retries N] [--length-bucket N] [--chunk-tokens N]          (ARL_JAX_THREADS=1 for single-threaded jax-js)
 *
 * Measures forwardBackward (cross_entropy, all tokens weighted) + optimStep (AdamW) at a fixed batch, ms/step (with
 * tokens/s and achieved GFLOP/s in each row's note: the figure pretraining budgets are planned with), the
 * median of `--steps` steps after 2 warm-up steps, each case in a fresh process (jax-js's wasm heap never shrinks,
 * so one case must not inherit another's). The PyTorch reference (bench/torch_reference.py: the same model, shapes,
 * torch.optim.AdamW; OPENBLAS_NUM_THREADS=1, torch.set_num_threads(<cores>)) runs with Debian's python3-torch and
 * is skipped with a message when no python can import torch — the bench installs nothing.
 *
 * SFT rows (issue 31, parts 2–3): warm-start throughput on real demonstrations — the default recipe's (search) and a
 * long-context tool env's (travel, context 768) — generated as `arl train` generates them, batched by
 * `lengthGroupedBatches` at the recipe's `sft.batchSize`, micro-batched with the recipe's settings and each trainer's
 * default length bucket; `SFT_BATCHES` consecutive batches after 2 warm-up ones, ms per step (mean), real
 * (unpadded) tokens/s and the achieved GFLOP/s on the padded work. PyTorch trains the same batches padded to each
 * batch's longest datum (a plain PyTorch SFT loop, one forward per batch).
 * Writes bench/results/train-step.json (bench/lib.ts format; speedup = PyTorch ms ÷ our ms).
 */
import { spawnSync } from "node:child_process";
import { availableParallelism } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Rng } from "../src/core/rng.ts";
import type { Datum } from "../src/core/types.ts";
import { EmbeddedBackend, type TrainerEngine } from "../src/policy/embedded/backend.ts";
import { Batcher } from "../src/policy/embedded/batching.ts";
import { resolveConfig as resolveGpt } from "../src/policy/embedded/gpt.ts";
import { trainLengthBucket } from "../src/policy/config.ts";
import { trajectoryToDatum } from "../src/algo/datum.ts";
import { getRecipe } from "../src/envs/index.ts";
import { resolveConfig } from "../src/train/config.ts";
import { withRecipeDefaults } from "../src/train/recipeDefaults.ts";
import { setupExperiment } from "../src/train/setup.ts";
import { lengthGroupedBatches } from "../src/train/sft.ts";
import { warmStartDemos } from "../src/train/warmStart.ts";
import { paramCount, type GPTConfig } from "../src/policy/embedded/gpt.ts";
import { jaxThreads, relaxedSimd, wasmHeapBytes } from "../src/policy/embedded/jax.ts";
import { benchResult, blasLabel, flag, benchDir, findTorchPython, median, printResult, torchBlasProblem, waitIdle, withContention, writeResult, type BenchRow, type TorchBlas, measured } from "./lib.ts";

const args = process.argv.slice(2);
const only = flag("--only");
const steps = Number(flag("--steps") ?? 5);
const noTorch = args.includes("--no-torch");
const maxWait = Number(flag("--max-wait") ?? 600);
const retries = Number(flag("--retries") ?? 3);
/** EmbeddedBackendOptions.lengthBucket of the fixed-shape cases (default 64: a 160-token RL batch pads to 192). */
const lengthBucket = Number(flag("--length-bucket") ?? 64);
/** EmbeddedBackendOptions.maxTokensPerChunk (default: the backend's). */
const chunkTokens = flag("--chunk-tokens") === undefined ? undefined : Number(flag("--chunk-tokens"));
/** Internal: run one case in this process and print its result as JSON on the last line. */
const childCase = flag("--case");

interface TrainCase {
  name: string;
  gpt: GPTConfig;
  batch: number;
  seq: number;
  /** SFT case: the recipe whose warm-start demonstrations are trained on (batch/seq unused). */
  sftEnv?: string;
}

/** SFT steps measured per SFT case (after 2 warm-up steps). */
const SFT_BATCHES = 16;

const base: GPTConfig = { vocabSize: 512, contextLength: 256, dModel: 128, nLayers: 4, nHeads: 4 };
const larger: GPTConfig = { vocabSize: 512, contextLength: 512, dModel: 192, nLayers: 6, nHeads: 6 };
const small = (d: number, l: number, h: number): GPTConfig => ({ vocabSize: 900, contextLength: 256, dModel: d, nLayers: l, nHeads: h });
const cases: TrainCase[] = [];
if (only === undefined || only === "base") {
  cases.push({ name: "base train 16×256", gpt: base, batch: 16, seq: 256 });
  cases.push({ name: "larger d192 L6 H6 train 8×512", gpt: larger, batch: 8, seq: 512 });
}
if (only !== "base" && only !== "sft") {
  // Small: the default `arl train` policy (d96 L2 H4) at its RL batch shape.
  cases.push({ name: "small d96 L2 H4 train 64×160", gpt: small(96, 2, 4), batch: 64, seq: 160 });
}
if (only === undefined || only === "sft") {
  // The shapes come from the demonstrations themselves (gpt filled in by sftData).
  cases.push({ name: "SFT search warm start (d96 L2, 32 demos/step)", gpt: small(96, 2, 4), batch: 0, seq: 0, sftEnv: "search" });
  cases.push({ name: "SFT travel warm start (d96 L2 ctx 768, 16 demos/step)", gpt: small(96, 2, 4), batch: 0, seq: 0, sftEnv: "travel" });
}

/**
 * An SFT case's data, as `arl train --env <env>` makes it: the recipe's demonstrations as datums, the first
 * `SFT_BATCHES + 2` length-grouped batches of an epoch, the model shape and the recipe's micro-batching config.
 */
async function sftData(env: string) {
  const recipe = getRecipe(env);
  const config = resolveConfig(withRecipeDefaults({ env: { name: env } }, recipe));
  const s = setupExperiment(config, recipe);
  const datums = (await warmStartDemos(s, config)).map((t) => trajectoryToDatum(t, 0));
  const batches = lengthGroupedBatches(datums, config.sft.batchSize, new Rng(config.run.seed)).slice(0, SFT_BATCHES + 2);
  if (batches.length < SFT_BATCHES + 2) throw new Error(`${env}: ${batches.length} SFT batches, the bench needs ${SFT_BATCHES + 2}`);
  return { gpt: s.gpt, batches, policy: config.policy };
}

/** Each SFT batch's micro-batches on an engine, as the backend cuts them (the recipe's budget, the engine's bucket). */
function sftChunks(data: Awaited<ReturnType<typeof sftData>>, engine: TrainerEngine) {
  const policy = { ...data.policy, trainer: engine };
  const batcher = new Batcher(resolveGpt(data.gpt), { lengthBucket: trainLengthBucket(policy), maxTokensPerChunk: policy.microBatchTokens, padRowsToPow2: engine === "jax" });
  return data.batches.map((b) => batcher.chunks(b));
}

/** Work per measured SFT step on an engine: real tokens, padded rows·T tokens and FLOPs (stepFlops) of its micro-batches. */
function sftWork(data: Awaited<ReturnType<typeof sftData>>, engine: TrainerEngine) {
  const chunks = sftChunks(data, engine);
  let real = 0;
  let padded = 0;
  let flops = 0;
  for (let i = 2; i < data.batches.length; i++) {
    for (const c of chunks[i]) {
      padded += c.rows * c.T;
      flops += stepFlops(data.gpt, c.rows, c.T);
    }
    for (const d of data.batches[i]) real += d.modelInput.length;
  }
  return { realPerStep: real / SFT_BATCHES, paddedPerStep: padded / SFT_BATCHES, flopsPerStep: flops / SFT_BATCHES };
}
/** Targets (issue 31): the default engine's speedup over PyTorch per case. */
const TARGETS: Record<string, number> = { "base train 16×256": 1.5, "larger d192 L6 H6 train 8×512": 1.2 };
/** The engines measured: the default (onnx) on every case, jax-js (the previous default) beside it. */
const ENGINES: TrainerEngine[] = (flag("--engines") ?? "onnx,jax").split(",") as TrainerEngine[];
/** Internal: the engine of a child case. */
const childEngine = (flag("--engine") ?? "onnx") as TrainerEngine;

/** Per-case measurements (ms unless named otherwise). */
interface Result {
  train_ms: number;
  fb_ms: number;
  adam_ms: number;
  /** First step, jit compilation included. */
  compile_ms: number;
  heap_mb?: number;
}

async function benchTrain(c: TrainCase, engine: TrainerEngine): Promise<Result> {
  if (c.sftEnv !== undefined) return benchSft(c.sftEnv, engine);
  // Default options, as the RL loop uses them: the 64-token length bucket pads a 160-token batch to 192.
  const be = await EmbeddedBackend.create(c.gpt, { seed: 0, lengthBucket, maxTokensPerChunk: chunkTokens, trainerEngine: engine });
  const rng = new Rng(1);
  const V = c.gpt.vocabSize;
  const datums: Datum[] = Array.from({ length: c.batch }, () => {
    const toks = Array.from({ length: c.seq + 1 }, () => rng.int(V));
    return { modelInput: toks.slice(0, -1), targetTokens: toks.slice(1), weights: new Array(c.seq).fill(1) };
  });
  const fb: number[] = [];
  const ad: number[] = [];
  let compile = 0;
  for (let i = 0; i < steps + 2; i++) {
    const t0 = performance.now();
    await be.forwardBackward(datums, "cross_entropy");
    const t1 = performance.now();
    await be.optimStep({ learningRate: 1e-3 });
    const t2 = performance.now();
    if (i === 0) compile = t2 - t0;
    if (i >= 2) {
      fb.push(t1 - t0);
      ad.push(t2 - t1);
    }
  }
  be.dispose();
  const total = fb.map((x, i) => x + ad[i]);
  return { train_ms: median(total), fb_ms: median(fb), adam_ms: median(ad), compile_ms: compile, heap_mb: wasmHeapBytes() / 2 ** 20 };
}

/**
 * An SFT case: the recipe's micro-batching and the engine's default length bucket; mean ms over `SFT_BATCHES` steps,
 * measured on a second pass over the batches (the first compiles jax-js's programs, one per new shape: in a
 * 1 000-step warm start that cost is paid once per shape, so the steady state is the comparable figure).
 */
async function benchSft(env: string, engine: TrainerEngine): Promise<Result> {
  const data = await sftData(env);
  const policy = { ...data.policy, trainer: engine };
  const be = await EmbeddedBackend.create(data.gpt, { seed: 0, lengthBucket: trainLengthBucket(policy), maxTokensPerChunk: policy.microBatchTokens, trainerEngine: engine });
  const fb: number[] = [];
  const ad: number[] = [];
  let compile = 0;
  const t00 = performance.now();
  for (const [pass, batches] of [data.batches, data.batches.slice(2)].entries()) {
    for (const batch of batches) {
      const t0 = performance.now();
      await be.forwardBackward(batch, "cross_entropy");
      const t1 = performance.now();
      await be.optimStep({ learningRate: 1e-3 });
      const t2 = performance.now();
      if (pass === 1) {
        fb.push(t1 - t0);
        ad.push(t2 - t1);
      }
    }
    if (pass === 0) compile = performance.now() - t00;
  }
  be.dispose();
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
  return { train_ms: mean(fb) + mean(ad), fb_ms: mean(fb), adam_ms: mean(ad), compile_ms: compile, heap_mb: wasmHeapBytes() / 2 ** 20 };
}

function runTorch(py: string, threads: number, sft: Map<string, Awaited<ReturnType<typeof sftData>>>): { results: Record<string, { train_ms: number }>; blas: TorchBlas } {
  const shapes = cases.map((c) => {
    const d = sft.get(c.name);
    if (d) {
      // The default (onnx) engine's own micro-batches, gradients accumulated: the same padded work as ours.
      const steps = sftChunks(d, "onnx").map((chunks, i) => chunks.map((ch) => ({ T: ch.T, lengths: ch.ids.map((j) => d.batches[i][j].modelInput.length) })));
      return { name: c.name, kind: "sft", vocab: d.gpt.vocabSize, context: d.gpt.contextLength, dModel: d.gpt.dModel, nLayers: d.gpt.nLayers, nHeads: d.gpt.nHeads, warmup: 2, steps };
    }
    return {
    name: c.name,
    kind: "train",
    vocab: c.gpt.vocabSize,
    context: c.gpt.contextLength,
    dModel: c.gpt.dModel,
    nLayers: c.gpt.nLayers,
    nHeads: c.gpt.nHeads,
    batch: c.batch,
    // PyTorch gets the padded length our backend trains on (the length bucket), so both do the same FLOPs.
    seq: Math.ceil(c.seq / lengthBucket) * lengthBucket,
    };
  });
  const r = spawnSync(
    py,
    [join(benchDir, "torch_reference.py"), "--threads", String(threads), "--steps", String(steps), "--shapes", JSON.stringify(shapes)],
    { encoding: "utf8", env: { ...process.env, OPENBLAS_NUM_THREADS: "1" }, maxBuffer: 1 << 24 },
  );
  if (r.status !== 0) throw new Error(`torch reference failed: ${r.stderr}`);
  const lines = r.stdout.trim().split("\n");
  return JSON.parse(lines[lines.length - 1]) as { results: Record<string, { train_ms: number }>; blas: TorchBlas };
}

function runCaseInChild(c: TrainCase, engine: TrainerEngine, env: Record<string, string> = {}): Result {
  const extra = ["--engine", engine, "--length-bucket", String(lengthBucket), ...(chunkTokens === undefined ? [] : ["--chunk-tokens", String(chunkTokens)])];
  const r = spawnSync(process.execPath, [...process.execArgv, fileURLToPath(import.meta.url), "--case", c.name, "--steps", String(steps), ...extra], {
    encoding: "utf8",
    maxBuffer: 1 << 24,
    env: { ...process.env, ...env },
  });
  if (r.status !== 0) throw new Error(`case ${c.name} failed: ${r.stderr}`);
  const lines = r.stdout.trim().split("\n");
  return JSON.parse(lines[lines.length - 1]) as Result;
}

const measuredHere = <T>(fn: () => T) => measured(fn, retries, maxWait);

async function main(): Promise<void> {
  if (childCase !== undefined) {
    const c = cases.find((x) => x.name === childCase);
    if (!c) throw new Error(`unknown case ${childCase}`);
    console.log(JSON.stringify(await benchTrain(c, childEngine)));
    return;
  }
  const threads = availableParallelism();
  const sft = new Map<string, Awaited<ReturnType<typeof sftData>>>();
  for (const c of cases) {
    if (c.sftEnv === undefined) continue;
    const d = await sftData(c.sftEnv);
    sft.set(c.name, d);
    c.gpt = d.gpt;
  }
  console.log(`embedded backend: engines ${ENGINES.join(", ")} (onnx: onnxruntime-node, ${threads} intra-op threads; jax: jax-js wasm, ${jaxThreads} thread(s), relaxed SIMD ${relaxedSimd ? "on" : "off"}); ${cases.length} case(s)`);
  const ours: Record<string, Record<string, Result>> = {};
  /** Share of the CPUs other processes used during each case (timings are noisy above ~10 %). */
  const busy: Record<string, number> = {};
  /** Cases an engine could not run, with the error's line. */
  const failed: Record<string, string> = {};
  let worst = 0;
  for (const engine of ENGINES) {
    ours[engine] = {};
    for (const c of cases) {
      let r: Awaited<ReturnType<typeof measuredHere<Result>>>;
      try {
        r = await measuredHere(() => runCaseInChild(c, engine));
      } catch (e) {
        // A shape an engine cannot run (jax-js: past its 4 GiB wasm32 heap) is a result, not a crash of the bench.
        const line = String((e as Error).message).split("\n").find((l) => /Error:/.test(l)) ?? String(e);
        failed[`${engine}:${c.name}`] = line.trim().slice(0, 200);
        console.log(`  ${engine} ${c.name}: failed — ${failed[`${engine}:${c.name}`]}`);
        continue;
      }
      ours[engine][c.name] = r.value;
      busy[`${engine}:${c.name}`] = r.others ?? 0;
      worst = Math.max(worst, r.others ?? 0);
      console.log(`  ${engine} ${c.name}: ${r.value.train_ms.toFixed(0)} ms/step (other processes: ${((r.others ?? 0) * 100).toFixed(0)}% CPU)`);
    }
  }
  let torch: Record<string, { train_ms: number }> | null = null;
  let blas: TorchBlas | null = null;
  let torchNote = "";
  const py = noTorch ? null : findTorchPython();
  if (noTorch) torchNote = "skipped (--no-torch)";
  else if (!py) torchNote = "skipped: no /usr/bin/python3 or python3 can import torch (Debian: apt install python3-torch libopenblas0-pthread)";
  else {
    const r = await measuredHere(() => runTorch(py, threads, sft));
    blas = r.value.blas;
    const problem = torchBlasProblem(blas);
    if (problem) torchNote = `refused: ${problem}`;
    else torch = r.value.results;
    worst = Math.max(worst, r.others ?? 0);
  }
  if (torchNote) console.log(`PyTorch reference: ${torchNote}`);
  const torchVersion = py ? spawnSync(py, ["-c", "import torch; print(torch.__version__)"], { encoding: "utf8" }).stdout.trim() : "";

  const rows: BenchRow[] = [];
  for (const c of cases) {
    for (const engine of ENGINES) {
      const o = ours[engine][c.name];
      if (!o) {
        rows.push({
          name: `${c.name} (${(paramCount(c.gpt) / 1e6).toFixed(2)}M params), ${engine}`,
          ours: Number.NaN,
          reference: torch?.[c.name]?.train_ms ?? null,
          unit: "ms/step",
          speedup: null,
          target: "",
          met: null,
          note: `could not run: ${failed[`${engine}:${c.name}`]}`,
        });
        continue;
      }
      const t = torch?.[c.name]?.train_ms ?? null;
      const speedup = t === null ? null : t / o.train_ms;
      const target = engine === "onnx" ? TARGETS[c.name] : undefined;
      rows.push({
        name: `${c.name} (${(paramCount(c.gpt) / 1e6).toFixed(2)}M params), ${engine}${engine === "onnx" ? " (default)" : ""}`,
        ours: o.train_ms,
        reference: t,
        unit: "ms/step",
        speedup,
        target: target === undefined ? "" : `≥ ${target}× PyTorch`,
        met: target !== undefined && speedup !== null ? speedup >= target : null,
        reason: target !== undefined && speedup !== null && speedup < target ? missReason(o) : undefined,
        note:
          `${sft.has(c.name) ? sftThroughput(sft.get(c.name)!, engine, o.train_ms) : throughput(c, o.train_ms)}; fwd+bwd ${o.fb_ms.toFixed(0)} + Adam ${o.adam_ms.toFixed(0)} ms; ${sft.has(c.name) ? `first pass (${SFT_BATCHES + 2} steps)` : "first step"} ${(o.compile_ms / 1000).toFixed(1)} s` +
          (engine === "jax" ? ` (jit); wasm heap ${o.heap_mb?.toFixed(0)} MB` : " (session build)") +
          `; other processes used ${((busy[`${engine}:${c.name}`] ?? 0) * 100).toFixed(0)} % CPU`,
      });
    }
  }
  const result = benchResult({ script: "bench/train-step.ts", args }, {
    bench: "train-step",
    title: "1. Embedded training step vs PyTorch (forward + backward + AdamW)",
    reference: torch
      ? `PyTorch ${torchVersion} CPU (Debian python3-torch), ${threads} threads, BLAS: ${blasLabel(blas!)}, same model/shapes (bench/torch_reference.py)`
      : `none: ${torchNote}`,
    rows,
    contention: worst,
    extra: { failed, ours: { engines: ENGINES, jaxThreads, relaxedSimd, lengthBucket, chunkTokens: chunkTokens ?? null, results: ours }, torch, blas, cases },
  });
  printResult(result);
  // A subset of the full run (cases, engines, reference or batching changed) never replaces the committed results.
  const partial = only !== undefined || ENGINES.join(",") !== "onnx,jax" || noTorch || ["--steps", "--length-bucket", "--chunk-tokens"].some((f) => flag(f) !== undefined);
  console.log(`wrote ${writeResult(result, partial)}${partial ? " (a partial run: bench/results/ untouched)" : ""}`);
}

/**
 * FLOPs of one training step on a padded `[rows, T]` micro-batch: 6·N·(12·L·D² + V·D) for the weight products
 * (forward 2, backward 4 per multiply-add; the tied head included; mlpRatio 4) + 12·rows·L·T²·D for attention's two
 * products (q·kᵀ and p·v, forward and backward, the masked half counted: the kernels compute it), N = rows·T.
 */
function stepFlops(gpt: GPTConfig, rows: number, T: number): number {
  const { vocabSize: V, dModel: D, nLayers: L } = gpt;
  return 6 * rows * T * (12 * L * D * D + V * D) + 12 * rows * L * T * T * D;
}

/** Tokens/s and achieved GFLOP/s of a fixed-shape step (T = the padded length). */
function throughput(c: TrainCase, trainMs: number): string {
  const T = Math.min(c.gpt.contextLength, Math.ceil(c.seq / lengthBucket) * lengthBucket);
  const N = c.batch * T;
  return `${Math.round(N / (trainMs / 1000)).toLocaleString("en-US")} tok/s, ${(stepFlops(c.gpt, c.batch, T) / (trainMs / 1000) / 1e9).toFixed(1)} GFLOP/s`;
}

/** An SFT row's note: real (unpadded) tokens/s, the share of computed tokens that are real, GFLOP/s on the padded work. */
function sftThroughput(data: Awaited<ReturnType<typeof sftData>>, engine: TrainerEngine, trainMs: number): string {
  const w = sftWork(data, engine);
  const s = trainMs / 1000;
  return `${Math.round(w.realPerStep / s).toLocaleString("en-US")} real tok/s (${Math.round(w.realPerStep)} per step, ${((100 * w.realPerStep) / w.paddedPerStep).toFixed(0)} % of the computed tokens), ${(w.flopsPerStep / s / 1e9).toFixed(1)} GFLOP/s`;
}

/** Why the default engine misses its target on a case: where its step time goes. */
function missReason(o: Result): string {
  return `forward + backward ${o.fb_ms.toFixed(0)} ms (onnxruntime's GEMMs ~60 % of it, the elementwise ops of the hand-written backward — LayerNorm, GELU, softmax — most of the rest) and the host AdamW ${o.adam_ms.toFixed(0)} ms (memory-bound, new buffers each step)`;
}

await main();
process.exit(0);
