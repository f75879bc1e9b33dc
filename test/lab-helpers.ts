/**
 * Helpers of the search-lab tests (`test/lab*.test.ts`): the quick lab's config as `arl lab --quick` resolves it,
 * and the narrowing of a lab result to the QA kind the search lab writes.
 */
import { searchRecipe } from "../src/envs/index.ts";
import { isQaLab } from "../src/lab/judge.ts";
import { quickLabOverrides } from "../src/lab/lab.ts";
import type { AnyLabResult, LabResult } from "../src/lab/types.ts";
import { resolveConfig, type ExperimentConfig } from "../src/train/config.ts";
import { applyOverrides } from "../src/train/configFile.ts";

/** The quick search lab's config with its runs under `root`, then the dotted `extra` flags over it. */
export function quickSearchLab(root: string, extra: Record<string, string> = {}): ExperimentConfig {
  return resolveConfig(applyOverrides(applyOverrides({}, quickLabOverrides(searchRecipe)), { "run.dir": root, ...extra }));
}

/**
 * The search lab's result as a QA lab (EM slices and claims).
 * @throws Error when `lab` is a loophole lab (another env's)
 */
export function qaLab(lab: AnyLabResult): LabResult {
  if (!isQaLab(lab)) throw new Error(`expected a QA lab result, got a loophole lab of ${lab.env}`);
  return lab;
}
