/**
 * A library script that uses the embedded backend exits when it is done, and is not cut short while it awaits a
 * kernel: jax-js's worker threads (src/policy/embedded/threads.ts) keep the process alive only while they owe an
 * answer. Before, idle threads held every script open after its last line (the CLI exits explicitly; a user's script
 * hung), and unref'ing them outright ended a script in the middle of its first `await`.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";

const dir = mkdtempSync(join(tmpdir(), "arl-exit-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("embedded backend in a plain script", () => {
  it("runs a sample and an update, prints both, and exits 0 on its own (no dispose, no process.exit)", () => {
    const backend = resolve("src/policy/embedded/backend.ts");
    const script = join(dir, "script.mts");
    writeFileSync(script, [
      `import { EmbeddedBackend } from ${JSON.stringify(backend)};`,
      `const b = await EmbeddedBackend.create({ vocabSize: 20, contextLength: 16, dModel: 16, nLayers: 1, nHeads: 2 }, 1);`,
      `const [s] = await b.samplingClient().sample([1, 2, 3], { n: 1, maxTokens: 4, temperature: 1, seed: 1 });`,
      `console.log("sampled", s.tokens.length);`,
      `const fb = await b.forwardBackward([{ modelInput: [1, 2, 3], targetTokens: [2, 3, 4], weights: [1, 1, 1] }], "cross_entropy");`,
      `console.log("loss", Number.isFinite(fb.loss));`,
    ].join("\n"));
    const r = spawnSync(process.execPath, ["--import", "tsx", script], { encoding: "utf8", timeout: 90_000, env: { ...process.env, ARL_JAX_THREADS: "2" } });
    expect(r.error, "the script did not exit within 90 s").toBeUndefined();
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toContain("sampled 4");
    expect(r.stdout).toContain("loss true");
  }, 120_000);
});
