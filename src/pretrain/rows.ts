/**
 * The pretraining batches: documents (tool-use episodes in the configured protocols, and drills) drawn from a seeded
 * stream, tokenised, separated by `<|endoftext|>` and packed into rows of exactly `contextLength + 1` tokens — no
 * padding, as GPT-2 / nanoGPT pretrain; a document that does not fit is cut at the row's end. Each step's batch is a
 * pure function of `(seed, step)`, so a resumed run trains on exactly the batches an uninterrupted one would.
 *
 * Loss weights (`data.lossOn`): `all` — every token (a language model's loss); `turns` — only the policy's turns and
 * drill answers (the spans a warm start would train).
 */
import type { Datum } from "../core/types.ts";
import type { Tokenizer } from "../core/tokenizer.ts";
import { Rng } from "../core/rng.ts";
import type { Protocol } from "../protocol/types.ts";
import type { PretrainConfig } from "./config.ts";
import { generateEpisode, type CorpusSegment } from "./corpus.ts";
import { generateDrill } from "./drills.ts";

/** The document separator: a special token of the base tokenizer (GPT-2's name). */
export const END_OF_TEXT = "<|endoftext|>";

/** One packed row with its weights, and how many documents it holds. */
export interface PackedBatch {
  /** `rowsPerStep` datums of `contextLength` positions each. */
  datums: Datum[];
  /** Documents started in this batch. */
  documents: number;
}

/** A seed for step `step`'s stream (SplitMix-style mixing of the run seed and the step). */
function stepSeed(seed: number, step: number): number {
  return new Rng((seed * 0x9e3779b1 + step * 0x85ebca6b) >>> 0).seed();
}

/** The segments of the `i`-th document of a stream (an episode or a drill, by the mix). */
export function documentSegments(rng: Rng, protocols: readonly Protocol[], drillFraction: number): CorpusSegment[] {
  if (rng.next() < drillFraction) return generateDrill(rng.seed()).segments;
  const protocol = protocols[rng.int(protocols.length)];
  return generateEpisode(rng.seed(), protocol).segments;
}

/**
 * Tokenises segments into ids and loss weights (`turns`: 1 on trained segments; `all`: 1 everywhere), followed by
 * the separator. Segment boundaries are encoded separately, as the rollout does turn by turn.
 */
export function encodeDocument(tokenizer: Tokenizer, segments: readonly CorpusSegment[], lossOn: "all" | "turns", separator: number): { ids: number[]; weights: number[] } {
  const ids: number[] = [];
  const weights: number[] = [];
  for (const s of segments) {
    const t = tokenizer.encode(s.text);
    ids.push(...t);
    for (let i = 0; i < t.length; i++) weights.push(lossOn === "all" || s.train ? 1 : 0);
  }
  ids.push(separator);
  weights.push(lossOn === "all" ? 1 : 0);
  return { ids, weights };
}

/**
 * Step `step`'s batch (see the file comment).
 * @param separator the id of {@link END_OF_TEXT}
 * @throws Error when a protocol named in the config is missing from `protocols`
 */
export function packedBatch(config: PretrainConfig, tokenizer: Tokenizer, protocols: readonly Protocol[], separator: number, step: number): PackedBatch {
  const rng = new Rng(stepSeed(config.run.seed, step));
  const rowLen = config.model.contextLength + 1;
  const datums: Datum[] = [];
  let documents = 0;
  for (let r = 0; r < config.optim.rowsPerStep; r++) {
    const ids: number[] = [];
    const weights: number[] = [];
    while (ids.length < rowLen) {
      const doc = encodeDocument(tokenizer, documentSegments(rng, protocols, config.data.drillFraction), config.data.lossOn, separator);
      ids.push(...doc.ids);
      weights.push(...doc.weights);
      documents++;
    }
    ids.length = rowLen;
    weights.length = rowLen;
    datums.push({ modelInput: ids.slice(0, -1), targetTokens: ids.slice(1), weights: weights.slice(1) });
  }
  return { datums, documents };
}
