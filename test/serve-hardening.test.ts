/**
 * Issue 5, servers: every `arl serve …` app, through real HTTP on 127.0.0.1 — oversized bodies (413), malformed JSON
 * (400), a missing or wrong token (401), a slow client (408 and disconnected), path-traversal names (400), bodies
 * nested past 64 levels (400, issue 29), and a graceful shutdown that finishes the request in flight. Counts go to
 * docs/reliability.md.
 */
import { connect } from "node:net";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { FastifyInstance } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BM25Index } from "../src/retrieval/bm25.ts";
import { REWARD_PRESETS } from "../src/reward/presets.ts";
import { createApp, listen, type RunningServer, type ServeOptions } from "../src/http/server.ts";
import { jsonTextTooDeepPath, tooDeepPath } from "../src/http/limits.ts";
import { createMcpApp, searchEnvTools } from "../src/serve/mcp.ts";
import { createOpenAIApp } from "../src/serve/openai.ts";
import { createRetrievalApp } from "../src/serve/retrieval.ts";
import { createRewardApp } from "../src/serve/reward.ts";
import { trainerApp } from "../src/serve/trainer.ts";
import { resolveConfig } from "../src/train/config.ts";
import { SMOKE_OVERRIDES, searchRecipe } from "../src/envs/index.ts";
import { applyOverrides } from "../src/train/configFile.ts";
import { setupExperiment } from "../src/train/setup.ts";
import { EmbeddedBackend } from "../src/policy/embedded/backend.ts";

const config = resolveConfig(applyOverrides({}, SMOKE_OVERRIDES));
const s = setupExperiment(config, searchRecipe);
const index = new BM25Index([...s.instance.corpus!()]);
const KEY = "k-123";
const opts: ServeOptions = { apiKey: KEY, bodyLimit: 64 * 1024, requestTimeoutMs: 400 };

/** Each server: how to build it, and one valid POST route. */
const servers: Array<{ name: string; make: () => Promise<FastifyInstance>; route: string }> = [
  { name: "retrieval", make: async () => createRetrievalApp(index, opts), route: "/retrieve" },
  { name: "reward", make: async () => createRewardApp({ ...opts, reward: { weights: REWARD_PRESETS.default.weights } }), route: "/reward" },
  { name: "mcp", make: async () => createMcpApp(searchEnvTools(index), opts), route: "/mcp" },
  {
    name: "openai",
    make: async () => {
      const backend = await EmbeddedBackend.create(s.gpt, 0);
      return createOpenAIApp({ name: "tiny", sampler: backend.samplingClient(), tokenizer: s.tokenizer, contextLength: s.gpt.contextLength }, opts);
    },
    route: "/v1/chat/completions",
  },
  {
    name: "trainer",
    make: async () =>
      trainerApp({ ...opts, baseModels: [{ name: "arl/init", gpt: s.gpt, tokenizer: s.tokenizer, seed: 0 }], dir: mkdtempSync(join(tmpdir(), "arl-harden-")) }),
    route: "/api/v1/forward_backward",
  },
];
const running = new Map<string, RunningServer>();

beforeAll(async () => {
  for (const srv of servers) running.set(srv.name, await listen(await srv.make()));
}, 60_000);
afterAll(async () => {
  for (const r of running.values()) await r.close();
});

const auth = { authorization: `Bearer ${KEY}`, "content-type": "application/json", accept: "application/json, text/event-stream" };

