/**
 * Think blocks: `<think>…</think>` is the policy's reasoning, never an action, in every protocol (Search-R1's
 * `<think>`, Qwen3's thinking mode in hermes and react); parsers remove complete blocks before reading tags.
 */

/**
 * Replaces each complete `<think>…</think>` block (the first `</think>` after each `<think>`) with a space (or, with
 * `keepLength`, with as many spaces as the block has characters, so positions keep their meaning) — what
 * `text.replace(/<think>[\s\S]*?<\/think>/g, " ")` does, in linear time: the lazy regex is quadratic on a long run
 * of unclosed `<think>` tags (found by the fuzz: 0.2 s at 100 KB, growing with the square).
 * Complete think blocks are reasoning, not actions: tags inside them never count.
 */
export function stripThink(text: string, keepLength = false): string {
  let out = "";
  let from = 0;
  for (;;) {
    const open = text.indexOf("<think>", from);
    if (open < 0) break;
    const close = text.indexOf("</think>", open + 7);
    if (close < 0) break; // no complete block starts here or later
    out += text.slice(from, open) + (keepLength ? " ".repeat(close + 8 - open) : " ");
    from = close + 8;
  }
  return out + text.slice(from);
}
