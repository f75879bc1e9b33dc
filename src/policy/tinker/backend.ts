/**
 * `TinkerBackend`: the `TrainingBackend` interface over the Tinker training API, so the RL loop trains a model on
 * hosted Tinker, SkyRL's Tinker server, TuFT, verl-tinker or `arl serve trainer` without changing a line.
 * Mapping (Tinker Python SDK 0.25's `ServiceClient` / `TrainingClient` / `SamplingClient`, thinking-machines-lab/tinker
 * @ d595dc2ba62a1494aa0f452fe1d0dbb7b321b870, `src/tinker/lib/public_interfaces/*.py`):
 * - `create` → `client/config` (the server's flags; absent on JSON-only servers), `create_session {tags,
 *   user_metadata, sdk_version}`, `create_model {session_id, model_seq_id, base_model, lora_config}`;
 * - every training request of a model carries `seq_id` 1, 2, 3, … in submission order (the SDK's `request_id + 1`),
 *   sent one at a time, each retried with the same `seq_id` and idempotency key (`client.ts`);
 * - `forwardBackward` → `forward_backward` (protobuf or JSON, `wire.ts` / `proto.ts`), our normalisation folded into
 *   the data (`toWireDatums`); the loss from `loss:sum`, SkyRL's `total_loss:sum`, or — when a server sends neither —
 *   recomputed from the returned logprobs (`fallbackLoss`, `losses.ts`), so a non-finite loss is always seen;
 * - `computeLogprobs` → `forward_backward` with `forward_only` (protobuf; SDK 0.25 has no `/forward`), or
 *   `forward {forward_input}` on JSON servers;
 * - `optimStep` → `optim_step` with every Adam field explicit (servers that ignore some are warned about by name);
 * - `samplingClient` → `save_weights_for_sampler` + `create_sampling_session` once per weights version, then `asample`;
 * - `save`/`load` → `save_weights`/`load_weights {optimizer: true}` with a pointer file `tinker.json`; a load on a
 *   model that has already trained goes to a fresh model (SkyRL refuses a second load on one model).
 */
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Datum, Metrics } from "../../core/types.ts";
import { ADAM_DEFAULTS } from "../embedded/optim.ts";
import type { AdamParams, ForwardBackwardResult, LossConfig, LossFnName, TrainingBackend } from "../../core/training.ts";
import type { SampledSequence, SampleOptions, SamplingClient } from "../../core/sampling.ts";
import { TinkerApiError, TinkerClient, type TinkerClientOptions } from "./client.ts";
import { PROTO_CONTENT_TYPE, decodeForwardBackwardOutput, decodeSampleResponse, encodeForwardBackwardRequest } from "./proto.ts";
import { FAMILIES, detectFamily, type TinkerServerFamily } from "./families.ts";
import { toWireDatums, type WireDatum, type WireForwardBackwardOutput, type WireFuture, type WireSampleResponse } from "./wire.ts";
import { droDatums, fallbackLoss, tinkerLossFieldsOf, tinkerLossFor } from "./losses.ts";

/** The SDK version whose wire this client speaks (servers resolve feature flags by it: `ClientConfigRequest`). */
export const TINKER_SDK_WIRE_VERSION = "0.25.0";

/** Body encoding of `forward_backward` and its results: `auto` = the server family's (`families.ts`), switched on a 415. */
export type TinkerWire = "auto" | "json" | "protobuf";

/** Options of a `TinkerBackend`. */
export interface TinkerBackendOptions extends TinkerClientOptions {
  /** The base model to fine-tune (e.g. `Qwen/Qwen3-8B`; for `arl serve trainer`, one of its base-model names). */
  baseModel: string;
  /** LoRA rank (hosted Tinker trains LoRA adapters; `arl serve trainer` accepts and ignores it). */
  loraRank?: number;
  /** Send `stopStrings` to the server (default: the server family's support); false = stop ids only, cut here. */
  sendStopStrings?: boolean;
  /** Datums per `forward_backward` request (default 128; never above the server's `fwdbwd_max_chunk_len`). */
  maxDatumsPerRequest?: number;
  /** Body encoding (default `auto`). */
  wire?: TinkerWire;
  /** The server family, for its known differences (default `auto`: detected, `families.ts`). */
  server?: TinkerServerFamily | "auto";
  /** Called once per server difference that changes what a run means (default: `console.warn`). */
  onWarning?: (message: string) => void;
  /** Run metadata sent as `user_metadata` with the session and the model (strings only). */
  userMetadata?: Record<string, string>;
}

