/**
 * `--agent` on a Tinker sampler: the gateway serves the agent from a Tinker API server's sampling client and the
 * updates go over the same API. Against `arl serve trainer` (the embedded backend behind the Tinker API, as the real
 * SDK speaks it — see test/tinker-sdk-replay.test.ts), serving a warm-start checkpoint as its base model, the run
 * reproduces the in-process run from the same checkpoint: the same rollouts, tokens and rewards, metrics to float noise.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { listen } from "../src/http/server.ts";
import { trainerApp } from "../src/serve/trainer.ts";
import { loadPolicy } from "../src/train/checkpoint.ts";
import { runAgentExperiment } from "../src/external/experiment.ts";
import { resolveConfig } from "../src/train/config.ts";
import { SMOKE_OVERRIDES } from "../src/envs/index.ts";
import { applyOverrides } from "../src/train/configFile.ts";
import { searchAgent } from "./agent-helpers.ts";

const root = mkdtempSync(join(tmpdir(), "arl-agent-tinker-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const overrides = { ...SMOKE_OVERRIDES, "policy.contextLength": "512", "rl.steps": "3", "run.dir": root, "rl.learningRate": "0.003" };
const lengthReward = (answer: string) => (answer.length % 5) / 4;

describe("arl train --agent over the Tinker API", () => {
  it("trains the agent on a Tinker server's sampler and model, matching the in-process run from the same warm start", async () => {
    // A warm start recorded and trained in process (its checkpoint is what the server will serve).
    await runAgentExperiment(resolveConfig(applyOverrides({}, { ...overrides, "run.name": "warm", "rl.steps": "0" })), { agent: searchAgent(), overwrite: true });
    const warm = join(root, "warm", "checkpoints", "sft");
    const inProcess = await runAgentExperiment(resolveConfig(applyOverrides({}, { ...overrides, "run.name": "embedded" })), { agent: searchAgent([], lengthReward), overwrite: true, warmStart: warm });

    const p = await loadPolicy(warm);
    const server = await listen(trainerApp({ baseModels: [{ name: "arl/warm-sft", gpt: p.gpt, tokenizer: p.tokenizer, checkpoint: warm, seed: 1 }], dir: join(root, "served"), longPollMs: 500 }));
    try {
      const config = resolveConfig(applyOverrides({}, { ...overrides, "run.name": "tinker", "policy.backend": "tinker", "policy.tinker.baseUrl": server.url, "policy.tinker.baseModel": "arl/warm-sft" }));
      const remote = await runAgentExperiment(config, { agent: searchAgent([], lengthReward), overwrite: true, warmStart: warm });
      expect(remote.steps).toHaveLength(3);
      expect(remote.steps.every((m) => m["train/loss"] !== undefined)).toBe(true); // the server applied each update
      expect(remote.before).toEqual(inProcess.before);
      expect(remote.after).toEqual(inProcess.after);
      const rollouts = (name: string) => readFileSync(join(root, name, "rollouts.jsonl"), "utf8");
      expect(rollouts("tinker")).toBe(rollouts("embedded")); // every rollout: same calls, segments, rewards
      remote.steps.forEach((m, i) => {
        for (const k of ["reward", "rewarded", "dropped", "segments", "datums", "calls", "tool_calls", "hack/response_length"]) expect(m[k], `${i} ${k}`).toBe(inProcess.steps[i][k]);
        expect(m["train/loss"]).toBeCloseTo(inProcess.steps[i]["train/loss"], 5);
      });
      // The final checkpoint is a pointer to the server's weights (tinker.json), not a copy.
      expect(JSON.parse(readFileSync(join(root, "tinker", "checkpoints", "final", "tinker.json"), "utf8"))).toHaveProperty("path");
    } finally {
      await server.close();
    }
  }, 240_000);
});
