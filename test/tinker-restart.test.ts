/**
 * A long run over the Tinker API survives what long runs meet: the server dies mid-run (the run stops with the
 * reason; `--resume` on a restarted server continues from the last `tinker://` checkpoint, and the metrics equal an
 * uninterrupted run's), and a response lost in transit (the retry carries the same `seq_id` and idempotency key, so
 * the server answers the first request's future instead of applying the update twice).
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { TinkerBackend } from "../src/policy/tinker/backend.ts";
import { listen, type RunningServer } from "../src/http/server.ts";
import { trainerApp } from "../src/serve/trainer.ts";
import { resolveConfig } from "../src/train/config.ts";
import { SMOKE_OVERRIDES, searchRecipe } from "../src/envs/index.ts";
import { applyOverrides } from "../src/train/configFile.ts";
import { silentReporter, type Reporter } from "../src/train/reporter.ts";
import { runExperiment } from "../src/train/runner.ts";
import { setupExperiment } from "../src/train/setup.ts";

const root = mkdtempSync(join(tmpdir(), "arl-tinker-restart-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const base = resolveConfig(applyOverrides({}, {
  ...SMOKE_OVERRIDES, "run.dir": root, "rl.steps": "4", "run.checkpointEvery": "1",
  "policy.backend": "tinker", "policy.tinker.baseModel": "arl/init", "policy.tinker.retryForMs": "1500",
}));
const s = setupExperiment(base, searchRecipe);
const serve = (dir: string, port?: number, hook?: (app: ReturnType<typeof trainerApp>) => void): Promise<RunningServer> => {
  const app = trainerApp({ baseModels: [{ name: "arl/init", gpt: s.gpt, tokenizer: s.tokenizer, seed: base.run.seed }], dir: join(root, dir), longPollMs: 500 });
  hook?.(app);
  return listen(app, { port });
};
const withUrl = (name: string, url: string) => ({ ...base, run: { ...base.run, name }, policy: { ...base.policy, tinker: { ...base.policy.tinker, baseUrl: url } } });
const metricsOf = (name: string) => readFileSync(join(root, name, "metrics.jsonl"), "utf8").trim().split("\n").map((l) => JSON.parse(l) as Record<string, number>);

describe("a run over the Tinker API when the server restarts", () => {
  it("stops with the reason, resumes from the last tinker:// checkpoint on the restarted server, and ends as an uninterrupted run", async () => {
    const straight = await serve("served-straight");
    try {
      await runExperiment(withUrl("straight", straight.url), searchRecipe, silentReporter, { overwrite: true });
    } finally {
      await straight.close();
    }

    const first = await serve("served");
    const port = Number(new URL(first.url).port);
    // The server process dies after RL step 2 (connections cut, nothing flushed).
    const crashAfterStep2: Reporter = {
      log: () => {},
      bar: (label) => ({
        update: (n: number) => {
          if (label.startsWith("RL") && n === 2) {
            first.app.server.close();
            first.app.server.closeAllConnections();
          }
        },
        stop: () => {},
      }),
    };
    const config = withUrl("restarted", first.url);
    await expect(runExperiment(config, searchRecipe, crashAfterStep2, { overwrite: true })).rejects.toThrow(/tinker .*no response.*ECONNREFUSED|tinker .*no response/);

    const second = await serve("served", port); // same --dir: the saved weights outlive the process
    try {
      await runExperiment(config, searchRecipe, silentReporter, { overwrite: false, resume: true });
    } finally {
      await second.close();
    }
    const [a, b] = [metricsOf("straight"), metricsOf("restarted")];
    expect(b.map((m) => m.step)).toEqual(a.map((m) => m.step));
    for (const [i, m] of a.entries()) {
      for (const [k, v] of Object.entries(m)) {
        if (typeof v !== "number" || /time|_ms$|wall|sec/.test(k)) continue;
        expect(Math.abs(b[i][k] - v), `step ${m.step} ${k}`).toBeLessThanOrEqual(1e-6 * Math.max(1, Math.abs(v)));
      }
    }
  }, 240_000);
});

describe("a response lost in transit", () => {
  it("is retried with the same seq_id and idempotency key, and the update is applied once", async () => {
    let dropped = 0;
    let optimSteps = 0;
    const srv = await serve("served-lost", undefined, (app) =>
      app.addHook("onSend", async (req, _reply, payload) => {
        if (req.url.endsWith("/optim_step")) {
          optimSteps++;
          if (dropped === 0) {
            dropped++;
            req.raw.socket.destroy(); // the server accepted it; the client never hears back
          }
        }
        return payload;
      }),
    );
    try {
      const be = await TinkerBackend.create({ baseUrl: srv.url, baseModel: "arl/init", backoffMs: 20 });
      const datum = { modelInput: [5, 6, 7], targetTokens: [6, 7, 8], weights: [1, 1, 1] };
      await be.forwardBackward([datum], "cross_entropy");
      const before = await be.computeLogprobs([datum]);
      const m = await be.optimStep({ learningRate: 1e-2 });
      expect(m.step).toBe(1); // one Adam step, not two
      expect(optimSteps).toBe(2); // the lost answer and its retry…
      const after = await be.computeLogprobs([datum]);
      expect(after[0]).not.toEqual(before[0]); // …and the weights moved once
      be.close();
    } finally {
      await srv.close();
    }
  }, 60_000);
});

describe("arl serve trainer answers retries and failures as the SDK expects", () => {
  it("gives a training request repeated with its seq_id (a new idempotency key) the first one's future; a failed request is a 200 RequestFailedResponse", async () => {
    const srv = await serve("served-seq");
    const post = async (path: string, body: unknown, key: string) => {
      const res = await fetch(`${srv.url}/api/v1/${path}`, { method: "POST", headers: { "content-type": "application/json", "x-idempotency-key": key }, body: JSON.stringify(body) });
      return { status: res.status, json: (await res.json()) as Record<string, unknown> };
    };
    const wait = async (id: unknown) => (await post("retrieve_future", { request_id: id }, `poll-${String(id)}`)).json;
    try {
      const session = (await post("create_session", { tags: [], user_metadata: {}, sdk_version: "0.25.0", type: "create_session" }, "k1")).json.session_id;
      const created = (await post("create_model", { session_id: session, model_seq_id: 0, base_model: "arl/init", lora_config: { rank: 8 }, type: "create_model" }, "k2")).json;
      // create_model sent again (the SDK's execute_with_retries makes a new key) → the same model, not a second one
      expect((await post("create_model", { session_id: session, model_seq_id: 0, base_model: "arl/init", lora_config: { rank: 8 }, type: "create_model" }, "k3")).json.model_id).toBe(created.model_id);
      const model_id = created.model_id;
      const optim = { model_id, seq_id: 1, adam_params: { learning_rate: 0.01, beta1: 0.9, beta2: 0.95, eps: 1e-12, weight_decay: 0, grad_clip_norm: 0 }, type: "optim_step" };
      const a = (await post("optim_step", optim, "k4")).json;
      const b = (await post("optim_step", optim, "k5")).json;
      expect(b.request_id).toBe(a.request_id);
      // (an optim_step before any forward_backward has no gradients: a failed request, as a 200 body)
      const noGrads = await wait(a.request_id);
      expect(Object.keys(noGrads).sort()).toEqual(["category", "error"]);
      expect((await post("optim_step", { ...optim, seq_id: 0 }, "k6")).status).toBe(400);
      // A request that fails while it runs: its checkpoint files were damaged after saving.
      const saved = (await wait((await post("save_weights", { model_id, path: "ckpt", seq_id: 2, type: "save_weights" }, "k7")).json.request_id)) as { path: string };
      const { readdirSync, writeFileSync } = await import("node:fs");
      const dir = join(root, "served-seq", String(model_id), "weights", "ckpt");
      for (const f of readdirSync(dir)) if (f.endsWith(".bin") || f.endsWith(".safetensors")) writeFileSync(join(dir, f), "damaged");
      const load = (await post("load_weights", { model_id, path: saved.path, seq_id: 3, optimizer: true, type: "load_weights" }, "k8")).json;
      const res = await fetch(`${srv.url}/api/v1/retrieve_future`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ request_id: load.request_id }) });
      expect(res.status).toBe(200);
      const failed = (await res.json()) as { error: string; category: string };
      expect(failed.category).toBe("server");
      expect(failed.error).toMatch(/checkpoint|checksum|ckpt/i);
    } finally {
      await srv.close();
    }
  }, 60_000);
});
