/**
 * Sampling speed of the embedded backend's two engines (jax-js and onnxruntime-node) vs PyTorch on the same shapes.
 *
 *   node --import tsx bench/sampling.ts [--only base|small] [--engines jax,onnx] [--no-torch] [--max-wait S]
 *     [--retries N] [--threads N] [--spinning]
 *
 * Cases (KV-cache sampling at temperature 1 through `samplingClient().sample()`, all calls of a rep in one batch):
 * - base: vocab 512, context 256, d_model 128, 4 layers, 4 heads, MLP 4×; 16 prompts × n = 1, 16-token prompts,
 *   128 new tokens (the issue's shape);
 * - small: the default training model, vocab 900, context 256, d96 L2 H4; 16 prompts × n = 8, 100-token prompts,
 *   24 new tokens (an RL rollout step's shape).
 * tok/s = new tokens ÷ wall time of the whole call (prefill included); median of 5 reps after 2 warm-ups; each
 * (case, engine) runs in a fresh child process. For the ONNX engine the session-rebuild cost per weight update
 * (host read of the weights + model build + session creation, ms) is measured after `optimStep`s.
 * `--threads N` sets the ONNX engine's intra-op threads (default: the engine's default, 1); `--spinning` lets its
 * pool threads spin. The PyTorch reference (bench/torch_reference.py, `/usr/bin/python3`, OPENBLAS_NUM_THREADS=1, --threads <cores>)
 * runs the same shapes; skipped with a message when no python can import torch.
 * Writes bench/results/sampling.json (a BenchResult, see bench/lib.ts) and prints the table.
 */
import { spawnSync } from "node:child_process";
import { availableParallelism } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Rng } from "../src/core/rng.ts";
import type { Datum } from "../src/core/types.ts";
import { EmbeddedBackend, type SamplerEngine } from "../src/policy/embedded/backend.ts";
import { paramCount, type GPTConfig } from "../src/policy/embedded/gpt.ts";
import type { BatchedSampler } from "../src/policy/embedded/batchedSampler.ts";
import type { OnnxSampler } from "../src/policy/onnx/sampler.ts";
import { benchResult, flag, benchDir, findTorchPython, machine, median, printResult, torchBlasProblem, waitIdle, withContention, writeResult, type BenchRow, type TorchBlas, measured } from "./lib.ts";

const args = process.argv.slice(2);
const only = flag("--only");
const engines = (flag("--engines") ?? "jax,onnx").split(",") as SamplerEngine[];
const noTorch = args.includes("--no-torch");
const maxWait = Number(flag("--max-wait") ?? 300);
const retries = Number(flag("--retries") ?? 2);
const cores = availableParallelism();
/** ONNX intra-op threads (default: the sampler's default, 1; PyTorch gets all cores). */
const threads = flag("--threads") === undefined ? undefined : Number(flag("--threads"));
const spinning = args.includes("--spinning");
const WARMUP = 2;
const REPS = 5;
/** Internal: run one (case, engine) in this process and print its result as the last stdout line. */
const childCase = flag("--case");
const childEngine = flag("--engine") as SamplerEngine | undefined;

/** One sampling shape. */
interface Case {
  name: string;
  gpt: GPTConfig;
  prompts: number;
  n: number;
  /** Prompt length (tokens). */
  prompt: number;
  newTokens: number;
}

const cases: Case[] = [];
if (only !== "small") {
  cases.push({ name: "base sample 16×128", gpt: { vocabSize: 512, contextLength: 256, dModel: 128, nLayers: 4, nHeads: 4 }, prompts: 16, n: 1, prompt: 16, newTokens: 128 });
}
if (only !== "base") {
  cases.push({ name: "d96 L2 H4 sample 128×24", gpt: { vocabSize: 900, contextLength: 256, dModel: 96, nLayers: 2, nHeads: 4 }, prompts: 16, n: 8, prompt: 100, newTokens: 24 });
}

/** What one child measures. */
interface EngineResult {
  /** New tokens per second, each measured rep. */
  tokS: number[];
  /** Median prefill and per-decode-step wall time (ms). */
  prefillMs: number;
  decodeStepMs: number;
  /** The first call (compilation / session creation included, ms). */
  firstCallMs: number;
  /** ONNX only: session rebuild after a weight update (read + build, ms), each measured update. */
  rebuildMs?: number[];
}

