/**
 * `arl serve trainer`: the embedded backend behind the Tinker training API, so the RL loop (or any Tinker client)
 * trains it over HTTP exactly as it would train a model on SkyRL's Tinker server, TuFT, verl-tinker or hosted
 * Tinker. Endpoints follow SkyRL's `skyrl-tx/tx/tinker/api.py` and the Tinker SDK's types (`src/policy/tinker/wire.ts`):
 * sessions and heartbeats, `create_model`, `get_info`, `forward_backward`, `forward`, `optim_step`, `save_weights`,
 * `load_weights`, `save_weights_for_sampler`, `create_sampling_session`, `asample`, `retrieve_future` (long poll,
 * then `try_again`), `get_server_capabilities`, `healthz`.
 *
 * Semantics: every model is a full fine-tune of its base (a `lora_config.rank` is accepted and reported, not
 * applied — the embedded model is small enough to train whole). Training requests of a model run one at a time in
 * arrival order; sampling at the model's current weights uses the live engine (batched across concurrent requests),
 * sampling at an older `sampler_weights` path loads that copy from disk. Losses are sums over tokens (Tinker's
 * convention): the server runs the backend with `normalization: "sum"`.
 *
 * Safety: Adam parameters are bounded up front (`AdamParamsWire`); an update, loss or logprob that comes out NaN/±Inf
 * is a failed request and changes nothing (no gradient accumulated, weights and Adam state kept), and no result
 * carries a non-finite number (JSON would send it as `null`). Retries: the same request under a used
 * `X-Idempotency-Key` or `seq_id` gets the first answer; another request under it is a 422 / 409
 * (`./idempotency.ts`).
 */
import { randomBytes } from "node:crypto";
import { mkdirSync, existsSync } from "node:fs";
import { join, resolve } from "node:path";
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import { NonFiniteError, firstNonFinite } from "../core/finite.ts";
import { EmbeddedBackend } from "../policy/embedded/backend.ts";
import type { GPTConfig } from "../policy/embedded/gpt.ts";
import type { Tokenizer } from "../policy/tokenizer.ts";
import { stopCut } from "../rollout/agent.ts";
import type { SamplingClient } from "../policy/types.ts";
import {
  PROTO_CONTENT_TYPE,
  ProtoDecodeError,
  decodeForwardBackwardRequest,
  encodeForwardBackwardOutput,
  encodeSampleResponse,
} from "../policy/tinker/proto.ts";
import {
  AdamParamsWire,
  ForwardBackwardRequest,
  OptimStepRequest,
  SampleRequest,
  modelInputTokens,
  type TensorData,
  type WireForwardBackwardOutput,
  type WireSampleResponse,
} from "../policy/tinker/wire.ts";
import { HttpError, createApp, parseBody, type ServeOptions } from "./http.ts";
import { quoteShort } from "./limits.ts";
import { lossConfigOf, toDatum } from "./trainer-inputs.ts";
import { SeqLedger, installIdempotency } from "./idempotency.ts";

/** A base model the server can fine-tune: a policy checkpoint folder, or a fresh initialisation of a shape. */
export interface TrainerBaseModel {
  /** The `base_model` name clients ask for (`get_server_capabilities` lists them). */
  name: string;
  gpt: GPTConfig;
  tokenizer: Tokenizer;
  /** Checkpoint folder to load (weights + Adam state); absent = fresh weights from `seed`. */
  checkpoint?: string;
  /** Seed of a fresh initialisation. */
  seed: number;
}

/** Options of the trainer server. */
export interface TrainerServerOptions extends ServeOptions {
  baseModels: TrainerBaseModel[];
  /** Folder for saved weights (`<dir>/<model_id>/{weights,sampler_weights}/<name>`); default `runs/serve-trainer`. */
  dir?: string;
  /** How long `retrieve_future` waits for a result before answering `try_again` (ms; default 20 000). */
  longPollMs?: number;
}

const ID = /^[A-Za-z0-9_-]{1,128}$/;

/** What an asynchronous endpoint answers (`UntypedAPIFuture`). */
interface FutureRef {
  request_id: string;
  future_id: string;
  status: string;
  model_id?: string;
}
const idField = z.string().regex(ID, "expected 1-128 characters of [A-Za-z0-9_-]");

