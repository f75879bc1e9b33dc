/**
 * The Tinker route through real HTTP: `arl serve trainer`'s app on 127.0.0.1, the `TinkerBackend` client, and the
 * RL loop run unchanged over it — compared with the in-process run from the same warm start and seed.
 */
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Fastify from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Metrics } from "../src/core/types.ts";
import { EmbeddedBackend } from "../src/policy/embedded/backend.ts";
import { TinkerBackend } from "../src/policy/tinker/backend.ts";
import { TinkerApiError, TinkerClient } from "../src/policy/tinker/client.ts";
import { toWireDatums } from "../src/policy/tinker/wire.ts";
import { listen, type RunningServer } from "../src/http/server.ts";
import { trainerApp } from "../src/serve/trainer.ts";
import { resolveConfig } from "../src/train/config.ts";
import { SMOKE_OVERRIDES, searchRecipe } from "../src/envs/index.ts";
import { applyOverrides } from "../src/train/configFile.ts";
import { silentReporter } from "../src/train/reporter.ts";
import { trainRl } from "../src/train/rlLoop.ts";
import { replayDatums, rlWorlds } from "../src/train/runner.ts";
import { setupExperiment, type Setup } from "../src/train/setup.ts";
import { warmStart, warmStartDemos } from "../src/train/warmStart.ts";
import { RunDir } from "../src/train/runDir.ts";
import type { Task, Trajectory } from "../src/core/types.ts";

const root = mkdtempSync(join(tmpdir(), "arl-tinker-"));
const config = resolveConfig(
  applyOverrides({}, { ...SMOKE_OVERRIDES, "run.dir": root, "rl.steps": "3", "detectors.enabled": "true", "detectors.referenceKl": "true" }),
);
let s: Setup;
let demos: Trajectory[];
let sft: string;
let server: RunningServer;

const post = async (path: string, body: unknown, headers: Record<string, string> = {}) => {
  const res = await fetch(`${server.url}/api/v1/${path}`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: typeof body === "string" ? body : JSON.stringify(body) });
  return { status: res.status, json: (await res.json()) as Record<string, unknown> };
};

beforeAll(async () => {
  s = setupExperiment(config, searchRecipe);
  demos = await warmStartDemos(s, config);
  const run = new RunDir(root, "warm", { overwrite: true });
  await warmStart(s, config, demos, run, silentReporter);
  sft = run.checkpoint("sft");
  server = await listen(
    trainerApp({
      baseModels: [
        { name: "arl/sft", gpt: s.gpt, tokenizer: s.tokenizer, checkpoint: sft, seed: config.run.seed },
        { name: "arl/init", gpt: s.gpt, tokenizer: s.tokenizer, seed: config.run.seed },
      ],
      dir: join(root, "served"),
      longPollMs: 200,
    }),
  );
}, 120_000);
afterAll(async () => server?.close());

