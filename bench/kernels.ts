/**
 * Why the training step is where it is: the throughput (GFLOP/s) of the two kinds of matrix product a GPT training
 * step is made of, in jax-js (our tensor library, wasm) and in PyTorch, at the base shape's sizes and the same
 * thread count. A dense 2-D product is the linear layers (forward and both backward products); a batched product of
 * many small matrices is attention (`[B·H, T, hd] @ [B·H, hd, T]` and back).
 *
 *   node --import tsx bench/kernels.ts [--no-torch] [--max-wait S]
 *
 * Median of 7 runs after a warm-up, each product jit-compiled on its own. Writes bench/results/kernels.json
 * (speedup = our GFLOP/s ÷ PyTorch's).
 */
import { spawnSync } from "node:child_process";
import { availableParallelism } from "node:os";
import { blockUntilReady, jaxThreads, jit, numpy as np, relaxedSimd } from "../src/policy/embedded/jax.ts";
import { benchResult, findTorchPython, median, printResult, waitIdle, withContention, writeResult, type BenchRow } from "./lib.ts";

const args = process.argv.slice(2);
const noTorch = args.includes("--no-torch");
const maxWait = Number(args[args.indexOf("--max-wait") + 1] ?? 600) || 600;

/** A product: a `[...batch, M, K]` @ `[...batch, K, N]`. */
interface Product {
  name: string;
  batch: number;
  M: number;
  K: number;
  N: number;
}
const products: Product[] = [
  { name: "linear: [3072,128]@[128,512]", batch: 1, M: 3072, K: 128, N: 512 },
  { name: "linear grad: [512,3072]@[3072,128]", batch: 1, M: 512, K: 3072, N: 128 },
  { name: "attention: 48×[256,32]@[32,256]", batch: 48, M: 256, K: 32, N: 256 },
  { name: "attention: 48×[256,256]@[256,32]", batch: 48, M: 256, K: 256, N: 32 },
];
const flops = (p: Product): number => 2 * p.batch * p.M * p.K * p.N;

async function ours(p: Product): Promise<number> {
  const shape = (r: number, c: number): number[] => (p.batch > 1 ? [p.batch, r, c] : [r, c]);
  const a = np.ones(shape(p.M, p.K)).mul(0.5);
  const b = np.ones(shape(p.K, p.N)).mul(0.25);
  const f = jit((x: np.Array, y: np.Array) => np.matmul(x, y));
  await blockUntilReady(f(a.ref, b.ref));
  const ts: number[] = [];
  for (let i = 0; i < 7; i++) {
    const t = performance.now();
    const y = f(a.ref, b.ref);
    await blockUntilReady(y);
    ts.push(performance.now() - t);
    y.dispose();
  }
  a.dispose();
  b.dispose();
  return flops(p) / median(ts) / 1e6;
}

const TORCH = `
import json, sys, time, statistics, torch
torch.set_num_threads(int(sys.argv[1]))
out = {}
for p in json.loads(sys.argv[2]):
    sh = lambda r, c: (p["batch"], r, c) if p["batch"] > 1 else (r, c)
    a = torch.full(sh(p["M"], p["K"]), 0.5); b = torch.full(sh(p["K"], p["N"]), 0.25)
    torch.matmul(a, b)
    ts = []
    for _ in range(7):
        t = time.perf_counter(); torch.matmul(a, b); ts.append(time.perf_counter() - t)
    out[p["name"]] = 2 * p["batch"] * p["M"] * p["K"] * p["N"] / statistics.median(ts) / 1e9
print(json.dumps(out))
`;

async function main(): Promise<void> {
  const threads = availableParallelism();
  await waitIdle(maxWait);
  const mine = await withContention(async () => {
    const r: Record<string, number> = {};
    for (const p of products) r[p.name] = await ours(p);
    return r;
  });
  const py = noTorch ? null : findTorchPython();
  let torch: Record<string, number> | null = null;
  let others = mine.others ?? 0;
  if (py) {
    const t = await withContention(() =>
      spawnSync(py, ["-c", TORCH, String(threads), JSON.stringify(products)], { encoding: "utf8", env: { ...process.env, OPENBLAS_NUM_THREADS: "1" } }),
    );
    if (t.value.status === 0) torch = JSON.parse(t.value.stdout.trim().split("\n").pop()!) as Record<string, number>;
    else console.log(`PyTorch reference failed: ${t.value.stderr}`);
    others = Math.max(others, t.others ?? 0);
  }
  const rows: BenchRow[] = products.map((p) => {
    const o = mine.value[p.name];
    const t = torch?.[p.name] ?? null;
    return {
      name: p.name,
      ours: o,
      reference: t,
      unit: "GFLOP/s",
      speedup: t === null ? null : o / t,
      target: "",
      met: null,
      note: `${(flops(p) / 1e6).toFixed(0)} MFLOP per product`,
    };
  });
  const result = benchResult({ script: "bench/kernels.ts", args }, {
    bench: "kernels",
    title: "1b. Why: matrix-product throughput, jax-js vs PyTorch",
    reference: py ? `PyTorch CPU, ${threads} threads (torch.matmul)` : "none (no python with torch)",
    rows,
    contention: others,
    extra: { jaxThreads, relaxedSimd },
  });
  printResult(result);
  console.log(`wrote ${writeResult(result)}`);
}

await main();
process.exit(0);