/** The pointer `save` writes: where the weights live on the server. */
export interface TinkerCheckpointPointer {
  baseUrl: string;
  baseModel: string;
  modelId: string;
  /** `tinker://<model_id>/weights/<name>`. */
  path: string;
}

let saveCounter = 0;
/** Warnings already given, by server, family and kind. */
const warnedOnce = new Set<string>();
/** verl-tinker servers this process holds a model on (one model per server: families.ts). */
const verlModels = new Set<string>();

/** What `TinkerBackend.create` found and made for a backend. */
interface TinkerBackendInit {
  client: TinkerClient;
  modelId: string;
  options: TinkerBackendOptions;
  /** The detected (or configured) server family. */
  family: TinkerServerFamily;
  /** The body encoding of `forward_backward` (switched once on a 415). */
  wire: "json" | "protobuf";
  /** Most datums per `forward_backward` request (`maxDatumsPerRequest`, and the server's `fwdbwd_max_chunk_len`). */
  maxChunk: number;
  /** Most bytes per request (the server's `fwdbwd_max_chunk_bytes_count`, default 5 000 000). */
  maxChunkBytes: number;
  /** The session's model and sampling-session sequence numbers (shared with `createModel`). */
  counters: { model: number; sampling: number };
}

/** A model trained through the Tinker API. Create with `TinkerBackend.create`. */
export class TinkerBackend implements TrainingBackend {
  private version = 0;
  private sampler: { version: number; ready: Promise<string> } | undefined;
  private readonly sampleSeqs = new Map<string, number>();
  private samplerExports = 0;
  /** The next `seq_id` of this model's training requests (the SDK's `request_id + 1`: 1, 2, …). */
  private seq = 1;
  /** Training requests chain here so their `seq_id`s reach the server in order. */
  private queue: Promise<unknown> = Promise.resolve();

  readonly client: TinkerClient;
  public modelId: string;
  private readonly options: TinkerBackendOptions;
  /** The detected (or configured) server family. */
  readonly family: TinkerServerFamily;
  private wire: "json" | "protobuf";
  private readonly maxChunk: number;
  private readonly maxChunkBytes: number;
  private readonly counters: { model: number; sampling: number };

  private constructor(init: TinkerBackendInit) {
    this.client = init.client;
    this.modelId = init.modelId;
    this.options = init.options;
    this.family = init.family;
    this.wire = init.wire;
    this.maxChunk = init.maxChunk;
    this.maxChunkBytes = init.maxChunkBytes;
    this.counters = init.counters;
  }

