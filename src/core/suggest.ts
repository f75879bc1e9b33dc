/**
 * "Did you mean …?" for a name that is not one of the allowed ones (an unknown config field, env option or design):
 * the allowed names equal to it up to case, `_` and `-` (`groupsize`, `group_size` → `groupSize`), else those
 * within a small edit distance (`grupSize` → `groupSize`). Own code rather than a dependency: the distance is the
 * textbook dynamic programme on names of a few dozen characters, and the case-insensitive tier comes first anyway.
 */

/** Names longer than this get no suggestion (the distance costs |a|·|b|; a config name is far shorter). */
const MAX_NAME_LENGTH = 64;

/**
 * Levenshtein distance between `a` and `b`: the fewest single-character insertions, deletions and substitutions
 * that turn one into the other (each costs 1). O(|a|·|b|) time, O(|b|) memory.
 */
export function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const cur = [i];
    for (let j = 1; j <= b.length; j++) cur[j] = Math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    prev = cur;
  }
  return prev[b.length];
}

/** A name folded for the first tier: lower case, without `_` and `-`. */
const fold = (s: string) => s.toLowerCase().replace(/[_-]/g, "");

/**
 * The allowed names nearest to `name`, best first, at most `max`: those equal to it up to case, `_` and `-` when
 * there are any; else those within edit distance max(1, ⌊|name|/3⌋) of it, compared in lower case (ties keep the
 * order of `allowed`). Empty when none is near, or `name` is longer than 64 characters.
 */
export function nearestNames(name: string, allowed: readonly string[], max = 3): string[] {
  if (name.length > MAX_NAME_LENGTH) return [];
  const exact = allowed.filter((c) => c !== name && fold(c) === fold(name));
  if (exact.length > 0) return exact.slice(0, max);
  const limit = Math.max(1, Math.floor(name.length / 3));
  return allowed
    .filter((c) => c !== name && c.length <= MAX_NAME_LENGTH)
    .map((c, i) => ({ c, i, d: editDistance(name.toLowerCase(), c.toLowerCase()) }))
    .filter((x) => x.d <= limit)
    .sort((x, y) => x.d - y.d || x.i - y.i)
    .slice(0, max)
    .map((x) => x.c);
}

/** ` (did you mean groupSize?)` / ` (did you mean a or b?)` for `name` among `allowed`, or "" when none is near. */
export function didYouMean(name: string, allowed: readonly string[]): string {
  const near = nearestNames(name, allowed);
  if (near.length === 0) return "";
  return ` (did you mean ${near.length === 1 ? near[0] : `${near.slice(0, -1).join(", ")} or ${near.at(-1)}`}?)`;
}

/**
 * Unknown `names` as an error message shows them: each with its suggestion (`groupsize (did you mean groupSize?)`),
 * and `; allowed: …` after them when one of them has none (so the message always says what is allowed).
 */
export function unknownNamesText(names: readonly string[], allowed: readonly string[]): string {
  const hints = names.map((n) => didYouMean(n, allowed));
  const listed = names.map((n, i) => `${n}${hints[i]}`).join(", ");
  return hints.some((h) => h === "") && allowed.length > 0 ? `${listed}; allowed: ${allowed.join(", ")}` : listed;
}
