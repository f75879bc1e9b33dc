/**
 * The base model's tokenizer (issue 32 part 1): a byte-level BPE (`../policy/hf/trainBpe.ts`) trained on a seeded
 * sample of the pretraining corpus — episodes in each configured protocol and drills — plus the wiki-18 passage
 * sample shipped in `data/` (natural English, so that prose such as retrieved passages compresses too). Special tokens:
 * every protocol's tags and stops (so one tokenizer serves the hermes, react and search-r1 envs) and `<|endoftext|>`.
 *
 * The `tokenizers` bindings' trainer prints its progress bar to stdout, which no option switches off from JavaScript,
 * so `trainBaseTokenizer` runs it in a child process (`arl __train-bpe`), whose output it drops.
 */
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Rng } from "../core/rng.ts";
import type { TokenizerJsonDocument } from "../core/tokenizer.ts";
import { PROTOCOLS } from "../protocol/index.ts";
import type { PretrainConfig } from "./config.ts";
import { generateEpisode } from "./corpus.ts";
import { generateDrill } from "./drills.ts";
import { END_OF_TEXT } from "./rows.ts";

/** The natural-text part of the tokenizer's sample (1 000 wiki-18 passages, data/README.md). */
export const WIKI_SAMPLE = fileURLToPath(new URL("../../data/wiki18-sample-1000.jsonl", import.meta.url));

/**
 * The base tokenizer's special tokens, in id order: every protocol's tags and stop strings (first seen first; a stop
 * that is one token lets the embedded sampler end a turn on it), then `<|endoftext|>`.
 */
export function baseSpecialTokens(): string[] {
  const out: string[] = [];
  for (const p of Object.values(PROTOCOLS)) for (const t of [...p.specialTokens, ...p.stops]) if (!out.includes(t)) out.push(t);
  out.push(END_OF_TEXT);
  return out;
}

/**
 * The tokenizer's training sample (see the file comment). Deterministic in the config's seed.
 * @throws Error when the wiki-18 sample is missing (it ships in the package's `data/`)
 */
export function tokenizerSample(config: PretrainConfig): string[] {
  const rng = new Rng(config.run.seed ^ 0x70b1);
  const texts: string[] = [];
  for (const name of config.data.protocols)
    for (let i = 0; i < config.tokenizer.episodes; i++) texts.push(generateEpisode(rng.seed(), PROTOCOLS[name]).segments.map((s) => s.text).join(""));
  for (let i = 0; i < config.tokenizer.drills; i++) texts.push(generateDrill(rng.seed()).segments.map((s) => s.text).join(""));
  if (!existsSync(WIKI_SAMPLE)) throw new Error(`arl pretrain: the tokenizer's natural-text sample ${WIKI_SAMPLE} is missing (it ships in the package's data/ folder)`);
  for (const line of readFileSync(WIKI_SAMPLE, "utf8").split("\n")) if (line.trim()) texts.push((JSON.parse(line) as { contents: string }).contents);
  return texts;
}

/**
 * Trains the base tokenizer in a child process (see the file comment).
 * @param workDir a folder of the caller's where the sample is written for the child (removed afterwards)
 * @returns the `tokenizer.json` document
 * @throws Error when the child fails (its stderr in the message)
 */
export async function trainBaseTokenizer(config: PretrainConfig, workDir: string): Promise<TokenizerJsonDocument> {
  const dir = mkdtempSync(join(workDir, "bpe-"));
  try {
    const input = join(dir, "input.json");
    const output = join(dir, "tokenizer.json");
    writeFileSync(input, JSON.stringify({ texts: tokenizerSample(config), vocabSize: config.tokenizer.vocabSize, specialTokens: baseSpecialTokens() }));
    const bin = fileURLToPath(new URL("../../bin/arl.mjs", import.meta.url));
    const stderr: string[] = [];
    const code = await new Promise<number | null>((resolve, reject) => {
      const child = spawn(process.execPath, [bin, "__train-bpe", input, output], { stdio: ["ignore", "ignore", "pipe"] });
      child.stderr.on("data", (d: Buffer) => stderr.push(d.toString()));
      child.on("error", reject);
      child.on("close", resolve);
    });
    if (code !== 0 || !existsSync(output)) throw new Error(`arl pretrain: training the tokenizer failed (exit ${code}): ${stderr.join("").trim().slice(-2000)}`);
    return JSON.parse(readFileSync(output, "utf8")) as TokenizerJsonDocument;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
