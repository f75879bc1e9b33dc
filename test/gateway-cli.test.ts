/**
 * `arl serve gateway --smoke` as a process: it serves on loopback with the bearer key, opens rollouts over HTTP or on
 * demand, appends every resolved rollout to `--records` as JSONL, and drops unrewarded ones when it shuts down.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { afterAll, describe, expect, it } from "vitest";
import type { RolloutRecord } from "../src/gateway/types.ts";

let child: ChildProcess | undefined;
afterAll(() => {
  if (child && child.exitCode === null) child.kill("SIGKILL");
});

describe("arl serve gateway", () => {
  it("serves a smoke model, records rollouts as JSONL, drops unrewarded ones at shutdown", async () => {
    const records = join(mkdtempSync(join(tmpdir(), "arl-gw-")), "out", "records.jsonl");
    child = spawn(process.execPath, ["bin/arl.mjs", "serve", "gateway", "--smoke", "--port", "0", "--api-key", "k1", "--open-on-demand", "--records", records, "--max-tokens", "8"], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    child.stderr!.on("data", (d: Buffer) => (out += d.toString()));
    const url = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no URL printed: ${out}`)), 30_000);
      child!.stdout!.on("data", (d: Buffer) => {
        out += d.toString();
        const m = /training gateway at (http:\/\/127\.0\.0\.1:\d+)/.exec(out);
        if (m) {
          clearTimeout(timer);
          resolve(m[1]);
        }
      });
      child!.on("exit", (code) => reject(new Error(`exited ${code}: ${out}`)));
    });
    const auth = { authorization: "Bearer k1", "content-type": "application/json" };
    // On demand: the first call opens rollout "a".
    const c = new OpenAI({ baseURL: `${url}/rollout/a/v1`, apiKey: "k1", maxRetries: 0 });
    const r = await c.chat.completions.create({ model: "anything", messages: [{ role: "user", content: "Book a flight to Paris." }], seed: 1 });
    expect(r.choices[0].message.role).toBe("assistant");
    expect(r.usage!.completion_tokens).toBeLessThanOrEqual(8);
    const rewarded = await fetch(`${url}/rollout/a/reward`, { method: "POST", headers: auth, body: JSON.stringify({ value: 0.25, parts: { booked: 0 } }) });
    expect(rewarded.status).toBe(200);
    // Opened over HTTP, never rewarded: dropped when the gateway shuts down.
    const opened = await fetch(`${url}/rollout/b/open`, { method: "POST", headers: auth, body: JSON.stringify({ meta: { task: "t-b" } }) });
    expect(opened.status).toBe(200);
    expect((await fetch(`${url}/healthz`)).status).toBe(200);
    expect((await fetch(`${url}/rollout/b`)).status).toBe(401);
    const exited = new Promise<number | null>((resolve) => child!.on("exit", resolve));
    child.kill("SIGTERM");
    expect(await exited).toBe(0);
    const lines = readFileSync(records, "utf8").trim().split("\n").map((l) => JSON.parse(l) as RolloutRecord);
    expect(lines.map((l) => [l.id, l.status])).toEqual([
      ["a", "rewarded"],
      ["b", "dropped"],
    ]);
    expect(lines[0].reward).toEqual({ value: 0.25, parts: { booked: 0 } });
    expect(lines[0].calls).toHaveLength(1);
    expect(lines[0].calls[0].completionTokens).toHaveLength(r.usage!.completion_tokens);
    expect(lines[1]).toMatchObject({ meta: { task: "t-b" }, calls: [], dropReason: "the gateway closed before a reward" });
  });
});