describe("the RL loop over the Tinker API", () => {
  it("gives the in-process run's rollouts and rewards exactly, and its training metrics to float noise", async () => {
    const inProcess = await EmbeddedBackend.create(s.gpt, config.run.seed);
    await inProcess.load(sft);
    const a = await trainRl({ backend: inProcess, worlds: rlWorlds(s, config), replayDatums: replayDatums(s, demos), setup: s, config, run: new RunDir(root, "rl-local", { overwrite: true }), reporter: silentReporter, referenceDir: sft });

    const remote = { ...config, policy: { ...config.policy, backend: "tinker" as const, tinker: { ...config.policy.tinker, baseUrl: server.url, baseModel: "arl/sft" } } };
    const make = () => TinkerBackend.create({ baseUrl: server.url, baseModel: "arl/sft" });
    const backend = await make();
    const runB = new RunDir(root, "rl-http", { overwrite: true });
    const b = await trainRl({ backend, worlds: rlWorlds(s, remote), replayDatums: replayDatums(s, demos), setup: s, config: remote, run: runB, reporter: silentReporter, referenceDir: sft, label: "RL", makeReference: make });
    backend.close();

    expect(b.steps).toHaveLength(3);
    for (let step = 0; step < 3; step++) {
      const [x, y]: Metrics[] = [a.steps[step], b.steps[step]];
      expect(Object.keys(y).sort()).toEqual(Object.keys(x).sort());
      for (const k of Object.keys(x)) {
        if (k.startsWith("train/") || k === "hack/kl_ref") {
          // Same math; the client folds the token-mean into the advantages instead of dividing the sum (float32).
          expect(Math.abs(y[k] - x[k]), `${k} step ${step}`).toBeLessThanOrEqual(1e-4 * Math.max(1, Math.abs(x[k])));
        } else {
          expect(y[k], `${k} step ${step}`).toBe(x[k]); // rollout, reward and detector metrics: identical
        }
      }
    }
    // The checkpoints of the HTTP run are pointers to weights saved on the server.
    const pointer = JSON.parse(readFileSync(join(runB.checkpoint("final"), "tinker.json"), "utf8")) as { path: string; baseModel: string };
    expect(pointer.baseModel).toBe("arl/sft");
    expect(pointer.path).toMatch(/^tinker:\/\/model_[a-z0-9]+\/weights\/ckpt-/);
  }, 240_000);

  it("folds token-mean and Dr.GRPO normalisation into the data so the server's sums equal the in-process loss", async () => {
    const datums = demos.slice(0, 3).map((t) => {
      const n = t.tokens.length - 1;
      return {
        modelInput: t.tokens.slice(0, -1),
        targetTokens: t.tokens.slice(1),
        weights: t.lossMask.slice(1),
        logprobs: new Array(n).fill(-1),
        advantages: t.lossMask.slice(1).map((m, i) => (m ? 0.5 - (i % 3) * 0.25 : 0)),
      };
    });
    for (const [lossFn, cfg] of [
      ["ppo", { clipLow: 0.2, clipHigh: 0.28 }],
      ["importance_sampling", { normalization: "constant" as const, constantLength: 40 }],
      ["cross_entropy", {}],
    ] as const) {
      const local = await EmbeddedBackend.create(s.gpt, config.run.seed); // arl/init: fresh weights of the same seed
      const fbLocal = await local.forwardBackward(datums, lossFn, cfg);
      const remote = await TinkerBackend.create({ baseUrl: server.url, baseModel: "arl/init" });
      const fbRemote = await remote.forwardBackward(datums, lossFn, cfg);
      remote.close();
      expect(fbRemote.loss).toBeCloseTo(fbLocal.loss, 5);
      expect(fbRemote.metrics.tokens).toBe(fbLocal.metrics.tokens);
      if (lossFn === "ppo") expect(fbRemote.metrics.clip_fraction).toBeCloseTo(fbLocal.metrics.clip_fraction, 6);
      expect(fbRemote.logprobs[2].slice(0, 5)).toEqual(fbLocal.logprobs[2].slice(0, 5).map((x) => expect.closeTo(x, 5)));
    }
    expect(() => toWireDatums(datums, "ppo", { klCoef: 0.1 })).toThrow(/no KL term; set rl.klCoef 0/);
  }, 60_000);

  it("saves, loads and samples at saved weights through tinker:// paths", async () => {
    const be = await TinkerBackend.create({ baseUrl: server.url, baseModel: "arl/init" });
    const d = toDatumOf(demos[0]);
    const before = await be.computeLogprobs([d]);
    const dir = join(root, "ckpt-roundtrip");
    await be.save(dir);
    const sampled0 = await be.samplingClient().sample(d.modelInput.slice(0, 8), { n: 2, maxTokens: 5, temperature: 1, seed: 11 });
    await be.forwardBackward([d], "cross_entropy");
    await be.optimStep({ learningRate: 0.05 });
    const after = await be.computeLogprobs([d]);
    expect(after[0]).not.toEqual(before[0]);
    await be.load(dir);
    expect(await be.computeLogprobs([d])).toEqual(before);
    // Same seed and weights → the same samples (the server exported the loaded weights for sampling again).
    expect(await be.samplingClient().sample(d.modelInput.slice(0, 8), { n: 2, maxTokens: 5, temperature: 1, seed: 11 })).toEqual(sampled0);
    be.close();
  }, 60_000);
});

function toDatumOf(t: Trajectory) {
  return { modelInput: t.tokens.slice(0, -1), targetTokens: t.tokens.slice(1), weights: t.lossMask.slice(1) };
}

