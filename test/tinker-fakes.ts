/**
 * Fake Tinker-API servers, one per server family, driven by the contract fixtures in
 * `test/fixtures/tinker/families/<family>.json` (request rules, answer shapes and status codes, each with its
 * `cite` into that server's public source). A fake validates every request against its fixture (required and
 * unknown fields, nested models, encodings, patterns, per-loss inputs and config keys, the API key), records it,
 * and answers the way that family does: its ids, status codes, pending answer (408 / try_again), failure form
 * (HTTP 400/422/409 `{"detail"}` or 200 `{"error","category"}`), seq_id rule (SkyRL dedupes, TuFT wants exactly
 * the next one, verl-tinker ignores it), load rule, consumed results (verl-tinker) and protobuf results.
 *
 * The model is trivial and deterministic: every target token has logprob −1; a token id ≥ `vocab` fails the
 * request with the reason `token id N is out of range (vocab size V)`; losses are the Tinker sums over the data as
 * sent (cross_entropy Σ −w·lp, importance_sampling Σ −r·A, ppo Σ −min(rA, clip(r)·A)); applied operations are
 * counted in `applied`.
 */
import { readFileSync } from "node:fs";
import type { AddressInfo } from "node:net";
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from "fastify";
import {
  PROTO_CONTENT_TYPE,
  decodeForwardBackwardRequest,
  encodeForwardBackwardOutput,
  encodeSampleResponse,
} from "../src/policy/tinker/proto.ts";
import type { WireForwardBackwardOutput, WireSampleResponse } from "../src/policy/tinker/wire.ts";

/** The families with a contract fixture. */
export type FamilyName = "skyrl" | "tuft" | "verl-tinker" | "tinker";
export const FAMILY_NAMES: readonly FamilyName[] = ["skyrl", "tuft", "verl-tinker", "tinker"];

/** Fields of one request model. */
export interface FieldRule {
  required: string[];
  optional: string[];
  /** Unknown fields rejected (pydantic `extra="forbid"`). */
  strict: boolean;
}

/** The request model of one endpoint. */
export interface RequestRule extends FieldRule {
  cite: string;
  /** Rules for nested values: `a.b[]` = each element of array `a.b`, `*` = each value of an object. */
  nested?: Record<string, FieldRule>;
  /** Regular expressions a string field must match. */
  patterns?: Record<string, string>;
  /** `loss_fn_inputs` keys each loss needs. */
  lossFnInputs?: Record<string, string[]>;
  /** `loss_fn_config` keys each loss accepts (absent: the server checks none). */
  lossFnConfigKeys?: Record<string, string[]>;
  /** The protobuf form: fields that must be set (non-default). */
  protobuf?: { message: string; required: string[]; cite: string };
}

/** One answer: status, an example body verbatim from the source, and the fields the fake fills in. */
export interface Answer {
  status: number;
  body: unknown;
  /** Top-level fields replaced in `body`; `{{name}}` is a variable (a whole-string `{{name}}` keeps its type). */
  template?: Record<string, unknown>;
  cite: string;
  assumed?: boolean;
  /** SkyRL: a cross-entropy output carries `elementwise_loss` next to `logprobs`. */
  elementwiseLoss?: boolean;
}

export interface EndpointSpec {
  method: "GET" | "POST";
  path: string;
  encoding: "json" | "protobuf" | "either";
  served?: boolean;
  request: RequestRule | null;
  responses: Record<string, Answer>;
}

export interface Fixture {
  family: FamilyName;
  source: { repo: string; commit: string; files: string[] };
  auth: null | { header: string; except: string[]; missing: Answer; invalid: Answer; cite: string };
  ids: { request: string; session: string; model: string; sampling: string; cite: string };
  pollHoldMs: { value: number | null; cite: string };
  protobufResults: { endpoints: string[]; cite: string };
  resultsConsumed: { value: boolean; cite: string };
  seqRule: { kind: "dedupe" | "next" | "ignored" | "sdk"; endpoints: string[]; cite: string };
  loadRule: { kind: "first-request-only" | "any"; cite: string };
  rlWeights: { value: boolean; cite: string };
  ppoDefaults: { clip_low_threshold: number; clip_high_threshold: number; cite: string };
  /** verl-tinker's answer while the server is not ready. */
  notReady?: Answer;
  endpoints: Record<string, EndpointSpec>;
}

