/**
 * What one `forwardBackward` call of the embedded backend hands its loss program besides the tokens: the checks a
 * loss needs of its datums, and the hyper-parameter vector `hp` (clip bounds, KL coefficient, the normalisation's
 * 1/denominator, dual clip, DRO β; see `loss.ts`).
 */
import type { LossConfig, LossFnName } from "../../core/training.ts";
import type { Datum } from "../../core/types.ts";

/** The loss setup of one batch. */
export interface LossPlan {
  /** The k3 KL term is on (`klCoef` > 0). */
  useKl: boolean;
  /** Every datum carries sampler logprobs (so `kl` and `ratio_mean` are reported). */
  hasQ: boolean;
  /** Dual-clip PPO (`ppo` with `clipRatioC`). */
  dualClip: boolean;
  /** Tokens with a nonzero weight in the batch. */
  tokenCount: number;
  /** `[clipLow, clipHigh, klCoef, invDenom, clipRatioC, droBeta]`, defaults filled. */
  hp: number[];
}

/**
 * The loss setup of `datums` (already validated) under `lossFn` and `config`. The normalisation's 1/denominator:
 * 1 (`sum`), 1/(constantLength·batch) (`constant`), else 1/Σweights (`tokens`; 0 when there are none).
 * @throws Error on missing sampler logprobs/advantages for RL losses, missing `refLogprobs` with `klCoef` > 0,
 *   `normalization: "constant"` without `constantLength`, or `clipRatioC` ≤ 1
 */
export function lossPlan(datums: readonly Datum[], lossFn: LossFnName, config: LossConfig): LossPlan {
  const rl = lossFn !== "cross_entropy";
  datums.forEach((d, i) => {
    if (rl && (!d.logprobs || !d.advantages)) {
      throw new Error(`datum ${i}: loss "${lossFn}" needs logprobs and advantages`);
    }
  });
  const klCoef = config.klCoef ?? 0;
  const useKl = klCoef > 0;
  if (useKl) {
    datums.forEach((d, i) => {
      if (!d.refLogprobs) throw new Error(`datum ${i}: klCoef > 0 needs refLogprobs`);
    });
  }
  const hasQ = datums.every((d) => d.logprobs !== undefined);
  const wTotal = datums.reduce((s, d) => s + d.weights.reduce((a, b) => a + b, 0), 0);
  const tokenCount = datums.reduce((s, d) => s + d.weights.filter((w) => w !== 0).length, 0);
  let invDenom: number;
  if (config.normalization === "sum") {
    invDenom = 1;
  } else if (config.normalization === "constant") {
    if (!(config.constantLength && config.constantLength > 0)) {
      throw new Error('normalization "constant" needs a positive constantLength');
    }
    invDenom = 1 / (config.constantLength * datums.length);
  } else {
    invDenom = wTotal > 0 ? 1 / wTotal : 0;
  }
  const dualClip = lossFn === "ppo" && config.clipRatioC !== undefined;
  if (dualClip && !(config.clipRatioC! > 1)) throw new Error(`clipRatioC must be > 1 (dual-clip PPO), got ${config.clipRatioC}`);
  const hp = [config.clipLow ?? 0.2, config.clipHigh ?? 0.2, klCoef, invDenom, config.clipRatioC ?? 0, config.droBeta ?? 0.05];
  return { useKl, hasQ, dualClip, tokenCount, hp };
}