describe("the trainer server's API", () => {
  it("answers malformed and unknown requests with 4xx and a reason", async () => {
    const bad = await post("forward_backward", "{not json");
    expect(bad.status).toBe(400);
    expect(String(bad.json.error)).toMatch(/JSON/i);
    const missing = await post("forward_backward", { model_id: "x" });
    expect(missing.status).toBe(400);
    expect(missing.json.error).toMatch(/forward_backward_input/);
    expect((await post("optim_step", { model_id: "model_nope", adam_params: {} })).status).toBe(404);
    const base = await post("create_model", { base_model: "Qwen/Qwen3-8B", lora_config: { rank: 8 } });
    expect(base.status).toBe(400);
    expect(base.json.error).toMatch(/unknown "Qwen\/Qwen3-8B" \(this server has: arl\/sft, arl\/init\)/);
    const created = await post("create_model", { base_model: "arl/init", lora_config: { rank: 8 } });
    const model_id = created.json.model_id as string;
    const lossIn = (data: unknown) => ({ model_id, forward_backward_input: { data, loss_fn: "ppo" } });
    const short = await post("forward_backward", lossIn([{ model_input: { chunks: [{ tokens: [1, 2, 3] }] }, loss_fn_inputs: { target_tokens: { data: [2, 3] } } }]));
    expect(short.status).toBe(400);
    expect(short.json.error).toMatch(/target_tokens: 2 values, model_input has 3 tokens/);
    const noAdv = await post("forward_backward", lossIn([{ model_input: { chunks: [{ tokens: [1, 2] }] }, loss_fn_inputs: { target_tokens: { data: [2, 3] } } }]));
    expect(noAdv.json.error).toMatch(/logprobs: required by loss ppo/);
    const vocab = await post("forward_backward", { model_id, forward_backward_input: { data: [{ model_input: { chunks: [{ tokens: [1, 99999] }] }, loss_fn_inputs: { target_tokens: { data: [2, 3] } } }], loss_fn: "cross_entropy" } });
    expect(vocab.json.error).toMatch(/model_input\[1\]: token id 99999 outside/);
    const traversal = await post("save_weights", { model_id, path: "../../etc" });
    expect(traversal.status).toBe(400);
    expect(traversal.json.error).toMatch(/path: expected 1-128 characters/);
    expect((await post("load_weights", { model_id, path: "tinker://../weights/x" })).status).toBe(400);
    expect((await post("retrieve_future", { request_id: "req_nope" })).status).toBe(404);
    const stop = await post("asample", { base_model: "arl/init", prompt: { chunks: [{ tokens: [2] }] }, sampling_params: { max_tokens: 3, stop: [""] } });
    expect(stop.status).toBe(400);
    expect(stop.json.error).toMatch(/sampling_params.stop: empty string/);
    const neither = await post("asample", { prompt: { chunks: [{ tokens: [2] }] }, sampling_params: { max_tokens: 3 } });
    expect(neither.status).toBe(400);
    expect(neither.json.error).toMatch(/exactly one of base_model and model_path/);
  });

  it("long-polls futures, then answers try_again; single-token stop strings work", async () => {
    const f = await post("asample", { base_model: "arl/sft", num_samples: 3, prompt: { chunks: [{ tokens: s.tokenizer.promptTokens("question : what is the capital of france ?") }] }, sampling_params: { max_tokens: 12, seed: 5, stop: ["</search>", "</answer>"], temperature: 1 } });
    expect(f.status).toBe(200);
    let r = await post("retrieve_future", { request_id: f.json.request_id });
    while (r.json.type === "try_again") r = await post("retrieve_future", { request_id: f.json.request_id });
    const seqs = r.json.sequences as Array<{ tokens: number[]; logprobs: number[]; stop_reason: string }>;
    expect(r.json.type).toBe("sample");
    expect(seqs).toHaveLength(3);
    for (const q of seqs) {
      expect(q.logprobs).toHaveLength(q.tokens.length);
      expect(["stop", "length"]).toContain(q.stop_reason);
      if (q.stop_reason === "stop") expect([s.tokenizer.id("</search>"), s.tokenizer.id("</answer>")]).toContain(q.tokens.at(-1));
    }
  }, 30_000);

  it("requires the API key when one is set (Bearer or X-API-Key), except for healthz", async () => {
    const keyed = await listen(trainerApp({ baseModels: [{ name: "arl/init", gpt: s.gpt, tokenizer: s.tokenizer, seed: 0 }], apiKey: "sekret", dir: join(root, "keyed") }));
    try {
      expect((await fetch(`${keyed.url}/api/v1/healthz`)).status).toBe(200);
      const no = await fetch(`${keyed.url}/api/v1/create_session`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
      expect(no.status).toBe(401);
      await expect(TinkerBackend.create({ baseUrl: keyed.url, baseModel: "arl/init", apiKey: "wrong" })).rejects.toThrow(/HTTP 401: missing or wrong API key/);
      const be = await TinkerBackend.create({ baseUrl: keyed.url, baseModel: "arl/init", apiKey: "sekret" });
      be.close();
    } finally {
      await keyed.close();
    }
  });
});

describe("TinkerClient", () => {
  it("retries 503 and connection errors with back-off, never a 4xx, and sends heartbeats", async () => {
    const fake = Fastify();
    let calls = 0;
    let heartbeats = 0;
    fake.post("/api/v1/flaky", async (_req, reply) => (++calls < 3 ? reply.code(503).send({ error: "busy" }) : { ok: calls }));
    fake.post("/api/v1/bad", async (_req, reply) => {
      calls++;
      return reply.code(422).send({ detail: "loss_fn: invalid" });
    });
    fake.post("/api/v1/create_session", async () => ({ session_id: "s1" }));
    fake.post("/api/v1/session_heartbeat", async () => {
      heartbeats++;
      return {};
    });
    const srv = await listen(fake);
    try {
      const c = new TinkerClient({ baseUrl: srv.url, backoffMs: 5, heartbeatMs: 20 });
      expect(await c.call("flaky", {})).toEqual({ ok: 3 });
      calls = 0;
      await expect(c.call("bad", {})).rejects.toThrow(new TinkerApiError(422, "bad", "loss_fn: invalid"));
      expect(calls).toBe(1);
      await c.createSession({ sdkVersion: "0.25.0" });
      await new Promise((r) => setTimeout(r, 120));
      c.close();
      expect(heartbeats).toBeGreaterThanOrEqual(2);
      const down = new TinkerClient({ baseUrl: "http://127.0.0.1:9", retries: 2, backoffMs: 5 });
      await expect(down.call("healthz", undefined, "GET")).rejects.toThrow(/no response/);
    } finally {
      await srv.close();
    }
  });
});

describe("TinkerClient authentication and billing pauses (SDK 0.25: lib/_jwt_auth.py, internal_client_holder.py)", () => {
  it("exchanges the key for a JWT when client/config says pjwt_auth_enabled, sends it as X-API-Key, and waits out a 402", async () => {
    const fake = Fastify();
    const jwt = (exp: number) => ["e30", Buffer.from(JSON.stringify({ exp })).toString("base64url"), "sig"].join(".");
    const token = jwt(Math.floor(Date.now() / 1000) + 3600);
    const seen: Array<[string, string | undefined]> = [];
    let paid = 0;
    fake.addHook("onRequest", async (req) => {
      seen.push([req.url, req.headers["x-api-key"] as string | undefined]);
    });
    fake.post("/api/v1/auth/token", async () => ({ jwt: token }));
    fake.post("/api/v1/create_session", async (_req, reply) => (++paid < 3 ? reply.code(402).send({ detail: "billing: payment required" }) : { session_id: "s1" }));
    const srv = await listen(fake);
    try {
      const c = new TinkerClient({ baseUrl: srv.url, apiKey: "tml-key", backoffMs: 5, heartbeatMs: 0 });
      await c.useJwt();
      expect(await c.createSession({ sdkVersion: "0.25.0" })).toBe("s1");
      expect(seen[0]).toEqual(["/api/v1/auth/token", "tml-key"]); // the exchange authenticates with the key
      expect(seen.slice(1).map(([, k]) => k)).toEqual([token, token, token]); // then the JWT, through two 402 pauses
      c.billingPauseMs = 0;
      paid = 0;
      await expect(c.createSession({ sdkVersion: "0.25.0" })).rejects.toThrow(/HTTP 402: billing: payment required/);
    } finally {
      await srv.close();
    }
  });
});

describe("arl train's whole experiment on a Tinker server with a real-model tokenizer", () => {
  it("warm-starts, evaluates and trains over HTTP with a byte-level BPE chat tokenizer and stop strings", async () => {
    const { runExperiment } = await import("../src/train/runner.ts");
    const { HfTokenizer } = await import("../src/policy/hf/tokenizer.ts");
    const { loadPolicy } = await import("../src/train/checkpoint.ts");
    const tokDir = join(import.meta.dirname, "fixtures", "tiny-chatml");
    const base = resolveConfig(applyOverrides({}, {
      ...SMOKE_OVERRIDES, "run.dir": root, "run.name": "bpe", "policy.contextLength": "384", "rl.steps": "1",
      "policy.backend": "tinker", "policy.tinker.tokenizer": tokDir, "policy.tinker.baseModel": "arl/init",
    }));
    const sb = setupExperiment(base, searchRecipe);
    expect(sb.tokenizer).toBeInstanceOf(HfTokenizer);
    const srv = await listen(trainerApp({ baseModels: [{ name: "arl/init", gpt: sb.gpt, tokenizer: sb.tokenizer, seed: 0 }], dir: join(root, "served-bpe") }));
    try {
      const config = { ...base, policy: { ...base.policy, tinker: { ...base.policy.tinker, baseUrl: srv.url } } };
      const summary = await runExperiment(config, searchRecipe, silentReporter, { overwrite: true });
      expect(summary.rows.map((r) => r.policy)).toEqual(["Direct", "RAG", "Warm start (SFT)", "RL (GRPO)"]);
      for (const r of summary.rows) expect(r.n).toBe(8);
      // Prompts went through the chat template; the checkpoint keeps the tokenizer and its template.
      const sample = JSON.parse(readFileSync(join(root, "bpe", "samples", "step-0.jsonl"), "utf8").split("\n")[0]) as { tokens?: number[]; text?: string };
      expect(JSON.stringify(sample)).toContain("<|im_start|>");
      const p = await loadPolicy(join(root, "bpe", "checkpoints", "final"));
      expect(p.tokenizer).toBeInstanceOf(HfTokenizer);
      expect(p.tokenizer.promptTokens("hi")).toEqual(sb.tokenizer.promptTokens("hi"));
      (p.backend as TinkerBackend).close();
    } finally {
      await srv.close();
    }
  }, 240_000);
});

describe("stop strings for multi-token tags", () => {
  it("are given as strings for a BPE tokenizer, and samples a server did not stop are cut after the tag", async () => {
    const { HfTokenizer } = await import("../src/policy/hf/tokenizer.ts");
    const { PolicyAgent, protocolStops } = await import("../src/rollout/agent.ts");
    const tok = HfTokenizer.fromDir(join(import.meta.dirname, "fixtures", "tiny-chatml"));
    const stops = protocolStops(tok);
    expect(stops.stopStrings).toEqual(["</search>", "</answer>"]);
    expect(stops.stop).toEqual([...tok.eosTokenIds]);
    expect(protocolStops(s.tokenizer)).toEqual({ stop: [s.tokenizer.id("</search>"), s.tokenizer.id("</answer>")], stopStrings: [] });
    const text = "<search> capital of peru </search> and more words";
    const ids = tok.encode(text);
    const ignoring = { sample: async () => [{ tokens: ids, logprobs: ids.map(() => -0.5), stopReason: "length" as const }] };
    const agent = new PolicyAgent(ignoring, tok, { temperature: 1, maxTokensPerTurn: 64, ...stops });
    const turn = await agent.generate([1, 2], { task: { id: "t", kind: "capital", question: "q", answers: ["a"] } as Task, turnIndex: 0, history: [], seed: 1, budget: 100 });
    expect(tok.decode(turn.tokens).endsWith("</search>")).toBe(true);
    expect(turn.stopReason).toBe("stop");
    expect(turn.logprobs).toHaveLength(turn.tokens.length);
  });
});
