/**
 * The tag index of a Search-R1 / veRL transcript (see `./transcript.ts`): every action and observation tag located
 * once (`indexOf`), binary-searched lookups, and the reading of observation blocks — where each ends, what the env
 * certainly wrote, and what cannot be attributed to the env or the model. Linear time in the text.
 */
import { CORRECTIVE, skipRoleGap, skipSpaces } from "./transcriptText.ts";

export type ActionTag = "search" | "answer" | "tool_call";
export type ObsTag = "information" | "tool_response";
export const ACTION_TAGS: readonly ActionTag[] = ["search", "answer", "tool_call"];
export const OBS_TAGS: readonly ObsTag[] = ["information", "tool_response"];

/** Sorted start positions of the non-overlapping occurrences of one string, with binary-search lookups. */
export class Hits {
  readonly at: number[] = [];
  constructor(text: string, needle: string) {
    for (let i = text.indexOf(needle); i >= 0; i = text.indexOf(needle, i + needle.length)) this.at.push(i);
  }

  /** Index in `at` of the first occurrence at or after `x` (`at.length` when none). */
  rank(x: number): number {
    let lo = 0;
    let hi = this.at.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.at[mid] < x) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /** The first occurrence at or after `x`, or -1. */
  next(x: number): number {
    const i = this.rank(x);
    return i < this.at.length ? this.at[i] : -1;
  }

  /** The last occurrence starting before `x`, or -1. */
  prev(x: number): number {
    const i = this.rank(x);
    return i > 0 ? this.at[i - 1] : -1;
  }
}

/** A tag occurrence. */
export interface TagAt<T> {
  tag: T;
  at: number;
}

/**
 * The earliest occurrence at or after `x` among `tags` (each tag's occurrences are `hitsOf(tag)`), or null; at equal
 * positions the tag listed first wins.
 */
function firstTag<T extends string>(tags: readonly T[], hitsOf: (tag: T) => Hits, x: number): TagAt<T> | null {
  let best: TagAt<T> | null = null;
  for (const tag of tags) {
    const at = hitsOf(tag).next(x);
    if (at >= 0 && (best === null || at < best.at)) best = { tag, at };
  }
  return best;
}

/** A search or tool-call block that an observation follows: where the env's next output begins. */
interface Boundary {
  /** Position of the block's opening tag. */
  open: number;
}

/** One observation block as read. */
export interface ObsRead {
  /** End of the block: after its closing tag (or where an unclosed block stops). */
  end: number;
  /** The content the env certainly wrote (passages are read from it); null when that cannot be told. */
  certain: string | null;
  /** [from, to) of the text the reader cannot attribute to the env or the model, or null. */
  uncertain: [number, number] | null;
}

/** Every tag of a transcript located once, and the protocol's reading of them. */
export class TagIndex {
  private readonly opens = new Map<string, Hits>();
  private readonly closes = new Map<string, Hits>();
  readonly corrective: Hits;
  private readonly boundaries: Boundary[] = [];

  constructor(readonly text: string) {
    for (const t of [...ACTION_TAGS, ...OBS_TAGS]) {
      this.opens.set(t, new Hits(text, `<${t}>`));
      this.closes.set(t, new Hits(text, `</${t}>`));
    }
    this.corrective = new Hits(text, CORRECTIVE);
    // A search or tool-call block (its nearest opening tag after the previous closing action tag) followed by an
    // observation: the env's next output starts after it, so no observation block reaches past its opening tag.
    for (const tag of ["search", "tool_call"] as const) {
      for (const p of this.close(tag).at) {
        if (this.observationAfter(p + tag.length + 3) === null) continue;
        const op = this.open(tag).prev(p);
        if (op >= 0 && op >= this.previousCloseEnd(p)) this.boundaries.push({ open: op });
      }
    }
    this.boundaries.sort((a, b) => a.open - b.open);
  }

  open(tag: ActionTag | ObsTag): Hits {
    return this.opens.get(tag) as Hits;
  }

  close(tag: ActionTag | ObsTag): Hits {
    return this.closes.get(tag) as Hits;
  }

  /** End of the last closing action tag that starts before `p` (0 when none). */
  previousCloseEnd(p: number): number {
    let end = 0;
    for (const t of ACTION_TAGS) {
      const q = this.close(t).prev(p);
      if (q >= 0) end = Math.max(end, q + t.length + 3);
    }
    return end;
  }

