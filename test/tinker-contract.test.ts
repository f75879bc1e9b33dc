/**
 * Contract tests of the Tinker-API client (`src/policy/tinker/*`) against the four server families it must work
 * with — SkyRL's Tinker server, TuFT, verl-tinker and hosted Tinker. Each family's wire is a fixture written from
 * that server's public source (`test/fixtures/tinker/families/<family>.json`: repository, commit, files, and a
 * `cite` file:line on every rule and answer); a fake server (`tinker-fakes.ts`) enforces the fixture and answers as
 * the family does, and the real `TinkerBackend` runs a whole training round-trip against it.
 */
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { Datum } from "../src/core/types.ts";
import { TinkerBackend, type TinkerBackendOptions } from "../src/policy/tinker/backend.ts";
import { TinkerApiError } from "../src/policy/tinker/client.ts";
import { FAMILIES } from "../src/policy/tinker/families.ts";
import {
  FAMILY_NAMES,
  TRAINING_ENDPOINTS,
  checkRequest,
  loadFixture,
  startFake,
  type FakeOptions,
  type FakeTinkerServer,
  type FamilyName,
  type Fixture,
  type RecordedRequest,
} from "./tinker-fakes.ts";

const KEY = "contract-test-key";
const root = mkdtempSync(join(tmpdir(), "arl-tinker-contract-"));
const servers: FakeTinkerServer[] = [];
afterAll(async () => {
  await Promise.all(servers.map((s) => s.close()));
});

// ---- data: two datums, 4 trained tokens; the fake's policy gives every target token logprob −1 ----
const SFT: Datum[] = [
  { modelInput: [1, 2, 3, 4], targetTokens: [2, 3, 4, 5], weights: [0, 1, 1, 1] },
  { modelInput: [7, 8, 9], targetTokens: [8, 9, 10], weights: [0, 0, 1] },
];
const OLD_LP = -1.5;
const RL: Datum[] = SFT.map((d, i) => ({
  ...d,
  logprobs: d.weights.map((w) => (w ? OLD_LP : 0)),
  advantages: i === 0 ? [0, 0.5, 0.5, 0.5] : [0, 0, -1],
}));
const BAD: Datum = { modelInput: [1, 4242], targetTokens: [4242, 3], weights: [1, 1] };
const BAD_REASON = "token id 4242 is out of range (vocab size 1000)";
const minusOnes = (ds: Datum[]) => ds.map((d) => d.targetTokens.map(() => -1));

/** The Tinker loss of RL on the fake policy (lp −1), token-mean normalised as the client folds it in. */
function expectedRlLoss(lossFn: "importance_sampling" | "ppo", lo = 0.8, hi = 1.2): number {
  const total = RL.reduce((s, d) => s + d.weights.reduce((a, b) => a + b, 0), 0);
  let loss = 0;
  for (const d of RL) {
    d.targetTokens.forEach((_, t) => {
      const a = (d.advantages![t] * d.weights[t]) / total;
      const r = Math.exp(-1 - d.logprobs![t]);
      loss -= lossFn === "ppo" ? Math.min(r * a, Math.min(hi, Math.max(lo, r)) * a) : r * a;
    });
  }
  return loss;
}

/** The differences each family's backend must name at start (and on the first optim_step with gradClip set). */
const WARNINGS: Record<FamilyName, RegExp[]> = {
  skyrl: [
    /notes are for SkyRL's FSDP backend/,
    /reports the loss as total_loss:sum/,
    /applies only adam_params\.learning_rate/,
    /LoRA alpha is fixed at 32/,
    /load_weights is accepted only as a model's first request/,
    /ignores adam_params eps, grad_clip_norm \(set here to 1e-8, 1\)/,
  ],
  tuft: [/seq_id must be exactly the next one/, /forward_backward takes protobuf only \(JSON → 415\)/],
  "verl-tinker": [
    /SDK 0\.19 JSON wire only/,
    /lora_config is ignored/,
    /result is deleted when first retrieved/,
    /sampler saves ignore the requested name/,
    /caps the ratio at 2\.0/,
    /ignores adam_params grad_clip_norm \(set here to 1\)/,
  ],
  tinker: [],
};

