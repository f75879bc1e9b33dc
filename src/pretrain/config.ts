/**
 * The `arl pretrain` config (issue 32 part 3): the base model's shape, its tokenizer's budget, the corpus mix and the
 * optimiser schedule. Flags name a field by its path (`--optim.steps 200`, `--model.dModel 64`, `--run.seed 1`); errors name the field
 * and its allowed values. Defaults are the shipped base's (measured, README "The base model").
 */
import { z } from "zod";
import { int, intIn, SIZE_BOUNDS } from "../core/configFields.ts";
import { ConfigError } from "../train/config.ts";

const num = (lo: number, hi: number, desc: string) => z.number().min(lo).max(hi).describe(desc);

/** The whole pretraining config (see the file comment). */
export const PretrainConfig = z
  .object({
    run: z
      .object({
        dir: z.string().min(1).default("runs/pretrain").describe("Run folder: tokenizer.json, checkpoint-<step>/, metrics.jsonl, and base/ at the end."),
        seed: int(0, "Seeds the tokenizer's sample, the corpus stream and the initial weights: same seed, same machine → same base fingerprint.").default(0),
        checkpointEvery: int(1, "Steps between checkpoints (a killed run resumes from the last one).").default(100),
        evalEvery: int(1, "Steps between held-out evaluations (loss per token, written to metrics.jsonl).").default(250),
        probesPerCell: int(0, "Reading probes run on the finished base (probes.ts): cases per copy (length × distance) and per select list length (twice as many), each protocol; 0 = none.").default(4),
      })
      .strict()
      .prefault({}),
    model: z
      .object({
        dModel: intIn(8, SIZE_BOUNDS.dModel, "Transformer width.").default(128),
        nLayers: intIn(1, SIZE_BOUNDS.nLayers, "Transformer blocks.").default(4),
        nHeads: intIn(1, SIZE_BOUNDS.nHeads, "Attention heads (must divide dModel; dModel/nHeads even under rope).").default(4),
        mlpRatio: intIn(1, SIZE_BOUNDS.mlpRatio, "MLP hidden size / dModel.").default(4),
        contextLength: intIn(16, SIZE_BOUNDS.contextLength, "Context (tokens); also the packed row length.").default(1024),
        positional: z.enum(["rope", "learned"]).default("rope").describe("Positions: rope (rotary, measured to copy sooner) or learned (GPT-2 absolute embeddings)."),
        tokenShift: z.boolean().default(true).describe("Mix the previous token into each position's input (GPTConfig.tokenShift; measured: copying forms several times sooner)."),
        shiftWindow: intIn(1, 3, "Previous tokens the token shift mixes in (GPTConfig.shiftWindow; measured: 3 reaches a lower loss than 1 on the same batches, 1.04 vs 1.19 nats at steps 351–400).").default(3),
      })
      .strict()
      .prefault({}),
    tokenizer: z
      .object({
        vocabSize: intIn(300, 65_536, "Byte-level BPE vocabulary (256 bytes + merges + special tokens).").default(1024),
        episodes: int(1, "Generated episodes (per protocol) in the tokenizer's training sample.").default(1500),
        drills: int(0, "Generated drills in the tokenizer's training sample.").default(1500),
      })
      .strict()
      .prefault({}),
    data: z
      .object({
        protocols: z.array(z.enum(["hermes", "react"])).min(1).default(["hermes", "react"]).describe("Protocols the episodes are rendered in (drawn uniformly per episode)."),
        drillFraction: num(0, 1, "Share of documents that are copy / lookup drills (the rest are tool-use episodes).").default(0.5),
        lossOn: z.enum(["all", "turns"]).default("all").describe("Tokens the loss covers: all (a language model's pretraining) or turns (only the policy's turns and drill answers)."),
      })
      .strict()
      .prefault({}),
    optim: z
      .object({
        steps: int(1, "Optimiser steps.").default(3000),
        rowsPerStep: intIn(1, SIZE_BOUNDS.batch, "Packed rows of contextLength tokens per step.").default(16),
        learningRate: num(0, 1, "Peak AdamW learning rate (after warm-up; cosine decay to minLearningRate).").default(3e-3),
        minLearningRate: num(0, 1, "Learning rate at the last step.").default(3e-4),
        warmupSteps: int(0, "Linear warm-up steps.").default(100),
        weightDecay: num(0, 1, "Decoupled weight decay (AdamW).").default(0),
        gradClip: num(0, 1e6, "Global gradient-norm clip (0 = off).").default(1),
      })
      .strict()
      .prefault({}),
  })
  .strict()
  .refine((c) => c.model.dModel % c.model.nHeads === 0, { message: "model.nHeads must divide model.dModel", path: ["model", "nHeads"] })
  .refine((c) => c.model.positional !== "rope" || (c.model.dModel / c.model.nHeads) % 2 === 0, { message: "model.positional rope needs an even dModel/nHeads", path: ["model", "nHeads"] })
  .refine((c) => c.optim.minLearningRate <= c.optim.learningRate, { message: "optim.minLearningRate must be ≤ optim.learningRate", path: ["optim", "minLearningRate"] });

