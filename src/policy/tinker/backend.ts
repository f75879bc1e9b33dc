/**
 * `TinkerBackend`: the `TrainingBackend` interface over the Tinker training API, so the RL loop trains a model on
 * hosted Tinker, SkyRL's Tinker server, TuFT, verl-tinker or `arl serve trainer` without changing a line.
 * Mapping (Tinker Python SDK's `TrainingClient` / `SamplingClient`):
 * - `forwardBackward` → `forward_backward` (our normalisation folded into the data: `toWireDatums`), metrics with
 *   their `:sum`/`:mean` suffixes dropped (`loss:sum` → `loss`);
 * - `computeLogprobs` → `forward` (the `logprobs` output);
 * - `optimStep` → `optim_step` with every Adam field explicit (our defaults, not the server's);
 * - `samplingClient` → after an update, `save_weights_for_sampler` + `create_sampling_session` (once per weights
 *   version, lazily on the first sample), then `asample` per call;
 * - `save`/`load` → `save_weights`/`load_weights`, with a pointer file `tinker.json` in the checkpoint folder.
 */
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Datum, Metrics } from "../../core/types.ts";
import { ADAM_DEFAULTS } from "../embedded/optim.ts";
import type {
  AdamParams,
  ForwardBackwardResult,
  LossConfig,
  LossFnName,
  SampledSequence,
  SampleOptions,
  SamplingClient,
  TrainingBackend,
} from "../types.ts";
import { TinkerClient, type TinkerClientOptions } from "./client.ts";
import { ppoLossConfig, toWireDatums, type WireForwardBackwardOutput, type WireSampleResponse } from "./wire.ts";

/** Options of a `TinkerBackend`. */
export interface TinkerBackendOptions extends TinkerClientOptions {
  /** The base model to fine-tune (e.g. `Qwen/Qwen3-8B`; for `arl serve trainer`, one of its base-model names). */
  baseModel: string;
  /** LoRA rank (hosted Tinker trains LoRA adapters; `arl serve trainer` accepts and ignores it). */
  loraRank?: number;
  /** Send `stopStrings` to the server (default true); false = stop ids only, the caller cuts at the strings (SkyRL). */
  sendStopStrings?: boolean;
  /** Datums per `forward_backward` request (default 128, the SDK's chunk size); larger batches are split. */
  maxDatumsPerRequest?: number;
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

/** A model trained through the Tinker API. Create with `TinkerBackend.create`. */
export class TinkerBackend implements TrainingBackend {
  private version = 0;
  private sampler: { version: number; ready: Promise<string> } | undefined;
  private sampleSeq = 0;

  private constructor(
    readonly client: TinkerClient,
    readonly modelId: string,
    private readonly options: TinkerBackendOptions,
  ) {}

  /**
   * Opens a session and creates the model (`create_model` with `lora_config.rank`).
   * @throws TinkerApiError when the server is unreachable, the key is wrong or the base model is unknown
   */
  static async create(options: TinkerBackendOptions): Promise<TinkerBackend> {
    const client = new TinkerClient(options);
    const session = await client.createSession();
    const created = await client.call<{ request_id: string; model_id?: string }>("create_model", {
      session_id: session,
      base_model: options.baseModel,
      lora_config: { rank: options.loraRank ?? 32 },
      type: "create_model",
    });
    const done = await client.result<{ model_id?: string }>(created);
    const modelId = done.model_id ?? created.model_id;
    if (!modelId) throw new Error(`tinker create_model: the server returned no model_id (${JSON.stringify(done)})`);
    return new TinkerBackend(client, modelId, options);
  }

  async forwardBackward(datums: Datum[], lossFn: LossFnName, config: LossConfig = {}): Promise<ForwardBackwardResult> {
    if (datums.length === 0) throw new Error("forwardBackward: empty batch");
    // Normalise over the whole batch first, then split into requests: the gradients of the parts add up.
    const wire = toWireDatums(datums, lossFn, config);
    const loss_fn_config = lossFn === "ppo" ? ppoLossConfig(config) : undefined;
    const max = this.options.maxDatumsPerRequest ?? 128;
    let loss = 0;
    const seen = new Set<string>();
    const weighted: Metrics = {};
    let tokens = 0;
    const logprobs: number[][] = [];
    for (let start = 0; start < wire.length; start += max) {
      const part = wire.slice(start, start + max);
      const out = await this.client.submit<WireForwardBackwardOutput>("forward_backward", {
        model_id: this.modelId,
        forward_backward_input: { data: part, loss_fn: lossFn, loss_fn_config },
      });
      const m = stripSuffixes(out.metrics);
      loss += m.loss ?? 0;
      const partTokens = m.tokens ?? part.length;
      tokens += partTokens;
      for (const [k, v] of Object.entries(m)) {
        if (k === "loss" || k === "tokens") continue;
        weighted[k] = (weighted[k] ?? 0) + v * partTokens;
        seen.add(k);
      }
      for (const o of out.loss_fn_outputs) logprobs.push(o.logprobs.data);
    }
    const metrics: Metrics = { tokens };
    for (const k of seen) metrics[k] = tokens > 0 ? weighted[k] / tokens : 0;
    return { loss, metrics, logprobs };
  }

