/**
 * The viewer reads `--agent` transcripts a model wrote (issue 29, part 8's kind: a viewer read must not stall on
 * hostile text). `toolResponseBlocks` replaced `/<tool_response>\s*([\s\S]*?)\s*<\/tool_response>/g`, which was
 * O(n²) on unclosed opens (3.2 s on 300 KB) and worse on a whitespace run after an open.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { toolResponseBlocks } from "../src/view/agentEpisodes.ts";

const REGEX = /<tool_response>\s*([\s\S]*?)\s*<\/tool_response>/g;

describe("toolResponseBlocks", () => {
  it("finds exactly what the regex it replaced found, on soups of its fragments", () => {
    const fragment = fc.constantFrom("<tool_response>", "</tool_response>", "<tool_response", "/tool_response>", " ", "\n", "\t", "x", "{\"a\": 1}", "\u00a0", "\u2028");
    fc.assert(
      fc.property(fc.array(fragment, { maxLength: 40 }), (parts) => {
        const text = parts.join("");
        const expected = [...text.matchAll(REGEX)].map((m) => ({ start: m.index, end: m.index + m[0].length, content: m[1] }));
        expect(toolResponseBlocks(text)).toEqual(expected);
      }),
      { seed: 20261207, numRuns: 3000 },
    );
  });

  it("reads megabytes of unclosed opens and whitespace runs in one pass (the regex took minutes)", () => {
    const unclosed = "<tool_response>".repeat(70_000); // ≈ 1 MB, no close anywhere
    expect(toolResponseBlocks(unclosed)).toEqual([]);
    const spaces = "<tool_response>" + " ".repeat(1_000_000) + "x";
    expect(toolResponseBlocks(spaces)).toEqual([]);
    const many = `${"<tool_response> r </tool_response>".repeat(30_000)}<tool_response>${" ".repeat(500_000)}`;
    const blocks = toolResponseBlocks(many);
    expect(blocks).toHaveLength(30_000);
    expect(blocks.every((b) => b.content === "r")).toBe(true);
  }, 20_000);
});