/** A resolved pretraining config. */
export type PretrainConfig = z.infer<typeof PretrainConfig>;

/** The smoke preset (`arl pretrain --smoke`): a tiny model and a few steps, for tests (seconds). */
export const PRETRAIN_SMOKE: Record<string, string> = {
  "run.dir": "runs/pretrain-smoke",
  "model.dModel": "32",
  "model.nLayers": "2",
  "model.nHeads": "2",
  "model.contextLength": "1024",
  "tokenizer.vocabSize": "1024",
  "tokenizer.episodes": "60",
  "tokenizer.drills": "60",
  "optim.steps": "12",
  "optim.rowsPerStep": "2",
  "optim.warmupSteps": "2",
  "run.checkpointEvery": "5",
  "run.evalEvery": "6",
  "run.probesPerCell": "1",
};

/**
 * Validates a raw pretraining config and fills defaults.
 * @throws ConfigError naming each bad field and what it allows
 */
export function resolvePretrainConfig(raw: unknown): PretrainConfig {
  const r = PretrainConfig.safeParse(raw ?? {});
  if (r.success) return r.data;
  throw new ConfigError(r.error.issues.map((i) => describe(i, raw)));
}

/** One problem as `path: expected …, got …` (the experiment config's wording, src/train/config.ts). */
function describe(issue: z.core.$ZodIssue, raw: unknown): string {
  const path = issue.path.join(".") || "(top level)";
  let got: unknown = raw;
  for (const key of issue.path) got = got && typeof got === "object" ? (got as Record<PropertyKey, unknown>)[key] : undefined;
  const shown = got === undefined ? "nothing" : JSON.stringify(got);
  switch (issue.code) {
    case "invalid_value":
      return `${path}: expected one of ${issue.values.map((v) => JSON.stringify(v)).join(", ")}, got ${shown}`;
    case "unrecognized_keys": {
      let node: z.ZodType = unwrap(PretrainConfig as unknown as z.ZodType);
      for (const key of issue.path) node = unwrap((node as unknown as { shape: Record<string, z.ZodType> }).shape[String(key)]);
      const allowed = Object.keys((node as unknown as { shape: Record<string, unknown> }).shape);
      return `${path}: unknown field(s) ${issue.keys.join(", ")} (allowed: ${allowed.join(", ")})`;
    }
    case "too_small":
      return `${path}: expected ${issue.origin === "array" ? "a list of at least" : issue.inclusive ? "a number ≥" : "a number >"} ${issue.minimum}, got ${shown}`;
    case "too_big":
      return `${path}: expected a number ${issue.inclusive ? "≤" : "<"} ${issue.maximum}, got ${shown}`;
    case "invalid_type":
      return `${path}: expected ${issue.expected}, got ${shown}`;
    default:
      return `${path}: ${issue.message}`;
  }
}

function unwrap(t: z.ZodType): z.ZodType {
  let node = t as unknown as { unwrap?: () => z.ZodType; def?: { innerType?: z.ZodType } };
  while (node.def?.innerType) node = node.def.innerType as unknown as typeof node;
  return node as unknown as z.ZodType;
}

/** The learning rate at `step` (0-based): linear warm-up to the peak, then cosine to the minimum at the last step. */
export function learningRateAt(c: PretrainConfig["optim"], step: number): number {
  if (step < c.warmupSteps) return (c.learningRate * (step + 1)) / c.warmupSteps;
  const span = Math.max(1, c.steps - c.warmupSteps - 1);
  const t = Math.min(1, (step - c.warmupSteps) / span);
  return c.minLearningRate + 0.5 * (c.learningRate - c.minLearningRate) * (1 + Math.cos(Math.PI * t));
}
