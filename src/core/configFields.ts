/**
 * The building blocks every config section's schema shares (src/env/config.ts, src/reward/config.ts,
 * src/algo/config.ts, src/policy/config.ts, src/train/config.ts): integer fields whose errors show their bounds, the
 * upper bounds of sizes that are absurd beyond them, and the comma-list splitting of list flags. Here at the bottom
 * layer so that each owner's section can use them without importing another owner's.
 */
import { constants as bufferConstants } from "node:buffer";
import { z } from "zod";

/** An integer ≥ `min`, described by `desc` (the description `--print-config`'s readers and docs show). */
export const int = (min: number, desc: string) => z.number().int().min(min).describe(desc);

/** An integer in [min, max]; errors show the range. */
export const intIn = (min: number, max: number, desc: string) => z.number().int().min(min).max(max).describe(desc);

/** Upper bounds of sizes that are absurd beyond them (the embedded backend's memory check refuses far less). */
export const SIZE_BOUNDS = {
  /** Model width: the largest open models use 16 384. */
  dModel: 65_536,
  nLayers: 1_024,
  nHeads: 1_024,
  mlpRatio: 64,
  /** Context window (tokens): 2²⁰; remote (Tinker) models reach 128 Ki–1 Mi tokens. */
  contextLength: 1_048_576,
  /** Rows of one batch: demonstrations per SFT step, questions per RL step, replayed demonstrations. */
  batch: 65_536,
  /** Episodes per question (GRPO's G). */
  groupSize: 4_096,
  /** Characters of one tool output: V8's longest string (2²⁹−24 on 64-bit Node); longer ones throw RangeError. */
  chars: bufferConstants.MAX_STRING_LENGTH,
} as const;

/**
 * Splits a comma-separated list (`--env.faults.kinds hang,slow`), as the list fields' preprocessors do; the error
 * messages split the raw string the same way to show the offending item.
 * @returns the trimmed, non-empty items in order
 */
export function commaList(v: string): string[] {
  return v.split(",").map((x) => x.trim()).filter(Boolean);
}