async function runEngine(c: Case, engine: SamplerEngine): Promise<EngineResult> {
  const be = await EmbeddedBackend.create(c.gpt, { seed: 0, samplerEngine: engine, onnx: { threads, spinning } });
  const client = be.samplingClient() as BatchedSampler;
  const rng = new Rng(2);
  const V = c.gpt.vocabSize;
  const prompts = Array.from({ length: c.prompts }, () => Array.from({ length: c.prompt }, () => rng.int(V)));
  const tokS: number[] = [];
  const prefill: number[] = [];
  const step: number[] = [];
  let firstCallMs = 0;
  for (let r = 0; r < WARMUP + REPS; r++) {
    const t0 = performance.now();
    const out = await Promise.all(prompts.map((p, i) => client.sample(p, { n: c.n, maxTokens: c.newTokens, temperature: 1, seed: r * 1000 + i })));
    const ms = performance.now() - t0;
    const generated = out.flat().reduce((s, x) => s + x.tokens.length, 0);
    if (r === 0) firstCallMs = ms;
    if (r >= WARMUP) {
      tokS.push((generated / ms) * 1000);
      prefill.push(client.lastBatch.prefillMs);
      step.push(client.lastBatch.decodeMs / Math.max(1, client.lastBatch.decodeSteps));
    }
  }
  const result: EngineResult = { tokS, prefillMs: median(prefill), decodeStepMs: median(step), firstCallMs };
  if (engine === "onnx") {
    // Rebuild cost per weight update: an SGD-ish update, then a one-token call makes the sampler rebuild.
    const onnx = client as OnnxSampler;
    const datums: Datum[] = prompts.slice(0, 4).map((p) => ({ modelInput: p.slice(0, -1), targetTokens: p.slice(1), weights: new Array(p.length - 1).fill(1) }));
    const rebuildMs: number[] = [];
    for (let u = 0; u < 3; u++) {
      await be.forwardBackward(datums, "cross_entropy");
      await be.optimStep({ learningRate: 1e-3 });
      await client.sample(prompts[0], { n: 1, maxTokens: 1, temperature: 1, seed: u });
      const last = onnx.rebuilds[onnx.rebuilds.length - 1];
      rebuildMs.push(last.readMs + last.buildMs);
    }
    result.rebuildMs = rebuildMs;
  }
  be.dispose();
  return result;
}

function runInChild(c: Case, engine: SamplerEngine): EngineResult {
  const extra = [...(threads === undefined ? [] : ["--threads", String(threads)]), ...(spinning ? ["--spinning"] : [])];
  const r = spawnSync(process.execPath, [...process.execArgv, fileURLToPath(import.meta.url), "--case", c.name, "--engine", engine, ...extra], {
    encoding: "utf8",
    maxBuffer: 1 << 24,
  });
  if (r.status !== 0) throw new Error(`case ${c.name} (${engine}) failed: ${r.stderr}`);
  const lines = r.stdout.trim().split("\n");
  return JSON.parse(lines[lines.length - 1]) as EngineResult;
}

/** PyTorch's results by case name (tok_s, decode_step_ms). @throws Error when the script fails */
function runTorch(py: string): Record<string, { tok_s: number; decode_step_ms: number }> {
  const shapes = cases.map((c) => ({
    name: c.name,
    kind: "sample",
    vocab: c.gpt.vocabSize,
    context: c.gpt.contextLength,
    dModel: c.gpt.dModel,
    nLayers: c.gpt.nLayers,
    nHeads: c.gpt.nHeads,
    rows: c.prompts * c.n,
    prompt: c.prompt,
    newTokens: c.newTokens,
  }));
  // --steps 10: the script samples max(2, steps/2) = 5 measured reps after one warm-up.
  const r = spawnSync(py, [join(benchDir, "torch_reference.py"), "--threads", String(cores), "--steps", String(2 * REPS), "--shapes", JSON.stringify(shapes)], {
    encoding: "utf8",
    env: { ...process.env, OPENBLAS_NUM_THREADS: "1" },
    maxBuffer: 1 << 24,
  });
  if (r.status !== 0) throw new Error(`torch reference failed: ${r.stderr}`);
  const lines = r.stdout.trim().split("\n");
  const out = JSON.parse(lines[lines.length - 1]) as { results: Record<string, { tok_s: number; decode_step_ms: number }>; blas?: TorchBlas };
  const problem = torchBlasProblem(out.blas);
  if (problem) throw new BlasRefused(problem);
  return out.results;
}

/** The reference ran on a BLAS whose ratios would mislead (see `torchBlasProblem`). */
class BlasRefused extends Error {}

const measuredHere = <T>(fn: () => T) => measured(fn, retries, maxWait);

