/**
 * Typed reads of fields from JSON a run wrote (`metrics.jsonl`, `samples/*.jsonl`, `config.yaml`): a field of the
 * wrong type reads as absent (or a fallback), never as a crash of the viewer.
 */

/** `v` when it is a finite number, else undefined. */
export const num = (v: unknown): number | undefined => (typeof v === "number" && Number.isFinite(v) ? v : undefined);

/** `v` when it is a string, else `fallback` (default ""). */
export const str = (v: unknown, fallback = ""): string => (typeof v === "string" ? v : fallback);

/** `xs` cut or padded with `fill` to `n` items (token books of one sequence are all `[seq]`). */
export const fitTo = <T>(n: number, xs: T[], fill: T): T[] => (xs.length === n ? xs : Array.from({ length: n }, (_, i) => (i < xs.length ? xs[i] : fill)));