  async computeLogprobs(datums: Datum[]): Promise<number[][]> {
    const wire = toWireDatums(datums, "cross_entropy", { normalization: "sum" });
    const out: number[][] = [];
    const max = this.options.maxDatumsPerRequest ?? 128;
    for (let start = 0; start < wire.length; start += max) {
      const r = await this.client.submit<WireForwardBackwardOutput>("forward", {
        model_id: this.modelId,
        forward_backward_input: { data: wire.slice(start, start + max), loss_fn: "cross_entropy" },
      });
      for (const o of r.loss_fn_outputs) out.push(o.logprobs.data);
    }
    return out;
  }

  async optimStep(adam: AdamParams): Promise<Metrics> {
    const r = await this.client.submit<{ metrics?: Record<string, number> }>("optim_step", {
      model_id: this.modelId,
      adam_params: {
        learning_rate: adam.learningRate,
        beta1: adam.beta1 ?? ADAM_DEFAULTS.beta1,
        beta2: adam.beta2 ?? ADAM_DEFAULTS.beta2,
        eps: adam.eps ?? ADAM_DEFAULTS.eps,
        weight_decay: adam.weightDecay ?? ADAM_DEFAULTS.weightDecay,
        grad_clip_norm: adam.gradClip ?? ADAM_DEFAULTS.gradClip,
      },
      type: "optim_step",
    });
    this.version++;
    return stripSuffixes(r.metrics ?? {});
  }

  /** A sampling client at the current weights (they are exported for sampling on its first call). */
  samplingClient(): SamplingClient {
    const version = this.version;
    const session = (): Promise<string> => {
      if (this.sampler?.version !== version) this.sampler = { version, ready: this.openSamplingSession(version) };
      return this.sampler.ready;
    };
    return {
      sample: async (promptTokens: number[], options: SampleOptions): Promise<SampledSequence[]> => {
        const sessionId = await session();
        const useStrings = (this.options.sendStopStrings ?? true) && options.stopStrings !== undefined && options.stopStrings.length > 0;
        const stop = useStrings ? options.stopStrings : options.stop;
        const r = await this.client.submit<WireSampleResponse>("asample", {
          sampling_session_id: sessionId,
          seq_id: this.sampleSeq++,
          num_samples: options.n,
          prompt: { chunks: [{ type: "encoded_text", tokens: promptTokens }] },
          sampling_params: { max_tokens: options.maxTokens, temperature: options.temperature, seed: options.seed, stop: stop ?? null },
          type: "sample",
        });
        return r.sequences.map((s) => ({
          tokens: s.tokens,
          logprobs: s.logprobs ?? s.tokens.map(() => 0),
          stopReason: s.stop_reason === "stop" ? "stop" : "length",
        }));
      },
    };
  }

  private async openSamplingSession(version: number): Promise<string> {
    const saved = await this.client.submit<{ path: string }>("save_weights_for_sampler", {
      model_id: this.modelId,
      path: `sampler-v${version}`,
      type: "save_weights_for_sampler",
    });
    const r = await this.client.call<{ sampling_session_id: string }>("create_sampling_session", {
      session_id: this.client.sessionId,
      sampling_session_seq_id: version,
      model_path: saved.path,
      type: "create_sampling_session",
    });
    return r.sampling_session_id;
  }

  /** Saves weights + optimizer state on the server and writes the pointer `dir/tinker.json`. @throws TinkerApiError */
  async save(dir: string): Promise<void> {
    const name = `ckpt-${process.pid}-${Date.now().toString(36)}-${++saveCounter}`;
    const r = await this.client.submit<{ path: string }>("save_weights", { model_id: this.modelId, path: name, type: "save_weights" });
    const pointer: TinkerCheckpointPointer = { baseUrl: this.client.baseUrl, baseModel: this.options.baseModel, modelId: this.modelId, path: r.path };
    mkdirSync(dir, { recursive: true });
    const file = join(dir, "tinker.json");
    writeFileSync(`${file}.tmp`, JSON.stringify(pointer, null, 2));
    renameSync(`${file}.tmp`, file);
  }

  /** Loads the weights `dir/tinker.json` points at. @throws Error naming the file when it is missing or malformed */
  async load(dir: string): Promise<void> {
    const file = join(dir, "tinker.json");
    if (!existsSync(file)) throw new Error(`checkpoint ${dir}: missing tinker.json (not saved by a Tinker backend)`);
    let pointer: TinkerCheckpointPointer;
    try {
      pointer = JSON.parse(readFileSync(file, "utf8")) as TinkerCheckpointPointer;
    } catch (e) {
      throw new Error(`checkpoint ${file}: not valid JSON (${(e as Error).message})`);
    }
    if (typeof pointer.path !== "string") throw new Error(`checkpoint ${file}: missing "path" (tinker://…)`);
    await this.client.submit("load_weights", { model_id: this.modelId, path: pointer.path, type: "load_weights" });
    this.version++;
  }

  /** Stops the session heartbeats. */
  close(): void {
    this.client.close();
  }
}

/** `{"loss:sum": 1, "kl:mean": 2}` → `{loss: 1, kl: 2}`. */
function stripSuffixes(metrics: Record<string, number>): Metrics {
  const out: Metrics = {};
  for (const [k, v] of Object.entries(metrics)) if (typeof v === "number") out[k.replace(/:(sum|mean|max|min)$/, "")] = v;
  return out;
}