  /**
   * Reads the server's flags, opens a session and creates the model.
   * @throws TinkerApiError when the server is unreachable, the key is wrong or the base model is unknown
   */
  static async create(options: TinkerBackendOptions): Promise<TinkerBackend> {
    let client = new TinkerClient(options);
    const config = await client.clientConfig(TINKER_SDK_WIRE_VERSION);
    const family = options.server && options.server !== "auto" ? options.server : await detectFamily(client, config);
    const traits = FAMILIES[family];
    // Each poll outlives the server's own hold, so its try_again / 408 arrives instead of a cut connection — but
    // stays under 290 s: Node's fetch drops a response that has sent no headers for 300 s (SkyRL holds 300 s).
    if (options.pollTimeoutMs === undefined) client = new TinkerClient({ ...options, pollTimeoutMs: Math.min(290_000, Math.max(45_000, traits.pollHoldMs + 15_000)) });
    if (typeof config?.billing_exception_max_pause_duration_sec === "number") client.billingPauseMs = config.billing_exception_max_pause_duration_sec * 1000;
    if (config?.pjwt_auth_enabled === true) await client.useJwt();
    // verl-tinker serves one model and ignores model_id: a second model of this process there would be the same one.
    if (family === "verl-tinker") {
      const key = client.baseUrl;
      if (verlModels.has(key)) {
        throw new TinkerApiError(0, "create_model", `${key} is a verl-tinker server, which trains one model and ignores model_id: a second model (the reference policy of detectors.referenceKl / rl.klCoef, or a second run) would share the first one's weights. Set detectors.referenceKl: false and rl.klCoef: 0, or serve the reference from a second server`);
      }
      verlModels.add(key);
    }
    const wire = options.wire && options.wire !== "auto" ? options.wire : traits.wire;
    const chunkLimit = typeof config?.fwdbwd_max_chunk_len === "number" && config.fwdbwd_max_chunk_len > 0 ? config.fwdbwd_max_chunk_len : Infinity;
    const session = await client.createSession({ sdkVersion: TINKER_SDK_WIRE_VERSION, userMetadata: options.userMetadata });
    const counters = { model: 0, sampling: 0 };
    const modelId = await TinkerBackend.createModel(client, session, counters, options);
    const chunkBytes = typeof config?.fwdbwd_max_chunk_bytes_count === "number" && config.fwdbwd_max_chunk_bytes_count > 0 ? config.fwdbwd_max_chunk_bytes_count : 5_000_000;
    const maxChunk = Math.min(options.maxDatumsPerRequest ?? 128, chunkLimit);
    const backend = new TinkerBackend({ client, modelId, options, family, wire, maxChunk, maxChunkBytes: chunkBytes, counters });
    backend.warnAtStart();
    return backend;
  }

  private static async createModel(client: TinkerClient, session: string, counters: { model: number }, options: TinkerBackendOptions): Promise<string> {
    const body = {
      session_id: session,
      model_seq_id: counters.model++,
      base_model: options.baseModel,
      user_metadata: options.userMetadata ?? {},
      lora_config: { rank: options.loraRank ?? 32 },
      type: "create_model",
    };
    const send = async () => parseFuture(await client.send("create_model", { body }), "create_model") as WireFuture & { model_id?: string };
    const created = await send();
    const done = await client.result<{ model_id?: string }>(created, { type: "CreateModel", resubmit: send });
    const modelId = done.model_id ?? created.model_id;
    if (!modelId) throw new Error(`tinker create_model: the server returned no model_id (${JSON.stringify(done)})`);
    return modelId;
  }

  private warn(key: string, message: string): void {
    // Once per server and process: a run's reference policy or a reloaded model is not told again.
    const once = `${this.client.baseUrl} ${this.family} ${key}`;
    if (warnedOnce.has(once)) return;
    warnedOnce.add(once);
    (this.options.onWarning ?? ((m: string) => console.warn(`warning: ${m}`)))(message);
  }

  /** The differences of this server family that change what a run means, named once at start. */
  private warnAtStart(): void {
    for (const note of FAMILIES[this.family].startNotes) this.warn(note.slice(0, 40), `tinker server (${this.family}): ${note}`);
  }

  /**
   * `[start, end)` ranges of one request each: at most `maxChunk` datums and about `maxChunkBytes` of protobuf (the
   * SDK's `fwdbwd_max_chunk_len` / `fwdbwd_max_chunk_bytes_count`, training_client.py `_chunked_requests_generator`;
   * a datum costs ~10 bytes per input token plus 4–8 per tensor value).
   */
  private chunks(data: readonly WireDatum[]): Array<[number, number]> {
    const out: Array<[number, number]> = [];
    let start = 0;
    let bytes = 0;
    data.forEach((d, i) => {
      const size = d.model_input.chunks.reduce((a, c) => a + c.tokens.length * 10, 0) + Object.values(d.loss_fn_inputs).reduce((a, t) => a + t.data.length * 8, 0);
      if (i > start && (i - start >= this.maxChunk || bytes + size > this.maxChunkBytes)) {
        out.push([start, i]);
        start = i;
        bytes = 0;
      }
      bytes += size;
    });
    out.push([start, data.length]);
    return out;
  }

  /** Runs `work` with the next `seq_id`, after every earlier training request of this model was accepted. */
  private sequenced<T>(work: (seqId: number) => Promise<T>): Promise<T> {
    const seqId = this.seq++;
    const run = this.queue.then(() => work(seqId));
    this.queue = run.catch(() => {});
    return run;
  }