/** The endpoints whose requests carry a model's training `seq_id`. */
export const TRAINING_ENDPOINTS = new Set(["forward_backward", "forward", "optim_step", "save_weights", "save_weights_for_sampler", "load_weights"]);

export function loadFixture(family: FamilyName): Fixture {
  return JSON.parse(readFileSync(new URL(`./fixtures/tinker/families/${family}.json`, import.meta.url), "utf8")) as Fixture;
}

/** One request as the fake received it. */
export interface RecordedRequest {
  endpoint: string;
  method: string;
  contentType: string;
  accept: string;
  apiKey?: string;
  idempotencyKey?: string;
  requestType?: string;
  /** From the content type (`none`: no body). */
  encoding: "json" | "protobuf" | "none";
  decoded: boolean;
  // biome-ignore lint: JSON bodies are untyped
  body: any;
  /** Where the request breaks the fixture's rules (empty = it satisfies them). */
  problems: string[];
  status?: number;
  answer?: unknown;
  /** Protobuf answer. */
  proto?: boolean;
  /** The socket was destroyed instead of answering. */
  dropped?: boolean;
  /** The client had gone (its poll timed out) when the answer was ready. */
  aborted?: boolean;
  /** retrieve_future: the endpoint, kind (`forward` = a forward-only pass) and id of the future polled. */
  futureEndpoint?: string;
  futureKind?: string;
  futureId?: string;
}

/** Checks one recorded request against the fixture: the problems found (empty = it satisfies the contract). */
export function checkRequest(fx: Fixture, rec: RecordedRequest): string[] {
  const p: string[] = [];
  const ep = fx.endpoints[rec.endpoint];
  const at = `${fx.family} ${rec.endpoint}`;
  if (!ep || ep.served === false) return [`${at}: not served by ${fx.family}`];
  if (ep.method !== rec.method) p.push(`${at}: ${rec.method}, the server routes ${ep.method}`);
  if (fx.auth && !fx.auth.except.includes(rec.endpoint) && !rec.apiKey) p.push(`${at}: no ${fx.auth.header} header`);
  const rule = ep.request;
  if (!rule) return p;
  if (ep.encoding === "json" && rec.encoding === "protobuf") p.push(`${at}: protobuf body, the server parses JSON only`);
  if (ep.encoding === "protobuf" && rec.encoding !== "protobuf") p.push(`${at}: ${rec.encoding} body, the server takes protobuf only`);
  if (!rec.decoded) {
    p.push(`${at}: body not decodable as ${rec.encoding}`);
    return p;
  }
  const body = rec.body;
  if (rec.encoding === "protobuf") {
    const fbi = body.forward_backward_input ?? {};
    const view: Record<string, unknown> = { model_id: body.model_id, seq_id: body.seq_id ?? 0, data: fbi.data, loss_fn: fbi.loss_fn, forward_only: body.forward_only };
    for (const k of rule.protobuf?.required ?? []) {
      const v = view[k];
      if (v === undefined || v === null || v === "" || v === 0 || (Array.isArray(v) && v.length === 0)) p.push(`${at}: protobuf field ${k} not set`);
    }
  } else checkFields(body, rule, at, p);
  for (const [path, sub] of Object.entries(rule.nested ?? {})) for (const v of select(body, path)) checkFields(v, sub, `${at} ${path}`, p);
  for (const [k, re] of Object.entries(rule.patterns ?? {})) {
    const v = body?.[k];
    if (v !== undefined && v !== null && !new RegExp(re).test(String(v))) p.push(`${at}: ${k} ${JSON.stringify(v)} does not match ${re}`);
  }
  const input = body?.forward_backward_input ?? body?.forward_input;
  if (input && typeof input === "object") {
    const need = rule.lossFnInputs?.[input.loss_fn];
    if (need) {
      (input.data ?? []).forEach((d: { loss_fn_inputs?: Record<string, unknown> }, i: number) => {
        for (const k of need) if (!(k in (d.loss_fn_inputs ?? {}))) p.push(`${at}: data.${i}.loss_fn_inputs lacks ${k} (${input.loss_fn} needs it)`);
      });
    }
    const allowed = rule.lossFnConfigKeys?.[input.loss_fn];
    if (allowed) for (const k of Object.keys(input.loss_fn_config ?? {})) if (!allowed.includes(k)) p.push(`${at}: loss_fn_config.${k} not accepted by ${input.loss_fn}`);
  }
  return p;
}

