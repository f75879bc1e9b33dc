/**
 * The helpers every reward term's explanation uses: counts with their noun, numbers at 3 decimals, one-line
 * excerpts, and costs as `0 − x`.
 */

/** `n word` or `n words` (`many`: the plural, default word + s). */
export function plural(n: number, word: string, many = `${word}s`): string {
  return `${n} ${n === 1 ? word : many}`;
}

/** A number for an explanation: at most 3 decimals, no trailing zeros. */
export function num(x: number): string {
  return String(Number(x.toFixed(3)));
}

/** Whitespace collapsed to single spaces, cut to `max` characters (with `…`). */
export function oneLine(s: string, max: number): string {
  const t = s.replace(/\s+/g, " ").trim();
  return t.length <= max ? t : `${t.slice(0, max - 1)}…`;
}

/** `0 − x`, never `−0` (so a count of 0 gives `+0`, which `Object.is(v, 0)` accepts). */
export function neg(x: number): number {
  return 0 - x;
}
