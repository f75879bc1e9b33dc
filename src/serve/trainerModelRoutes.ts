/**
 * `arl serve trainer`'s health, capability, session and model routes: `healthz`, `get_server_capabilities`,
 * `create_session`, `session_heartbeat`, `telemetry`, `client/config`, `create_model`, `get_info`, `unload_model`.
 */
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import { HttpError, parseBody } from "../http/server.ts";
import { quoteShort } from "../http/limits.ts";
import { SeqLedger } from "./idempotency.ts";
import type { TrainerState } from "./trainerState.ts";

/** Adds the session and model routes to `app`. */
export function addModelRoutes(app: FastifyInstance, t: TrainerState): void {
  app.get("/api/v1/healthz", async () => ({ status: "ok" }));
  app.get("/api/v1/get_server_capabilities", async () => ({
    supported_models: [...t.bases.keys()].map((model_name) => ({ model_name })),
  }));
  app.post("/api/v1/create_session", async (req) => {
    parseBody(z.object({ tags: z.array(z.string()).default([]), sdk_version: z.string().default("unknown") }).passthrough(), req.body ?? {});
    const session_id = t.nextId("session");
    t.sessions.set(session_id, { heartbeats: 0, samplingSessions: 0 });
    return { type: "create_session", session_id, info_message: null, warning_message: null, error_message: null };
  });
  app.post("/api/v1/session_heartbeat", async (req) => {
    const { session_id } = parseBody(z.object({ session_id: z.string() }).passthrough(), req.body);
    const s = t.sessions.get(session_id);
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
    if (body.session_id != null && !t.sessions.has(body.session_id)) throw new HttpError(404, `session ${quoteShort(body.session_id)} not found`);
    // Checked before a repeat is answered: a request that is invalid now is refused, whatever came before it.
    const base = t.base(body.base_model);
    const seqKey = body.session_id != null && body.model_seq_id != null ? `model:${body.session_id}:${body.model_seq_id}` : undefined;
    const asked = `create_model of base_model ${JSON.stringify(base.name)}, lora rank ${body.lora_config?.rank ?? "none"}`;
    const repeat = seqKey ? t.bySeq.repeat(seqKey, asked, `model_seq_id ${body.model_seq_id} of session ${body.session_id}`) : undefined;
    if (repeat !== undefined) return repeat;
    const id = t.nextId("model");
    const backend = await t.newBackend(base);
    t.models.set(id, {
      id, base, loraRank: body.lora_config?.rank ?? null, backend, version: 0, samplerVersions: new Map(), seqFutures: new SeqLedger(),
      queue: Promise.resolve(), readers: new Set(), writing: null,
    });
    const f = t.submit(async () => ({ type: "create_model", model_id: id }));
    const answer = { ...f, model_id: id, base_model: base.name, lora_config: body.lora_config ?? null, status: "created" };
    if (seqKey) t.bySeq.keep(seqKey, asked, answer, asked);
    return answer;
  });
  app.post("/api/v1/get_info", async (req) => {
    const { model_id } = parseBody(z.object({ model_id: z.string() }).passthrough(), req.body);
    const m = t.model(model_id);
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
    const m = t.model(model_id);
    t.models.delete(model_id);
    return t.submit(async () => {
      await m.queue;
      m.backend.dispose();
      return { type: "unload_model", model_id };
    });
  });
}