async function main(): Promise<void> {
  if (childCase !== undefined) {
    const c = cases.find((x) => x.name === childCase);
    if (!c || !childEngine) throw new Error(`unknown case ${childCase} / engine ${childEngine}`);
    console.log(JSON.stringify(await runEngine(c, childEngine)));
    return;
  }
  console.log(`sampling engines: ${engines.join(", ")}; ONNX threads ${threads ?? "default (1)"}${spinning ? " (spinning)" : ""}; machine: ${machine().cpu} × ${cores}`);
  const ours = new Map<string, EngineResult>();
  const contention: Record<string, number | null> = {};
  for (const c of cases) {
    for (const e of engines) {
      const key = `${c.name} ${e}`;
      const r = await measuredHere(() => runInChild(c, e));
      ours.set(key, r.value);
      contention[key] = r.others;
      const v = r.value;
      console.log(
        `  ${key}: ${median(v.tokS).toFixed(0)} tok/s (prefill ${v.prefillMs.toFixed(1)} ms, ${v.decodeStepMs.toFixed(2)} ms/decode step` +
          `${v.rebuildMs ? `, rebuild ${median(v.rebuildMs).toFixed(0)} ms` : ""}; other processes ${((r.others ?? 0) * 100).toFixed(0)}% CPU)`,
      );
    }
  }
  let torch: Record<string, { tok_s: number; decode_step_ms: number }> | null = null;
  let torchNote = "";
  const py = noTorch ? null : findTorchPython();
  if (noTorch) torchNote = "skipped (--no-torch)";
  else if (!py) torchNote = "skipped (no /usr/bin/python3 or python3 that can import torch)";
  else {
    try {
      const r = await measuredHere(() => runTorch(py));
      torch = r.value;
      contention.torch = r.others;
    } catch (e) {
      if (!(e instanceof BlasRefused)) throw e;
      torchNote = `refused: ${e.message}`;
    }
  }
  if (torchNote) console.log(`PyTorch reference: ${torchNote}`);

  const rows: BenchRow[] = [];
  for (const c of cases) {
    const t = torch?.[c.name];
    for (const e of engines) {
      const key = `${c.name} ${e}`;
      const o = ours.get(key)!;
      const tok = median(o.tokS);
      const speedup = t ? tok / t.tok_s : null;
      // The target applies to the engine RL samples with by default (policy.sampler: onnx).
      const isBase = c.name.startsWith("base") && e === "onnx";
      const parts = [
        `${e === "jax" ? "jax-js (the trainer's runtime)" : `onnxruntime-node (default engine), ${threads ?? 1} thread(s)`}`,
        `${o.decodeStepMs.toFixed(2)} ms/decode step${t ? ` (PyTorch ${t.decode_step_ms.toFixed(2)})` : ""}`,
        `prefill ${o.prefillMs.toFixed(0)} ms`,
        `first call ${(o.firstCallMs / 1000).toFixed(1)} s`,
      ];
      if (o.rebuildMs) parts.push(`session rebuild per weight update ${median(o.rebuildMs).toFixed(0)} ms`);
      parts.push(`others used ${((contention[key] ?? 0) * 100).toFixed(0)}% CPU${t ? ` (PyTorch run: ${((contention.torch ?? 0) * 100).toFixed(0)}%)` : ""}`);
      rows.push({
        name: `${c.name} (${e})`,
        ours: tok,
        reference: t ? t.tok_s : null,
        unit: "tok/s",
        speedup,
        target: isBase ? "≥ 1.0× PyTorch" : "",
        met: isBase && speedup !== null ? speedup >= 1 : null,
        note: parts.join("; "),
        reason:
          isBase && speedup !== null && speedup < 1
            ? `decode steps: ${o.decodeStepMs.toFixed(2)} ms vs PyTorch's ${t?.decode_step_ms.toFixed(2)} ms; check the machine's load (others used ${((contention[key] ?? 0) * 100).toFixed(0)} %) and --threads`
            : undefined,
      });
    }
  }
  const ctn = Object.values(contention).filter((x): x is number => x !== null);
  const result = benchResult({ script: "bench/sampling.ts", args }, {
    bench: "sampling",
    title: "2. Sampling with a KV cache: ONNX and jax-js engines vs PyTorch",
    reference: torch ? `PyTorch CPU (bench/torch_reference.py), ${cores} threads, OPENBLAS_NUM_THREADS=1` : `PyTorch: ${torchNote}`,
    rows,
    contention: ctn.length ? Math.max(...ctn) : null,
    extra: {
      onnxThreads: threads ?? 1,
      spinning,
      warmup: WARMUP,
      reps: REPS,
      cases: cases.map((c) => ({ ...c, params: paramCount(c.gpt) })),
      ours: Object.fromEntries(ours),
      torch,
      contention,
    },
  });
  // A subset of the full run never replaces the committed results (bench/lib.ts writeResult).
  const file = writeResult(result, only !== undefined || engines.join(",") !== "jax,onnx" || noTorch);
  printResult(result);
  console.log(`wrote ${file}`);
}

await main();
process.exit(0);