  /** One `forward_backward` chunk (or `forward` on a JSON server) → its output. */
  private async fwdbwd(data: WireDatum[], lossFn: LossFnName | "cross_entropy", lossFnConfig: Record<string, number> | undefined, forwardOnly: boolean): Promise<WireForwardBackwardOutput> {
    const input = { data, loss_fn: lossFn, loss_fn_config: lossFnConfig };
    return this.sequenced(async (seqId) => {
      for (let attempt = 0; ; attempt++) {
        const wire = this.wire;
        let send: () => Promise<WireFuture>;
        if (wire === "protobuf") {
          const bytes = encodeForwardBackwardRequest({ model_id: this.modelId, seq_id: seqId, forward_backward_input: input, forward_only: forwardOnly });
          send = async () => parseFuture(await this.client.send("forward_backward", { bytes, contentType: PROTO_CONTENT_TYPE }), "forward_backward");
        } else if (forwardOnly) {
          // The SDK's ForwardRequest / ForwardBackwardRequest dataclasses have no `type` field (types/forward_request.py).
          const body = { model_id: this.modelId, seq_id: seqId, forward_input: input };
          send = async () => parseFuture(await this.client.send("forward", { body }), "forward");
        } else {
          const body = { model_id: this.modelId, seq_id: seqId, forward_backward_input: input };
          send = async () => parseFuture(await this.client.send("forward_backward", { body }), "forward_backward");
        }
        let future: WireFuture;
        try {
          future = await send();
        } catch (e) {
          // 415: the server wants the other encoding (TuFT refuses JSON here). Switch once, for the rest of the run.
          // A 404 on the JSON /forward: a server with only SDK 0.25's forward_only (TuFT, hosted Tinker).
          const noForward = e instanceof TinkerApiError && e.status === 404 && forwardOnly && wire === "json" && !/model/i.test(e.reason);
          if (e instanceof TinkerApiError && (e.status === 415 || noForward) && attempt === 0 && this.options.wire !== "json" && this.options.wire !== "protobuf") {
            this.wire = wire === "json" ? "protobuf" : "json";
            this.warn("wire-switch", `tinker server answered 415 to ${wire} forward_backward; using ${this.wire} from now on (set policy.tinker.wire: ${this.wire})`);
            continue;
          }
          throw e;
        }
        return this.client.result<WireForwardBackwardOutput>(future, {
          type: forwardOnly ? "Forward" : "ForwardBackward",
          accept: wire === "protobuf" ? PROTO_CONTENT_TYPE : undefined,
          decode: decodeForwardBackwardOutput,
          resubmit: send,
        });
      }
    });
  }

