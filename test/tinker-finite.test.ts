/**
 * Issue 29 part 4, through real HTTP on 127.0.0.1: `arl serve trainer` never lets an update corrupt a model and never
 * answers a non-finite number as a success — Adam hyper-parameters outside what a trainer accepts are a 400 naming
 * the field and its range (Tinker SDK `src/tinker/types/optim_step_request.py` @ d595dc2 sets no bounds; PyTorch
 * `torch/optim/adam.py` @ dc80ccd: 0 ≤ lr, 0 ≤ eps, 0 ≤ β < 1, 0 ≤ weight_decay); a NaN/Inf loss is a failed request
 * that adds no gradient; a checkpoint holding NaN is not loaded; an update that would leave NaN/Inf in the weights or
 * Adam moments is refused with the weights kept; every `TensorData` must agree with its shape and dtype.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NonFiniteError } from "../src/core/finite.ts";
import { EmbeddedBackend } from "../src/policy/embedded/backend.ts";
import { loadCheckpoint, saveCheckpoint } from "../src/policy/embedded/checkpoint.ts";
import { PROTO_CONTENT_TYPE, encodeForwardBackwardRequest } from "../src/policy/tinker/proto.ts";
import { listen, type RunningServer } from "../src/http/server.ts";
import { trainerApp } from "../src/serve/trainer.ts";
import { resolveConfig } from "../src/train/config.ts";
import { SMOKE_OVERRIDES, searchRecipe } from "../src/envs/index.ts";
import { applyOverrides } from "../src/train/configFile.ts";
import { setupExperiment } from "../src/train/setup.ts";

const root = mkdtempSync(join(tmpdir(), "arl-tinker-finite-"));
const config = resolveConfig(applyOverrides({}, SMOKE_OVERRIDES));
const s = setupExperiment(config, searchRecipe);
let server: RunningServer;

beforeAll(async () => {
  server = await listen(trainerApp({ baseModels: [{ name: "arl/init", gpt: s.gpt, tokenizer: s.tokenizer, seed: 0 }], dir: join(root, "served"), longPollMs: 2000 }));
}, 60_000);
afterAll(async () => {
  await server?.close();
  rmSync(root, { recursive: true, force: true });
});

const post = async (path: string, body: unknown, contentType = "application/json") => {
  const res = await fetch(`${server.url}/api/v1/${path}`, {
    method: "POST",
    headers: { "content-type": contentType },
    body: body instanceof Uint8Array ? new Blob([body as Uint8Array<ArrayBuffer>]) : typeof body === "string" ? body : JSON.stringify(body),
  });
  return { status: res.status, json: (await res.json()) as Record<string, unknown> };
};
/** Submits and waits for the future's answer (a result, or `{error, category}`). */
const run = async (path: string, body: unknown): Promise<Record<string, unknown>> => {
  const f = await post(path, body);
  expect(f.status, JSON.stringify(f.json)).toBe(200);
  for (;;) {
    const r = (await post("retrieve_future", { request_id: f.json.request_id })).json;
    if (r.type !== "try_again") return r;
  }
};
const newModel = async () => String((await post("create_model", { base_model: "arl/init" })).json.model_id);
const tokens = [5, 6, 7, 8];
const targets = [6, 7, 8, 9];
const sft = (model_id: string) => ({
  model_id,
  forward_backward_input: { loss_fn: "cross_entropy", data: [{ model_input: { chunks: [{ tokens }] }, loss_fn_inputs: { target_tokens: { data: targets, dtype: "int64" } } }] },
});
const logprobsOf = async (model_id: string) => {
  const r = await run("forward", { model_id, forward_input: sft(model_id).forward_backward_input });
  return (r.loss_fn_outputs as Array<{ logprobs: { data: number[] } }>)[0].logprobs.data;
};

