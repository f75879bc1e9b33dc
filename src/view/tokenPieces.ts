/**
 * Token id → text for `arl view`, from a checkpoint's `tokenizer.json` (Hugging Face format: `model.vocab` as a map
 * or a list of pairs, `added_tokens`, and the decoder, which says whether tokens are joined by spaces).
 */
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { isDir } from "./files.ts";
import { parseRunJson } from "./limits.ts";
import { readCapped, type TailStats } from "./tail.ts";

/** A tokenizer's pieces by id, and whether its decoder joins them by spaces (undefined: not known). */
export interface TokenPieces {
  pieces: string[] | null;
  spaced: boolean | undefined;
}

/**
 * The first `tokenizer.json` under `<dir>/checkpoints/*` of the folders in order (`final` first, then `sft`, then by
 * name), or undefined when none exists.
 */
export function findTokenizerFile(dirs: readonly string[]): string | undefined {
  const candidates: string[] = [];
  for (const d of dirs) {
    const ck = join(d, "checkpoints");
    if (!isDir(ck)) continue;
    const names = readdirSync(ck).sort((a, b) => (a === "final" ? -1 : b === "final" ? 1 : a === "sft" ? -1 : b === "sft" ? 1 : a < b ? -1 : 1));
    for (const n of names) candidates.push(join(ck, n, "tokenizer.json"));
  }
  return candidates.find((c) => existsSync(c));
}

/**
 * Reads a `tokenizer.json`'s pieces; `pieces` is null when the file is missing, over `maxBytes` or not a tokenizer
 * (never throws).
 */
export function readTokenPieces(file: string, maxBytes: number, stats?: TailStats): TokenPieces {
  let pieces: string[] | null = null;
  let spaced: boolean | undefined;
  const got = readCapped(file, maxBytes, stats);
  if (got !== null && "text" in got) {
    try {
      const tok = parseRunJson(got.text) as { model?: { vocab?: Record<string, number> | [string, number][] }; added_tokens?: { id: number; content: string }[]; decoder?: { type?: unknown } | null };
      // a WordPiece decoder joins tokens by spaces (the embedded WordTokenizer's); ByteLevel and others keep the text
      spaced = typeof tok.decoder?.type === "string" ? tok.decoder.type === "WordPiece" : undefined;
      pieces = [];
      const vocab = tok.model?.vocab;
      const entries: [string, number][] = Array.isArray(vocab) ? vocab.map(([t], i) => [t, i]) : Object.entries(vocab ?? {});
      for (const [t, id] of entries) pieces[id] = t;
      for (const a of tok.added_tokens ?? []) pieces[a.id] = a.content;
    } catch {
      pieces = null;
    }
  }
  return { pieces, spaced };
}