async function fakeOf(family: FamilyName, opts: FakeOptions = {}): Promise<{ fx: Fixture; fake: FakeTinkerServer }> {
  const fx = loadFixture(family);
  const fake = await startFake(fx, { apiKey: KEY, ...opts });
  servers.push(fake);
  return { fx, fake };
}

function open(fx: Fixture, fake: FakeTinkerServer, warnings: string[], extra: Partial<TinkerBackendOptions> = {}): Promise<TinkerBackend> {
  return TinkerBackend.create({
    baseUrl: fake.url,
    baseModel: "fake/base",
    apiKey: fx.auth ? KEY : undefined,
    backoffMs: 5,
    retryForMs: 5_000,
    heartbeatMs: 25,
    onWarning: (m) => warnings.push(m),
    ...extra,
  });
}

/** The seq_ids of each model's training requests in arrival order (a retry — same idempotency key — counted once). */
function seqsByModel(records: RecordedRequest[]): Map<string, number[]> {
  const out = new Map<string, number[]>();
  const keys = new Set<string>();
  for (const r of records) {
    if (!TRAINING_ENDPOINTS.has(r.endpoint) || !r.decoded || r.status === 415) continue;
    if (r.idempotencyKey && keys.has(r.idempotencyKey)) continue;
    if (r.idempotencyKey) keys.add(r.idempotencyKey);
    const list = out.get(r.body.model_id) ?? [];
    list.push(r.body.seq_id);
    out.set(r.body.model_id, list);
  }
  return out;
}

/** A regular expression for a fixture path template, e.g. `tinker://{{model_id}}/weights/{{name}}`. */
function templateRe(t: string, vars: Record<string, string>): RegExp {
  const parts = t.split(/(\{\{\w+\}\})/);
  return new RegExp(`^${parts.map((p) => (/^\{\{(\w+)\}\}$/.test(p) ? (vars[p.slice(2, -2)] ?? "[^/]+") : p.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"))).join("")}$`);
}

async function rejection(p: Promise<unknown>): Promise<TinkerApiError> {
  const e = await p.then(
    () => undefined,
    (err: unknown) => err,
  );
  expect(e, "the request should have failed").toBeInstanceOf(TinkerApiError);
  return e as TinkerApiError;
}

