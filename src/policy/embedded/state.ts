/**
 * The embedded backend's training state (weights and Adam moments) as named host tensors, `params.<leaf>`,
 * `adam.m.<leaf>`, `adam.v.<leaf>` in `paramShapes` order: what a checkpoint holds (`checkpoint.ts` writes and checks
 * the files), and the NaN/Inf check of a refused update.
 */
import { NonFiniteError, firstNonFinite } from "../../core/finite.ts";
import { loadCheckpoint } from "./checkpoint.ts";
import { namedLeaves, paramShapes, paramsFromData, type GPTConfig, type GPTParams } from "./gpt.ts";
import type { AdamState } from "./optim.ts";

/** Names (`params.<leaf>`, `adam.m.<leaf>`, `adam.v.<leaf>`) of the leaves holding a NaN/±Inf; reads each to the host. */
export async function nonFiniteLeaves(params: GPTParams, state: AdamState<GPTParams>): Promise<string[]> {
  const out: string[] = [];
  for (const [prefix, p] of [["params.", params], ["adam.m.", state.m], ["adam.v.", state.v]] as const) {
    for (const [name, a] of namedLeaves(p)) if (firstNonFinite(await a.ref.data())) out.push(prefix + name);
  }
  return out;
}

/** Host copies of the weights and Adam moments, named as in a checkpoint (the device arrays stay owned by the caller). */
export async function stateTensors(params: GPTParams, adam: AdamState<GPTParams>): Promise<[string, Float32Array][]> {
  const tensors: [string, Float32Array][] = [];
  const put = async (prefix: string, p: GPTParams): Promise<void> => {
    for (const [name, a] of namedLeaves(p)) tensors.push([prefix + name, (await a.ref.data()) as Float32Array]);
  };
  await put("params.", params);
  await put("adam.m.", adam.m);
  await put("adam.v.", adam.v);
  return tensors;
}

/**
 * The training state saved under `dir` for a model of shape `config`, as new device arrays. `withOptimizer: false`
 * takes the weights only and restarts Adam (zero moments, step 0; Tinker's `load_weights {optimizer: false}`).
 * @throws Error naming the file when a file is missing or fails its checksum, or when the saved model shape
 *   differs from `config`; NonFiniteError naming the tensor when one holds NaN/±Inf
 */
export async function readState(dir: string, config: Required<GPTConfig>, withOptimizer: boolean): Promise<{ params: GPTParams; adam: AdamState<GPTParams> }> {
  const { meta, tensors } = await loadCheckpoint(dir);
  // A NaN/Inf weight or moment would poison every later step: refuse the file, keep the current state.
  for (const [name, t] of tensors) {
    const bad = firstNonFinite(t, name);
    if (bad) throw new NonFiniteError([name], `checkpoint ${dir}: ${bad.path} is ${bad.value} (not finite); not loaded`);
  }
  // Fields added after a checkpoint was written read as their defaults (`positional`: learned, `tokenShift`: false, `shiftWindow`: 1), so old runs load.
  const saved = { mlpRatio: 4, positional: "learned", tokenShift: false, shiftWindow: 1, ...(meta.config as Partial<GPTConfig> | undefined) } as Partial<GPTConfig>;
  for (const k of Object.keys(config) as (keyof GPTConfig)[]) {
    if (saved[k] !== config[k]) {
      throw new Error(`checkpoint ${dir}: config.${k} is ${saved[k]}, this backend has ${config[k]}`);
    }
  }
  const sub = (prefix: string): Map<string, Float32Array> => {
    const m = new Map<string, Float32Array>();
    for (const [name] of paramShapes(config)) {
      const t = tensors.get(prefix + name);
      if (t) m.set(name, t);
    }
    return m;
  };
  const params = paramsFromData(config, sub("params."));
  const zeros = (): Map<string, Float32Array> => new Map(paramShapes(config).map(([name, shape]) => [name, new Float32Array(shape.reduce((a, b) => a * b, 1))]));
  const m = paramsFromData(config, withOptimizer ? sub("adam.m.") : zeros());
  const v = paramsFromData(config, withOptimizer ? sub("adam.v.") : zeros());
  return { params, adam: { step: withOptimizer ? Number(meta.adamStep ?? 0) : 0, m, v } };
}
