/**
 * Benchmark 1: the embedded backend's training step vs PyTorch on the same GPT shapes.
 *
 *   node --import tsx bench/train-step.ts [--only base|small] [--steps N] [--no-torch] [--max-wait S] [--retries N]
 *     [--length-bucket N] [--chunk-tokens N]          (ARL_JAX_THREADS=1 for single-threaded jax-js)
 *
 * Measures forwardBackward (cross_entropy, all tokens weighted) + optimStep (AdamW) at a fixed batch, ms/step, the
 * median of `--steps` steps after 2 warm-up steps, each case in a fresh process (jax-js's wasm heap never shrinks,
 * so one case must not inherit another's). The PyTorch reference (bench/torch_reference.py: the same model, shapes,
 * torch.optim.AdamW; OPENBLAS_NUM_THREADS=1, torch.set_num_threads(<cores>)) runs with Debian's python3-torch and
 * is skipped with a message when no python can import torch — the bench installs nothing.
 * Writes bench/results/train-step.json (bench/lib.ts format; speedup = PyTorch ms ÷ our ms).
 */
import { spawnSync } from "node:child_process";
import { availableParallelism } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Rng } from "../src/core/rng.ts";
import type { Datum } from "../src/core/types.ts";
import { EmbeddedBackend } from "../src/policy/embedded/backend.ts";
import { paramCount, type GPTConfig } from "../src/policy/embedded/gpt.ts";
import { jaxThreads, relaxedSimd, wasmHeapBytes } from "../src/policy/embedded/jax.ts";
import { benchResult, flag, benchDir, findTorchPython, median, printResult, waitIdle, withContention, writeResult, type BenchRow, measured } from "./lib.ts";

const args = process.argv.slice(2);
const only = flag("--only");
const steps = Number(flag("--steps") ?? 5);
const noTorch = args.includes("--no-torch");
const maxWait = Number(flag("--max-wait") ?? 600);
const retries = Number(flag("--retries") ?? 3);
/** EmbeddedBackendOptions.lengthBucket (default 64, the backend's default). */
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
}

const base: GPTConfig = { vocabSize: 512, contextLength: 256, dModel: 128, nLayers: 4, nHeads: 4 };
const small = (d: number, l: number, h: number): GPTConfig => ({ vocabSize: 900, contextLength: 256, dModel: d, nLayers: l, nHeads: h });
const cases: TrainCase[] = [];
if (only !== "small") cases.push({ name: "base train 16×256", gpt: base, batch: 16, seq: 256 });
if (only !== "base") {
  // Small: the default `arl train` policy (d96 L2 H4); large: d128 L3 H4 (the lab's biggest).
  cases.push({ name: "small d96 L2 H4 train 64×160", gpt: small(96, 2, 4), batch: 64, seq: 160 });
  cases.push({ name: "large d128 L3 H4 train 64×160", gpt: small(128, 3, 4), batch: 64, seq: 160 });
}

/** Per-case measurements (ms unless named otherwise). */
interface Result {
  train_ms: number;
  fb_ms: number;
  adam_ms: number;
  /** First step, jit compilation included. */
  compile_ms: number;
  heap_mb?: number;
}

