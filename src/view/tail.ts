/**
 * Bounded, incremental reads of the files `arl view` shows (src/view/sourceReader.ts). A run appends to its JSON-lines files
 * while the page polls, so `JsonlTail` keeps per-file state (identity, byte offset, a partial last line) and on
 * growth reads and parses only the appended bytes, in chunks; a line longer than its limit is skipped as it streams
 * past (never held whole) and counted as damaged. `readCapped` reads a whole file only when it is under a size limit.
 */
import { closeSync, constants, fstatSync, openSync, readSync } from "node:fs";
import { parseRunJson } from "./limits.ts";

/**
 * Open flags for every file the viewer reads: O_NONBLOCK, so opening a FIFO put where a run file was returns at once
 * (a plain open waits for a writer, and the viewer's event loop with it — issue 29's outside probe); the file is then
 * refused as not a plain file. Reads of plain files do not change under O_NONBLOCK.
 */
const OPEN_READ = constants.O_RDONLY | (constants.O_NONBLOCK ?? 0);

/** What a reader did, summed over reads (for tests and diagnostics): bytes read from disk, lines given to `JSON.parse`. */
export interface TailStats {
  bytesRead: number;
  linesParsed: number;
}

/** Limits of one `JsonlTail`. */
export interface TailOptions {
  /** A line of more bytes (without its newline) is skipped and counted in `damaged`. */
  maxLineBytes: number;
  /** Bytes of the file read at most; the rest is not read (`unread`). Default: no limit. */
  maxBytes?: number;
  /**
   * Bytes read by one `update` at most (default: no limit): a larger file is read over several calls (`behind`), so
   * one call (one HTTP request) never blocks for long.
   */
  maxReadBytes?: number;
  /** Lines parsed by one `update` at most (default: no limit): as `maxReadBytes`, for files of many short lines. */
  maxReadLines?: number;
  /** Bytes per read (default 1 MiB). */
  chunkBytes?: number;
  /** Counter the reads are added to. */
  stats?: TailStats;
}

/** New rows of a JSON-lines file since the last `update`. */
export interface TailUpdate {
  /** True when reading started over from byte 0 (first read, or the file was truncated, replaced or removed): the caller drops what it derived from earlier rows. */
  reset: boolean;
  /** Complete lines that are JSON objects, in file order. */
  rows: Record<string, unknown>[];
}

/** Bytes compared at the file's start and just before the offset to tell an append from a rewrite of one inode. */
const FINGERPRINT = 32;

/**
 * A JSON-lines file read incrementally. A rewrite is told from an append by the inode (a rename puts a new one), the
 * size (a truncation shrinks it) and the bytes at the start and just before the last offset (a rewrite of the same
 * inode, e.g. `writeFileSync`, changes them); any of these re-reads from byte 0. A last line without its newline (a
 * writer mid-append) is kept aside until it is whole; blank lines are ignored.
 */
export class JsonlTail {
  /** Complete lines that are not JSON objects or are longer than `maxLineBytes` (an over-long line is counted as soon as it passes the limit). */
  damaged = 0;
  /** Bytes of the file past `maxBytes`, not read. */
  unread = 0;
  /** True when the last `update` stopped at `maxReadBytes` with more of the file to read. */
  behind = false;
  private dev = -1;
  private ino = -1;
  private size = -1;
  private mtimeMs = -1;
  /** Bytes consumed: complete lines, the bytes of a line being skipped, and `pending`. */
  private offset = 0;
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  /** Inside a line longer than the limit: bytes are dropped until its newline. */
  private skipping = false;
  private head: Buffer = Buffer.alloc(0);
  private before: Buffer = Buffer.alloc(0);

  constructor(
    readonly path: string,
    private readonly options: TailOptions,
  ) {}

  /** Bytes consumed so far (it changes as a file is read over several calls). */
  get position(): number {
    return this.offset;
  }

  private clear(): void {
    this.damaged = 0;
    this.unread = 0;
    this.behind = false;
    this.dev = this.ino = this.size = this.mtimeMs = -1;
    this.offset = 0;
    this.pending = [];
    this.pendingBytes = 0;
    this.skipping = false;
    this.head = this.before = Buffer.alloc(0);
  }

  private pread(fd: number, length: number, position: number): Buffer {
    const b = Buffer.alloc(length);
    const n = length === 0 ? 0 : readSync(fd, b, 0, length, position);
    if (this.options.stats) this.options.stats.bytesRead += n;
    return b.subarray(0, n);
  }

  /** True when the bytes remembered at the start and before the offset are still there (the file was appended to). */
  private unchangedBefore(fd: number): boolean {
    return this.pread(fd, this.head.length, 0).equals(this.head) && this.pread(fd, this.before.length, this.offset - this.before.length).equals(this.before);
  }