function checkFields(obj: unknown, rule: FieldRule, at: string, p: string[]): void {
  if (!obj || typeof obj !== "object" || Array.isArray(obj)) {
    p.push(`${at}: expected an object, got ${JSON.stringify(obj)}`);
    return;
  }
  for (const k of rule.required) if (!(k in obj)) p.push(`${at}: missing required ${k}`);
  if (rule.strict) for (const k of Object.keys(obj)) if (!rule.required.includes(k) && !rule.optional.includes(k)) p.push(`${at}: unknown field ${k} (extra="forbid")`);
}

// biome-ignore lint: JSON walk
function select(obj: any, path: string): unknown[] {
  let cur: unknown[] = [obj];
  for (const seg of path.split(".")) {
    const next: unknown[] = [];
    for (const o of cur) {
      if (!o || typeof o !== "object") continue;
      if (seg === "*") next.push(...Object.values(o));
      else if (seg.endsWith("[]")) {
        const a = (o as Record<string, unknown>)[seg.slice(0, -2)];
        if (Array.isArray(a)) next.push(...a);
      } else if ((o as Record<string, unknown>)[seg] !== undefined && (o as Record<string, unknown>)[seg] !== null) next.push((o as Record<string, unknown>)[seg]);
    }
    cur = next;
  }
  return cur;
}

/** A template filled with `vars` (`{{name}}`). @throws Error on an unknown variable */
export function fill(t: unknown, vars: Record<string, unknown>): unknown {
  if (typeof t === "string") {
    const whole = /^\{\{(\w+)\}\}$/.exec(t);
    const get = (k: string) => {
      if (!(k in vars)) throw new Error(`fixture template variable {{${k}}} has no value`);
      return vars[k];
    };
    if (whole) return get(whole[1]);
    return t.replace(/\{\{(\w+)\}\}/g, (_, k: string) => String(get(k)));
  }
  if (Array.isArray(t)) return t.map((x) => fill(x, vars));
  if (t && typeof t === "object") return Object.fromEntries(Object.entries(t).map(([k, v]) => [k, fill(v, vars)]));
  return t;
}

/** An answer's body: the example with its template fields filled in. */
export function render(a: Answer, vars: Record<string, unknown> = {}): unknown {
  if (!a.template) return structuredClone(a.body);
  return { ...(a.body as object), ...(fill(a.template, vars) as object) };
}

export interface FakeOptions {
  /** The key the fake accepts (families with `auth`). */
  apiKey?: string;
  /** How long `retrieve_future` holds a pending future before the pending answer (ms; the real holds are minutes). */
  holdMs?: number;
  /** When a future resolves after its submit (ms), per endpoint or for all. */
  computeMs?: number | Record<string, number>;
  /** Destroy the socket instead of answering the first request to this endpoint (it is still processed). */
  dropFirstResponse?: string;
  /** Destroy the socket instead of sending the first completed result of a future of this endpoint. */
  dropFirstResult?: string;
  /** Token ids ≥ this fail the request. */
  vocab?: number;
  /** Answer the first `times` requests to `endpoint` with 503 (the fixture's `notReady`, else a bare 503). */
  unavailable?: { endpoint: string; times: number };
}

interface FutureRec {
  id: string;
  endpoint: string;
  kind: string;
  readyAt: number;
  result?: unknown;
  error?: { answer: string; vars: Record<string, unknown> };
  protoKind?: "fwdbwd" | "sample";
  fingerprint?: string;
  state: "stored" | "retrieved";
}

