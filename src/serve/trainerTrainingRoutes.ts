/**
 * `arl serve trainer`'s training and weight routes: `forward_backward` (JSON or the SDK's protobuf body),
 * `forward`, `optim_step`, `save_weights`, `save_weights_for_sampler`, `load_weights`, `weights_info`. Losses are
 * sums over tokens (Tinker's convention); a NaN/±Inf loss, logprob or update is a failed request that changes nothing.
 */
import { existsSync, mkdirSync } from "node:fs";
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import { NonFiniteError, firstNonFinite } from "../core/finite.ts";
import { ProtoDecodeError, decodeForwardBackwardRequest } from "../policy/tinker/proto.ts";
import { AdamParamsWire, ForwardBackwardRequest, OptimStepRequest, type TensorData, type WireForwardBackwardOutput } from "../policy/tinker/wire.ts";
import { HttpError, parseBody } from "../http/server.ts";
import { quoteShort } from "../http/limits.ts";
import { lossConfigOf, toDatum } from "./trainer-inputs.ts";
import { idField, parseTinkerPath, tensor, type TrainerState } from "./trainerState.ts";

/** Adds the training and weight routes to `app`. */
export function addTrainingRoutes(app: FastifyInstance, t: TrainerState): void {
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
    const m = t.model(body.model_id);
    const input = body.forward_backward_input;
    const withBackward = endpointBackward && !body.forward_only;
    const datums = input.data.map((d, i) => toDatum(d, i, input.loss_fn, m.base.gpt));
    const config = lossConfigOf(input);
    const what = withBackward ? "forward_backward" : "forward";
    return t.once(m, body.seq_id, what, { loss_fn: input.loss_fn, config, datums }, () => t.submit(() =>
      t.train(m, async (): Promise<WireForwardBackwardOutput> => {
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
    const m = t.model(body.model_id);
    // Bounded by the schema (wire.ts `AdamParamsWire`); an update that still comes out non-finite is refused by the
    // backend (requireFinite), which keeps the weights and Adam state it had.
    const a: AdamParamsWire = body.adam_params;
    return t.once(m, body.seq_id, "optim_step", a, () => t.submit(() =>
      t.train(m, async () => {
        const adam = { learningRate: a.learning_rate, beta1: a.beta1, beta2: a.beta2, eps: a.eps, weightDecay: a.weight_decay, gradClip: a.grad_clip_norm };
        const metrics = await m.backend.optimStep(adam, { requireFinite: true });
        m.version++;
        return { type: "optim_step", metrics };
      }),
    ));
  });

  // ---- weights ----
  const saveBody = z.object({
    model_id: z.string(),
    path: idField.nullish(),
    seq_id: z.number().int().nullish(),
    sampling_session_seq_id: z.number().int().min(0).nullish(),
  }).passthrough();
  const saveWeights = (kind: "weights" | "sampler_weights") => async (req: { body: unknown }) => {
    const body = parseBody(saveBody, req.body);
    const m = t.model(body.model_id);
    // save_weights_for_sampler without a path (the SDK's save_weights_and_get_sampling_client): an unnamed
    // snapshot, answered with a sampling session on it instead of a path.
    const ephemeral = body.path == null;
    if (ephemeral && kind === "weights") throw new HttpError(400, "path: required (a name of [A-Za-z0-9_-])");
    if (ephemeral && body.sampling_session_seq_id == null) throw new HttpError(400, "give path, or sampling_session_seq_id for an unnamed sampler snapshot");
    const name = body.path ?? `unnamed-${t.nextId("s")}`;
    return t.once(m, body.seq_id, kind === "weights" ? "save_weights" : "save_weights_for_sampler", { path: body.path ?? null, sampling_session_seq_id: body.sampling_session_seq_id ?? null }, () => t.submit(() =>
      t.train(m, async () => {
        const dir = t.weightsDir(m.id, kind, name);
        mkdirSync(dir, { recursive: true });
        await m.backend.save(dir);
        if (kind === "sampler_weights") m.samplerVersions.set(name, m.version);
        const path = `tinker://${m.id}/${kind}/${name}`;
        if (kind === "weights") return { type: "save_weights", path };
        if (!ephemeral) return { type: "save_weights_for_sampler", path };
        const sampling_session_id = t.nextId("sampling");
        t.samplingSessions.set(sampling_session_id, { modelPath: path });
        return { type: "save_weights_for_sampler", path: null, sampling_session_id };
      }),
    ));
  };
  app.post("/api/v1/save_weights", saveWeights("weights"));
  app.post("/api/v1/save_weights_for_sampler", saveWeights("sampler_weights"));

  app.post("/api/v1/load_weights", async (req) => {
    const body = parseBody(
      z.object({ model_id: z.string({ error: "model_id: required (this server has no create-via-load: client/config says create_model_via_load_weights false)" }), path: z.string(), optimizer: z.boolean().default(true), seq_id: z.number().int().nullish() }).passthrough(),
      req.body,
    );
    const m = t.model(body.model_id);
    const p = parseTinkerPath(body.path, "path");
    const dir = t.weightsDir(p.modelId, p.kind as "weights", p.name);
    if (!existsSync(dir)) throw new HttpError(404, `path: no saved weights at ${quoteShort(body.path)}`);
    return t.once(m, body.seq_id, "load_weights", { path: body.path, optimizer: body.optimizer }, () => t.submit(() =>
      t.train(m, async () => {
        await m.backend.load(dir, { optimizer: body.optimizer });
        m.version++;
        return { type: "load_weights", path: body.path, model_id: m.id };
      }),
    ));
  });

  // The SDK asks before create_training_client_from_state (rest_client.py:203-214, `WeightsInfoResponse`).
  app.post("/api/v1/weights_info", async (req) => {
    const body = parseBody(z.object({ tinker_path: z.string() }).passthrough(), req.body);
    const p = parseTinkerPath(body.tinker_path, "tinker_path");
    const m = t.models.get(p.modelId);
    const dir = t.weightsDir(p.modelId, p.kind as "weights", p.name);
    if (!existsSync(dir)) throw new HttpError(404, `tinker_path: no saved weights at ${quoteShort(body.tinker_path)}`);
    if (!m) throw new HttpError(404, `tinker_path: model ${p.modelId} is not loaded on this server (its base model is unknown after a restart; load it into a new model with create_model + load_weights)`);
    // Every model here is a full fine-tune; the SDK builds a LoraConfig from lora_rank, so the rank it asked for is kept.
    return { base_model: m.base.name, is_lora: true, lora_rank: m.loraRank ?? 1, train_unembed: true, train_mlp: true, train_attn: true };
  });
}
