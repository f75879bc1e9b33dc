/**
 * Issue 29 parts 3, 6 and 9 (the gateway's): hostile sizes get a 4xx before the work they would cost, through real
 * HTTP on 127.0.0.1 — an over-long prompt is refused by its byte size without being tokenised, a body over the
 * context's body limit is a 413, big prompts in flight leave `/healthz` and small calls answering (large tokenisations
 * run one at a time in a lane), nesting past 64 levels is a 400 naming the field (not a 500 "Maximum call stack size
 * exceeded"), rollout ids are plain tokens (`.` and `..` refused), error bodies stay short, and the API key is
 * compared in constant time. Error shape: OpenAI's `{error: {message, type, param, code}}` (src/gateway/errors.ts).
 */
import { Agent, request } from "node:http";
import { connect, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { startGateway, type RunningGateway } from "../src/gateway/server.ts";
import type { Tokenizer } from "../src/core/tokenizer.ts";
import { DEFAULT_MAX_BYTES_PER_TOKEN, WorkLane, sameSecret } from "../src/http/limits.ts";
import { ScriptedSampler, qwenTokenizer } from "./gateway-helpers.ts";

// Counts crypto.timingSafeEqual calls (the real function still answers).
const crypto = vi.hoisted(() => ({ timingSafeEqualCalls: 0 }));
vi.mock("node:crypto", async (importOriginal) => {
  const m = await importOriginal<typeof import("node:crypto")>();
  return {
    ...m,
    timingSafeEqual: (a: NodeJS.ArrayBufferView, b: NodeJS.ArrayBufferView) => {
      crypto.timingSafeEqualCalls++;
      return m.timingSafeEqual(a, b);
    },
  };
});

const CONTEXT = 2048;
const KEY = "limits-key";
const base = qwenTokenizer();

/** The test tokenizer, counting the characters it is asked to tokenise; texts over `slowOver` characters also take `slowMs` more (busy). */
function countingTokenizer(opts: { slowOver?: number; slowMs?: number; onSlow?: () => void } = {}): Tokenizer & { chars: number; big: number } {
  const spend = (text: string) => {
    t.chars += text.length;
    if (opts.slowOver !== undefined && text.length > opts.slowOver) {
      t.big++;
      opts.onSlow?.();
      const until = Date.now() + (opts.slowMs ?? 0);
      while (Date.now() < until) {
        // a tokenizer's synchronous work, made long enough to see
      }
    }
  };
  const t = {
    chars: 0,
    big: 0,
    vocabSize: base.vocabSize,
    bos: base.bos,
    pad: base.pad,
    encode: (text: string) => (spend(text), base.encode(text)),
    promptTokens: (text: string, o?: { rendered?: boolean }) => (spend(text), base.promptTokens(text, o)),
    decode: (ids: readonly number[]) => base.decode(ids),
    id: (token: string) => base.id(token),
    toJSON: () => base.toJSON(),
  };
  return t;
}

let gw: RunningGateway;
let tok: ReturnType<typeof countingTokenizer>;

async function post(path: string, body: unknown, headers: Record<string, string> = {}): Promise<{ status: number; text: string; json: Record<string, any> }> {
  const r = await fetch(`${gw.url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${KEY}`, ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
  const text = await r.text();
  return { status: r.status, text, json: JSON.parse(text) as Record<string, any> };
}

/** A raw HTTP POST (no URL normalisation: `/rollout/../v1/…` is sent as written). */
function rawPost(port: number, path: string, body: string): Promise<{ status: number; json: Record<string, any> }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port, method: "POST", path, headers: { "content-type": "application/json", authorization: `Bearer ${KEY}` } }, (res) => {
      let data = "";
      res.on("data", (d) => (data += d));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, json: JSON.parse(data) as Record<string, any> }));
    });
    req.on("error", reject);
    req.end(body);
  });
}