describe("optim_step's Adam parameters", () => {
  it("outside what a trainer accepts (the tester's lr 1 + weight_decay 1e30 included) are a 400 naming the field and its range, and change nothing", async () => {
    const model_id = await newModel();
    expect((await run("forward_backward", sft(model_id))).type).toBeUndefined(); // a result, not a failure
    const before = await logprobsOf(model_id);
    const cases: Array<[string, RegExp]> = [
      ['{"learning_rate": 1, "weight_decay": 1e30}', /adam_params\.weight_decay: learning_rate × weight_decay is 1e\+30, expected at most 1/],
      ['{"learning_rate": 2}', /adam_params\.learning_rate: expected a finite number in \[0, 1\], got 2/],
      ['{"learning_rate": 1e400}', /adam_params\.learning_rate: expected a finite number in \[0, 1\], got Infinity/],
      ['{"learning_rate": null}', /adam_params\.learning_rate: expected a finite number in \[0, 1\], got null/],
      ['{"beta1": 1}', /adam_params\.beta1: expected a finite number in \[0, 1\)/],
      ['{"beta2": 0.999999999}', /adam_params\.beta2: expected a finite number in \[0, 1\) \(at most 0\.99999994: the update runs in float32\), got 0\.999999999/],
      ['{"eps": 0}', /adam_params\.eps: expected a finite number in \[1e-30, 1\], got 0/],
      ['{"eps": 1e-50}', /adam_params\.eps: expected a finite number in \[1e-30, 1\], got 1e-50/],
      ['{"weight_decay": -1}', /adam_params\.weight_decay: expected a finite number in \[0, 1\/learning_rate\], got -1/],
      ['{"grad_clip_norm": -1}', /adam_params\.grad_clip_norm: expected a finite number in \[0, ∞\) \(0 = no clipping\), got -1/],
      ['{"betas": [0.9, 0.99]}', /adam_params: unknown field\(s\) betas \(AdamParams has learning_rate, beta1, beta2, eps, weight_decay, grad_clip_norm\)/],
    ];
    for (const [adam, reason] of cases) {
      const r = await post("optim_step", `{"model_id": "${model_id}", "adam_params": ${adam}}`);
      expect(r.status, adam).toBe(400);
      expect(String(r.json.error), adam).toMatch(reason);
    }
    expect(await logprobsOf(model_id)).toEqual(before);
    // The gradients of the forward_backward are still there: a valid step applies them, with finite metrics.
    const ok = await run("optim_step", { model_id, adam_params: { learning_rate: 1e-3 } });
    expect(ok.type).toBe("optim_step");
    expect(Number.isFinite((ok.metrics as Record<string, number>).grad_norm)).toBe(true);
    expect(await logprobsOf(model_id)).not.toEqual(before);
  }, 30_000);
});

describe("a non-finite loss or logprob", () => {
  it("is a failed request, never a success with null; its gradients are not accumulated and the weights stay as they were", async () => {
    const model_id = await newModel();
    const before = await logprobsOf(model_id);
    // Sampler logprobs of −1e6 are within the input bounds, but the importance ratio exp(lp − (−1e6)) overflows.
    const rl = {
      model_id,
      forward_backward_input: {
        loss_fn: "importance_sampling",
        data: [{ model_input: { chunks: [{ tokens }] }, loss_fn_inputs: { target_tokens: { data: targets }, logprobs: { data: [-1e6, -1e6, -1e6, -1e6] }, advantages: { data: [1, 1, 1, 1] } } }],
      },
    };
    const r = await run("forward_backward", rl);
    expect(r.category).toBe("user");
    expect(String(r.error)).toMatch(/forward_backward: \S+ is -?(NaN|Infinity) \(not finite\); its gradients were not accumulated/);
    expect(JSON.stringify(r)).not.toContain("null");
    // Nothing was accumulated: an optim_step has no gradients to apply, and the weights did not move.
    const step = await run("optim_step", { model_id, adam_params: { learning_rate: 1e-3 } });
    expect(String(step.error)).toMatch(/no accumulated gradients/);
    expect(await logprobsOf(model_id)).toEqual(before);
  }, 30_000);

  it("in a checkpoint: load_weights refuses it naming the tensor, and the model keeps its weights", async () => {
    const model_id = await newModel();
    const saved = await run("save_weights", { model_id, path: "good" });
    const dir = join(root, "served", model_id, "weights", "good");
    // The same checkpoint with one NaN weight, its manifest consistent (a file made elsewhere, not damaged in transit).
    const { meta, tensors } = await loadCheckpoint(dir);
    tensors.get("params.wte")![3] = Number.NaN;
    await saveCheckpoint(join(root, "served", model_id, "weights", "nan"), meta, [...tensors]);
    await run("forward_backward", sft(model_id));
    await run("optim_step", { model_id, adam_params: { learning_rate: 1e-2 } });
    const trained = await logprobsOf(model_id);
    const r = await run("load_weights", { model_id, path: String(saved.path).replace(/good$/, "nan") });
    expect(r.category).toBe("user");
    expect(String(r.error)).toMatch(/params\.wte\[3\] is NaN \(not finite\); not loaded/);
    expect(await logprobsOf(model_id)).toEqual(trained);
  }, 30_000);
});