async function benchTrain(c: TrainCase): Promise<Result> {
  // Default options, as the RL loop uses them: the 64-token length bucket pads a 160-token batch to 192.
  const be = await EmbeddedBackend.create(c.gpt, { seed: 0, lengthBucket, maxTokensPerChunk: chunkTokens });
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

function runTorch(py: string, threads: number): Record<string, { train_ms: number }> {
  const shapes = cases.map((c) => ({
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
  }));
  const r = spawnSync(
    py,
    [join(benchDir, "torch_reference.py"), "--threads", String(threads), "--steps", String(steps), "--shapes", JSON.stringify(shapes)],
    { encoding: "utf8", env: { ...process.env, OPENBLAS_NUM_THREADS: "1" }, maxBuffer: 1 << 24 },
  );
  if (r.status !== 0) throw new Error(`torch reference failed: ${r.stderr}`);
  const lines = r.stdout.trim().split("\n");
  return (JSON.parse(lines[lines.length - 1]) as { results: Record<string, { train_ms: number }> }).results;
}

function runCaseInChild(c: TrainCase, env: Record<string, string> = {}): Result {
  const extra = ["--length-bucket", String(lengthBucket), ...(chunkTokens === undefined ? [] : ["--chunk-tokens", String(chunkTokens)])];
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
    console.log(JSON.stringify(await benchTrain(c)));
    return;
  }
  const threads = availableParallelism();
  console.log(`embedded backend: jax-js wasm, ${jaxThreads} thread(s), relaxed SIMD ${relaxedSimd ? "on" : "off"}; ${cases.length} case(s)`);
  const ours: Record<string, Result> = {};
  /** Share of the CPUs other processes used during each case (timings are noisy above ~10 %). */
  const busy: Record<string, number> = {};
  let worst = 0;
  for (const c of cases) {
    const r = await measuredHere(() => runCaseInChild(c));
    ours[c.name] = r.value;
    busy[c.name] = r.others ?? 0;
    worst = Math.max(worst, r.others ?? 0);
    console.log(`  ${c.name}: ${r.value.train_ms.toFixed(0)} ms/step (other processes: ${((r.others ?? 0) * 100).toFixed(0)}% CPU)`);
  }
  // The base case once more without relaxed SIMD (FMA), to show what it is worth.
  let noFma: Result | null = null;
  const baseCase = cases.find((c) => c.name.startsWith("base"));
  if (baseCase && relaxedSimd && process.env.ARL_RELAXED_SIMD !== "0") {
    const r = await measuredHere(() => runCaseInChild(baseCase, { ARL_RELAXED_SIMD: "0" }));
    noFma = r.value;
    worst = Math.max(worst, r.others ?? 0);
    console.log(`  ${baseCase.name} without relaxed SIMD: ${noFma.train_ms.toFixed(0)} ms/step`);
  }
  let torch: Record<string, { train_ms: number }> | null = null;
  let torchNote = "";
  const py = noTorch ? null : findTorchPython();
  if (noTorch) torchNote = "skipped (--no-torch)";
  else if (!py) torchNote = "skipped: no /usr/bin/python3 or python3 can import torch (Debian: apt install python3-torch)";
  else {
    const r = await measuredHere(() => runTorch(py, threads));
    torch = r.value;
    worst = Math.max(worst, r.others ?? 0);
  }
  if (torchNote) console.log(`PyTorch reference: ${torchNote}`);
  const torchVersion = py ? spawnSync(py, ["-c", "import torch; print(torch.__version__)"], { encoding: "utf8" }).stdout.trim() : "";

  const rows: BenchRow[] = cases.map((c) => {
    const o = ours[c.name];
    const t = torch?.[c.name]?.train_ms ?? null;
    const speedup = t === null ? null : t / o.train_ms;
    const isBase = c.name.startsWith("base");
    return {
      name: `${c.name} (${(paramCount(c.gpt) / 1e6).toFixed(2)}M params)`,
      ours: o.train_ms,
      reference: t,
      unit: "ms/step",
      speedup,
      target: isBase ? "≥ 1.0× PyTorch" : "",
      met: isBase && speedup !== null ? speedup >= 1 : null,
      reason:
        isBase && speedup !== null && speedup < 1
          ? "attention: jax-js's batched attention products (B·H small [T, hd] matrices) run at ~0.3× PyTorch's throughput (kernels table 1b) and the 256-token context makes attention ~40 % of this shape's FLOPs; the dense products are at 0.5–2.3×"
          : undefined,
      note:
        `fwd+bwd ${o.fb_ms.toFixed(0)} + Adam ${o.adam_ms.toFixed(0)} ms; first step (jit) ${(o.compile_ms / 1000).toFixed(1)} s; ` +
        `wasm heap ${o.heap_mb?.toFixed(0)} MB; other processes used ${((busy[c.name] ?? 0) * 100).toFixed(0)} % CPU`,
    };
  });
  if (noFma && baseCase) {
    const t = torch?.[baseCase.name]?.train_ms ?? null;
    rows.splice(1, 0, {
      name: `${baseCase.name}, relaxed SIMD off (ARL_RELAXED_SIMD=0)`,
      ours: noFma.train_ms,
      reference: t,
      unit: "ms/step",
      speedup: t === null ? null : t / noFma.train_ms,
      target: "",
      met: null,
      note: `fwd+bwd ${noFma.fb_ms.toFixed(0)} + Adam ${noFma.adam_ms.toFixed(0)} ms (wasm f32x4 mul+add instead of FMA)`,
    });
  }
  const result = benchResult({ script: "bench/train-step.ts", args }, {
    bench: "train-step",
    title: "1. Embedded training step vs PyTorch (forward + backward + AdamW)",
    reference: torch
      ? `PyTorch ${torchVersion} CPU (Debian python3-torch), ${threads} threads, same model/shapes (bench/torch_reference.py)`
      : `none: ${torchNote}`,
    rows,
    contention: worst,
    extra: { ours: { threads: jaxThreads, relaxedSimd, lengthBucket, chunkTokens: chunkTokens ?? null, results: ours }, torch, cases },
  });
  printResult(result);
  console.log(`wrote ${writeResult(result)}`);
}

await main();
process.exit(0);
