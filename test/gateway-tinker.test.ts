/**
 * `arl serve gateway --policy.backend tinker`: the gateway in front of a Tinker server's sampler. Against
 * `arl serve trainer` serving a checkpoint as its base model (the embedded backend behind the Tinker API, as the real
 * SDK speaks it — test/tinker-sdk-replay.test.ts), a chat call through the real `openai` client records the same
 * completion tokens as the gateway serving that checkpoint in process, logprobs to float noise.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { afterAll, describe, expect, it } from "vitest";
import { loadGatewayPolicy } from "../src/cli/gatewayPolicy.ts";
import { travelRecipe } from "../src/envs/travel/index.ts";
import type { EnvRecipe } from "../src/env/recipe.ts";
import { startGateway } from "../src/gateway/server.ts";
import { EmbeddedBackend } from "../src/policy/embedded/backend.ts";
import { withRecipeDefaults } from "../src/train/recipeDefaults.ts";
import { listen } from "../src/http/server.ts";
import { trainerApp } from "../src/serve/trainer.ts";
import { savePolicy } from "../src/train/checkpoint.ts";
import { ConfigError, resolveConfig } from "../src/train/config.ts";
import { applyOverrides } from "../src/train/configFile.ts";
import { setupExperiment } from "../src/train/setup.ts";

const root = mkdtempSync(join(tmpdir(), "arl-gw-tinker-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe("arl serve gateway on a Tinker sampler", () => {
  it("records the same completion as the in-process gateway serving the same checkpoint", async () => {
    // A small hermes-vocabulary policy on disk (the travel smoke shape, seeded weights).
    const recipe = travelRecipe as EnvRecipe;
    const config = resolveConfig(applyOverrides(withRecipeDefaults({}, recipe, true), { "env.protocol": "hermes" }));
    const s = setupExperiment(config, recipe);
    const ckpt = join(root, "ckpt");
    const b = await EmbeddedBackend.create(s.gpt, 3);
    await savePolicy(ckpt, b, s.tokenizer, s.gpt);
    b.dispose();

    const server = await listen(trainerApp({ baseModels: [{ name: "arl/gw-test", gpt: s.gpt, tokenizer: s.tokenizer, checkpoint: ckpt, seed: 1 }], dir: join(root, "served"), longPollMs: 500 }));
    const embedded = await loadGatewayPolicy({ checkpoint: ckpt, maxTokens: 12 });
    const tinker = await loadGatewayPolicy({ checkpoint: ckpt, maxTokens: 12 }, { "policy.backend": "tinker", "policy.tinker.baseUrl": server.url, "policy.tinker.baseModel": "arl/gw-test" });
    const gateways = await Promise.all([embedded, tinker].map((p) => startGateway({ policy: p.policy, seed: 5, openOnDemand: true })));
    try {
      expect(tinker.policy.name).toBe("arl/gw-test");
      const records = [];
      for (const g of gateways) {
        const client = new OpenAI({ baseURL: g.baseUrl("r1"), apiKey: "x", maxRetries: 0 });
        const r = await client.chat.completions.create({ model: "any", messages: [{ role: "user", content: "Book a flight to Paris." }], seed: 11, max_tokens: 12 });
        expect(r.choices[0].message.role).toBe("assistant");
        records.push(g.registry.snapshot("r1").calls[0]);
      }
      const [a, t] = records;
      expect(t.promptTokens).toEqual(a.promptTokens);
      expect(t.completionTokens).toEqual(a.completionTokens);
      expect(t.completionTokens.length).toBeGreaterThan(0);
      t.logprobs.forEach((lp, i) => expect(lp).toBeCloseTo(a.logprobs[i], 4));
    } finally {
      for (const g of gateways) await g.close();
      embedded.dispose();
      tinker.dispose();
      await server.close();
    }
  }, 120_000);

  it("needs the served model's tokenizer: --policy.tinker.tokenizer or --checkpoint, else a ConfigError naming the field", async () => {
    const err = await loadGatewayPolicy({}, { "policy.backend": "tinker", "policy.tinker.baseUrl": "http://127.0.0.1:9", "policy.tinker.baseModel": "m" }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConfigError);
    expect(String((err as Error).message)).toContain("policy.tinker.tokenizer: with --policy.backend tinker the gateway renders messages with the served model's tokenizer");
    await expect(loadGatewayPolicy({ smoke: true }, { "policy.backend": "tinker" })).rejects.toThrow("--smoke: with --policy.backend tinker");
  });
});
