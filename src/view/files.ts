/**
 * The viewer's whole-file reads: a file's `size:mtime` stamp (what says it changed), a cached read re-done only when
 * the stamp changes, and the parse of a JSON-lines text. Every read is bounded (src/view/tail.ts `readCapped`).
 */
import { statSync } from "node:fs";
import { parseRunJson } from "./limits.ts";
import { readCapped, type TailStats } from "./tail.ts";

/** True when `p` is a folder (false when it is missing or anything else). */
export const isDir = (p: string): boolean => {
  try {
    return statSync(p).isDirectory();
  } catch {
    return false;
  }
};

/** A file's (or folder's) `size:mtime`, or `-` when it is missing. */
export function fileStamp(path: string): string {
  try {
    const s = statSync(path);
    return `${s.size}:${s.mtimeMs}`;
  } catch {
    return "-";
  }
}

/** A whole file's text, cached by size and mtime; not read when it is over `maxBytes` (`tooBig`). */
export class CachedFile {
  private key = "";
  private text: string | null = null;
  /** The file's size when it is over `maxBytes` (as of the last `read`). */
  tooBig: number | undefined;
  constructor(
    readonly path: string,
    private readonly maxBytes: number,
    private readonly stats?: TailStats,
  ) {}

  /** `size:mtime`, or `-` when the file is missing. */
  stamp(): string {
    return fileStamp(this.path);
  }

  /** The file's text (null when missing or over `maxBytes`); re-read only when its stamp changed. */
  read(): string | null {
    const k = this.stamp();
    if (k !== this.key) {
      this.key = k;
      const got = readCapped(this.path, this.maxBytes, this.stats);
      this.text = got !== null && "text" in got ? got.text : null;
      this.tooBig = got !== null && "tooBig" in got ? got.tooBig : undefined;
    }
    return this.text;
  }
}

/**
 * Parses the complete lines of a JSON-lines text (a last line without its newline is being written: skipped).
 * @param counter when given, `counter.damaged` is set to the number of complete lines that are not JSON objects
 *   (skipped, never a crash of the viewer; the page reports them: `SourceInfo.damagedLines`)
 */
export function parseJsonLines(text: string | null, counter?: { damaged: number }): Record<string, unknown>[] {
  if (counter !== undefined) counter.damaged = 0;
  if (text === null || text === "") return [];
  const lines = text.split("\n");
  lines.pop(); // "" after the final newline, or a line still being written
  const out: Record<string, unknown>[] = [];
  for (const line of lines) {
    if (line.trim() === "") continue;
    try {
      const v = parseRunJson(line);
      if (v !== null && typeof v === "object" && !Array.isArray(v)) out.push(v as Record<string, unknown>);
      else if (counter !== undefined) counter.damaged++;
    } catch {
      if (counter !== undefined) counter.damaged++; // not JSON: skipped, and counted
    }
  }
  return out;
}
