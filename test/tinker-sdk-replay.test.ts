/**
 * What the real Tinker SDK sends, `arl serve trainer` accepts: the 31 exchanges the official Python SDK 0.25.0
 * (thinking-machines-lab/tinker @ d595dc2ba62a1494aa0f452fe1d0dbb7b321b870) had with a fresh `arl serve trainer
 * --smoke` (test/fixtures/tinker/sdk-0.25/, recorded 2026-12-01) are replayed against a fresh server — the same
 * bytes, ids aside — and every answer must be what the SDK got: same status, same content type, same body (protobuf
 * answers decoded with the SDK's rules, numbers to 1e-5).
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { decodeForwardBackwardOutput, decodeForwardBackwardRequest, decodeSampleResponse } from "../src/policy/tinker/proto.ts";
import { listen, type RunningServer } from "../src/http/server.ts";
import { trainerApp } from "../src/serve/trainer.ts";
import { resolveConfig } from "../src/train/config.ts";
import { SMOKE_OVERRIDES, searchRecipe } from "../src/envs/index.ts";
import { applyOverrides } from "../src/train/configFile.ts";
import { setupExperiment } from "../src/train/setup.ts";

interface Body {
  json?: unknown;
  base64?: string;
  text?: string;
}
interface Exchange {
  method: string;
  path: string;
  headers: Record<string, string>;
  body: Body;
  response: { status: number; contentType?: string; body: Body };
}

const fixture = JSON.parse(readFileSync(join(import.meta.dirname, "fixtures/tinker/sdk-0.25/exchanges.json"), "utf8")) as { exchanges: Exchange[] };
const root = mkdtempSync(join(tmpdir(), "arl-sdk-replay-"));
let server: RunningServer;

beforeAll(async () => {
  const config = resolveConfig(applyOverrides({}, SMOKE_OVERRIDES)); // what `arl serve trainer --smoke` serves
  const s = setupExperiment(config, searchRecipe);
  server = await listen(trainerApp({ baseModels: [{ name: "arl/init", gpt: s.gpt, tokenizer: s.tokenizer, seed: config.run.seed }], dir: join(root, "served") }));
}, 60_000);
afterAll(async () => {
  await server?.close();
  rmSync(root, { recursive: true, force: true });
});

/** Ids are `<kind>_<7-char process prefix><6-char counter>`: the replay maps the recorded prefix to the live one. */
const ID = /\b(?:session|model|req|sampling|s)_([0-9a-z]{7})[0-9a-z]{6}\b/;

function close(actual: unknown, expected: unknown, where: string): void {
  if (typeof expected === "number" && typeof actual === "number") {
    expect(Math.abs(actual - expected), where).toBeLessThanOrEqual(1e-5 * Math.max(1, Math.abs(expected)));
  } else if (Array.isArray(expected)) {
    expect(Array.isArray(actual), where).toBe(true);
    expect((actual as unknown[]).length, where).toBe(expected.length);
    expected.forEach((e, i) => close((actual as unknown[])[i], e, `${where}[${i}]`));
  } else if (expected !== null && typeof expected === "object") {
    expect(actual !== null && typeof actual === "object", where).toBe(true);
    expect(Object.keys(actual as object).sort(), where).toEqual(Object.keys(expected).sort());
    for (const [k, v] of Object.entries(expected)) close((actual as Record<string, unknown>)[k], v, `${where}.${k}`);
  } else expect(actual, where).toEqual(expected);
}

describe("the real Tinker SDK 0.25 against arl serve trainer (recorded exchanges, replayed)", () => {
  it("covers the endpoints the SDK calls, protobuf forward_backward and protobuf results included", () => {
    const paths = new Set(fixture.exchanges.map((e) => e.path.replace("/api/v1/", "")));
    for (const p of ["client/config", "create_session", "create_model", "forward_backward", "optim_step", "save_weights", "load_weights", "save_weights_for_sampler", "create_sampling_session", "asample", "retrieve_future"]) {
      expect(paths, p).toContain(p);
    }
    const fwd = fixture.exchanges.filter((e) => e.path.endsWith("/forward_backward"));
    expect(fwd.every((e) => e.headers["content-type"] === "application/x-protobuf")).toBe(true);
    // The SDK numbers a model's training requests 1, 2, 3 … and its forward is forward_backward with forward_only.
    const decoded = fwd.map((e) => decodeForwardBackwardRequest(Buffer.from(e.body.base64!, "base64")));
    expect(decoded.map((d) => d.forward_only)).toEqual([false, true, false, false]);
    expect(decoded.map((d) => d.seq_id)).toEqual([1, 3, 4, 9]);
    const protoAnswers = fixture.exchanges.filter((e) => e.response.contentType === "application/x-protobuf");
    expect(protoAnswers.length).toBeGreaterThanOrEqual(5);
  });

  it("answers every recorded request as it answered the SDK", async () => {
    let recordedPrefix: string | undefined;
    let livePrefix: string | undefined;
    const swapIds = (text: string): string => (recordedPrefix && livePrefix ? text.split(recordedPrefix).join(livePrefix) : text);
    for (const [i, ex] of fixture.exchanges.entries()) {
      const where = `#${i} ${ex.method} ${ex.path}`;
      const body = ex.body.base64 !== undefined ? Buffer.from(swapIds(Buffer.from(ex.body.base64, "base64").toString("latin1")), "latin1") : ex.body.json !== undefined ? swapIds(JSON.stringify(ex.body.json)) : undefined;
      const res = await fetch(`${server.url}${ex.path}`, { method: ex.method, headers: ex.headers, body: ex.method === "POST" ? body : undefined });
      const bytes = Buffer.from(await res.arrayBuffer());
      expect(res.status, where).toBe(ex.response.status);
      const proto = (res.headers.get("content-type") ?? "").includes("application/x-protobuf");
      expect(proto, where).toBe((ex.response.contentType ?? "").includes("application/x-protobuf"));
      if (proto) {
        const decode = ex.headers["x-tinker-request-type"] === "Sample" ? decodeSampleResponse : decodeForwardBackwardOutput;
        close(decode(bytes), decode(Buffer.from(ex.response.body.base64!, "base64")), where);
        continue;
      }
      if (ex.response.body.json === undefined) continue;
      const text = bytes.toString("utf8");
      if (!recordedPrefix) {
        // The first id in an answer fixes the mapping of the recorded server's id prefix to this one's.
        const rec = ID.exec(JSON.stringify(ex.response.body.json));
        const live = ID.exec(text);
        if (rec && live) [recordedPrefix, livePrefix] = [rec[1], live[1]];
      }
      close(JSON.parse(text), JSON.parse(swapIds(JSON.stringify(ex.response.body.json))), where);
    }
    expect(livePrefix).toBeDefined();
  }, 60_000);
});