/** A request through `agent` (kept-alive connections); the status. */
function send(url: string, method: string, path: string, agent: Agent, body?: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const u = new URL(url);
    const req = request({ host: u.hostname, port: Number(u.port), method, path, agent, headers: body !== undefined ? { "content-type": "application/json" } : {} }, (res) => {
      res.resume();
      res.on("end", () => resolve(res.statusCode ?? 0));
    });
    req.on("error", reject);
    req.end(body);
  });
}

const user = (content: string) => ({ messages: [{ role: "user", content }] });
const expectOpenAIError = (json: Record<string, any>) => expect(Object.keys(json.error).sort()).toEqual(["code", "message", "param", "type"]);

beforeAll(async () => {
  tok = countingTokenizer();
  gw = await startGateway({ policy: { name: "arl/policy", sampler: new ScriptedSampler(tok), tokenizer: tok, contextLength: CONTEXT, maxTokens: 64 }, apiKey: KEY, openOnDemand: true });
});
afterAll(async () => {
  await gw?.close();
});

describe("sizes before work (part 3)", () => {
  it("a prompt over context × 32 bytes is refused as context_length_exceeded without being tokenised", async () => {
    const cap = CONTEXT * DEFAULT_MAX_BYTES_PER_TOKEN;
    const before = tok.chars;
    const r = await post("/v1/chat/completions", user("weather ".repeat(Math.ceil((cap * 3) / 8))));
    expect(r.status).toBe(400);
    expect(r.json.error).toMatchObject({ type: "invalid_request_error", code: "context_length_exceeded", param: "messages" });
    expect(r.json.error.message).toMatch(new RegExp(`maximum context length is ${CONTEXT} tokens\\. However, your messages and tools are \\d+ bytes of text, more than this gateway tokenizes for the context \\(${CONTEXT} tokens × 32 bytes = ${cap} bytes\\)`));
    // Only the stop strings' few characters, if any, were tokenised — not the ~200 KB prompt.
    expect(tok.chars - before).toBeLessThan(1000);
    // Just under the cap the prompt is tokenised and counted as before.
    const near = await post("/v1/chat/completions", user("weather ".repeat(Math.floor(cap / 8) - 100)));
    expect(near.json.error.message).toMatch(/However, your messages resulted in \d+ tokens/);
    expect(tok.chars - before).toBeGreaterThan(cap - 1000);
  });

  it("a body over the context's limit (8 × context × 32 bytes, at least 1 MiB) is a 413 naming the limit", async () => {
    const r = await post("/v1/chat/completions", user("x".repeat(1_100_000)));
    expect(r.status).toBe(413);
    expectOpenAIError(r.json);
    expect(r.json.error).toMatchObject({ type: "invalid_request_error", code: "request_too_large" });
    expect(r.json.error.message).toMatch(/over this gateway's limit of 1048576 bytes/);
  });

  it("a stop sequence (tokenised per request) is at most 1024 characters: a longer one is a 400 naming it", async () => {
    const r = await post("/v1/chat/completions", { ...user("hi"), stop: ["</answer>", "x".repeat(100_000)] });
    expect(r.status).toBe(400);
    expect(r.json.error).toMatchObject({ param: "stop[1]", code: "invalid_value" });
    expect(r.json.error.message).toMatch(/stop\[1\]: a stop sequence is at most 1024 characters/);
  });

  it("four concurrent over-long prompts (over the byte cap, and over the body limit): /healthz and a small call answer meanwhile", async () => {
    const small = async () => {
      const t0 = Date.now();
      const r = await post("/rollout/small-1/v1/chat/completions", user("What is the weather in Oslo?"));
      return { ms: Date.now() - t0, status: r.status };
    };
    const health = async () => {
      const t0 = Date.now();
      const r = await fetch(`${gw.url}/healthz`);
      return { ms: Date.now() - t0, status: r.status };
    };
    for (const [size, status] of [
      [900_000, 400],
      [2_000_000, 413],
    ] as const) {
      const bigs = Array.from({ length: 4 }, () => post("/v1/chat/completions", user("weather ".repeat(size / 8))));
      const [h, s] = await Promise.all([health(), small()]);
      const answers = await Promise.all(bigs);
      expect(answers.map((a) => a.status)).toEqual([status, status, status, status]);
      expect(h.status).toBe(200);
      expect(s.status).toBe(200);
      // Tokenising 4 × 0.9-2 MB takes seconds (the stall this guards against); reading and sizing them, milliseconds.
      expect(h.ms).toBeLessThan(2000);
      expect(s.ms).toBeLessThan(2000);
    }
  }, 60_000);

  it("large prompts under the cap are tokenised one at a time: /healthz and a small call are answered between them", async () => {
    const events: string[] = [];
    let firstBig!: () => void;
    const started = new Promise<void>((resolve) => (firstBig = resolve));
    const slow = countingTokenizer({ slowOver: 20_000, slowMs: 150, onSlow: () => (events.push("big tokenised"), firstBig()) });
    const g = await startGateway({ policy: { name: "slow", sampler: new ScriptedSampler(slow), tokenizer: slow, contextLength: CONTEXT, maxTokens: 32 } });
    // The probe's connection is open before the stall (a client in another process needs no turn of this event
    // loop to connect; in-process, connecting takes several).
    const probe = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      expect(await send(g.url, "GET", "/healthz", probe)).toBe(200);
      // 8 prompts of 48 KB (under the 64 KB cap; ~6 000 tokens, so each ends as a 400 after tokenising), written
      // on open connections in one go, so all eight have arrived before the server reads the first.
      const sockets = await Promise.all(Array.from({ length: 8 }, () => new Promise<Socket>((resolve) => {
        const so: Socket = connect(Number(new URL(g.url).port), "127.0.0.1", () => resolve(so));
      })));
      await new Promise((r) => setTimeout(r, 50)); // the server has accepted them
      const payload = JSON.stringify(user("weather ".repeat(6000)));
      const bigs = sockets.map(
        (so) =>
          new Promise<number>((resolve) => {
            let data = "";
            so.on("data", (d) => (data += d.toString()));
            so.on("close", () => resolve(Number(data.slice(9, 12))));
          }),
      );
      for (const so of sockets) so.write(`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(payload)}\r\nConnection: close\r\n\r\n${payload}`);
      await started; // the first big prompt has been tokenised: the others are waiting
      const h = send(g.url, "GET", "/healthz", probe).then((st) => (events.push("healthz answered"), st));
      const s = h.then(() => send(g.url, "POST", "/v1/chat/completions", probe, JSON.stringify(user("What is the weather in Paris?")))).then((st) => (events.push("small answered"), st));
      expect(await Promise.all([h, s])).toEqual([200, 200]);
      expect(await Promise.all(bigs)).toEqual(Array(8).fill(400));
      expect(slow.big).toBe(8);
      // Both were answered while big prompts still waited to be tokenised (before: only after all eight).
      const lastBig = events.lastIndexOf("big tokenised");
      expect(events.indexOf("healthz answered"), events.join(", ")).toBeLessThan(lastBig);
      expect(events.indexOf("small answered"), events.join(", ")).toBeLessThan(lastBig);
    } finally {
      probe.destroy();
      await g.close();
    }
  }, 30_000);

  it("WorkLane: large jobs run one per macrotask, in order; small ones at once; a throwing job rejects only itself", async () => {
    const lane = new WorkLane(100);
    const order: string[] = [];
    const jobs = [
      lane.run(1000, () => {
        order.push("big1");
        setImmediate(() => order.push("a callback queued by big1")); // runs before big2: big2 is a later macrotask
      }),
      lane.run(1000, () => {
        order.push("big2");
        throw new Error("boom");
      }),
      lane.run(1000, () => order.push("big3")),
    ];
    await lane.run(10, () => order.push("small"));
    expect(lane.waiting).toBe(3);
    await expect(jobs[1]).rejects.toThrow("boom");
    await Promise.all([jobs[0], jobs[2]]);
    expect(order).toEqual(["small", "big1", "a callback queued by big1", "big2", "big3"]);
    expect(lane.waiting).toBe(0);
  });
});