  /**
   * Reads what the file gained since the last call.
   * @returns null when nothing changed (same inode, size and mtime; or still missing), else the new rows and
   *   whether they start over from byte 0 (`{reset: true, rows: []}` when the file went away)
   */
  update(): TailUpdate | null {
    let fd: number;
    try {
      fd = openSync(this.path, OPEN_READ);
    } catch {
      const known = this.dev !== -1;
      this.clear();
      return known ? { reset: true, rows: [] } : null;
    }
    try {
      const st = fstatSync(fd);
      if (!st.isFile()) {
        const known = this.dev !== -1;
        this.clear();
        return known ? { reset: true, rows: [] } : null;
      }
      const sameFile = st.dev === this.dev && st.ino === this.ino;
      if (sameFile && st.size === this.size && st.mtimeMs === this.mtimeMs && !this.behind) return null;
      const reset = !sameFile || st.size < this.offset || !this.unchangedBefore(fd);
      if (reset) this.clear();
      this.dev = st.dev;
      this.ino = st.ino;
      this.size = st.size;
      this.mtimeMs = st.mtimeMs;
      const end = Math.min(st.size, this.options.maxBytes ?? Infinity);
      this.unread = st.size - end;
      const stop = Math.min(end, this.offset + (this.options.maxReadBytes ?? Infinity));
      const rows = this.offset < stop ? this.readTo(fd, stop) : [];
      this.behind = this.offset < end;
      return { reset, rows };
    } finally {
      closeSync(fd);
    }
  }

  /** Parses bytes `[offset, end)` line by line; remembers the fingerprints. */
  private readTo(fd: number, end: number): Record<string, unknown>[] {
    const { maxLineBytes, stats } = this.options;
    const rows: Record<string, unknown>[] = [];
    const buf = Buffer.allocUnsafe(Math.min(this.options.chunkBytes ?? 1 << 20, end - this.offset));
    let lines = this.options.maxReadLines ?? Infinity;
    let pos = this.offset;
    while (pos < end && lines > 0) {
      let n = readSync(fd, buf, 0, Math.min(buf.length, end - pos), pos);
      if (n <= 0) break; // shorter than its stat said (truncated meanwhile): the next update sees it
      if (stats) stats.bytesRead += n;
      const chunk = buf.subarray(0, n);
      for (let start = 0; start < n; ) {
        const nl = chunk.indexOf(10, start);
        const stop = nl === -1 ? n : nl;
        if (!this.skipping) {
          if (this.pendingBytes + stop - start > maxLineBytes) {
            // over the limit: drop what is held and the rest of the line as it streams past
            this.skipping = true;
            this.damaged++;
            this.pending = [];
            this.pendingBytes = 0;
          } else if (nl === -1) {
            this.pending.push(Buffer.from(chunk.subarray(start, stop))); // a copy: `buf` is reused
            this.pendingBytes += stop - start;
          } else {
            const line = this.pending.length === 0 ? chunk.subarray(start, stop) : Buffer.concat([...this.pending, chunk.subarray(start, stop)]);
            this.pending = [];
            this.pendingBytes = 0;
            const row = this.parseLine(line);
            if (row !== undefined) rows.push(row);
          }
        }
        if (nl === -1) break;
        this.skipping = false; // the newline ends a skipped line too
        start = nl + 1;
        if (--lines === 0) {
          n = start; // the rest of the chunk is read again by the next update
          break;
        }
      }
      pos += n;
    }
    this.offset = pos;
    if (this.head.length < FINGERPRINT) this.head = this.pread(fd, Math.min(FINGERPRINT, pos), 0);
    this.before = this.pread(fd, Math.min(FINGERPRINT, pos), pos - Math.min(FINGERPRINT, pos));
    return rows;
  }

  /** One complete line: a JSON object, undefined for a blank line, or counted as damaged. */
  private parseLine(line: Buffer): Record<string, unknown> | undefined {
    const text = line.toString("utf8");
    if (text.trim() === "") return undefined;
    if (this.options.stats) this.options.stats.linesParsed++;
    try {
      const v = parseRunJson(text);
      if (v !== null && typeof v === "object" && !Array.isArray(v)) return v as Record<string, unknown>;
    } catch {
      // not JSON: counted below
    }
    this.damaged++;
    return undefined;
  }
}

/** A whole file's text when it is at most `maxBytes`; `tooBig` with its size when larger; null when missing or unreadable. */
export type CappedText = { text: string } | { tooBig: number } | null;

/**
 * Reads a whole file (`summary.json`, `config.yaml`, `lab.json`, `tokenizer.json` …) only when it is at most
 * `maxBytes` long: the size is checked on the open file before any byte is read.
 * @param maxBytes largest size read (bytes)
 * @param stats counter the bytes read are added to
 */
export function readCapped(path: string, maxBytes: number, stats?: TailStats): CappedText {
  let fd: number;
  try {
    fd = openSync(path, OPEN_READ);
  } catch {
    return null;
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) return null;
    if (st.size > maxBytes) return { tooBig: st.size };
    const buf = Buffer.alloc(st.size);
    let got = 0;
    while (got < st.size) {
      const n = readSync(fd, buf, got, st.size - got, got);
      if (n <= 0) break;
      got += n;
    }
    if (stats) stats.bytesRead += got;
    return { text: buf.toString("utf8", 0, got) };
  } catch {
    return null;
  } finally {
    closeSync(fd);
  }
}
