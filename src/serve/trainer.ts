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
 *
 * The server's state and shared rules: `./trainerState.ts`; routes: `./trainerModelRoutes.ts` (sessions, models),
 * `./trainerTrainingRoutes.ts` (forward/backward, optimizer, weights), `./trainerSamplingRoutes.ts` (sampling); the
 * futures' long poll is here.
 */
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import { PROTO_CONTENT_TYPE, encodeForwardBackwardOutput, encodeSampleResponse } from "../policy/tinker/proto.ts";
import type { WireForwardBackwardOutput, WireSampleResponse } from "../policy/tinker/wire.ts";
import { HttpError, createApp, parseBody } from "../http/server.ts";
import { quoteShort } from "../http/limits.ts";
import { installIdempotency } from "./idempotency.ts";
import { addModelRoutes } from "./trainerModelRoutes.ts";
import { addSamplingRoutes } from "./trainerSamplingRoutes.ts";
import { addTrainingRoutes } from "./trainerTrainingRoutes.ts";
import { TrainerState, type TrainerServerOptions } from "./trainerState.ts";

/**
 * Builds the trainer app (not yet listening).
 * @throws Error when no base model is given or two share a name
 */
export function trainerApp(options: TrainerServerOptions): FastifyInstance {
  const t = new TrainerState(options);
  const longPollMs = options.longPollMs ?? 20_000;
  const app = createApp(options);
  // SDK 0.25's forward_backward body (proto.ts); decoded in the handler so a malformed one is a clear 400.
  app.addContentTypeParser(PROTO_CONTENT_TYPE, { parseAs: "buffer" }, (_req, body, done) => done(null, body));
  // Idempotency (`X-Idempotency-Key`, SDK `_client.py`): the same request sent again with the same key gets the
  // first answer back instead of running twice; the key with another request is a 422 (./idempotency.ts). Polls and
  // heartbeats are not replayed (each poll must see the future's state).
  installIdempotency(app, { exclude: ["/api/v1/retrieve_future", "/api/v1/session_heartbeat", "/api/v1/client/config"] });
  addModelRoutes(app, t);
  addTrainingRoutes(app, t);
  addSamplingRoutes(app, t);

  // ---- futures ----
  app.post("/api/v1/retrieve_future", async (req, reply) => {
    const { request_id } = parseBody(z.object({ request_id: z.string() }).passthrough(), req.body);
    const f = t.futures.get(request_id);
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
    setTimeout(() => t.futures.delete(request_id), 600_000).unref();
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
    for (const m of t.models.values()) await m.queue;
  });
  return app;
}