interface ModelRec {
  id: string;
  sessionId: string;
  nextSeq: number;
  /** Non-create_model requests so far (SkyRL's load rule). */
  prior: number;
}

type Op = { result: unknown; protoKind?: "fwdbwd" | "sample" } | { error: { answer: string; vars: Record<string, unknown> } };

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** A running fake server of one family. */
export class FakeTinkerServer {
  readonly records: RecordedRequest[] = [];
  /** Operations applied to the fake model, by endpoint (`forward` = a forward-only pass). */
  readonly applied: Record<string, number> = {};
  /** Losses computed, in order. */
  readonly losses: number[] = [];
  url = "";
  private readonly app: FastifyInstance;
  private n = 0;
  private readonly sessions = new Set<string>();
  private readonly models = new Map<string, ModelRec>();
  private readonly futures = new Map<string, FutureRec>();
  private readonly dedupe = new Map<string, FutureRec>();
  private readonly checkpoints = new Map<string, string>();
  private readonly samplerPaths = new Set<string>();
  private readonly samplingSessions = new Set<string>();
  private dropped = new Set<string>();
  private readonly vocab: number;

  constructor(
    readonly fx: Fixture,
    readonly opts: FakeOptions = {},
  ) {
    this.vocab = opts.vocab ?? 1000;
    // forceCloseConnections: the client's pool keeps sockets open (some never used) that would hold close() for a minute.
    this.app = Fastify({ logger: false, bodyLimit: 64 * 1024 * 1024, forceCloseConnections: true });
    this.app.removeAllContentTypeParsers();
    this.app.addContentTypeParser("*", { parseAs: "buffer" }, (_req, body, done) => done(null, body));
    for (const [name, ep] of Object.entries(fx.endpoints)) {
      if (ep.served === false) continue;
      this.app.route({ method: ep.method, url: ep.path, handler: (req, reply) => this.dispatch(name, req, reply) });
    }
    this.app.setNotFoundHandler((req, reply) => {
      const rec = this.record(req.url.replace(/^\/api\/v1\//, ""), req);
      return this.send(reply, rec, 404, { detail: "Not Found" });
    });
  }

  async start(): Promise<this> {
    await this.app.listen({ host: "127.0.0.1", port: 0 });
    this.url = `http://127.0.0.1:${(this.app.server.address() as AddressInfo).port}`;
    return this;
  }


  async close(): Promise<void> {
    await this.app.close();
  }

  /** The model ids created, in order. */
  get modelIds(): string[] {
    return [...this.models.keys()];
  }

  // ---- request intake ----

  private record(endpoint: string, req: FastifyRequest): RecordedRequest {
    const ct = String(req.headers["content-type"] ?? "");
    const raw = req.body as Buffer | undefined;
    const encoding: RecordedRequest["encoding"] = req.method === "GET" || raw === undefined ? "none" : ct.includes("protobuf") ? "protobuf" : "json";
    const ep = this.fx.endpoints[endpoint];
    let body: unknown;
    let decoded = encoding === "none";
    if (encoding === "protobuf" && ep && ep.encoding !== "json") {
      try {
        body = decodeForwardBackwardRequest(new Uint8Array(raw!));
        decoded = true;
      } catch {
        decoded = false;
      }
    } else if (encoding !== "none") {
      // A JSON-only server parses whatever arrives as JSON (a protobuf body fails here).
      try {
        const text = raw!.toString("utf8");
        body = text === "" ? {} : JSON.parse(text);
        decoded = true;
      } catch {
        decoded = false;
      }
    }
    const rec: RecordedRequest = {
      endpoint,
      method: req.method,
      contentType: ct,
      accept: String(req.headers.accept ?? ""),
      apiKey: req.headers["x-api-key"] as string | undefined,
      idempotencyKey: req.headers["x-idempotency-key"] as string | undefined,
      requestType: req.headers["x-tinker-request-type"] as string | undefined,
      encoding,
      decoded,
      body,
      problems: [],
    };
    rec.problems = checkRequest(this.fx, rec);
    this.records.push(rec);
    return rec;
  }

  private send(reply: FastifyReply, rec: RecordedRequest, status: number, body: unknown, proto?: Uint8Array): FastifyReply {
    rec.status = status;
    rec.answer = body;
    rec.proto = proto !== undefined;
    if (this.opts.dropFirstResponse === rec.endpoint && !this.dropped.has(`response:${rec.endpoint}`)) {
      this.dropped.add(`response:${rec.endpoint}`);
      rec.dropped = true;
      reply.hijack();
      reply.raw.socket?.destroy();
      return reply;
    }
    if (proto) return reply.code(status).header("content-type", PROTO_CONTENT_TYPE).send(Buffer.from(proto));
    return reply.code(status).header("content-type", "application/json").send(JSON.stringify(body));
  }

  private answer(reply: FastifyReply, rec: RecordedRequest, a: Answer, vars: Record<string, unknown> = {}): FastifyReply {
    return this.send(reply, rec, a.status, render(a, vars));
  }

  private async dispatch(name: string, req: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
    const fx = this.fx;
    const ep = fx.endpoints[name];
    const rec = this.record(name, req);
    if (fx.auth && !fx.auth.except.includes(name)) {
      if (!rec.apiKey) return this.answer(reply, rec, fx.auth.missing);
      if (rec.apiKey !== this.opts.apiKey) return this.answer(reply, rec, fx.auth.invalid);
    }
    if (ep.encoding === "protobuf" && rec.encoding !== "protobuf" && ep.responses.wrongEncoding) {
      return this.answer(reply, rec, ep.responses.wrongEncoding, { content_type: rec.contentType.split(";")[0].trim().toLowerCase() });
    }
    const down = this.opts.unavailable;
    if (down && down.endpoint === name && this.unavailableLeft(down) > 0) {
      return this.fx.notReady ? this.answer(reply, rec, this.fx.notReady) : this.send(reply, rec, 503, { detail: "Service Unavailable" });
    }
    if (!rec.decoded) return this.send(reply, rec, 422, ep.responses.wrongEncoding ? render(ep.responses.wrongEncoding) : { detail: "body not decodable" });
    if (rec.problems.length > 0) return this.send(reply, rec, 422, { detail: rec.problems.map((msg) => ({ type: "value_error", msg })) });
    return this.handle(name, ep, rec, req, reply);
  }

  private unavailableSent = 0;
  private unavailableLeft(down: { times: number }): number {
    return down.times - this.unavailableSent++;
  }

  // ---- ids ----

  private idVars(extra: Record<string, unknown> = {}): Record<string, unknown> {
    const n = ++this.n;
    const hex = n.toString(16);
    return { n, hex8: hex.padStart(8, "0"), hex32: hex.padStart(32, "0"), uuid: `00000000-0000-4000-8000-${hex.padStart(12, "0")}`, ...extra };
  }

  private newId(kind: "request" | "session" | "model" | "sampling", extra: Record<string, unknown> = {}): string {
    return String(fill(this.fx.ids[kind], this.idVars(extra)));
  }

  private computeDelay(endpoint: string): number {
    const c = this.opts.computeMs ?? 30;
    return typeof c === "number" ? c : (c[endpoint] ?? 30);
  }

  private addFuture(endpoint: string, op: Op, kind = endpoint): FutureRec {
    const f: FutureRec = { id: this.newId("request"), endpoint, kind, readyAt: Date.now() + this.computeDelay(endpoint), state: "stored" };
    if ("error" in op) f.error = op.error;
    else {
      f.result = op.result;
      f.protoKind = op.protoKind;
    }
    this.futures.set(f.id, f);
    return f;
  }

  private ok(endpoint: string, result: unknown, protoKind?: "fwdbwd" | "sample"): Op {
    this.applied[endpoint] = (this.applied[endpoint] ?? 0) + 1;
    return { result, protoKind };
  }

  private fail(reason: string): Op {
    return { error: { answer: "failure", vars: { reason } } };
  }

  /** A training operation under the family's seq_id rule. */
  private sequenced(model: ModelRec, endpoint: string, seq: number | null, run: () => Op): Op {
    model.prior++;
    const rule = this.fx.seqRule;
    if (rule.kind === "next" && rule.endpoints.includes(endpoint) && seq !== null) {
      if (seq !== model.nextSeq) return { error: { answer: "conflict", vars: { expected: model.nextSeq, got: seq } } };
      const op = run();
      if (!("error" in op)) model.nextSeq++;
      return op;
    }
    return run();
  }

  // ---- endpoints ----

  private async handle(name: string, ep: EndpointSpec, rec: RecordedRequest, req: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
    const r = ep.responses;
    // biome-ignore lint: JSON body
    const b: any = rec.body ?? {};
    const base = { base_model: "fake/base" };
    switch (name) {
      case "client/config":
      case "healthz":
      case "get_server_capabilities":
        return this.answer(reply, rec, r.success, base);
      case "session_heartbeat":
        if (r.failure && !this.sessions.has(b.session_id)) return this.answer(reply, rec, r.failure, { session_id: b.session_id });
        return this.answer(reply, rec, r.success);
      case "create_session": {
        const id = this.newId("session");
        this.sessions.add(id);
        return this.answer(reply, rec, r.success, { session_id: id });
      }
      case "create_model": {
        if (r.refused && (b.lora_config === null || b.lora_config === undefined)) return this.answer(reply, rec, r.refused);
        if (!this.sessions.has(b.session_id)) return this.send(reply, rec, 404, { detail: "Session not found" });
        const id = this.newId("model", { session_id: b.session_id, model_seq_id: b.model_seq_id });
        this.models.set(id, { id, sessionId: b.session_id, nextSeq: 1, prior: 0 });
        const vars = { model_id: id, base_model: b.base_model };
        const f = this.addFuture(name, { result: render(r.result, vars) });
        return this.answer(reply, rec, r.success, { ...vars, request_id: f.id });
      }
      case "forward_backward":
      case "forward":
      case "optim_step":
      case "save_weights":
      case "save_weights_for_sampler":
      case "load_weights":
        return this.training(name, ep, rec, b, reply);
      case "create_sampling_session": {
        if (!this.samplerPaths.has(b.model_path)) return r.failure ? this.answer(reply, rec, r.failure, { model_path: b.model_path }) : this.send(reply, rec, 404, { detail: "Checkpoint not found" });
        const id = this.newId("sampling", { session_id: b.session_id, sampling_session_seq_id: b.sampling_session_seq_id });
        this.samplingSessions.add(id);
        return this.answer(reply, rec, r.success, { sampling_session_id: id });
      }
      case "asample": {
        let op: Op;
        if (!this.samplingSessions.has(b.sampling_session_id)) op = this.fail(`Session ${b.sampling_session_id} not found.`);
        else {
          const n = b.num_samples ?? 1;
          const max = b.sampling_params?.max_tokens ?? 16;
          const sequences = Array.from({ length: n }, (_, i) => ({
            stop_reason: i === 0 ? "stop" : "length",
            tokens: Array.from({ length: max }, (_, t) => 100 + 10 * i + t),
            logprobs: Array.from({ length: max }, () => -0.5),
          }));
          op = this.ok(name, render(r.result, { sequences }), "sample");
        }
        const f = this.addFuture(name, op);
        return this.answer(reply, rec, r.success, { request_id: f.id });
      }
      case "retrieve_future":
        return this.retrieve(rec, b, req, reply);
      default:
        return this.send(reply, rec, 404, { detail: "Not Found" });
    }
  }

  // biome-ignore lint: JSON body
  private training(name: string, ep: EndpointSpec, rec: RecordedRequest, b: any, reply: FastifyReply): FastifyReply {
    const r = ep.responses;
    const fx = this.fx;
    const modelId: string | undefined = b.model_id ?? undefined;
    if (name === "load_weights" && r.refused && !modelId) return this.answer(reply, rec, r.refused);
    const model = modelId ? this.models.get(modelId) : undefined;
    if (!model) return this.send(reply, rec, 404, { detail: "Model not found" });
    // TuFT reads the raw proto seq_id (0 when unset); the others null.
    const seq: number | null = b.seq_id ?? (rec.encoding === "protobuf" ? 0 : null);
    const forwardOnly = name === "forward" || b.forward_only === true;
    const kind = forwardOnly ? "forward" : name;
    // SkyRL: a training request repeated under its (model_id, seq_id) returns the original future.
    let fingerprint: string | undefined;
    if (fx.seqRule.kind === "dedupe" && fx.seqRule.endpoints.includes(name) && seq !== null) {
      fingerprint = `${kind}:${JSON.stringify(b.forward_backward_input ?? b.forward_input ?? b.adam_params)}`;
      const seen = this.dedupe.get(`${modelId}:${seq}`);
      if (seen) {
        if (seen.fingerprint !== fingerprint) return this.answer(reply, rec, r.conflict);
        return this.answer(reply, rec, r.success, { request_id: seen.id, model_id: modelId });
      }
    }
    if (name === "load_weights" && fx.loadRule.kind === "first-request-only" && r.refused && model.prior > 0) {
      return this.answer(reply, rec, r.refused, { seq_id: b.seq_id ?? model.prior + 1 });
    }
    if (name === "save_weights" && r.conflict && this.checkpoints.has(String(fill((r.result.template as { path: string }).path, { model_id: modelId, name: b.path })))) {
      return this.answer(reply, rec, r.conflict, { model_id: modelId, name: b.path });
    }
    const op = this.sequenced(model, name, seq, () => {
      switch (name) {
        case "forward_backward":
        case "forward":
          return this.forward(kind, forwardOnly ? (fx.endpoints.forward?.served !== false && fx.endpoints.forward?.responses.result ? fx.endpoints.forward.responses.result : r.result) : r.result, b.forward_backward_input ?? b.forward_input, forwardOnly);
        case "optim_step":
          return this.ok(name, render(r.result, { learning_rate: b.adam_params?.learning_rate }));
        case "save_weights": {
          const vars = { ...this.idVars(), model_id: modelId, name: b.path ?? `checkpoint-${this.n}` };
          const result = render(r.result, vars) as { path: string };
          this.checkpoints.set(result.path, modelId!);
          return this.ok(name, result);
        }
        case "save_weights_for_sampler": {
          const vars = { ...this.idVars(), model_id: modelId, name: b.path ?? `sampler-${this.n}` };
          const result = render(r.result, vars) as { path: string };
          this.samplerPaths.add(result.path);
          return this.ok(name, result);
        }
        default: {
          // load_weights
          if (fx.loadRule.kind === "first-request-only" && !r.refused && b.seq_id !== 1) return this.fail(`LoadWeights is not permitted with seq_id ${b.seq_id}`);
          if (!this.checkpoints.has(b.path)) return this.fail(`Unknown checkpoint path: ${b.path}`);
          return this.ok(name, render(r.result, { path: b.path, model_id: modelId }));
        }
      }
    });
    const f = this.addFuture(name, op, kind);
    if (fingerprint) {
      f.fingerprint = fingerprint;
      this.dedupe.set(`${modelId}:${seq}`, f);
    }
    return this.answer(reply, rec, r.success, { request_id: f.id, model_id: modelId });
  }

  /** The fake model's forward (and backward) pass. */
  // biome-ignore lint: JSON input
  private forward(kind: string, result: Answer, input: any, forwardOnly: boolean): Op {
    const vocab = this.vocab;
    let loss = 0;
    let numTokens = 0;
    const fx = this.fx;
    const outputs: Array<Record<string, { data: number[]; dtype: string; shape: number[] }>> = [];
    for (const d of input.data as Array<{ model_input: { chunks: Array<{ tokens: number[] }> }; loss_fn_inputs: Record<string, { data: number[] }> }>) {
      const tokens = d.model_input.chunks.flatMap((c) => c.tokens);
      const inputs = d.loss_fn_inputs;
      const targets = inputs.target_tokens.data;
      const bad = [...tokens, ...targets].find((t) => !(t >= 0 && t < vocab));
      if (bad !== undefined) return this.fail(`token id ${bad} is out of range (vocab size ${vocab})`);
      const lp = targets.map(() => -1);
      numTokens += targets.length;
      const w = inputs.weights?.data;
      const lo = input.loss_fn_config?.clip_low_threshold ?? fx.ppoDefaults.clip_low_threshold;
      const hi = input.loss_fn_config?.clip_high_threshold ?? fx.ppoDefaults.clip_high_threshold;
      lp.forEach((x, t) => {
        if (input.loss_fn === "cross_entropy") loss -= (w ? w[t] : 1) * x;
        else {
          const mask = fx.rlWeights.value && w ? w[t] : 1;
          const r = Math.exp(x - inputs.logprobs.data[t]);
          const a = inputs.advantages.data[t];
          loss -= mask * (input.loss_fn === "ppo" ? Math.min(r * a, Math.min(hi, Math.max(lo, r)) * a) : r * a);
        }
      });
      const out: Record<string, { data: number[]; dtype: string; shape: number[] }> = { logprobs: { data: lp, dtype: "float32", shape: [lp.length] } };
      if (result.elementwiseLoss && input.loss_fn === "cross_entropy" && !forwardOnly) {
        const el = lp.map((x, t) => -(w ? w[t] : 1) * x);
        out.elementwise_loss = { data: el, dtype: "float32", shape: [el.length] };
      }
      outputs.push(out);
    }
    if (!forwardOnly) this.losses.push(loss);
    return this.ok(kind, render(result, { loss_fn_outputs: outputs, loss, loss_fn: input.loss_fn, num_tokens: numTokens }), "fwdbwd");
  }

  private async retrieve(rec: RecordedRequest, b: { request_id: string }, req: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
    const fx = this.fx;
    const r = fx.endpoints.retrieve_future.responses;
    const f = this.futures.get(String(b.request_id));
    if (!f) return this.answer(reply, rec, r.notFound, { request_id: b.request_id });
    rec.futureEndpoint = f.endpoint;
    rec.futureKind = f.kind;
    rec.futureId = f.id;
    const hold = this.opts.holdMs ?? 15;
    const pendingAtStart = Date.now() < f.readyAt;
    if (pendingAtStart) await sleep(Math.min(hold, f.readyAt - Date.now()));
    if (req.raw.socket?.destroyed) {
      rec.aborted = true;
      reply.hijack();
      return reply;
    }
    if (Date.now() < f.readyAt) return this.answer(reply, rec, r.pending, { request_id: f.id });
    if (fx.resultsConsumed.value) {
      // verl-tinker: a future that finished during the wait answers try_again; the next poll gets it, once.
      if (pendingAtStart) return this.answer(reply, rec, r.pendingDone);
      if (f.state === "retrieved") return this.answer(reply, rec, r.alreadyRetrieved, { request_id: f.id });
      f.state = "retrieved";
    }
    if (f.error) {
      const a = r[f.error.answer] ?? r.failure;
      return this.answer(reply, rec, a, f.error.vars);
    }
    if (this.opts.dropFirstResult === f.endpoint && !this.dropped.has(`result:${f.endpoint}`)) {
      this.dropped.add(`result:${f.endpoint}`);
      rec.dropped = true;
      rec.status = 200;
      rec.answer = f.result;
      reply.hijack();
      reply.raw.socket?.destroy();
      return reply;
    }
    if (f.protoKind && fx.protobufResults.endpoints.includes(f.endpoint) && rec.accept.includes(PROTO_CONTENT_TYPE)) {
      const bytes = f.protoKind === "fwdbwd" ? encodeForwardBackwardOutput(f.result as WireForwardBackwardOutput) : encodeSampleResponse(f.result as WireSampleResponse);
      return this.send(reply, rec, 200, f.result, bytes);
    }
    return this.send(reply, rec, 200, f.result);
  }
}

/** Starts a fake of `fx`'s family on 127.0.0.1 (a free port). */
export function startFake(fx: Fixture, opts: FakeOptions = {}): Promise<FakeTinkerServer> {
  return new FakeTinkerServer(fx, opts).start();
}
