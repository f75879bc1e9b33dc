/**
 * What `arl serve trainer` keeps between requests (src/serve/trainer.ts): sessions, models with their embedded
 * backends, futures, sampling sessions and frozen sampler engines — and the rules every route shares: training
 * requests of a model run one at a time after the sampling requests reading its live weights (`train`), each
 * asynchronous request is a future (`submit`), and a `seq_id` sent again gets the first answer (`once`).
 */
import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { join, resolve } from "node:path";
import { z } from "zod";
import { NonFiniteError, firstNonFinite } from "../core/finite.ts";
import { EmbeddedBackend } from "../policy/embedded/backend.ts";
import type { GPTConfig } from "../policy/embedded/gpt.ts";
import type { Tokenizer } from "../core/tokenizer.ts";
import type { SamplingClient } from "../core/sampling.ts";
import type { TensorData } from "../policy/tinker/wire.ts";
import { HttpError, type ServeOptions } from "../http/server.ts";
import { quoteShort } from "../http/limits.ts";
import { SeqLedger } from "./idempotency.ts";

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

/** Model ids and weight names: what is safe in a path. */
const ID = /^[A-Za-z0-9_-]{1,128}$/;

/** A request field holding an id or weight name (`ID`). */
export const idField = z.string().regex(ID, "expected 1-128 characters of [A-Za-z0-9_-]");

/** What an asynchronous endpoint answers (`UntypedAPIFuture`). */
export interface FutureRef {
  request_id: string;
  future_id: string;
  status: string;
  model_id?: string;
}

/** An asynchronous request's state, read by `retrieve_future`. */
export interface Future {
  /** Results the SDK takes as protobuf when it asks (`Accept: application/x-protobuf`). */
  kind?: "fwdbwd" | "sample";
  done: boolean;
  result?: unknown;
  error?: { error: string; category: "user" | "server" };
  waiters: Array<() => void>;
}

/** A model being trained: its backend, weight versions and the queue its training requests wait in. */
export interface ServedModel {
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

/** Where a sampler samples: a saved (or live) sampler path, or a base model. */
export type SamplerTarget = { modelPath?: string; baseModel?: string };

/** A 1-D float32 tensor of `data`. */
export const tensor = (data: number[]): TensorData => ({ data, dtype: "float32", shape: [data.length] });

/** `tinker://<model_id>/<kind>/<name>` → its parts. @throws HttpError 400 on another form or unsafe names */
export function parseTinkerPath(path: string, field: string): { modelId: string; kind: string; name: string } {
  const m = /^tinker:\/\/([^/]+)\/(?:(weights|sampler_weights)\/)?([^/]+)$/.exec(path);
  if (!m || !ID.test(m[1]) || !ID.test(m[3])) {
    throw new HttpError(400, `${field}: expected tinker://<model_id>/weights/<name> or tinker://<model_id>/sampler_weights/<name>, got ${quoteShort(path)}`);
  }
  return { modelId: m[1], kind: m[2] ?? "sampler_weights", name: m[3] };
}

/** The trainer server's state and the rules its routes share (see the module doc). */
export class TrainerState {
  readonly bases = new Map<string, TrainerBaseModel>();
  /** Folder of saved weights. */
  readonly root: string;
  readonly sessions = new Map<string, { heartbeats: number; samplingSessions: number }>();
  readonly samplingSessions = new Map<string, SamplerTarget>();
  readonly models = new Map<string, ServedModel>();
  readonly futures = new Map<string, Future>();
  /** `session:model_seq_id` → create_model's answer, `session:sampling_session_seq_id` → create_sampling_session's. */
  readonly bySeq = new SeqLedger<unknown>();
  /** Base or saved sampler weights, one engine cached per base name. */
  private readonly frozen = new Map<string, { key: string; backend: EmbeddedBackend }>();
  private counter = 0;
  /** A per-process prefix keeps ids unique across restarts (weights saved under --dir outlive the process). */
  private readonly process = randomBytes(4).readUInt32LE(0).toString(36).padStart(7, "0");

  /** @throws Error when no base model is given or two share a name */
  constructor(options: TrainerServerOptions) {
    if (options.baseModels.length === 0) throw new Error("serve trainer: at least one base model (--checkpoint or --config)");
    for (const b of options.baseModels) {
      if (this.bases.has(b.name)) throw new Error(`serve trainer: two base models named ${JSON.stringify(b.name)}`);
      this.bases.set(b.name, b);
    }
    this.root = resolve(options.dir ?? join("runs", "serve-trainer"));
  }

  /** A new id: `<prefix>_<process><counter>`. */
  nextId(prefix: string): string {
    return `${prefix}_${this.process}${(++this.counter).toString(36).padStart(6, "0")}`;
  }

