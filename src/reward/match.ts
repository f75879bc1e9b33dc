/**
 * Multi-pattern matching in linear time (Aho–Corasick), for the reward terms that test many gold answers against a
 * long text. Before it, `goldRetrieved` re-normalised every passage for every gold and `answerGrounded` re-normalised
 * the answer for every passage (quadratic: 18 s for a 200 000-character transcript; 13 s for 400 golds against
 * 500 000 characters of passages). Normalising each text once and then calling `String.prototype.includes` per
 * gold still costs O(golds × text); this automaton costs O(Σ |pattern|) to build and O(|text|) per text scanned,
 * whatever the number of patterns.
 */

/**
 * The patterns a `SequenceMatcher` looks for: sequences of symbols (strings compared with `===`). A pattern may be
 * a string (its UTF-16 code units are the symbols: substring matching) or an array of tokens (whole-token matching);
 * `null` is a pattern that never matches (so indices stay those of the caller's list).
 */
export type Pattern = ArrayLike<string> | null;

/** `best` of a state that no pattern ends at (pattern indices are smaller). */
const NONE = 0x7fffffff;

/**
 * An Aho–Corasick automaton over a list of patterns. `first(text)` is the index (in the list) of the first pattern
 * that occurs as a contiguous subsequence of `text`, or −1. An empty pattern occurs in every text, as `"".includes`
 * would say. Build: O(Σ |pattern|) map operations; `first`: O(|text|) map operations (amortised, as in KMP), each on
 * one symbol.
 */
export class SequenceMatcher {
  // Transitions of state s (state 0 is the root): the first child in `sym[s]` → `child[s]` (`child[s] === 0`: no
  // child, the root being no one's child), any others in `more[s]`. Most states of long patterns have one child,
  // so there is no Map per state, and the tables are typed arrays sized once: a 1 M-symbol pattern stays small.
  private readonly sym: string[];
  private readonly child: Int32Array;
  private readonly more = new Map<number, Map<string, number>>();
  /** `fail[s]`: the state of the longest proper suffix of `s`'s path that is also a path of the trie. */
  private readonly fail: Int32Array;
  /** `best[s]`: the smallest index of a pattern that ends at `s` or at a state on its failure chain (`NONE`: none). */
  private readonly best: Int32Array;
  /** Number of states. */
  private readonly size: number;

  constructor(patterns: readonly Pattern[]) {
    let capacity = 1;
    for (const p of patterns) if (p !== null) capacity += p.length;
    this.sym = new Array<string>(capacity).fill("");
    this.child = new Int32Array(capacity);
    this.fail = new Int32Array(capacity);
    this.best = new Int32Array(capacity).fill(NONE);
    let size = 1;
    patterns.forEach((p, index) => {
      if (p === null) return;
      let s = 0;
      for (let i = 0; i < p.length; i++) {
        const c = p[i];
        let t = this.go(s, c);
        if (t < 0) {
          t = size++;
          if (this.child[s] === 0) {
            this.sym[s] = c;
            this.child[s] = t;
          } else {
            let m = this.more.get(s);
            if (m === undefined) this.more.set(s, (m = new Map()));
            m.set(c, t);
          }
        }
        s = t;
      }
      if (index < this.best[s]) this.best[s] = index;
    });
    this.size = size;
    // Breadth-first: a state's failure target is shallower, so its `best` is final when the state is reached.
    const queue = new Int32Array(size);
    let tail = 0;
    const link = (s: number, c: string, t: number): void => {
      let g = 0;
      if (s !== 0) {
        let f = this.fail[s];
        g = this.go(f, c);
        while (g < 0 && f !== 0) {
          f = this.fail[f];
          g = this.go(f, c);
        }
        if (g < 0) g = 0;
      }
      this.fail[t] = g;
      if (this.best[g] < this.best[t]) this.best[t] = this.best[g];
      queue[tail++] = t;
    };
    for (let q = -1; q < tail; q++) {
      const s = q < 0 ? 0 : queue[q];
      if (this.child[s] === 0) continue;
      link(s, this.sym[s], this.child[s]);
      const m = this.more.get(s);
      if (m !== undefined) for (const [c, t] of m) link(s, c, t);
    }
  }

  /** True when no pattern can ever match (no patterns, or all `null`). */
  get empty(): boolean {
    return this.size === 1 && this.best[0] === NONE;
  }

  /** The goto transition of state `s` on symbol `c`, or −1. */
  private go(s: number, c: string): number {
    const t = this.child[s];
    if (t === 0) return -1;
    if (this.sym[s] === c) return t;
    return this.more.get(s)?.get(c) ?? -1;
  }

  /**
   * The index of the first pattern (in the constructor's list order) occurring in `text`, or −1.
   * @param text a string (code units as symbols) or an array of tokens, as the patterns were given
   */
  first(text: ArrayLike<string>): number {
    let found = this.best[0];
    if (found === 0 || this.size === 1) return found === NONE ? -1 : found;
    let s = 0;
    for (let i = 0; i < text.length; i++) {
      const c = text[i];
      let t = this.go(s, c);
      while (t < 0 && s !== 0) {
        s = this.fail[s];
        t = this.go(s, c);
      }
      s = t < 0 ? 0 : t;
      if (this.best[s] < found) {
        found = this.best[s];
        if (found === 0) break;
      }
    }
    return found === NONE ? -1 : found;
  }
}