  async forwardBackward(datums: Datum[], lossFn: LossFnName, config: LossConfig = {}): Promise<ForwardBackwardResult> {
    if (datums.length === 0) throw new Error("forwardBackward: empty batch");
    // Normalise over the whole batch first, then split into requests: the gradients of the parts add up.
    const traits = FAMILIES[this.family];
    const loss = lossFn === "cross_entropy" ? { lossFn } : tinkerLossFor(tinkerLossFieldsOf(lossFn, config), this.family);
    let sent = datums;
    let lossFnConfig = loss.lossFnConfig;
    if (lossFn === "dro") {
      // Tinker's dro sums ½β(lp − q)² over every position of a datum (docs "DRO"; TuFT loss_fn/dro.py @ 102eefd), with
      // one β for the batch: fold our per-token normalisation into β and make the penalty vanish (value and gradient)
      // where we do not train, by sending the trainer's current logprobs there as q.
      const d = droDatums(datums, config, await this.computeLogprobs(datums));
      sent = d.datums;
      lossFnConfig = { ...lossFnConfig, beta: d.beta };
    }
    const wire = toWireDatums(sent, lossFn, config, { rlWeights: traits.rlWeights });
    let total = 0;
    let tokens = 0;
    const logprobs: number[][] = [];
    const parts: Array<{ metrics: Record<string, number>; datums: number }> = [];
    for (const [start, end] of this.chunks(wire)) {
      const part = wire.slice(start, end);
      const out = await this.fwdbwd(part, loss.lossFn as LossFnName, lossFnConfig, false);
      const partLogprobs = outputLogprobs(out, part, "forward_backward");
      if (this.family === "skyrl" && Object.keys(out.metrics).length === 0) {
        // SkyRL's JAX backend (its default) averages each sequence's loss over its own tokens and then over the
        // datums (skyrl/backends/jax.py:406, :176-185) and reports no metrics: not the summed losses this client's
        // normalisation is folded into. Stop before any optim_step applies that gradient.
        throw new TinkerApiError(200, "forward_backward", "this SkyRL server runs its JAX backend, whose losses are per-sequence means (skyrl/backends/jax.py:406), not the sums agentic-rl normalises for: start SkyRL with --backend fsdp");
      }
      const serverLoss = out.metrics["loss:sum"] ?? out.metrics["total_loss:sum"] ?? out.metrics.loss;
      if (serverLoss === undefined) this.warn("no-loss", `tinker server (${this.family}) reports no loss metric (loss:sum / total_loss:sum); the loss is recomputed from the returned logprobs`);
      total += serverLoss ?? fallbackLoss(part, loss.lossFn, lossFnConfig, partLogprobs);
      // Tokens trained = the datums' non-zero weights (mask), counted here: servers count differently or not at all.
      tokens += datums.slice(start, end).reduce((s, d) => s + d.weights.reduce((a, w) => a + (w !== 0 ? 1 : 0), 0), 0);
      parts.push({ metrics: out.metrics, datums: part.length });
      logprobs.push(...partLogprobs);
    }
    const metrics: Metrics = { tokens };
    for (const [k, v] of Object.entries(reduceChunkMetrics(parts))) {
      if (k !== "loss" && k !== "total_loss" && k !== "tokens") metrics[k] = v;
    }
    return { loss: total, metrics, logprobs };
  }

  async computeLogprobs(datums: Datum[]): Promise<number[][]> {
    const wire = toWireDatums(datums, "cross_entropy", { normalization: "sum" });
    const out: number[][] = [];
    for (const [start, end] of this.chunks(wire)) {
      const part = wire.slice(start, end);
      out.push(...outputLogprobs(await this.fwdbwd(part, "cross_entropy", undefined, true), part, "forward"));
    }
    return out;
  }

  async optimStep(adam: AdamParams): Promise<Metrics> {
    const adamParams = {
      learning_rate: adam.learningRate,
      beta1: adam.beta1 ?? ADAM_DEFAULTS.beta1,
      beta2: adam.beta2 ?? ADAM_DEFAULTS.beta2,
      eps: adam.eps ?? ADAM_DEFAULTS.eps,
      weight_decay: adam.weightDecay ?? ADAM_DEFAULTS.weightDecay,
      grad_clip_norm: adam.gradClip ?? ADAM_DEFAULTS.gradClip,
    };
    const ignored = FAMILIES[this.family].ignoredAdam.filter((k) => k !== "learning_rate" && adamParams[k as keyof typeof adamParams] !== DEFAULT_ADAM_WIRE[k as keyof typeof DEFAULT_ADAM_WIRE]);
    if (ignored.length > 0) this.warn("adam", `tinker server (${this.family}) ignores adam_params ${ignored.join(", ")} (set here to ${ignored.map((k) => adamParams[k as keyof typeof adamParams]).join(", ")}); its own optimizer settings apply`);
    const r = await this.sequenced((seqId) => this.client.submit<{ metrics?: Record<string, number> }>("optim_step", { model_id: this.modelId, seq_id: seqId, adam_params: adamParams, type: "optim_step" }, "OptimStep"));
    this.version++;
    return reduceChunkMetrics([{ metrics: r.metrics ?? {}, datums: 1 }]);
  }