describe("an update that would leave NaN/Inf in the weights or Adam moments (the embedded backend's optimizer step)", () => {
  it("is refused: weights, moments and step count unchanged, the offending tensors named; training continues", async () => {
    const be = await EmbeddedBackend.create(s.gpt, 0);
    const datum = { modelInput: tokens, targetTokens: targets, weights: [1, 1, 1, 1] };
    const before = await be.computeLogprobs([datum]);
    // lr · weight_decay = 1e40 overflows float32: the decay term p·lr·wd is ±Inf/NaN in every matrix.
    const absurd = { learningRate: 1e10, weightDecay: 1e30 };
    await be.forwardBackward([datum], "cross_entropy");
    const err = await be.optimStep(absurd, { requireFinite: true }).then(() => undefined, (e: unknown) => e);
    expect(err).toBeInstanceOf(NonFiniteError);
    expect((err as NonFiniteError).what).toContain("params.wte");
    expect((err as Error).message).toMatch(/optim_step: the update would make params\.\S+ .*non-finite .*refused — weights and Adam state unchanged/);
    expect(be.step).toBe(0);
    expect(await be.computeLogprobs([datum])).toEqual(before);
    // Without requireFinite (the local RL loop): the same refusal, reported as skipped.
    await be.forwardBackward([datum], "cross_entropy");
    expect(await be.optimStep(absurd)).toMatchObject({ skipped: 1, step: 0 });
    expect(await be.computeLogprobs([datum])).toEqual(before);
    // The Adam moments were not touched either: a sane step from here equals one on a fresh backend.
    const fresh = await EmbeddedBackend.create(s.gpt, 0);
    for (const b of [be, fresh]) {
      await b.forwardBackward([datum], "cross_entropy");
      expect((await b.optimStep({ learningRate: 1e-2 })).step).toBe(1);
    }
    expect(await be.computeLogprobs([datum])).toEqual(await fresh.computeLogprobs([datum]));
    be.dispose();
    fresh.dispose();
  }, 30_000);
});

describe("TensorData", () => {
  it("must agree with its shape and dtype, be dense and finite, at every entry point (JSON and protobuf)", async () => {
    const model_id = await newModel();
    const fb = (inputs: Record<string, unknown>, input = tokens) => ({
      model_id,
      forward_backward_input: { loss_fn: "cross_entropy", data: [{ model_input: { chunks: [{ tokens: input }] }, loss_fn_inputs: inputs }] },
    });
    // The tester's case: 8 tokens, 8 target values, shape [7].
    const eight = await post("forward_backward", fb({ target_tokens: { data: [6, 7, 8, 9, 10, 11, 12, 13], shape: [7], dtype: "int64" } }, [5, 6, 7, 8, 9, 10, 11, 12]));
    expect(eight.status).toBe(400);
    expect(String(eight.json.error)).toMatch(/loss_fn_inputs\.target_tokens\.shape: shape \[7\] holds 7 values, data has 8/);
    const cases: Array<[Record<string, unknown>, RegExp]> = [
      [{ target_tokens: { data: targets, dtype: "int64", shape: [2, 2] } }, /target_tokens\.shape: \[2, 2\], expected \[4\]/],
      [{ target_tokens: { data: [6, 7.5, 8, 9], dtype: "int64" } }, /target_tokens\.data\.1: 7\.5 is not an integer \(dtype int64\)/],
      [{ target_tokens: { data: targets }, weights: { data: [1, null, 1, 1], dtype: "float32" } }, /weights\.data\.1: expected a finite number, got null/],
      [{ target_tokens: { data: targets }, weights: { data: [1, 1e39, 1, 1], dtype: "float32" } }, /weights\.data\.1: 1e\+39 is not a float32 value/],
      [{ target_tokens: { data: targets }, weights: { data: [1], dtype: "float32", shape: [4], sparse_crow_indices: [0, 1], sparse_col_indices: [0] } }, /weights\.sparse_crow_indices: sparse \(CSR\) tensors are not supported/],
    ];
    for (const [inputs, reason] of cases) {
      const r = await post("forward_backward", fb(inputs));
      expect(r.status, JSON.stringify(inputs)).toBe(400);
      expect(String(r.json.error), JSON.stringify(inputs)).toMatch(reason);
    }
    // The SDK's protobuf body: a tensor whose shape disagrees with its data is refused the same way.
    const bytes = encodeForwardBackwardRequest({
      model_id,
      seq_id: 1,
      forward_backward_input: { loss_fn: "cross_entropy", data: [{ model_input: { chunks: [{ tokens }] }, loss_fn_inputs: { target_tokens: { data: targets, dtype: "int64", shape: [3] } } }] },
    });
    const proto = await post("forward_backward", bytes, PROTO_CONTENT_TYPE);
    expect(proto.status).toBe(400);
    expect(String(proto.json.error)).toMatch(/target_tokens\.shape: shape \[3\] holds 3 values, data has 4/);
    // Model input chunks and sample prompts take token ids: integers only.
    const chunk = await post("forward_backward", { model_id, forward_backward_input: { loss_fn: "cross_entropy", data: [{ model_input: { chunks: [{ tokens: [5, 6.5] }] }, loss_fn_inputs: { target_tokens: { data: [6, 7] } } }] } });
    expect(chunk.status).toBe(400);
    expect(String(chunk.json.error)).toMatch(/model_input\.chunks\.0\.tokens\.1/);
    const prompt = await post("asample", { base_model: "arl/init", prompt: { chunks: [{ tokens: [5, 1e300] }] }, sampling_params: { max_tokens: 2 } });
    expect(prompt.status).toBe(400);
    expect(String(prompt.json.error)).toMatch(/prompt\.chunks\.0\.tokens\.1/);
  }, 30_000);
});