describe("nesting (part 6, gateway)", () => {
  const deep = (levels: number, leaf: string) => `${'{"type": "object", "properties": {"a": '.repeat(levels)}${leaf}${"}}".repeat(levels)}`;

  it("tools[].function.parameters 2 000 deep is a 400 naming the field, not a 500", async () => {
    const body = `{"messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function", "function": {"name": "f", "parameters": ${deep(2000, "{}")}}}]}`;
    const r = await post("/v1/chat/completions", body);
    expect(r.status).toBe(400);
    expectOpenAIError(r.json);
    expect(r.json.error).toMatchObject({ type: "invalid_request_error", code: "invalid_value", param: "tools[0].function.parameters" });
    expect(r.json.error.message).toMatch(/^tools\[0\]\.function\.parameters\.properties\.a.*: JSON nested deeper than 64 levels/);
    // 29 levels of nested properties (63 levels of JSON with the body around them) are served.
    const ok = await post("/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function", "function": {"name": "f", "parameters": ${deep(29, "{}")}}}]}`);
    expect(ok.status, ok.text).toBe(200);
  });

  it("a rollout's meta and tool-call arguments 20 000 deep are 400s too (the rollout's answers stay serialisable)", async () => {
    const meta = await post("/rollout/deep-meta/open", `{"meta": ${'{"a": '.repeat(20_000)}1${"}".repeat(20_000)}}`);
    expect(meta.status).toBe(400);
    expect(meta.json.error).toMatchObject({ param: "meta.a.a.a", code: "invalid_value" });
    const args = `${"[".repeat(20_000)}${"]".repeat(20_000)}`;
    const r = await post("/v1/chat/completions", {
      messages: [
        { role: "user", content: "hi" },
        { role: "assistant", content: null, tool_calls: [{ id: "c1", type: "function", function: { name: "f", arguments: args } }] },
        { role: "tool", tool_call_id: "c1", content: "ok" },
      ],
    });
    expect(r.status).toBe(400);
    expect(r.json.error).toMatchObject({ param: "messages[1].tool_calls[0].function.arguments", code: "invalid_value" });
    expect(r.json.error.message).toMatch(/nested deeper than 64 levels/);
  });
});

describe("ids, error bodies, API key (part 9, gateway)", () => {
  it("rollout ids are plain tokens: '.', '..', dots only, spaces and other characters are a 400 naming the allowed ones", async () => {
    const port = Number(new URL(gw.url).port);
    const rule = /rollout id: expected 1-256 characters of A-Z a-z 0-9 - \. _ ~ : @ \+ =, not dots only/;
    for (const path of ["/rollout/./v1/chat/completions", "/rollout/../reward", "/rollout/%2E%2E/v1/chat/completions", "/rollout/.../open", "/rollout/a%20b/open", "/rollout/%C3%BC/open"]) {
      const r = await rawPost(port, path, path.endsWith("reward") ? '{"value": 1}' : JSON.stringify(user("hi")));
      expect(r.status, path).toBe(400);
      expect(r.json.error).toMatchObject({ param: "id", code: "invalid_value" });
      expect(r.json.error.message, path).toMatch(rule);
    }
    const hdr = await post("/v1/chat/completions", user("hi"), { "x-rollout-id": ".." });
    expect(hdr.status).toBe(400);
    expect(hdr.json.error.message).toMatch(rule);
    expect(() => gw.registry.open(".")).toThrow(rule);
    for (const id of [".", "..", "..."]) expect(gw.registry.has(id)).toBe(false);
    // The ids the trainer makes, and a few more, still work.
    for (const id of ["run0-s3-t1-g2", "demo-careful-0-7", "a.b", "task:17@v2", "x_y~z+1=2"]) expect((await post(`/rollout/${encodeURIComponent(id)}/open`, {})).status, id).toBe(200);
  });

  it("10 000 invalid messages, 3 000 tools and a long id give short error bodies: the first problems and a count", async () => {
    const r = await post("/v1/chat/completions", { messages: Array.from({ length: 10_000 }, () => ({ role: "wizard" })) });
    expect(r.status).toBe(400);
    expect(r.text.length).toBeLessThan(4096);
    expect(r.json.error.param).toBe("messages[0].role");
    expect(r.json.error.message).toMatch(/^messages\[0\]\.role: expected a message with role .*; … and 9995 more problems$/);
    const tools = Array.from({ length: 3000 }, (_, i) => ({ type: "function", function: { name: `tool_${i}` } }));
    const choice = await post("/v1/chat/completions", { ...user("hi"), tools, tool_choice: { type: "function", function: { name: "x".repeat(60_000) } } });
    expect(choice.status).toBe(400);
    expect(choice.text.length).toBeLessThan(4096);
    expect(choice.json.error.message).toMatch(/unknown tool "x{80}…" \(60000 characters\); the request's tools are tool_0, .* tool_9 … and 2990 more$/);
    const id = await post("/v1/chat/completions", user("hi"), { "x-rollout-id": `bad id ${"z".repeat(8000)}` });
    expect(id.status).toBe(400);
    expect(id.text.length).toBeLessThan(1024);
  });

  it("the API key is compared in constant time (crypto.timingSafeEqual over SHA-256 digests), whatever the given key's length", async () => {
    expect(sameSecret("abc", "abc")).toBe(true);
    for (const given of ["abd", "ab", "abcd", "", undefined, ["abc", "abc"]]) expect(sameSecret(given, "abc")).toBe(false);
    const before = crypto.timingSafeEqualCalls;
    for (const key of [KEY, "x", `${KEY}-and-more`, KEY.slice(0, -1)]) {
      const r = await fetch(`${gw.url}/rollout/any/reward`, { method: "POST", headers: { authorization: `Bearer ${key}`, "content-type": "application/json" }, body: '{"value": 1}' });
      expect(r.status, key).toBe(key === KEY ? 404 : 401);
    }
    expect(crypto.timingSafeEqualCalls - before).toBe(4);
  });
});

describe("a refused value is quoted with its type (issue 29, outside probe)", () => {
  it("max_tokens, temperature, stream, messages, deadline_ms: the value (cut to 80 characters) and its type", async () => {
    const long = "x".repeat(5000);
    const cases: Array<[Record<string, unknown>, RegExp]> = [
      [{ ...user("hi"), max_tokens: "5" }, /^max_tokens: expected an integer ≥ 1, got "5" \(a string\)$/],
      [{ ...user("hi"), max_tokens: 0 }, /^max_tokens: expected an integer ≥ 1, got 0$/],
      [{ ...user("hi"), max_tokens: 2.5 }, /^max_tokens: expected an integer ≥ 1, got 2\.5$/],
      [{ ...user("hi"), temperature: long }, /^temperature: expected a number in \[0, 2\], got "x{80}…" \(a string\)$/],
      [{ ...user("hi"), stream: [1, 2] }, /^stream: expected true or false, got \[ 1, 2 \] \(an array\)$/],
      [{ messages: "hello" }, /^messages: expected a list of messages, got "hello" \(a string\)$/],
    ];
    for (const [body, pattern] of cases) {
      const r = await post("/v1/chat/completions", body);
      expect(r.status, JSON.stringify(body).slice(0, 80)).toBe(400);
      expect(r.json.error.message).toMatch(pattern);
    }
    // `1e999` is JSON for a number past float64: Infinity once parsed.
    const inf = await post("/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1e999}`);
    expect(inf.json.error.message).toMatch(/^max_tokens: expected an integer ≥ 1, got Infinity$/);
    const open = await post("/rollout/r-quote/open", { deadline_ms: "soon" });
    expect(open.json.error.message).toMatch(/^deadline_ms: .*, got "soon" \(a string\)$/);
  });
});