  /** A sampling client at the current weights (they are exported for sampling on its first call). */
  samplingClient(): SamplingClient {
    const version = this.version;
    const session = (): Promise<string> => {
      if (this.sampler?.version !== version) {
        const entry = { version, ready: this.openSamplingSession(version) };
        // A failed export is not remembered: the next sample tries again (under a new name: SkyRL refuses a reused one).
        entry.ready.catch(() => {
          if (this.sampler === entry) this.sampler = undefined;
        });
        this.sampler = entry;
      }
      return this.sampler.ready;
    };
    return {
      sample: async (promptTokens: number[], options: SampleOptions): Promise<SampledSequence[]> => {
        const sessionId = await session();
        const seqId = this.sampleSeqs.get(sessionId) ?? 0; // per sampling session from 0, as the SDK's SamplingClient
        this.sampleSeqs.set(sessionId, seqId + 1);
        const sendStrings = this.options.sendStopStrings ?? FAMILIES[this.family].stopStrings;
        const useStrings = sendStrings && options.stopStrings !== undefined && options.stopStrings.length > 0;
        const stop = useStrings ? options.stopStrings : options.stop;
        const body = {
          sampling_session_id: sessionId,
          seq_id: seqId,
          num_samples: options.n,
          prompt: { chunks: [{ type: "encoded_text", tokens: promptTokens }] },
          sampling_params: { max_tokens: options.maxTokens, temperature: options.temperature, seed: options.seed, stop: stop ?? null, top_k: -1, top_p: 1 },
          type: "sample",
        };
        const send = async () => parseFuture(await this.client.send("asample", { body }), "asample");
        const r = await this.client.result<WireSampleResponse>(await send(), {
          type: "Sample",
          accept: this.wire === "protobuf" ? PROTO_CONTENT_TYPE : undefined,
          decode: decodeSampleResponse,
          resubmit: send,
        });
        return r.sequences.map((s, i) => {
          // Zeros in place of missing logprobs would make every importance ratio exp(lp − 0): refuse instead.
          if (!s.logprobs || s.logprobs.length !== s.tokens.length) {
            throw new TinkerApiError(200, "asample", `sequence ${i}: ${s.logprobs ? `${s.logprobs.length} logprobs for ${s.tokens.length} tokens` : "no logprobs"} — RL needs the sampler's token logprobs`);
          }
          return { tokens: s.tokens, logprobs: s.logprobs, stopReason: s.stop_reason === "stop" ? ("stop" as const) : ("length" as const) };
        });
      },
    };
  }

  private async openSamplingSession(version: number): Promise<string> {
    const saved = await this.sequenced((seqId) =>
      this.client.submit<{ path: string }>("save_weights_for_sampler", { model_id: this.modelId, path: `sampler-v${version}-${++this.samplerExports}`, seq_id: seqId, type: "save_weights_for_sampler" }, "SaveWeightsForSampler"),
    );
    const r = await this.client.call<{ sampling_session_id: string }>("create_sampling_session", {
      session_id: this.client.sessionId,
      sampling_session_seq_id: this.counters.sampling++,
      model_path: saved.path,
      type: "create_sampling_session",
    });
    return r.sampling_session_id;
  }

  /** Saves weights + optimizer state on the server and writes the pointer `dir/tinker.json`. @throws TinkerApiError */
  async save(dir: string): Promise<void> {
    const name = `ckpt-${process.pid}-${Date.now().toString(36)}-${++saveCounter}`;
    const r = await this.sequenced((seqId) => this.client.submit<{ path: string }>("save_weights", { model_id: this.modelId, path: name, seq_id: seqId, type: "save_weights" }, "SaveWeights"));
    const pointer: TinkerCheckpointPointer = { baseUrl: this.client.baseUrl, baseModel: this.options.baseModel, modelId: this.modelId, path: r.path };
    mkdirSync(dir, { recursive: true });
    const file = join(dir, "tinker.json");
    writeFileSync(`${file}.tmp`, JSON.stringify(pointer, null, 2));
    renameSync(`${file}.tmp`, file);
  }

