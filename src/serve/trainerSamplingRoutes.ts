/**
 * `arl serve trainer`'s sampling routes: `create_sampling_session`, `samplers/:id`, `asample`. Sampling at a model's
 * current weights uses its live engine (batched across concurrent requests, waiting for the training request that
 * writes them); sampling at an older `sampler_weights` path or a base model uses a frozen copy loaded from disk.
 */
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import type { Tokenizer } from "../core/tokenizer.ts";
import { stopCut } from "../rollout/agent.ts";
import { SampleRequest, modelInputTokens, type WireSampleResponse } from "../policy/tinker/wire.ts";
import { HttpError, parseBody } from "../http/server.ts";
import { quoteShort } from "../http/limits.ts";
import { parseTinkerPath, type SamplerTarget, type TrainerState } from "./trainerState.ts";

/** Adds the sampling routes to `app`. */
export function addSamplingRoutes(app: FastifyInstance, t: TrainerState): void {
  app.post("/api/v1/create_sampling_session", async (req) => {
    const body = parseBody(
      z.object({ session_id: z.string(), sampling_session_seq_id: z.number().int().default(0), base_model: z.string().nullish(), model_path: z.string().nullish() }).passthrough(),
      req.body,
    );
    if (!t.sessions.has(body.session_id)) throw new HttpError(404, `session ${quoteShort(body.session_id)} not found`);
    if (body.base_model == null && body.model_path == null) throw new HttpError(400, "give base_model or model_path");
    // model_path wins when both are given (the SDK: base_model "is inferred from model_path, if provided"). Checked
    // here, before a repeat is answered, so a session on nothing is never opened.
    if (body.model_path != null) t.model(parseTinkerPath(body.model_path, "model_path").modelId);
    else t.base(body.base_model!);
    const target = body.model_path != null ? { modelPath: body.model_path } : { baseModel: body.base_model! };
    const seqKey = `sampling:${body.session_id}:${body.sampling_session_seq_id}`;
    const asked = `a sampling session on ${target.modelPath ?? `base_model ${JSON.stringify(target.baseModel)}`}`;
    const repeat = t.bySeq.repeat(seqKey, asked, `sampling_session_seq_id ${body.sampling_session_seq_id} of session ${body.session_id}`);
    if (repeat !== undefined) return repeat;
    const sampling_session_id = t.nextId("sampling");
    t.samplingSessions.set(sampling_session_id, target);
    const answer = { type: "create_sampling_session", sampling_session_id };
    t.bySeq.keep(seqKey, asked, answer, asked);
    return answer;
  });


  // `SamplingClient.get_tokenizer()` asks which base model a sampling session samples (rest_client.py:1108).
  app.get("/api/v1/samplers/:id", async (req) => {
    const { id } = req.params as { id: string };
    const sess = t.samplingSessions.get(id);
    if (!sess) throw new HttpError(404, `sampler ${quoteShort(id)} not found`);
    const base = sess.baseModel ?? t.models.get(parseTinkerPath(sess.modelPath!, "model_path").modelId)?.base.name;
    return { sampler_id: id, base_model: base ?? null, model_path: sess.modelPath ?? null };
  });

  app.post("/api/v1/asample", async (req) => {
    const body = parseBody(SampleRequest, req.body);
    const extra = req.body as { topk_prompt_logprobs?: unknown };
    if (body.prompt_logprobs === true || (typeof extra.topk_prompt_logprobs === "number" && extra.topk_prompt_logprobs > 0)) {
      throw new HttpError(400, "prompt_logprobs / topk_prompt_logprobs: not supported by this server (score a sequence with forward_backward forward_only instead)");
    }
    let target: SamplerTarget;
    if (body.sampling_session_id) {
      const s = t.samplingSessions.get(body.sampling_session_id);
      if (!s) throw new HttpError(404, `sampling session ${quoteShort(body.sampling_session_id)} not found`);
      target = s;
    } else {
      target = { modelPath: body.model_path ?? undefined, baseModel: body.base_model ?? undefined };
    }
    const sp = body.sampling_params;
    if (sp.top_k !== -1 || sp.top_p !== 1) throw new HttpError(400, "sampling_params: top_k and top_p are not supported by this server (leave -1 / 1)");
    const { client, base, live } = await t.samplerFor(target);
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
    if (!live) return t.submit(run, "sample");
    const m = live;
    return t.submit(async () => {
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