interface Future {
  /** Results the SDK takes as protobuf when it asks (`Accept: application/x-protobuf`). */
  kind?: "fwdbwd" | "sample";
  done: boolean;
  result?: unknown;
  error?: { error: string; category: "user" | "server" };
  waiters: Array<() => void>;
}

interface ServedModel {
  id: string;
  base: TrainerBaseModel;
  loraRank: number | null;
  backend: EmbeddedBackend;
  /** Bumped by every optim_step / load_weights: sampler paths remember the version they were saved at. */
  version: number;
  samplerVersions: Map<string, number>;
  /** `seq_id` → the future answered for it: the same request sent again (a retry) is not re-run, another is a 409. */
  seqFutures: SeqLedger<FutureRef>;
  /** Training requests run in this chain, one at a time, in arrival order. */
  queue: Promise<void>;
  /** Sampling requests running on the live weights; a training request waits for them to finish. */
  readers: Set<Promise<unknown>>;
  writing: Promise<void> | null;
}

/**
 * Builds the trainer app (not yet listening).
 * @throws Error when no base model is given or two share a name
 */
export function trainerApp(options: TrainerServerOptions): FastifyInstance {
  if (options.baseModels.length === 0) throw new Error("serve trainer: at least one base model (--checkpoint or --config)");
  const bases = new Map<string, TrainerBaseModel>();
  for (const b of options.baseModels) {
    if (bases.has(b.name)) throw new Error(`serve trainer: two base models named ${JSON.stringify(b.name)}`);
    bases.set(b.name, b);
  }
  const root = resolve(options.dir ?? join("runs", "serve-trainer"));
  const longPollMs = options.longPollMs ?? 20_000;
  const app = createApp(options);
  // SDK 0.25's forward_backward body (proto.ts); decoded in the handler so a malformed one is a clear 400.
  app.addContentTypeParser(PROTO_CONTENT_TYPE, { parseAs: "buffer" }, (_req, body, done) => done(null, body));
  // Idempotency (`X-Idempotency-Key`, SDK `_client.py`): the same request sent again with the same key gets the
  // first answer back instead of running twice; the key with another request is a 422 (./idempotency.ts). Polls and
  // heartbeats are not replayed (each poll must see the future's state).
  installIdempotency(app, { exclude: ["/api/v1/retrieve_future", "/api/v1/session_heartbeat", "/api/v1/client/config"] });
  const sessions = new Map<string, { heartbeats: number; samplingSessions: number }>();
  const samplingSessions = new Map<string, { modelPath?: string; baseModel?: string }>();
  const models = new Map<string, ServedModel>();
  const futures = new Map<string, Future>();
  const frozen = new Map<string, { key: string; backend: EmbeddedBackend }>(); // base or saved sampler weights, one cached per base name
  let counter = 0;
  // A per-process prefix keeps ids unique across restarts (weights saved under --dir outlive the process).
  const run = randomBytes(4).readUInt32LE(0).toString(36).padStart(7, "0");
  const nextId = (prefix: string) => `${prefix}_${run}${(++counter).toString(36).padStart(6, "0")}`;
  /** `session:model_seq_id` → create_model's answer, `session:sampling_session_seq_id` → create_sampling_session's. */
  const bySeq = new SeqLedger<unknown>();

  const newBackend = async (base: TrainerBaseModel, dir = base.checkpoint): Promise<EmbeddedBackend> => {
    const backend = await EmbeddedBackend.create(base.gpt, base.seed);
    if (dir) await backend.load(dir);
    return backend;
  };

  /**
   * Starts `work` as a future and returns its id. A thrown HttpError or NonFiniteError (a loss, logprob or update
   * that came out NaN/±Inf and was refused) is a user error, anything else a server error. A result holding a
   * NaN/±Inf anywhere fails too: JSON would send it as `null`, which a client takes for a value.
   */
  const submit = (work: () => Promise<unknown>, kind?: Future["kind"]): FutureRef => {
    const id = nextId("req");
    const f: Future = { kind, done: false, waiters: [] };
    futures.set(id, f);
    work().then(
      (r) => {
        const bad = firstNonFinite(r);
        if (bad) f.error = { error: `${bad.path} is ${bad.value} (not finite); the result was not sent`, category: "server" };
        else f.result = r;
      },
      (e: unknown) =>
        (f.error = e instanceof HttpError || e instanceof NonFiniteError ? { error: e.message, category: "user" } : { error: (e as Error).message, category: "server" }),
    ).finally(() => {
      f.done = true;
      for (const w of f.waiters.splice(0)) w();
    });
    return { request_id: id, future_id: id, status: "pending" };
  };

  /**
   * A training request of `m` with its `seq_id`: the first time, `start()` submits it; a repeat of the same request
   * (the client retried after a lost response) gets the same future back.
   * @param what the endpoint, for messages; `request` what the request asks (compared as canonical JSON)
   * @throws HttpError 400 on a seq_id ≤ 0; 409 when the seq_id was used by another request of this model (SkyRL's
   *   rule: `skyrl/tinker/api.py:362-408`, "Training request sequence number was reused")
   */
  const once = (m: ServedModel, seqId: number | null | undefined, what: string, request: unknown, start: () => FutureRef): FutureRef => {
    if (seqId == null) return start();
    if (!Number.isInteger(seqId) || seqId < 1) throw new HttpError(400, `seq_id: expected an integer ≥ 1, got ${seqId}`);
    const seen = m.seqFutures.repeat(String(seqId), [what, request], `seq_id ${seqId} of model ${m.id}`);
    if (seen) return seen;
    const ref = { ...start(), model_id: m.id };
    m.seqFutures.keep(String(seqId), [what, request], ref, what);
    return ref;
  };

  const model = (id: string): ServedModel => {
    const m = models.get(id);
    if (!m) throw new HttpError(404, `model ${quoteShort(id)} not found (create it with POST /api/v1/create_model)`);
    return m;
  };

  /** Runs a training request on `m` after the ones before it, once no sampling request reads the live weights. */
  const train = <T>(m: ServedModel, work: () => Promise<T>): Promise<T> => {
    const run = m.queue.then(async () => {
      while (m.readers.size > 0) await Promise.allSettled([...m.readers]);
      const p = work();
      m.writing = p.then(() => {}, () => {});
      try {
        return await p;
      } finally {
        m.writing = null;
      }
    });
    m.queue = run.then(() => {}, () => {});
    return run;
  };

  const tensor = (data: number[]): TensorData => ({ data, dtype: "float32", shape: [data.length] });

  // ---- health, capabilities, sessions ----
  app.get("/api/v1/healthz", async () => ({ status: "ok" }));
  app.get("/api/v1/get_server_capabilities", async () => ({
    supported_models: [...bases.keys()].map((model_name) => ({ model_name })),
  }));
  app.post("/api/v1/create_session", async (req) => {
    parseBody(z.object({ tags: z.array(z.string()).default([]), sdk_version: z.string().default("unknown") }).passthrough(), req.body ?? {});
    const session_id = nextId("session");
    sessions.set(session_id, { heartbeats: 0, samplingSessions: 0 });
    return { type: "create_session", session_id, info_message: null, warning_message: null, error_message: null };
  });
  app.post("/api/v1/session_heartbeat", async (req) => {
    const { session_id } = parseBody(z.object({ session_id: z.string() }).passthrough(), req.body);
    const s = sessions.get(session_id);
    if (!s) throw new HttpError(404, `session ${quoteShort(session_id)} not found`);
    s.heartbeats++;
    return { type: "session_heartbeat" };
  });
  app.post("/api/v1/telemetry", async () => ({ status: "accepted" }));
  // The SDK's first call (`ClientConfigResponse`, types/client_config_response.py): flags that fit this server —
  // API-key auth, no zstd bodies, chunks sent one at a time, httpx's transport, no create-via-load.
  app.post("/api/v1/client/config", async () => ({
    pjwt_auth_enabled: false,
    credential_default_source: "api_key",
    parallel_fwdbwd_chunks: false,
    proto_compress_fwdbwd: false,
    fwdbwd_max_chunk_len: 1024,
    sample_no_retries: false,
    use_pyqwest_transport: false,
    create_model_via_load_weights: false,
    /** Not an SDK flag (the SDK ignores unknown ones): tells agentic-rl's client it talks to this server. */
    arl_trainer: true,
  }));

  // ---- models ----
  app.post("/api/v1/create_model", async (req) => {
    const body = parseBody(
      z.object({
        base_model: z.string(),
        lora_config: z.object({ rank: z.number().int().min(1) }).passthrough().nullish(),
        session_id: z.string().nullish(),
        model_seq_id: z.number().int().min(0).nullish(),
      }).passthrough(),
      req.body,
    );
    if (body.session_id != null && !sessions.has(body.session_id)) throw new HttpError(404, `session ${quoteShort(body.session_id)} not found`);
    // Checked before a repeat is answered: a request that is invalid now is refused, whatever came before it.
    const base = bases.get(body.base_model);
    if (!base) throw new HttpError(400, `base_model: unknown ${quoteShort(body.base_model)} (this server has: ${[...bases.keys()].join(", ")})`);
    const seqKey = body.session_id != null && body.model_seq_id != null ? `model:${body.session_id}:${body.model_seq_id}` : undefined;
    const asked = `create_model of base_model ${JSON.stringify(base.name)}, lora rank ${body.lora_config?.rank ?? "none"}`;
    const repeat = seqKey ? bySeq.repeat(seqKey, asked, `model_seq_id ${body.model_seq_id} of session ${body.session_id}`) : undefined;
    if (repeat !== undefined) return repeat;
    const id = nextId("model");
    const backend = await newBackend(base);
    models.set(id, {
      id, base, loraRank: body.lora_config?.rank ?? null, backend, version: 0, samplerVersions: new Map(), seqFutures: new SeqLedger(),
      queue: Promise.resolve(), readers: new Set(), writing: null,
    });
    const f = submit(async () => ({ type: "create_model", model_id: id }));
    const answer = { ...f, model_id: id, base_model: base.name, lora_config: body.lora_config ?? null, status: "created" };
    if (seqKey) bySeq.keep(seqKey, asked, answer, asked);
    return answer;
  });
  app.post("/api/v1/get_info", async (req) => {
    const { model_id } = parseBody(z.object({ model_id: z.string() }).passthrough(), req.body);
    const m = model(model_id);
    return {
      type: "get_info",
      model_id,
      status: "ready",
      model_data: { base_model: m.base.name, model_name: m.base.name, lora_config: m.loraRank ? { rank: m.loraRank } : null, arch: "gpt", vocab_size: m.base.gpt.vocabSize, context_length: m.base.gpt.contextLength },
      is_lora: false,
    };
  });

  app.post("/api/v1/unload_model", async (req) => {
    const { model_id } = parseBody(z.object({ model_id: z.string() }).passthrough(), req.body);
    const m = model(model_id);
    models.delete(model_id);
    return submit(async () => {
      await m.queue;
      m.backend.dispose();
      return { type: "unload_model", model_id };
    });
  });

  // ---- training ----
  const forward = (endpointBackward: boolean) => async (req: { body: unknown }) => {
    let raw = req.body;
    if (raw instanceof Uint8Array) {
      // SDK 0.25 sends forward_backward as tinker_public.ForwardBackwardRequest (proto.ts).
      try {
        raw = decodeForwardBackwardRequest(raw);
      } catch (e) {
        if (e instanceof ProtoDecodeError) throw new HttpError(400, `forward_backward (protobuf body): ${e.message}`);
        throw e;
      }
    }
    const body = parseBody(ForwardBackwardRequest, raw);
    const m = model(body.model_id);
    const input = body.forward_backward_input;
    const withBackward = endpointBackward && !body.forward_only;
    const datums = input.data.map((d, i) => toDatum(d, i, input.loss_fn, m.base.gpt));
    const config = lossConfigOf(input);
    const what = withBackward ? "forward_backward" : "forward";
    return once(m, body.seq_id, what, { loss_fn: input.loss_fn, config, datums }, () => submit(() =>
      train(m, async (): Promise<WireForwardBackwardOutput> => {
        if (!withBackward) {
          const lps = await m.backend.computeLogprobs(datums);
          // The forward pass's loss too (the SDK's forward returns a ForwardBackwardOutput with `loss:sum`); the RL
          // losses at the current weights equal −Σ A (ratio 1 only if the logprobs are current), so only cross
          // entropy is reported.
          const metrics: Record<string, number> = {};
          if (input.loss_fn === "cross_entropy") metrics["loss:sum"] = lps.reduce((a, lp, i) => a - lp.reduce((b, x, t) => b + x * datums[i].weights[t], 0), 0);
          const out = { loss_fn_output_type: "ArrayRecord", loss_fn_outputs: lps.map((lp) => ({ logprobs: tensor(lp) })), metrics };
          const bad = firstNonFinite(out);
          if (bad) throw new NonFiniteError([bad.path], `forward: ${bad.path} is ${bad.value} (not finite) at the model's current weights`);
          return out;
        }
        // requireFinite: a NaN/±Inf loss, metric or logprob is an error and adds no gradient (nothing to undo).
        const r = await m.backend.forwardBackward(datums, input.loss_fn, config, { requireFinite: true });
        const metrics: Record<string, number> = { "loss:sum": r.loss };
        for (const [k, v] of Object.entries(r.metrics)) metrics[k === "tokens" ? "tokens:sum" : `${k}:mean`] = v;
        return {
          loss_fn_output_type: "ArrayRecord",
          loss_fn_outputs: r.logprobs.map((lp, i) => {
            const out: Record<string, TensorData> = { logprobs: tensor(lp) };
            if (input.loss_fn === "cross_entropy") out.elementwise_loss = tensor(lp.map((x, t) => -x * datums[i].weights[t]));
            return out;
          }),
          metrics,
        };
      }),
    "fwdbwd"));
  };
  app.post("/api/v1/forward_backward", forward(true));
  app.post("/api/v1/forward", forward(false));
  app.post("/api/v1/optim_step", async (req) => {
    const body = parseBody(OptimStepRequest, req.body);
    const m = model(body.model_id);
    // Bounded by the schema (wire.ts `AdamParamsWire`); an update that still comes out non-finite is refused by the
    // backend (requireFinite), which keeps the weights and Adam state it had.
    const a: AdamParamsWire = body.adam_params;
    return once(m, body.seq_id, "optim_step", a, () => submit(() =>
      train(m, async () => {
        const adam = { learningRate: a.learning_rate, beta1: a.beta1, beta2: a.beta2, eps: a.eps, weightDecay: a.weight_decay, gradClip: a.grad_clip_norm };
        const metrics = await m.backend.optimStep(adam, { requireFinite: true });
        m.version++;
        return { type: "optim_step", metrics };
      }),
    ));
  });

  // ---- weights ----
  const weightsDir = (modelId: string, kind: "weights" | "sampler_weights", name: string) => join(root, modelId, kind, name);
  const saveBody = z.object({
    model_id: z.string(),
    path: idField.nullish(),
    seq_id: z.number().int().nullish(),
    sampling_session_seq_id: z.number().int().min(0).nullish(),
  }).passthrough();
  const saveWeights = (kind: "weights" | "sampler_weights") => async (req: { body: unknown }) => {
    const body = parseBody(saveBody, req.body);
    const m = model(body.model_id);
    // save_weights_for_sampler without a path (the SDK's save_weights_and_get_sampling_client): an unnamed
    // snapshot, answered with a sampling session on it instead of a path.
    const ephemeral = body.path == null;
    if (ephemeral && kind === "weights") throw new HttpError(400, "path: required (a name of [A-Za-z0-9_-])");
    if (ephemeral && body.sampling_session_seq_id == null) throw new HttpError(400, "give path, or sampling_session_seq_id for an unnamed sampler snapshot");
    const name = body.path ?? `unnamed-${nextId("s")}`;
    return once(m, body.seq_id, kind === "weights" ? "save_weights" : "save_weights_for_sampler", { path: body.path ?? null, sampling_session_seq_id: body.sampling_session_seq_id ?? null }, () => submit(() =>
      train(m, async () => {
        const dir = weightsDir(m.id, kind, name);
        mkdirSync(dir, { recursive: true });
        await m.backend.save(dir);
        if (kind === "sampler_weights") m.samplerVersions.set(name, m.version);
        const path = `tinker://${m.id}/${kind}/${name}`;
        if (kind === "weights") return { type: "save_weights", path };
        if (!ephemeral) return { type: "save_weights_for_sampler", path };
        const sampling_session_id = nextId("sampling");
        samplingSessions.set(sampling_session_id, { modelPath: path });
        return { type: "save_weights_for_sampler", path: null, sampling_session_id };
      }),
    ));
  };
  app.post("/api/v1/save_weights", saveWeights("weights"));
  app.post("/api/v1/save_weights_for_sampler", saveWeights("sampler_weights"));

  /** `tinker://<model_id>/<kind>/<name>` → its parts. @throws HttpError 400 on another form or unsafe names */
  const parsePath = (path: string, field: string): { modelId: string; kind: string; name: string } => {
    const m = /^tinker:\/\/([^/]+)\/(?:(weights|sampler_weights)\/)?([^/]+)$/.exec(path);
    if (!m || !ID.test(m[1]) || !ID.test(m[3])) {
      throw new HttpError(400, `${field}: expected tinker://<model_id>/weights/<name> or tinker://<model_id>/sampler_weights/<name>, got ${quoteShort(path)}`);
    }
    return { modelId: m[1], kind: m[2] ?? "sampler_weights", name: m[3] };
  };
  app.post("/api/v1/load_weights", async (req) => {
    const body = parseBody(
      z.object({ model_id: z.string({ error: "model_id: required (this server has no create-via-load: client/config says create_model_via_load_weights false)" }), path: z.string(), optimizer: z.boolean().default(true), seq_id: z.number().int().nullish() }).passthrough(),
      req.body,
    );
    const m = model(body.model_id);
    const p = parsePath(body.path, "path");
    const dir = weightsDir(p.modelId, p.kind as "weights", p.name);
    if (!existsSync(dir)) throw new HttpError(404, `path: no saved weights at ${quoteShort(body.path)}`);
    return once(m, body.seq_id, "load_weights", { path: body.path, optimizer: body.optimizer }, () => submit(() =>
      train(m, async () => {
        await m.backend.load(dir, { optimizer: body.optimizer });
        m.version++;
        return { type: "load_weights", path: body.path, model_id: m.id };
      }),
    ));
  });

  // The SDK asks before create_training_client_from_state (rest_client.py:203-214, `WeightsInfoResponse`).
  app.post("/api/v1/weights_info", async (req) => {
    const body = parseBody(z.object({ tinker_path: z.string() }).passthrough(), req.body);
    const p = parsePath(body.tinker_path, "tinker_path");
    const m = models.get(p.modelId);
    const dir = weightsDir(p.modelId, p.kind as "weights", p.name);
    if (!existsSync(dir)) throw new HttpError(404, `tinker_path: no saved weights at ${quoteShort(body.tinker_path)}`);
    if (!m) throw new HttpError(404, `tinker_path: model ${p.modelId} is not loaded on this server (its base model is unknown after a restart; load it into a new model with create_model + load_weights)`);
    // Every model here is a full fine-tune; the SDK builds a LoraConfig from lora_rank, so the rank it asked for is kept.
    return { base_model: m.base.name, is_lora: true, lora_rank: m.loraRank ?? 1, train_unembed: true, train_mlp: true, train_attn: true };
  });
  // `SamplingClient.get_tokenizer()` asks which base model a sampling session samples (rest_client.py:1108).
  app.get("/api/v1/samplers/:id", async (req) => {
    const { id } = req.params as { id: string };
    const sess = samplingSessions.get(id);
    if (!sess) throw new HttpError(404, `sampler ${quoteShort(id)} not found`);
    const base = sess.baseModel ?? models.get(parsePath(sess.modelPath!, "model_path").modelId)?.base.name;
    return { sampler_id: id, base_model: base ?? null, model_path: sess.modelPath ?? null };
  });

  // ---- sampling ----
  app.post("/api/v1/create_sampling_session", async (req) => {
    const body = parseBody(
      z.object({ session_id: z.string(), sampling_session_seq_id: z.number().int().default(0), base_model: z.string().nullish(), model_path: z.string().nullish() }).passthrough(),
      req.body,
    );
    if (!sessions.has(body.session_id)) throw new HttpError(404, `session ${quoteShort(body.session_id)} not found`);
    if (body.base_model == null && body.model_path == null) throw new HttpError(400, "give base_model or model_path");
    // model_path wins when both are given (the SDK: base_model "is inferred from model_path, if provided"). Checked
    // here, before a repeat is answered, so a session on nothing is never opened.
    if (body.model_path != null) model(parsePath(body.model_path, "model_path").modelId);
    else if (!bases.has(body.base_model!)) throw new HttpError(400, `base_model: unknown ${quoteShort(body.base_model!)} (this server has: ${[...bases.keys()].join(", ")})`);
    const target = body.model_path != null ? { modelPath: body.model_path } : { baseModel: body.base_model! };
    const seqKey = `sampling:${body.session_id}:${body.sampling_session_seq_id}`;
    const asked = `a sampling session on ${target.modelPath ?? `base_model ${JSON.stringify(target.baseModel)}`}`;
    const repeat = bySeq.repeat(seqKey, asked, `sampling_session_seq_id ${body.sampling_session_seq_id} of session ${body.session_id}`);
    if (repeat !== undefined) return repeat;
    const sampling_session_id = nextId("sampling");
    samplingSessions.set(sampling_session_id, target);
    const answer = { type: "create_sampling_session", sampling_session_id };
    bySeq.keep(seqKey, asked, answer, asked);
    return answer;
  });

  /** The engine that samples at a path or base model, and the tokenizer/shape it runs. */
  const samplerFor = async (
    target: { modelPath?: string; baseModel?: string },
  ): Promise<{ client: SamplingClient; base: TrainerBaseModel; live?: ServedModel }> => {
    if (target.baseModel !== undefined) {
      const base = bases.get(target.baseModel);
      if (!base) throw new HttpError(400, `base_model: unknown ${quoteShort(target.baseModel)} (this server has: ${[...bases.keys()].join(", ")})`);
      return { client: await frozenBackend(base, `base:${base.name}`, base.checkpoint), base };
    }
    const p = parsePath(target.modelPath!, "model_path");
    const m = model(p.modelId);
    if (p.kind === "sampler_weights" && m.samplerVersions.get(p.name) === m.version) return { client: m.backend.samplingClient(), base: m.base, live: m };
    const dir = weightsDir(p.modelId, p.kind as "weights", p.name);
    if (!existsSync(dir)) throw new HttpError(404, `model_path: no saved weights at ${quoteShort(target.modelPath!)}`);
    return { client: await frozenBackend(m.base, `${p.kind}:${p.modelId}/${p.name}`, dir), base: m.base };
  };
  const frozenBackend = async (base: TrainerBaseModel, key: string, dir: string | undefined): Promise<SamplingClient> => {
    const cached = frozen.get(base.name);
    if (cached?.key === key) return cached.backend.samplingClient();
    const backend = await newBackend(base, dir);
    frozen.set(base.name, { key, backend });
    return backend.samplingClient();
  };

  app.post("/api/v1/asample", async (req) => {
    const body = parseBody(SampleRequest, req.body);
    const extra = req.body as { topk_prompt_logprobs?: unknown };
    if (body.prompt_logprobs === true || (typeof extra.topk_prompt_logprobs === "number" && extra.topk_prompt_logprobs > 0)) {
      throw new HttpError(400, "prompt_logprobs / topk_prompt_logprobs: not supported by this server (score a sequence with forward_backward forward_only instead)");
    }
    let target: { modelPath?: string; baseModel?: string };
    if (body.sampling_session_id) {
      const s = samplingSessions.get(body.sampling_session_id);
      if (!s) throw new HttpError(404, `sampling session ${quoteShort(body.sampling_session_id)} not found`);
      target = s;
    } else {
      target = { modelPath: body.model_path ?? undefined, baseModel: body.base_model ?? undefined };
    }
    const sp = body.sampling_params;
    if (sp.top_k !== -1 || sp.top_p !== 1) throw new HttpError(400, "sampling_params: top_k and top_p are not supported by this server (leave -1 / 1)");
    const { client, base, live } = await samplerFor(target);
    const prompt = modelInputTokens(body.prompt);
    if (prompt.length === 0) throw new HttpError(400, "prompt: no tokens (give at least one token in prompt.chunks)");
    const bad = prompt.findIndex((t) => t >= base.gpt.vocabSize);
    if (bad >= 0) throw new HttpError(400, `prompt[${bad}]: token id ${prompt[bad]} outside [0, ${base.gpt.vocabSize})`);
    if (prompt.length + 1 > base.gpt.contextLength) throw new HttpError(400, `prompt: ${prompt.length} tokens leave no room in the ${base.gpt.contextLength}-token context`);
    const stops = sp.stop == null ? [] : typeof sp.stop === "string" ? [sp.stop] : sp.stop;
    // Single-token stops end decoding in the engine; longer stop strings (a tag split by a BPE tokenizer) are found
    // in the decoded text afterwards and the sequence is cut after the token that completes one (vLLM's rule).
    const stop: number[] = [];
    const stopStrings: string[] = [];
    for (const x of stops) {
      if (typeof x === "number") {
        if (x >= base.gpt.vocabSize) throw new HttpError(400, `sampling_params.stop: token id ${x} outside [0, ${base.gpt.vocabSize})`);
        stop.push(x);
      }
      else if (x === "") throw new HttpError(400, "sampling_params.stop: empty string");
      else {
        const single = singleToken(base.tokenizer, x);
        if (single === undefined) stopStrings.push(x);
        else stop.push(single);
      }
    }
    const run = async (): Promise<WireSampleResponse> => {
      const seqs = await client.sample(prompt, {
        n: body.num_samples,
        maxTokens: Math.min(sp.max_tokens, base.gpt.contextLength - prompt.length),
        temperature: sp.temperature,
        stop,
        seed: sp.seed ?? Math.floor(Math.random() * 2 ** 31),
      });
      return {
        type: "sample",
        sequences: seqs.map((q) => {
          // The first stop of either kind ends the sequence (a string may complete before the id the sampler stopped at).
          const cut = stopStrings.length > 0 ? stopCut(base.tokenizer, q.tokens, stop, stopStrings) : -1;
          if (cut >= 0) return { tokens: q.tokens.slice(0, cut + 1), logprobs: q.logprobs.slice(0, cut + 1), stop_reason: "stop" as const };
          return { tokens: q.tokens, logprobs: q.logprobs, stop_reason: q.stopReason === "stop" ? ("stop" as const) : ("length" as const) };
        }),
        prompt_logprobs: null,
      };
    };
    if (!live) return submit(run, "sample");
    const m = live;
    return submit(async () => {
      if (m.writing) await m.writing;
      const p = run();
      m.readers.add(p);
      try {
        return await p;
      } finally {
        m.readers.delete(p);
      }
    }, "sample");
  });

  // ---- futures ----
  app.post("/api/v1/retrieve_future", async (req, reply) => {
    const { request_id } = parseBody(z.object({ request_id: z.string() }).passthrough(), req.body);
    const f = futures.get(request_id);
    if (!f) throw new HttpError(404, `future ${quoteShort(request_id)} not found`);
    if (!f.done) {
      await new Promise<void>((res) => {
        const timer = setTimeout(res, longPollMs);
        f.waiters.push(() => {
          clearTimeout(timer);
          res();
        });
      });
    }
    if (!f.done) return { type: "try_again", request_id, queue_state: "active" };
    // A retrieved result is kept 10 minutes (a client may retry a lost response), then dropped.
    setTimeout(() => futures.delete(request_id), 600_000).unref();
    // A failed request is a 200 `RequestFailedResponse` {error, category} (the SDK reads it as a failure, never
    // retries it; a 4xx/5xx here would make it retry or give up on the poll itself).
    if (f.error) return f.error;
    const accept = String(req.headers.accept ?? "");
    if (f.kind && accept.includes(PROTO_CONTENT_TYPE)) {
      const bytes = f.kind === "fwdbwd" ? encodeForwardBackwardOutput(f.result as WireForwardBackwardOutput) : encodeSampleResponse(f.result as WireSampleResponse);
      return reply.header("content-type", PROTO_CONTENT_TYPE).send(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));
    }
    return f.result;
  });

  app.addHook("onClose", async () => {
    for (const m of models.values()) await m.queue;
  });
  return app;
}

/** The id of `text` when it is exactly one token of `tokenizer`, else undefined. */
function singleToken(tokenizer: Tokenizer, text: string): number | undefined {
  try {
    return tokenizer.id(text);
  } catch {
    const ids = tokenizer.encode(text);
    return ids.length === 1 && tokenizer.decode(ids) === text ? ids[0] : undefined;
  }
}