  /**
   * Loads the weights and optimizer state `dir/tinker.json` points at. A model that has already received training
   * requests is replaced by a fresh one first (SkyRL refuses a second load on one model; the SDK loads only right
   * after `create_model`, `seq_id` 1).
   * @throws Error naming the file when it is missing or malformed; TinkerApiError when the server refuses the load
   */
  async load(dir: string): Promise<void> {
    const file = join(dir, "tinker.json");
    if (!existsSync(file)) throw new Error(`checkpoint ${dir}: missing tinker.json (not saved by a Tinker backend)`);
    let pointer: TinkerCheckpointPointer;
    try {
      pointer = JSON.parse(readFileSync(file, "utf8")) as TinkerCheckpointPointer;
    } catch (e) {
      throw new Error(`checkpoint ${file}: not valid JSON (${(e as Error).message})`);
    }
    if (typeof pointer.path !== "string" || !pointer.path.startsWith("tinker://")) throw new Error(`checkpoint ${file}: "path" must be a tinker:// path, got ${JSON.stringify(pointer.path)}`);
    await this.queue;
    if (this.seq > 1) {
      // The replaced model stays on the server until the session ends (SkyRL unloads a session's models 300 s after
      // its last heartbeat); unload_model is not sent: verl-tinker does not serve it.
      this.modelId = await TinkerBackend.createModel(this.client, this.client.sessionId!, this.counters, this.options);
      this.seq = 1;
      this.sampler = undefined;
    }
    await this.sequenced((seqId) => this.client.submit("load_weights", { model_id: this.modelId, path: pointer.path, seq_id: seqId, optimizer: true, type: "load_weights" }, "LoadWeights"));
    this.version++;
  }

  /** Stops the session heartbeats. */
  close(): void {
    this.client.close();
    if (this.family === "verl-tinker") verlModels.delete(this.client.baseUrl);
  }
}

/** The SDK's `AdamParams` defaults (`types/optim_step_request.py`): what a server that ignores a field applies. */
const DEFAULT_ADAM_WIRE = { learning_rate: 1e-4, beta1: 0.9, beta2: 0.95, eps: 1e-12, weight_decay: 0, grad_clip_norm: 0 };

function parseFuture(res: { body: Uint8Array }, path: string): WireFuture {
  const text = new TextDecoder().decode(res.body);
  try {
    const f = JSON.parse(text) as WireFuture;
    if (typeof f.request_id !== "string") throw new Error("no request_id");
    return f;
  } catch (e) {
    throw new TinkerApiError(200, path, `expected a future {request_id}, got ${text.slice(0, 200)} (${(e as Error).message})`);
  }
}

/** The per-datum `logprobs` of an output, checked against the request. @throws Error on a count or length mismatch */
function outputLogprobs(out: WireForwardBackwardOutput, part: WireDatum[], path: string): number[][] {
  if (out.loss_fn_outputs.length !== part.length) throw new Error(`tinker ${path}: ${out.loss_fn_outputs.length} outputs for ${part.length} datums`);
  return out.loss_fn_outputs.map((o, i) => {
    const lp = o.logprobs?.data;
    const n = part[i].loss_fn_inputs.target_tokens.data.length;
    if (!lp || lp.length !== n) throw new Error(`tinker ${path}: datum ${i}: ${lp ? `${lp.length} logprobs` : "no logprobs"} for ${n} target tokens`);
    return lp;
  });
}

/**
 * The metrics of a batch split into several `forward_backward` requests, combined by each name's reduction suffix
 * as the SDK does (`lib/chunked_fwdbwd_helpers.py` `_metrics_reduction`): `:sum` added, `:min`/`:max`, `:mean`
 * weighted by the datums of each request; SkyRL's `:last` takes the last; other suffixes are dropped; a name without
 * a suffix is a mean. Names come back without their suffix (`loss:sum` → `loss`).
 */
export function reduceChunkMetrics(parts: ReadonlyArray<{ metrics: Record<string, number>; datums: number }>): Metrics {
  const out: Metrics = {};
  if (parts.length === 0) return out;
  for (const key of Object.keys(parts[0].metrics)) {
    if (!parts.every((p) => typeof p.metrics[key] === "number")) continue;
    const at = key.lastIndexOf(":");
    const [name, reduction] = at < 0 ? [key, "mean"] : [key.slice(0, at), key.slice(at + 1)];
    const values = parts.map((p) => p.metrics[key]);
    if (reduction === "sum") out[name] = values.reduce((a, b) => a + b, 0);
    else if (reduction === "min") out[name] = Math.min(...values);
    else if (reduction === "max") out[name] = Math.max(...values);
    else if (reduction === "last") out[name] = values[values.length - 1];
    else if (reduction === "mean") {
      const n = parts.reduce((a, p) => a + p.datums, 0);
      out[name] = n > 0 ? parts.reduce((a, p, i) => a + values[i] * p.datums, 0) / n : 0;
    }
  }
  return out;
}