describe.each(servers)("arl serve $name", ({ name, route }) => {
  const url = () => running.get(name)!.url + route;

  it("binds 127.0.0.1 by default", () => {
    expect(running.get(name)!.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
  });

  it("refuses a missing or wrong token with 401 and a reason", async () => {
    for (const headers of [{ "content-type": "application/json" }, { ...auth, authorization: "Bearer nope" }]) {
      const r = await fetch(url(), { method: "POST", headers, body: "{}" });
      expect(r.status).toBe(401);
      expect(((await r.json()) as { error: string }).error).toMatch(/API key/);
    }
  });

  it("answers malformed JSON with 400 and an oversized body with 413, never 500", async () => {
    for (const body of ["{", "[1,", '{"a":', "\u0000\u0001", "nul"]) {
      const r = await fetch(url(), { method: "POST", headers: auth, body });
      expect(r.status, `${name} ${JSON.stringify(body)}`).toBeGreaterThanOrEqual(400);
      expect(r.status).toBeLessThan(500);
    }
    const big = JSON.stringify({ queries: ["x".repeat(100 * 1024)] });
    const r = await fetch(url(), { method: "POST", headers: auth, body: big });
    expect(r.status).toBe(413);
  });

  it("drops a client that sends its body too slowly (408), and keeps serving", async () => {
    const { port } = new URL(running.get(name)!.url);
    const reply = await new Promise<string>((resolve) => {
      const sock = connect(Number(port), "127.0.0.1", () => {
        sock.write(`POST ${route} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${KEY}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"a"`);
      });
      let data = "";
      sock.on("data", (d) => (data += d.toString()));
      sock.on("close", () => resolve(data));
      sock.setTimeout(5000, () => sock.destroy());
    });
    expect(reply).toMatch(/^HTTP\/1\.1 408/);
    // Our `{error}` body, not fastify's own shape (createApp's clientErrorHandler).
    expect(JSON.parse(reply.slice(reply.indexOf("\r\n\r\n") + 4))).toEqual({ error: "the request was not received within 400 ms" });
    const ok = await fetch(running.get(name)!.url + (name === "trainer" ? "/api/v1/healthz" : name === "openai" ? "/healthz" : "/healthz"));
    expect(ok.status).toBe(200);
  }, 10_000);

  it("answers a body nested 10 000 deep with 400 saying where, before any route code walks it (issue 29)", async () => {
    const r = await fetch(url(), { method: "POST", headers: auth, body: `{"x": ${"[".repeat(10_000)}${"]".repeat(10_000)}}` });
    expect(r.status).toBe(400);
    expect(((await r.json()) as { error: string }).error).toMatch(/^x(\[0\]){7}…: JSON nested deeper than 64 levels of arrays and objects/);
  });
});

describe("the API key is checked on the matched route", () => {
  it("a query string or a percent-encoded path does not skip it (only GET /healthz is open)", async () => {
    const base = running.get("openai")!.url;
    for (const url of ["/v1/models?x=/healthz", "/v1/models?healthz", "/v1/%6dodels", "/v1/models/healthz"]) {
      expect((await fetch(base + url)).status, url).toBe(401);
    }
    expect((await fetch(base + "/healthz")).status).toBe(200);
    expect((await fetch(base + "/v1/models", { headers: auth })).status).toBe(200);
  });
});

describe("names from requests cannot escape the server's folders", () => {
  it("rejects path traversal in checkpoint and sampler names (trainer)", async () => {
    const base = running.get("trainer")!.url + "/api/v1";
    const post = (p: string, b: unknown) => fetch(`${base}/${p}`, { method: "POST", headers: auth, body: JSON.stringify(b) });
    const created = (await (await post("create_model", { base_model: "arl/init" })).json()) as { model_id: string };
    const names = ["../x", "..", "a/b", "..\\x", "%2e%2e", "x\u0000", "/etc/passwd", "a".repeat(200), ""];
    for (const path of names) {
      const r = await post("save_weights", { model_id: created.model_id, path });
      expect(r.status, path).toBe(400);
    }
    for (const path of ["tinker://../weights/x", "tinker://model_1/weights/../../x", "file:///etc/passwd", "tinker://a/b/c/d"]) {
      const r = await post("load_weights", { model_id: created.model_id, path });
      expect(r.status, path).toBe(400);
    }
  });
});

describe("graceful shutdown", () => {
  it("finishes the request in flight, then refuses new connections", async () => {
    const app = createApp({});
    app.get("/slow", async () => {
      await new Promise((r) => setTimeout(r, 300));
      return { done: true };
    });
    const srv = await listen(app);
    const inflight = fetch(`${srv.url}/slow`).then(async (r) => ({ status: r.status, body: await r.json() }));
    await new Promise((r) => setTimeout(r, 50));
    const closed = srv.close();
    expect(await inflight).toEqual({ status: 200, body: { done: true } });
    await closed;
    await expect(fetch(`${srv.url}/slow`)).rejects.toThrow();
  });
});

describe("inputs a new user tried (each a 4xx with a reason, never a 500 or a broken model)", () => {
  const call = async (name: string, path: string, body: unknown, method = "POST") => {
    const r = await fetch(running.get(name)!.url + path, { method, headers: auth, body: method === "POST" ? JSON.stringify(body) : undefined });
    return { status: r.status, json: (await r.json()) as Record<string, unknown> };
  };
  it("trainer: empty prompt, stop id outside the vocabulary, huge weights, absurd learning rate, unknown session; models can be unloaded", async () => {
    const prompt = (tokens: number[]) => ({ base_model: "arl/init", prompt: { chunks: [{ tokens }] }, sampling_params: { max_tokens: 2, stop: [99999] } });
    expect((await call("trainer", "/api/v1/asample", prompt([]))).json.error).toMatch(/prompt: no tokens/);
    expect((await call("trainer", "/api/v1/asample", prompt([2]))).json.error).toMatch(/stop: token id 99999 outside/);
    const m = (await call("trainer", "/api/v1/create_model", { base_model: "arl/init" })).json.model_id as string;
    const fb = await call("trainer", "/api/v1/forward_backward", {
      model_id: m,
      forward_backward_input: { loss_fn: "cross_entropy", data: [{ model_input: { chunks: [{ tokens: [2, 3] }] }, loss_fn_inputs: { target_tokens: { data: [3, 4] }, weights: { data: [1e308, 1] } } }] },
    });
    expect(fb.status).toBe(400);
    expect(fb.json.error).toMatch(/weights\.data\.0: 1e\+308 is not a float32 value/); // TensorData's own check (wire.ts) comes first
    const lr = await call("trainer", "/api/v1/optim_step", { model_id: m, adam_params: { learning_rate: 1e308 } });
    expect(lr.status).toBe(400);
    expect(lr.json.error).toMatch(/learning_rate: expected a finite number in \[0, 1\], got 1e\+308/);
    expect((await call("trainer", "/api/v1/create_model", { base_model: "arl/init", session_id: "session_nope" })).status).toBe(404);
    const un = await call("trainer", "/api/v1/unload_model", { model_id: m });
    expect(un.status).toBe(200);
    expect((await call("trainer", "/api/v1/get_info", { model_id: m })).status).toBe(404);
  });
  it("trainer: a long client value is echoed cut to 80 characters, in every field (issue 29, outside probe)", async () => {
    const long = "x".repeat(20_000);
    const m = (await call("trainer", "/api/v1/create_model", { base_model: "arl/init" })).json.model_id as string;
    const datum = (inputs: Record<string, unknown>) => ({ model_input: { chunks: [{ tokens: [2, 3] }] }, loss_fn_inputs: { target_tokens: { data: [3, 4] }, ...inputs } });
    const fb = (inputs: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
      call("trainer", "/api/v1/forward_backward", { model_id: m, forward_backward_input: { loss_fn: "ppo", data: [datum(inputs)], ...extra } });
    const cases: Array<[string, Promise<{ status: number; json: Record<string, unknown> }>, RegExp]> = [
      ["target_tokens.data", fb({ target_tokens: { data: [long, 4] } }), /target_tokens\.data\.0: expected a finite number, got "x{80}…" \(a string\)/],
      ["weights.data", fb({ weights: { data: [{ [long]: 1 }, 1] } }), /weights\.data\.0: expected a finite number, got .{0,100} \(an object\)/],
      ["loss_fn_config value", fb({ logprobs: { data: [0, 0] }, advantages: { data: [1, 1] } }, { loss_fn_config: { clip_low_threshold: long } }), /loss_fn_config/],
      ["loss_fn_config key", fb({ logprobs: { data: [0, 0] }, advantages: { data: [1, 1] } }, { loss_fn_config: { [long]: 1 } }), /loss_fn_config/],
      ["an unknown key", call("trainer", "/api/v1/optim_step", { model_id: m, adam_params: { [long]: 1 } }), /unknown field\(s\) x{80}…/],
      ["model_id", call("trainer", "/api/v1/get_info", { model_id: long }), /model "x{80}…" \(20000 characters\) not found/],
      ["path", call("trainer", "/api/v1/load_weights", { model_id: m, path: `tinker://${long}` }), /path: expected tinker:.*got "tinker:/],
      ["session_id", call("trainer", "/api/v1/create_model", { base_model: "arl/init", session_id: long }), /session "x{80}…"/],
    ];
    for (const [name, reply, pattern] of cases) {
      const r = await reply;
      expect(r.status, name).toBeGreaterThanOrEqual(400);
      expect(r.status, name).toBeLessThan(500);
      const error = String(r.json.error);
      expect(error, name).toMatch(pattern);
      expect(error, name).not.toContain("x".repeat(81));
    }
  });

  it("retrieval: a request's total query text is bounded; openai: user content required, models/<id>; lowercase bearer", async () => {
    // (The test servers take 64 KB bodies; the default limit is 16 MiB, so the query budget is what bounds the work.)
    const { RetrieveRequest } = await import("../src/serve/retrieval.ts");
    const { parseBody } = await import("../src/http/server.ts");
    expect(() => parseBody(RetrieveRequest, { queries: Array.from({ length: 20 }, () => "x ".repeat(2000)) })).toThrow(/query characters per request/);
    const noContent = await call("openai", "/v1/chat/completions", { model: "tiny", messages: [{ role: "user" }] });
    expect(noContent.status).toBe(400);
    expect(noContent.json.error).toMatch(/user message needs content/);
    expect((await call("openai", "/v1/models/tiny", undefined, "GET")).json.id).toBe("tiny");
    expect((await call("openai", "/v1/models/other", undefined, "GET")).status).toBe(404);
    const lower = await fetch(running.get("retrieval")!.url + "/retrieve", { method: "POST", headers: { ...auth, authorization: `bearer ${KEY}` }, body: JSON.stringify({ queries: ["france"] }) });
    expect(lower.status).toBe(200);
  });
  it("the Tinker client names the server it could not reach and takes a URL with /api/v1", async () => {
    const { TinkerClient } = await import("../src/policy/tinker/client.ts");
    const c = new TinkerClient({ baseUrl: running.get("trainer")!.url + "/api/v1/", apiKey: KEY });
    expect(await c.call("healthz", undefined, "GET")).toEqual({ status: "ok" });
    const down = new TinkerClient({ baseUrl: "http://127.0.0.1:9", retries: 1 });
    await expect(down.call("create_session", {})).rejects.toThrow(/is a Tinker server running at http:\/\/127\.0\.0\.1:9\?/);
    expect(() => new TinkerClient({ baseUrl: "ftp://x" })).toThrow(/http\(s\) URL/);
  });
  it("arl export verl refuses values that would run as shell code in run.sh", async () => {
    const { exportVerl } = await import("../src/export/verl.ts");
    const out = mkdtempSync(join(tmpdir(), "arl-verl-inj-"));
    await expect(exportVerl({ outDir: out, config, rewardUrl: 'http://h:1/"$(echo PWNED >&2)"' })).rejects.toThrow(/plain URL characters/);
    await expect(exportVerl({ outDir: out, config, model: 'x"; echo PWNED; #' })).rejects.toThrow(/Hugging Face id/);
  });
});

describe("deep and large bodies do not stall a server (issue 29, outside probe)", () => {
  it("the depth is read off the text: the same path as the parsed value's, strings and escaped keys skipped", () => {
    const cases: unknown[] = [
      { a: [1, { "k\"]{": [[["[[[["]]] }] },
      [0, [1, [2, [3]]], { x: "}]", y: { "\\": [{}] } }],
      { s: "[[[[[[", t: [[[]]] },
    ];
    for (const v of cases) for (const d of [1, 2, 3, 4]) expect(jsonTextTooDeepPath(JSON.stringify(v), d), `${JSON.stringify(v)} ${d}`).toEqual(tooDeepPath(v, d));
    expect(jsonTextTooDeepPath(`{"a": ${"[".repeat(70)}${"]".repeat(70)}}`, 64)).toEqual(["a", ...Array(63).fill(0)]);
  });

  it("answers bodies nested millions deep with 400 while /healthz keeps answering (reward, default body limit)", async () => {
    const srv = await listen(createRewardApp({ apiKey: KEY, reward: { weights: REWARD_PRESETS.default.weights } }));
    try {
      const deep = `${"[".repeat(3_000_000)}${"]".repeat(3_000_000)}`; // 6 MB; V8's JSON.parse takes ~3 s on it
      const order: string[] = [];
      const bodies = Array.from({ length: 4 }, () =>
        fetch(`${srv.url}/reward`, { method: "POST", headers: auth, body: deep }).then(async (r) => {
          order.push("deep");
          return { status: r.status, error: ((await r.json()) as { error: string }).error };
        }),
      );
      await new Promise((r) => setTimeout(r, 50));
      const sent = Date.now();
      const health = await fetch(`${srv.url}/healthz`);
      const waited = Date.now() - sent;
      order.push("healthz");
      expect(health.status).toBe(200);
      for (const r of await Promise.all(bodies)) {
        expect(r.status).toBe(400);
        expect(r.error).toMatch(/^(\[0\]){8}…: JSON nested deeper than 64 levels/);
      }
      // Before the fix JSON.parse held the event loop ~3 s per body (~12 s for four); a stall of seconds fails this.
      expect(waited, order.join(",")).toBeLessThan(2500);
    } finally {
      await srv.close();
    }
  }, 30_000);

  it("servers with small requests take 1 MiB by default (retrieval, mcp: 413 above it; reward keeps 16 MiB for batches)", async () => {
    const big = JSON.stringify({ queries: ["x"], pad: "y".repeat(1024 * 1024) });
    const apps: Array<[FastifyInstance, string, number]> = [
      [createRetrievalApp(index, { apiKey: KEY }), "/retrieve", 413],
      [createMcpApp(searchEnvTools(index), { apiKey: KEY }), "/mcp", 413],
      [createRewardApp({ apiKey: KEY, reward: { weights: REWARD_PRESETS.default.weights } }), "/reward", 400],
    ];
    for (const [app, route, status] of apps) {
      const srv = await listen(app);
      try {
        expect((await fetch(srv.url + route, { method: "POST", headers: auth, body: big })).status, route).toBe(status);
      } finally {
        await srv.close();
      }
    }
  });
});
