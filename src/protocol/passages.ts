/**
 * Passage lists of retrieval observations, read back from text: Search-R1's `Doc 1(Title: t) text` (as
 * `formatPassages` of `./searchR1.ts` writes them) and veRL's `Doc 1 (Title: "t")\ntext`.
 */
import type { Passage } from "../core/types.ts";
import { skipSpaces } from "./transcriptText.ts";

/** Passage headers: `Doc 1(Title: ` (Search-R1) or `Doc 1 (Title: ` (veRL), the number captured. */
const HEADER = /Doc (\d+) ?\(Title: /y;

/**
 * Passages listed in a retrieval observation, in rank order. Reads both `Doc 1(Title: t) text` (Search-R1
 * `_passages2string`, ours `formatPassages` in ./searchR1.ts) and `Doc 1 (Title: "t")\ntext` (veRL `_passages2string`; a
 * `---` line separates the results of several queries). A veRL tool response is JSON `{"result": "…"}` and is
 * unwrapped first. Titles lose surrounding double quotes and a `, source : s` suffix (kept as `source`). Ids are
 * `title` until `resolve` maps a passage back to its corpus entry. Text without `Doc n` headers gives [].
 *
 * Headers are read as the formatters write them, so a passage that quotes one stays one passage: a header starts
 * the content or a line, and headers are numbered consecutively — `Doc 1`, then `Doc 2`, … (the numbering starts
 * again at `Doc 1` only on the line after a `---` separator line). A title runs to the first `)` followed by a space
 * or a newline on its line. `Doc 3(Title: x)` in the middle of a line, or out of sequence, is passage text.
 * Linear time. Never throws.
 */
export function parsePassages(observation: string): Passage[] {
  let body = observation;
  const trimmed = body.trim();
  if (trimmed.startsWith("{")) {
    try {
      const parsed = JSON.parse(trimmed) as unknown;
      if (parsed && typeof parsed === "object" && typeof (parsed as { result?: unknown }).result === "string") {
        body = (parsed as { result: string }).result;
      }
    } catch {
      // not JSON: read the text as it is
    }
  }
  // Accepted headers: [start of `Doc`, start of the passage text, raw title].
  const heads: [number, number, string][] = [];
  let expected = 1;
  let afterSeparator = false;
  for (let line = skipSpaces(body, 0); line < body.length; ) {
    const eol = body.indexOf("\n", line);
    const lineEnd = eol < 0 ? body.length : eol;
    HEADER.lastIndex = line;
    const m = HEADER.exec(body);
    const n = m ? m[1] : "";
    if (m && (n === String(expected) || (afterSeparator && n === "1"))) {
      const titleStart = HEADER.lastIndex;
      // The title ends at the first `)` followed by a space or a newline, on this line (searched in the line only).
      const rest = body.slice(titleStart, lineEnd);
      let close = rest.indexOf(")");
      while (close >= 0 && close + 1 < rest.length && rest[close + 1] !== " ") close = rest.indexOf(")", close + 1);
      if (close >= 0 && (close + 1 < rest.length || eol >= 0)) {
        heads.push([line, titleStart + close + 2, rest.slice(0, close)]);
        expected = Number(n) + 1;
      }
    }
    afterSeparator = body.slice(line, lineEnd).trim() === "---";
    if (eol < 0) break;
    line = eol + 1;
  }
  return heads.map(([, start, rawTitle], i) => {
    const end = i + 1 < heads.length ? heads[i + 1][0] : body.length;
    let title = rawTitle.trim();
    let source: string | undefined;
    const src = / , source : (.*)$/.exec(title);
    if (src) {
      source = src[1].trim();
      title = title.slice(0, src.index).trim();
    }
    if (title.length >= 2 && title.startsWith('"') && title.endsWith('"')) title = title.slice(1, -1);
    const text = body.slice(start, end).replace(/\n-{3}\n?\s*$/, "").trim();
    const p: Passage = { id: title, title, text };
    if (source !== undefined) p.source = source;
    return p;
  });
}