describe("contract fixtures", () => {
  it.each(FAMILY_NAMES)("%s: cites its source and covers every endpoint the client calls", (family) => {
    const fx = loadFixture(family);
    expect(fx.family).toBe(family);
    expect(fx.source.commit).toMatch(/^[0-9a-f]{40}$/);
    expect(fx.source.files.length).toBeGreaterThan(0);
    const endpoints = [
      "client/config", "healthz", "get_server_capabilities", "create_session", "session_heartbeat", "create_model", "forward_backward",
      "forward", "optim_step", "save_weights", "save_weights_for_sampler", "create_sampling_session", "load_weights", "asample", "retrieve_future",
    ];
    expect(Object.keys(fx.endpoints).sort()).toEqual([...endpoints].sort());
    for (const [name, ep] of Object.entries(fx.endpoints)) {
      expect(ep.path, name).toBe(`/api/v1/${name}`);
      expect(["json", "protobuf", "either"], name).toContain(ep.encoding);
      if (ep.request) expect(ep.request.cite, name).toMatch(/\S+:\d+|\(/);
      for (const [k, a] of Object.entries(ep.responses)) expect(a.cite, `${name}.${k}`).toMatch(/\S/);
      if (ep.served !== false) expect(ep.responses.success, name).toBeDefined();
    }
    const rf = fx.endpoints.retrieve_future.responses;
    for (const k of ["pending", "failure", "notFound"]) expect(rf[k], k).toBeDefined();
    // The client's table of family differences agrees with the fixture.
    expect(FAMILIES[family].rlWeights).toBe(fx.rlWeights.value);
    if (fx.pollHoldMs.value !== null) expect(FAMILIES[family].pollHoldMs).toBe(fx.pollHoldMs.value);
    const fwdbwd = fx.endpoints.forward_backward.encoding;
    expect(fwdbwd === "either" || fwdbwd === FAMILIES[family].wire).toBe(true);
  });
});

describe.each(FAMILY_NAMES)("TinkerBackend against a %s server", (family) => {
  it("trains, samples, saves and loads with requests that satisfy the family's contract", async () => {
    const { fx, fake } = await fakeOf(family);
    const warnings: string[] = [];
    const be = await open(fx, fake, warnings);
    let models: string[];
    let savePath: string;
    try {
      expect(be.family).toBe(family);
      const first = be.modelId;

      const ce = await be.forwardBackward(SFT, "cross_entropy");
      expect(ce.loss).toBeCloseTo(1, 5); // Σ (w / Σw)·1
      expect(ce.loss).toBeCloseTo(fake.losses.at(-1)!, 5);
      expect(ce.metrics.tokens).toBe(4);
      expect(ce.logprobs).toEqual(minusOnes(SFT));

      const is = await be.forwardBackward(RL, "importance_sampling");
      expect(is.loss).toBeCloseTo(expectedRlLoss("importance_sampling"), 5);
      expect(is.logprobs).toEqual(minusOnes(RL));
      const ppo = await be.forwardBackward(RL, "ppo", { clipLow: 0.2, clipHigh: 0.28 });
      expect(ppo.loss).toBeCloseTo(expectedRlLoss("ppo", 0.8, 1.28), 5);
      expect(ppo.loss).toBeCloseTo(fake.losses.at(-1)!, 5);
      expect(Math.abs(ppo.loss - is.loss)).toBeGreaterThan(0.1); // the clip bounds reached the server

      expect(await be.computeLogprobs(SFT)).toEqual(minusOnes(SFT));
      await be.optimStep({ learningRate: 2e-5, gradClip: 1 });
      expect(fake.applied).toMatchObject({ forward_backward: 3, forward: 1, optim_step: 1 });

      const samples = await be.samplingClient().sample([1, 2, 3], { n: 2, maxTokens: 3, temperature: 0.7, seed: 7, stop: [5], stopStrings: ["</answer>"] });
      expect(samples).toEqual([
        { tokens: [100, 101, 102], logprobs: [-0.5, -0.5, -0.5], stopReason: "stop" },
        { tokens: [110, 111, 112], logprobs: [-0.5, -0.5, -0.5], stopReason: "length" },
      ]);

      const dir = join(root, family, "ckpt");
      await be.save(dir);
      savePath = (JSON.parse(readFileSync(join(dir, "tinker.json"), "utf8")) as { path: string }).path;
      const saveTemplate = (fx.endpoints.save_weights.responses.result.template as { path: string }).path;
      expect(savePath).toMatch(templateRe(saveTemplate, { model_id: first, name: "ckpt-[^/]+" }));
      await be.load(dir); // after training: goes to a fresh model
      expect(be.modelId).not.toBe(first);
      await be.forwardBackward(SFT, "cross_entropy");
      await be.optimStep({ learningRate: 2e-5 });
      const second = be.modelId;
      await be.load(dir); // a second load after training: a fresh model again
      expect(be.modelId).not.toBe(second);
      models = [first, second, be.modelId];

      // A request the server fails surfaces with the server's reason, in each family's failure form.
      const err = await rejection(be.forwardBackward([BAD], "cross_entropy"));
      const failure = fx.endpoints.retrieve_future.responses.failure;
      expect(err.message).toContain(BAD_REASON);
      expect(err.status).toBe(failure.status);
      if (failure.status === 200) {
        const category = (failure.body as { category: string }).category;
        expect(err.category).toBe(category === "user" || category === "server" ? category : "unknown");
      }
      if (family === "tuft") {
        // TuFT advances next_seq_id only after a success: every later request conflicts (409), as families.ts warns.
        const next = await rejection(be.forwardBackward(SFT, "cross_entropy"));
        expect(next.status).toBe(409);
        const [, expected, got] = /Sequence conflict: expected (\d+), got (\d+)\./.exec(next.message) ?? [];
        expect(Number(got)).toBe(Number(expected) + 1);
      }
    } finally {
      be.close();
    }

    // Every request satisfies the fixture: required fields present, nothing unknown where strict, the right encoding.
    expect(fake.records.flatMap((r) => checkRequest(fx, r))).toEqual([]);
    // The only error statuses are the family's pending answer (SkyRL's 408) and the failure answers of the bad request.
    const rf = fx.endpoints.retrieve_future.responses;
    const errors = fake.records.filter((r) => r.status === undefined || r.status >= 400);
    for (const r of errors) expect([r.endpoint, [rf.pending, rf.failure, rf.conflict].some((a) => a?.status === r.status)]).toEqual(["retrieve_future", true]);
    const failed = errors.filter((r) => r.status === rf.failure.status || r.status === rf.conflict?.status);
    // SkyRL's failure is a bare 400, which the SDK re-polls 3 times before giving up (lib/api_future_impl.py:349-356).
    expect(failed).toHaveLength(rf.failure.status === 400 ? 4 : family === "tuft" ? 2 : 0);
    const called = new Set(fake.records.map((r) => r.endpoint));
    for (const e of ["client/config", "create_session", "session_heartbeat", "create_model", "forward_backward", "optim_step", "save_weights", "save_weights_for_sampler", "create_sampling_session", "load_weights", "asample", "retrieve_future"]) {
      expect(called, e).toContain(e);
    }
    expect(called.has("forward")).toBe(FAMILIES[family].wire === "json");
    for (const r of fake.records.filter((x) => x.endpoint === "forward_backward")) expect(r.encoding).toBe(FAMILIES[family].wire);
    // Every POST but polls, heartbeats and client/config carries an idempotency key (the SDK's rule).
    for (const r of fake.records) {
      if (r.method === "POST" && !["retrieve_future", "session_heartbeat", "client/config"].includes(r.endpoint)) expect(r.idempotencyKey, r.endpoint).toMatch(/^arl-/);
    }

    // seq_id 1, 2, 3, … per model, in order; each load is its model's first training request.
    const seqs = seqsByModel(fake.records);
    expect([...seqs.keys()].sort()).toEqual([...models!].sort());
    for (const [model, list] of seqs) expect(list, model).toEqual(list.map((_, i) => i + 1));
    const loads = fake.records.filter((r) => r.endpoint === "load_weights");
    expect(loads.map((r) => [r.body.model_id, r.body.seq_id, r.body.path])).toEqual([
      [models![1], 1, savePath!],
      [models![2], 1, savePath!],
    ]);

    // What went on the wire for the optimizer and the sampler.
    expect(fake.records.find((r) => r.endpoint === "optim_step")!.body.adam_params).toMatchObject({ learning_rate: 2e-5, grad_clip_norm: 1 });
    const asample = fake.records.find((r) => r.endpoint === "asample")!;
    expect(asample.body).toMatchObject({ num_samples: 2, seq_id: 0, prompt: { chunks: [{ type: "encoded_text", tokens: [1, 2, 3] }] } });
    expect(asample.body.sampling_params).toMatchObject({ max_tokens: 3, temperature: 0.7, seed: 7, stop: ["</answer>"] });

    // RL datums carry `weights` only where families.ts says the server reads them.
    const rl = fake.records.filter((r) => r.endpoint === "forward_backward" && r.body.forward_backward_input.loss_fn !== "cross_entropy");
    expect(rl).toHaveLength(2);
    for (const r of rl) for (const d of r.body.forward_backward_input.data) expect("weights" in d.loss_fn_inputs).toBe(FAMILIES[family].rlWeights);

    // Results: in the family's metric names (SkyRL: total_loss:sum, no loss:sum), protobuf where the family and the
    // client agree on it.
    const lossKeys = Object.keys((fx.endpoints.forward_backward.responses.result.template as { metrics: object }).metrics);
    const results = fake.records.filter((r) => r.futureKind === "forward_backward" && r.status === 200 && (r.answer as { type?: string }).type !== "try_again");
    const trained = results.filter((x) => !(x.answer as { error?: string }).error);
    expect(trained).toHaveLength(4); // cross_entropy, importance_sampling, ppo, cross_entropy after the load
    for (const r of trained) {
      const metrics = (r.answer as { metrics: Record<string, number> }).metrics;
      for (const k of lossKeys) expect(metrics, k).toHaveProperty([k]);
      if (family === "skyrl") expect(metrics).not.toHaveProperty(["loss:sum"]);
    }
    const binary = fake.records.filter((r) => r.endpoint === "retrieve_future" && r.proto);
    if (FAMILIES[family].wire === "protobuf") {
      expect(new Set(binary.map((r) => r.futureEndpoint))).toEqual(new Set(["forward_backward", "asample"]));
      for (const r of binary) expect(r.accept).toContain("application/x-protobuf");
    } else expect(binary).toEqual([]);
    expect(fake.records.filter((r) => r.endpoint === "session_heartbeat").length).toBeGreaterThan(0);

    // The family's differences are named once at start (all warnings name the family).
    for (const w of warnings) expect(w).toContain(`(${family})`);
    expect(warnings).toHaveLength(WARNINGS[family].length);
    for (const re of WARNINGS[family]) expect(warnings.some((w) => re.test(w)), String(re)).toBe(true);
  });

  it("keeps polling a future whose retrieve_future outlasts the client's poll timeout, then gets its result", async () => {
    const { fx, fake } = await fakeOf(family, { computeMs: { forward_backward: 700 }, holdMs: 5_000 });
    const warnings: string[] = [];
    const be = await open(fx, fake, warnings, { pollTimeoutMs: 150, heartbeatMs: 0 });
    try {
      const fb = await be.forwardBackward(SFT, "cross_entropy");
      expect(fb.loss).toBeCloseTo(1, 5);
      expect(fb.logprobs).toEqual(minusOnes(SFT));
    } finally {
      be.close();
    }
    const polls = fake.records.filter((r) => r.endpoint === "retrieve_future" && r.futureEndpoint === "forward_backward");
    expect(polls.filter((r) => r.aborted).length).toBeGreaterThanOrEqual(3);
    expect(polls.every((r) => r.body.request_id === polls[0].body.request_id)).toBe(true);
    expect(fake.applied.forward_backward).toBe(1);
    expect(fake.records.flatMap((r) => checkRequest(fx, r))).toEqual([]);
  });
});

describe("a lost response", () => {
  it("SkyRL: a forward_backward whose answer is lost is retried with its seq_id and applied exactly once", async () => {
    const { fx, fake } = await fakeOf("skyrl", { dropFirstResponse: "forward_backward" });
    const be = await open(fx, fake, [], { heartbeatMs: 0 });
    try {
      const fb = await be.forwardBackward(SFT, "cross_entropy");
      expect(fb.loss).toBeCloseTo(1, 5);
      await be.optimStep({ learningRate: 1e-4 });
      await be.forwardBackward(SFT, "cross_entropy");
    } finally {
      be.close();
    }
    const sent = fake.records.filter((r) => r.endpoint === "forward_backward");
    expect(sent).toHaveLength(3);
    const [lost, retry] = sent;
    expect(lost.dropped).toBe(true);
    expect(retry.dropped).toBeUndefined();
    expect(retry.body.seq_id).toBe(lost.body.seq_id);
    expect(retry.idempotencyKey).toBe(lost.idempotencyKey);
    // SkyRL's dedupe: the retry gets the original future back (skyrl/tinker/api.py:362-408).
    expect((retry.answer as { request_id: string }).request_id).toBe((lost.answer as { request_id: string }).request_id);
    expect(fake.applied).toMatchObject({ forward_backward: 2, optim_step: 1 });
    expect([...seqsByModel(fake.records).values()]).toEqual([[1, 2, 3]]);
    expect(fake.records.flatMap((r) => checkRequest(fx, r))).toEqual([]);
  });

  it("SkyRL re-serves a result whose answer was lost; verl-tinker deleted it on first retrieval and says so", async () => {
    for (const family of ["skyrl", "verl-tinker"] as const) {
      const { fx, fake } = await fakeOf(family, { dropFirstResult: "forward_backward" });
      const be = await open(fx, fake, [], { heartbeatMs: 0 });
      try {
        const run = be.forwardBackward(SFT, "cross_entropy");
        if (family === "skyrl") expect((await run).loss).toBeCloseTo(1, 5);
        else {
          const err = await rejection(run);
          expect(err.status).toBe(200);
          expect(err.message).toContain("future id result already retrieved");
        }
      } finally {
        be.close();
      }
      expect(fake.applied.forward_backward).toBe(1);
      expect(fake.records.some((r) => r.endpoint === "retrieve_future" && r.dropped)).toBe(true);
    }
  });
});

describe("body encodings", () => {
  it("TuFT answers 415 to a JSON forward_backward; an unrecognised server's client switches to protobuf with the same seq_id", async () => {
    const { fx, fake } = await fakeOf("tuft");
    const warnings: string[] = [];
    const be = await open(fx, fake, warnings, { server: "unknown", heartbeatMs: 0 });
    try {
      expect(be.family).toBe("unknown");
      expect((await be.forwardBackward(SFT, "cross_entropy")).loss).toBeCloseTo(1, 5);
      expect(await be.computeLogprobs(SFT)).toEqual(minusOnes(SFT));
    } finally {
      be.close();
    }
    const sent = fake.records.filter((r) => r.endpoint === "forward_backward");
    expect(sent.map((r) => [r.encoding, r.status, r.body?.seq_id])).toEqual([
      ["json", 415, 1],
      ["protobuf", 202, 1],
      ["protobuf", 202, 2],
    ]);
    expect(sent[0].problems).toEqual(["tuft forward_backward: json body, the server takes protobuf only"]);
    expect(warnings.some((w) => /answered 415 to json forward_backward; using protobuf/.test(w))).toBe(true);
  });

  it("a forced wire the server cannot parse fails at once with the server's reason", async () => {
    const forced: Array<{ family: FamilyName; wire: "json" | "protobuf"; status: number; reason: string }> = [
      { family: "tuft", wire: "json", status: 415, reason: "Unsupported Content-Type 'application/json'; expected application/x-protobuf" },
      { family: "verl-tinker", wire: "protobuf", status: 422, reason: "JSON decode error" },
    ];
    const fakes: FakeTinkerServer[] = [];
    for (const { family, wire, status, reason } of forced) {
      const { fx, fake } = await fakeOf(family);
      fakes.push(fake);
      const client = await open(fx, fake, [], { wire, heartbeatMs: 0 });
      try {
        const err = await rejection(client.forwardBackward(SFT, "cross_entropy"));
        expect(err.status, family).toBe(status);
        expect(err.message).toContain(reason);
      } finally {
        client.close();
      }
    }
    expect(fakes[1].records.filter((r) => r.endpoint === "forward_backward").map((r) => r.problems)).toEqual([
      ["verl-tinker forward_backward: protobuf body, the server parses JSON only", "verl-tinker forward_backward: body not decodable as protobuf"],
    ]);
  });
});

describe("family rules the fakes enforce", () => {
  it("TuFT wants X-API-Key on every route but healthz", async () => {
    const { fx, fake } = await fakeOf("tuft");
    const err = await rejection(
      TinkerBackend.create({ baseUrl: fake.url, baseModel: "fake/base", backoffMs: 5, heartbeatMs: 0, onWarning: () => {} }),
    );
    expect(err.status).toBe(401);
    expect(err.message).toContain("Missing API key");
    expect(fake.records.map((r) => r.endpoint)).toEqual(["client/config"]); // a 401 is not retried
    expect(fx.auth?.except).toEqual(["healthz"]);
  });

  it("SkyRL refuses a load on a model that has trained (400); the client's load goes to a fresh model", async () => {
    const { fx, fake } = await fakeOf("skyrl");
    const be = await open(fx, fake, [], { heartbeatMs: 0 });
    try {
      await be.forwardBackward(SFT, "cross_entropy");
      const dir = join(root, "skyrl-refuse", "ckpt");
      await be.save(dir);
      const path = (JSON.parse(readFileSync(join(dir, "tinker.json"), "utf8")) as { path: string }).path;
      const trained = be.modelId;
      const err = await rejection(be.client.send("load_weights", { body: { model_id: trained, path, seq_id: 3, optimizer: true, type: "load_weights" } }));
      expect(err.status).toBe(400);
      expect(err.message).toContain("LoadWeights is not permitted with seq_id 3");
      await be.load(dir);
      expect(be.modelId).not.toBe(trained);
      expect((await be.forwardBackward(SFT, "cross_entropy")).loss).toBeCloseTo(1, 5);
    } finally {
      be.close();
    }
    expect(fake.records.filter((r) => r.endpoint === "load_weights").map((r) => r.status)).toEqual([400, 200]);
  });
});

describe("a batch split into several forward_backward requests", () => {
  it("SkyRL: the loss and each metric are combined by their reduction suffix, as the SDK combines chunks", async () => {
    const { fx, fake } = await fakeOf("skyrl");
    const be = await open(fx, fake, [], { heartbeatMs: 0, maxDatumsPerRequest: 1 });
    try {
      const fb = await be.forwardBackward(SFT, "cross_entropy");
      expect(fake.records.filter((r) => r.endpoint === "forward_backward")).toHaveLength(2);
      expect(fb.loss).toBeCloseTo(1, 5); // Σ of the parts' total_loss:sum
      expect(fb.logprobs).toEqual(minusOnes(SFT));
      expect(fb.metrics.tokens).toBe(4);
      // SkyRL's num_tokens:sum (skyrl_train_backend.py:767-823) is a sum: 4 + 3 target tokens. The SDK sums ":sum"
      // metrics over chunks and averages ":mean" ones (lib/chunked_fwdbwd_helpers.py:93-131, _metrics_reduction).
      expect(fb.metrics.num_tokens).toBe(7);
    } finally {
      be.close();
    }
  });
});

describe("a sampling session that failed to open", () => {
  it("verl-tinker: after a 503 past the retry budget, the next sample at the same weights opens it again", async () => {
    const { fx, fake } = await fakeOf("verl-tinker", { unavailable: { endpoint: "create_sampling_session", times: 2 } });
    const be = await open(fx, fake, [], { heartbeatMs: 0, retries: 2 });
    try {
      const sampler = be.samplingClient();
      const opts = { n: 1, maxTokens: 2, temperature: 1, seed: 3 };
      const err = await rejection(sampler.sample([1, 2], opts));
      expect(err.status).toBe(503);
      expect(err.message).toContain("Server not ready: status=initializing");
      // The server is ready again: a later call must not get the first call's cached rejection.
      expect(await sampler.sample([1, 2], opts)).toEqual([{ tokens: [100, 101], logprobs: [-0.5, -0.5], stopReason: "stop" }]);
    } finally {
      be.close();
    }
  });
});

describe("the fakes refuse what their servers refuse", () => {
  /** One raw request to a fake (with its key), its status and parsed JSON answer. */
  async function call(fake: FakeTinkerServer, path: string, body: unknown, bytes?: Uint8Array) {
    const res = await fetch(`${fake.url}/api/v1/${path}`, {
      method: "POST",
      headers: { "content-type": bytes ? "application/x-protobuf" : "application/json", "x-api-key": KEY },
      body: bytes ? new Blob([bytes as Uint8Array<ArrayBuffer>]) : JSON.stringify(body),
    });
    return { status: res.status, json: (await res.json()) as Record<string, unknown> };
  }

  it("an unknown field: 422 where the request model is strict (TuFT, hosted Tinker), ignored elsewhere", async () => {
    for (const family of FAMILY_NAMES) {
      const { fx, fake } = await fakeOf(family);
      const r = await call(fake, "create_session", { tags: [], user_metadata: null, sdk_version: "0.25.0", type: "create_session", bogus: 1 });
      const strict = fx.endpoints.create_session.request!.strict;
      expect([family, r.status]).toEqual([family, strict ? 422 : fx.endpoints.create_session.responses.success.status]);
      if (strict) expect(JSON.stringify(r.json)).toContain("unknown field bogus");
    }
  });

  it("SkyRL: a seq_id reused with another payload is 409; TuFT: a seq_id out of turn fails its future with 409", async () => {
    const { encodeForwardBackwardRequest } = await import("../src/policy/tinker/proto.ts");
    const { toWireDatums } = await import("../src/policy/tinker/wire.ts");
    const data = toWireDatums(SFT, "cross_entropy");
    for (const family of ["skyrl", "tuft"] as const) {
      const { fake } = await fakeOf(family);
      const session = String((await call(fake, "create_session", { tags: [], user_metadata: null, sdk_version: "0.25.0", type: "create_session" })).json.session_id);
      const model = String((await call(fake, "create_model", { session_id: session, model_seq_id: 0, base_model: "fake/base", lora_config: { rank: 8 }, type: "create_model" })).json.model_id);
      const fb = (seq: number, datums = data) =>
        call(fake, "forward_backward", undefined, encodeForwardBackwardRequest({ model_id: model, seq_id: seq, forward_backward_input: { data: datums, loss_fn: "cross_entropy" } }));
      if (family === "skyrl") {
        const a = await fb(1);
        expect((await fb(1)).json.request_id).toBe(a.json.request_id);
        expect(await fb(1, data.slice(0, 1))).toEqual({ status: 409, json: { detail: "Training request sequence number was reused" } });
      } else {
        const f = await fb(2);
        expect(f.status).toBe(202);
        await new Promise((r) => setTimeout(r, 40));
        expect(await call(fake, "retrieve_future", { request_id: f.json.request_id })).toEqual({
          status: 409,
          json: { detail: "Failed to retrieve future: Sequence conflict: expected 1, got 2." },
        });
      }
    }
  });

  it("TuFT: a lost forward_backward answer is retried under the same seq_id, which TuFT refuses (409) though it applied the step", async () => {
    const { fx, fake } = await fakeOf("tuft", { dropFirstResponse: "forward_backward" });
    const be = await open(fx, fake, [], { heartbeatMs: 0 });
    try {
      const err = await rejection(be.forwardBackward(SFT, "cross_entropy"));
      expect(err.status).toBe(409);
      expect(err.message).toContain("Sequence conflict: expected 2, got 1.");
      expect(fake.applied.forward_backward).toBe(1);
      // The server's next_seq_id and the client's agree again: training continues.
      expect((await be.forwardBackward(SFT, "cross_entropy")).loss).toBeCloseTo(1, 5);
    } finally {
      be.close();
    }
  });
});