  /** A backend of `base`'s shape, loaded from `dir` (default: the base's checkpoint; none: fresh weights). */
  async newBackend(base: TrainerBaseModel, dir = base.checkpoint): Promise<EmbeddedBackend> {
    const backend = await EmbeddedBackend.create(base.gpt, base.seed);
    if (dir) await backend.load(dir);
    return backend;
  }

  /** The base model of that name. @throws HttpError 400 naming the models this server has */
  base(name: string): TrainerBaseModel {
    const base = this.bases.get(name);
    if (!base) throw new HttpError(400, `base_model: unknown ${quoteShort(name)} (this server has: ${[...this.bases.keys()].join(", ")})`);
    return base;
  }

  /**
   * Starts `work` as a future and returns its id. A thrown HttpError or NonFiniteError (a loss, logprob or update
   * that came out NaN/±Inf and was refused) is a user error, anything else a server error. A result holding a
   * NaN/±Inf anywhere fails too: JSON would send it as `null`, which a client takes for a value.
   */
  submit(work: () => Promise<unknown>, kind?: Future["kind"]): FutureRef {
    const id = this.nextId("req");
    const f: Future = { kind, done: false, waiters: [] };
    this.futures.set(id, f);
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
  }

  /**
   * A training request of `m` with its `seq_id`: the first time, `start()` submits it; a repeat of the same request
   * (the client retried after a lost response) gets the same future back.
   * @param what the endpoint, for messages; `request` what the request asks (compared as canonical JSON)
   * @throws HttpError 400 on a seq_id ≤ 0; 409 when the seq_id was used by another request of this model (SkyRL's
   *   rule: `skyrl/tinker/api.py:362-408`, "Training request sequence number was reused")
   */
  once(m: ServedModel, seqId: number | null | undefined, what: string, request: unknown, start: () => FutureRef): FutureRef {
    if (seqId == null) return start();
    if (!Number.isInteger(seqId) || seqId < 1) throw new HttpError(400, `seq_id: expected an integer ≥ 1, got ${seqId}`);
    const seen = m.seqFutures.repeat(String(seqId), [what, request], `seq_id ${seqId} of model ${m.id}`);
    if (seen) return seen;
    const ref = { ...start(), model_id: m.id };
    m.seqFutures.keep(String(seqId), [what, request], ref, what);
    return ref;
  }

  /** The model of that id. @throws HttpError 404 */
  model(id: string): ServedModel {
    const m = this.models.get(id);
    if (!m) throw new HttpError(404, `model ${quoteShort(id)} not found (create it with POST /api/v1/create_model)`);
    return m;
  }

  /** Runs a training request on `m` after the ones before it, once no sampling request reads the live weights. */
  train<T>(m: ServedModel, work: () => Promise<T>): Promise<T> {
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
  }

  /** Folder of a model's saved weights or sampler weights of that name. */
  weightsDir(modelId: string, kind: "weights" | "sampler_weights", name: string): string {
    return join(this.root, modelId, kind, name);
  }

  /**
   * The engine that samples at a path or base model, and the tokenizer/shape it runs; `live` when it is a model's
   * current weights (then sampling waits for its training requests).
   * @throws HttpError 400 on an unknown base model or bad path, 404 on a missing model or weights
   */
  async samplerFor(target: SamplerTarget): Promise<{ client: SamplingClient; base: TrainerBaseModel; live?: ServedModel }> {
    if (target.baseModel !== undefined) {
      const base = this.base(target.baseModel);
      return { client: await this.frozenBackend(base, `base:${base.name}`, base.checkpoint), base };
    }
    const p = parseTinkerPath(target.modelPath!, "model_path");
    const m = this.model(p.modelId);
    if (p.kind === "sampler_weights" && m.samplerVersions.get(p.name) === m.version) return { client: m.backend.samplingClient(), base: m.base, live: m };
    const dir = this.weightsDir(p.modelId, p.kind as "weights", p.name);
    if (!existsSync(dir)) throw new HttpError(404, `model_path: no saved weights at ${quoteShort(target.modelPath!)}`);
    return { client: await this.frozenBackend(m.base, `${p.kind}:${p.modelId}/${p.name}`, dir), base: m.base };
  }

  /** The cached engine of `base` at weights `key` (one per base name: a new key replaces it). */
  private async frozenBackend(base: TrainerBaseModel, key: string, dir: string | undefined): Promise<SamplingClient> {
    const cached = this.frozen.get(base.name);
    if (cached?.key === key) return cached.backend.samplingClient();
    const backend = await this.newBackend(base, dir);
    this.frozen.set(base.name, { key, backend });
    return backend.samplingClient();
  }
}