  /** The first closing action tag at or after `x`. */
  nextActionClose(x: number): TagAt<ActionTag> | null {
    return firstTag(ACTION_TAGS, (tag) => this.close(tag), x);
  }

  /** The first observation opening tag at or after `x`. */
  nextObservationOpen(x: number): TagAt<ObsTag> | null {
    return firstTag(OBS_TAGS, (tag) => this.open(tag), x);
  }

  /**
   * The observation that follows an action ending at `x`: the first observation opening tag after it, when no
   * closing action tag and no corrective observation comes first. Null when none does.
   */
  observationAfter(x: number): TagAt<ObsTag> | null {
    const o = this.nextObservationOpen(x);
    if (o === null) return null;
    const c = this.nextActionClose(x);
    if (c !== null && c.at < o.at) return null;
    const k = this.corrective.next(x);
    if (k >= 0 && k < o.at) return null;
    return o;
  }

  /** Opening tag of the first boundary at or after `x`, or -1. */
  nextBoundary(x: number): number {
    let lo = 0;
    let hi = this.boundaries.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.boundaries[mid].open < x) lo = mid + 1;
      else hi = mid;
    }
    return lo < this.boundaries.length ? this.boundaries[lo].open : -1;
  }

  /**
   * Reads the observation block whose opening tag is at `o` (the rules are `trajectoryFromText`'s): it ends at
   * the last closing tag of its kind before the next boundary (or the end of the text); a `<tool_response>` whose
   * body is one JSON value ends at the first closing tag after that value. Never throws.
   */
  readObservation(o: TagAt<ObsTag>): ObsRead {
    const text = this.text;
    const openEnd = o.at + o.tag.length + 2;
    const closeLen = o.tag.length + 3;
    const boundary = this.nextBoundary(openEnd);
    const limit = boundary < 0 ? text.length : boundary;
    const closes = this.close(o.tag);
    const first = closes.next(openEnd);
    if (first >= 0 && first < limit) {
      const last = closes.prev(limit);
      if (o.tag === "tool_response") {
        const close = jsonBodyClose(text, openEnd, last);
        if (close >= 0) return { end: close + closeLen, certain: text.slice(openEnd, close), uncertain: null };
      }
      return { end: last + closeLen, certain: text.slice(openEnd, first), uncertain: first === last ? null : [first + closeLen, last] };
    }
    // Unclosed (Search-R1 cuts an observation at `max_obs_length` tokens, its closing tag included): it runs to the
    // boundary or to the end of the text, an `<answer>` in it included (see `trajectoryFromText`).
    const end = boundary >= 0 ? boundary : text.length;
    return { end, certain: null, uncertain: [openEnd, end] };
  }

  /**
   * An observation block and the `<tool_response>` blocks that directly follow it (veRL puts the responses to
   * several calls of one turn in one user message).
   */
  readObservations(o: TagAt<ObsTag>): ObsRead[] {
    const reads = [this.readObservation(o)];
    if (o.tag !== "tool_response") return reads;
    for (;;) {
      const prev = reads[reads.length - 1];
      if (prev.certain === null) break;
      const g = skipRoleGap(this.text, prev.end);
      if (!this.text.startsWith("<tool_response>", g)) break;
      reads.push(this.readObservation({ tag: "tool_response", at: g }));
    }
    return reads;
  }
}

/**
 * Start of the `</tool_response>` that closes a JSON body: when the text after `from` is one JSON object or array
 * (then only whitespace) before a closing tag at or before `limit`, that tag; else -1. A closing tag quoted inside
 * a JSON string is skipped (veRL writes `json.dumps({"result": …})`, which leaves `<` and `/` as they are).
 * Linear in `limit - from`.
 */
function jsonBodyClose(text: string, from: number, limit: number): number {
  const start = skipSpaces(text, from);
  const first = text.charCodeAt(start);
  if (first !== 0x7b && first !== 0x5b) return -1; // { [
  let depth = 0;
  let inString = false;
  let escaped = false;
  let end = -1;
  for (let i = start; i < limit; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (escaped) escaped = false;
      else if (c === 0x5c) escaped = true;
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x7b || c === 0x5b) depth++;
    else if (c === 0x7d || c === 0x5d) {
      depth--;
      if (depth === 0) {
        end = i + 1;
        break;
      }
    }
  }
  if (end < 0) return -1;
  const close = skipSpaces(text, end);
  if (close > limit || !text.startsWith("</tool_response>", close)) return -1;
  try {
    JSON.parse(text.slice(start, end));
  } catch {
    return -1;
  }
  return close;
}
