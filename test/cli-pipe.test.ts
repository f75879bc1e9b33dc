/**
 * Issue 29's outside probe: `arl train --print-config | wc -c` stopped at 65 536 bytes — `process.exit` dropped what the
 * pipe had not taken yet. The CLI now exits once stdout and stderr have flushed (`exitAfterFlush`, src/cli/main.ts).
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

const ARL = join(import.meta.dirname, "..", "bin", "arl.mjs");

describe("arl's output through a pipe", () => {
  it("a 200 KB --print-config arrives whole", async () => {
    const dir = mkdtempSync(join(tmpdir(), "arl-pipe-"));
    try {
      const file = join(dir, "big.json");
      writeFileSync(file, JSON.stringify({ run: { name: "x".repeat(200_000) } }));
      // A shell pipe, as the user ran it (a Node child's own stdout pipe is a socket pair and did not lose the tail).
      const child = spawn("sh", ["-c", `"${process.execPath}" "${ARL}" train --print-config --config "${file}" | wc -c`], { stdio: ["ignore", "pipe", "pipe"] });
      let out = "";
      child.stdout.on("data", (c: Buffer) => (out += c.toString("utf8")));
      const code = await new Promise<number | null>((r) => child.on("close", r));
      expect(code).toBe(0);
      expect(Number(out.trim())).toBeGreaterThan(200_000); // was 65 536
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
