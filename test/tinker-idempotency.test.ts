/**
 * Issue 29 part 5, through real HTTP on 127.0.0.1: `arl serve trainer`'s replays answer only the request they were
 * given for. An `X-Idempotency-Key` (what the Tinker SDK sends, `src/tinker/_client.py:107` @ d595dc2) reused with a
 * different request — body, model or path — is a 422, as the IETF idempotency-key draft ("Error Scenarios") and
 * Stripe (`idempotency_error`) answer; the same request gets the stored answer. A `seq_id` / `model_seq_id` /
 * `sampling_session_seq_id` reused with another request is a 409, SkyRL's rule (`skyrl/tinker/api.py:362-408`), and a
 * request that is invalid (an unknown base model) is refused before any replay.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EmbeddedBackend } from "../src/policy/embedded/backend.ts";
import { listen, type RunningServer } from "../src/http/server.ts";
import { trainerApp } from "../src/serve/trainer.ts";
import { resolveConfig } from "../src/train/config.ts";
import { SMOKE_OVERRIDES, searchRecipe } from "../src/envs/index.ts";
import { applyOverrides } from "../src/train/configFile.ts";
import { setupExperiment } from "../src/train/setup.ts";

const root = mkdtempSync(join(tmpdir(), "arl-tinker-idem-"));
const config = resolveConfig(applyOverrides({}, SMOKE_OVERRIDES));
const s = setupExperiment(config, searchRecipe);
let server: RunningServer;

beforeAll(async () => {
  // A base with a checkpoint: create_model reads it from disk, so a repeat can arrive while the first is running.
  const ckpt = join(root, "base");
  const be = await EmbeddedBackend.create(s.gpt, 0);
  await be.save(ckpt);
  be.dispose();
  server = await listen(
    trainerApp({
      baseModels: [
        { name: "arl/init", gpt: s.gpt, tokenizer: s.tokenizer, seed: 0 },
        { name: "arl/ckpt", gpt: s.gpt, tokenizer: s.tokenizer, seed: 0, checkpoint: ckpt },
      ],
      dir: join(root, "served"),
    }),
  );
}, 60_000);
afterAll(async () => {
  await server?.close();
  rmSync(root, { recursive: true, force: true });
});

const post = async (path: string, body: unknown, key?: string) => {
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (key) headers["x-idempotency-key"] = key;
  const res = await fetch(`${server.url}/api/v1/${path}`, { method: "POST", headers, body: typeof body === "string" ? body : JSON.stringify(body) });
  return { status: res.status, json: (await res.json()) as Record<string, unknown> };
};

describe("an idempotency key", () => {
  it("with the same request gets the first answer; with another body, model or path it is a 422 naming the first request", async () => {
    const a = await post("create_model", { base_model: "arl/init" }, "m1");
    expect(a.status).toBe(200);
    // The same request again (keys in another order, other spacing: the same JSON) → the same model, not a second one.
    const again = await post("create_model", '{ "base_model" :"arl/init" }', "m1");
    expect(again).toEqual(a);
    // The tester's case: an unknown base model under a used key is not the earlier model.
    const unknown = await post("create_model", { base_model: "no/such-model" }, "m1");
    expect(unknown.status).toBe(422);
    expect(String(unknown.json.error)).toMatch(/x-idempotency-key "m1" was already used for another request \(POST \/api\/v1\/create_model with a different body\)/);
    const modelA = String(a.json.model_id);
    const modelB = String((await post("create_model", { base_model: "arl/init" }, "m2")).json.model_id);

    const optim = (model_id: string, learning_rate: number) => ({ model_id, adam_params: { learning_rate }, type: "optim_step" });
    const first = await post("optim_step", optim(modelA, 1e-3), "k1");
    expect(first.status).toBe(200);
    expect(await post("optim_step", optim(modelA, 1e-3), "k1")).toEqual(first);
    // The same JSON with its keys in another order is the same request.
    expect(await post("optim_step", `{"type":"optim_step","adam_params":{"learning_rate":0.001},"model_id":"${modelA}"}`, "k1")).toEqual(first);
    for (const [body, what] of [
      [optim(modelA, 0.5), "another learning rate"],
      [optim(modelB, 1e-3), "another model"],
    ] as const) {
      const r = await post("optim_step", body, "k1");
      expect(r.status, what).toBe(422);
      expect(String(r.json.error), what).toMatch(/"k1" was already used for another request \(POST \/api\/v1\/optim_step with a different body\): a retry must repeat its request exactly; send a new key for a new request/);
    }
    const otherPath = await post("save_weights", { model_id: modelA, path: "x" }, "k1");
    expect(otherPath.status).toBe(422);
    expect(String(otherPath.json.error)).toMatch(/"k1" was already used for another request \(POST \/api\/v1\/optim_step\)/);
    // A request that failed keeps nothing under its key: corrected, it runs.
    expect((await post("create_model", { base_model: "no/such-model" }, "m3")).status).toBe(400);
    const fixed = await post("create_model", { base_model: "arl/init" }, "m3");
    expect(fixed.status).toBe(200);
    expect([modelA, modelB]).not.toContain(fixed.json.model_id);
  });

  it("sent again while the first request is still being handled gets that request's answer (it runs once)", async () => {
    const answers = await Promise.all(Array.from({ length: 6 }, () => post("create_model", { base_model: "arl/ckpt" }, "c1")));
    for (const r of answers) expect(r.status).toBe(200);
    expect(new Set(answers.map((r) => r.json.model_id)).size).toBe(1);
  });
});

describe("a seq id reused with another request", () => {
  it("is a 409 (SkyRL's rule), the same request gets the first answer, and an invalid request is refused before any replay", async () => {
    const session = String((await post("create_session", { tags: [], sdk_version: "0.25.0" })).json.session_id);
    const create = (base_model: string, rank = 8) => post("create_model", { session_id: session, model_seq_id: 0, base_model, lora_config: { rank } });
    const a = await create("arl/init");
    expect(a.status).toBe(200);
    expect((await create("arl/init")).json.model_id).toBe(a.json.model_id); // a retry (the SDK's retries use new keys)
    const unknown = await create("no/such-model");
    expect(unknown.status).toBe(400);
    expect(String(unknown.json.error)).toMatch(/base_model: unknown "no\/such-model"/);
    const other = await create("arl/init", 16);
    expect(other.status).toBe(409);
    expect(String(other.json.error)).toMatch(/model_seq_id 0 of session \S+ was already used for another request \(create_model of base_model "arl\/init", lora rank 8\): a retry must repeat its request exactly/);

    const model_id = String(a.json.model_id);
    const step = (learning_rate: number) => post("optim_step", { model_id, seq_id: 1, adam_params: { learning_rate } });
    const first = await step(1e-3);
    expect(first.status).toBe(200);
    expect((await step(1e-3)).json.request_id).toBe(first.json.request_id);
    const lr = await step(0.5);
    expect(lr.status).toBe(409);
    expect(String(lr.json.error)).toMatch(/seq_id 1 of model \S+ was already used for another request \(optim_step\)/);
    const fb = await post("forward_backward", {
      model_id,
      seq_id: 1,
      forward_backward_input: { loss_fn: "cross_entropy", data: [{ model_input: { chunks: [{ tokens: [5, 6] }] }, loss_fn_inputs: { target_tokens: { data: [6, 7] } } }] },
    });
    expect(fb.status).toBe(409);

    const sampling = (body: Record<string, unknown>) => post("create_sampling_session", { session_id: session, sampling_session_seq_id: 0, ...body });
    const sa = await sampling({ base_model: "arl/init" });
    expect(sa.status).toBe(200);
    expect((await sampling({ base_model: "arl/init" })).json).toEqual(sa.json);
    expect((await sampling({ base_model: "no/such-model" })).status).toBe(400);
    expect((await sampling({ base_model: "arl/ckpt" })).status).toBe(409);
  });
});
