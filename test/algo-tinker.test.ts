/**
 * The Tinker client sends every RL loss `tinkerLossFor` maps (src/policy/tinker/losses.ts): `cispo` and `gspo` with
 * absolute ratio bounds, `dro` with `beta`, against fake TuFT and SkyRL servers (test/tinker-fakes.ts, fixtures
 * written from their sources). Field names: the Tinker SDK's `clip_low_threshold` / `clip_high_threshold`
 * (thinking-machines-lab/tinker @ d595dc2ba62a1494aa0f452fe1d0dbb7b321b870 `src/tinker/types/datum.py:31-32`, and
 * `loss_fn_type.py:9-10` for the names `cispo`, `dro`); `beta` for `dro` (Tinker docs "Loss functions / DRO":
 * `loss_fn_config={"beta": 0.05}`; agentscope-ai/TuFT @ 102eefd4cf8fb0241ba656d14df4928f0b2c0c9e
 * `src/tuft/loss_fn/dro.py:28` `loss_fn_config.get("beta", 0.01)`, `cispo.py:28-29` the clip keys); `gspo` on SkyRL
 * (NovaSky-AI/SkyRL @ a9564572eb8e91076be43c1bd5e4615e3de17265 `skyrl/tinker/api.py:610-622`: gspo takes
 * clip_low_threshold, clip_high_threshold).
 */
import { afterAll, describe, expect, it } from "vitest";
import type { Datum } from "../src/core/types.ts";
import { droDatums } from "../src/policy/tinker/losses.ts";
import { TinkerBackend } from "../src/policy/tinker/backend.ts";
import { backendAlgorithmProblem } from "../src/train/backendAlgorithm.ts";
import { loadFixture, startFake, type FakeTinkerServer, type FamilyName } from "./tinker-fakes.ts";

const KEY = "algo-tinker-key";
const servers: FakeTinkerServer[] = [];
afterAll(async () => {
  await Promise.all(servers.map((s) => s.close()));
});

// Two datums, 4 trained tokens (weights 1), sampler logprob −1.5 on them and 0 elsewhere; the fake's policy gives −1.
const RL: Datum[] = [
  { modelInput: [1, 2, 3, 4], targetTokens: [2, 3, 4, 5], weights: [0, 1, 1, 1], logprobs: [0, -1.5, -1.5, -1.5], advantages: [0, 0.5, 0.5, 0.5] },
  { modelInput: [7, 8, 9], targetTokens: [8, 9, 10], weights: [0, 0, 1], logprobs: [0, 0, -1.5], advantages: [0, 0, -1] },
];

async function backendOn(family: FamilyName): Promise<{ be: TinkerBackend; fake: FakeTinkerServer }> {
  const fx = loadFixture(family);
  const fake = await startFake(fx, { apiKey: KEY });
  servers.push(fake);
  const be = await TinkerBackend.create({ baseUrl: fake.url, baseModel: "fake/base", apiKey: fx.auth ? KEY : undefined, backoffMs: 5, retryForMs: 5_000, heartbeatMs: 25, onWarning: () => {} });
  return { be, fake };
}

/** Runs `use` on a client of a fresh fake `family` server, closing the client afterwards. */
async function onBackend(family: FamilyName, use: (on: { be: TinkerBackend; fake: FakeTinkerServer }) => Promise<void>): Promise<void> {
  const on = await backendOn(family);
  try {
    await use(on);
  } finally {
    await on.be.close?.();
  }
}

/**
 * Sends the clipped loss `loss` with clip bounds 0.2 / `clipHigh` and checks the request names the server's loss
 * with absolute ratio bounds: `clip_low_threshold` 1 − 0.2, `clip_high_threshold` 1 + `clipHigh`.
 */
async function expectClipLoss(on: { be: TinkerBackend; fake: FakeTinkerServer }, loss: "cispo" | "gspo", clipHigh: number): Promise<void> {
  await on.be.forwardBackward(RL, loss, { clipLow: 0.2, clipHigh });
  const c = lastInput(on.fake);
  expect(c.loss_fn).toBe(loss);
  expect(c.loss_fn_config?.clip_low_threshold).toBeCloseTo(0.8, 6);
  expect(c.loss_fn_config?.clip_high_threshold).toBeCloseTo(1 + clipHigh, 6);
}

/** The last forward_backward (not forward-only) request's input, as the fake decoded it. */
function lastInput(fake: FakeTinkerServer) {
  const r = fake.records.filter((x) => x.endpoint === "forward_backward" && x.decoded && x.body.forward_only !== true).at(-1);
  expect(r, "a forward_backward request").toBeDefined();
  expect(r!.problems).toEqual([]); // the request satisfies the family's contract
  return r!.body.forward_backward_input as { loss_fn: string; loss_fn_config?: Record<string, number> | null; data: Array<{ loss_fn_inputs: Record<string, { data: number[] }> }> };
}

describe("Tinker client: cispo, dro, gspo", () => {
  it("cispo and dro on TuFT: the server's names with their loss_fn_config", async () => {
    await onBackend("tuft", async ({ be, fake }) => {
      await expectClipLoss({ be, fake }, "cispo", 0.28);

      // dro: β·w·k with token-mean k = 1/Σw = 1/4: 0.05/4 = 0.0125; q at untrained positions = the trainer's logprob
      // there (−1 on the fake), so the server's Σ over every position adds nothing there.
      const fb = await be.forwardBackward(RL, "dro", { droBeta: 0.05 });
      const d = lastInput(fake);
      expect(d.loss_fn).toBe("dro");
      expect(d.loss_fn_config?.beta).toBeCloseTo(0.0125, 9);
      expect(d.data[0].loss_fn_inputs.logprobs.data).toEqual([-1, -1.5, -1.5, -1.5]);
      expect(d.data[1].loss_fn_inputs.logprobs.data).toEqual([-1, -1, -1.5]);
      // Advantages carry w·k as for every RL loss: 0.5/4, −1/4.
      expect(d.data[0].loss_fn_inputs.advantages.data[1]).toBeCloseTo(0.125, 6);
      expect(fb.logprobs).toEqual(RL.map((x) => x.targetTokens.map(() => -1)));
      await expect(be.forwardBackward(RL, "gspo")).rejects.toThrow(/rl\.lossFn: "gspo" needs the server loss "gspo"; this tuft server offers cispo, cross_entropy, dro, importance_sampling, ppo/);
    });
  });

  it("gspo on SkyRL with its clip bounds; dro refused there (SkyRL has none)", async () => {
    await onBackend("skyrl", async (on) => {
      await expectClipLoss(on, "gspo", 0.2);
      await expect(on.be.forwardBackward(RL, "dro")).rejects.toThrow(/skyrl server offers/);
    });
  });

  it("droDatums: β folded with the normalisation; per-token weights that differ are refused", () => {
    const current = RL.map((x) => x.targetTokens.map(() => -2));
    // constant normalisation: k = 1/(constantLength·batch) = 1/(8·2); β' = 0.1·1·k = 0.00625
    const c = droDatums(RL, { droBeta: 0.1, normalization: "constant", constantLength: 8 }, current);
    expect(c.beta).toBeCloseTo(0.00625, 12);
    expect(c.datums[1].logprobs).toEqual([-2, -2, -1.5]);
    // sum: k = 1, weights 0.5 → β' = 0.05·0.5 = 0.025
    const half = RL.map((x) => ({ ...x, weights: x.weights.map((w) => w * 0.5) }));
    expect(droDatums(half, { normalization: "sum" }, current).beta).toBeCloseTo(0.025, 12);
    const mixed = [RL[0], { ...RL[1], weights: [0, 0, 0.5] }];
    expect(() => droDatums(mixed, {}, current)).toThrow(/β is one number per request.*seq-mean-token-mean/);
  });

  it("config: cispo, dro and gspo are accepted with policy.backend tinker (the server family decides at the first update)", () => {
    const rl = { clipLow: 0.2, clipHigh: 0.2, droBeta: 0.05, lossAggMode: "auto" as const, advantage: "grpo" as const };
    for (const lossFn of ["cispo", "dro", "gspo"] as const) expect(backendAlgorithmProblem("tinker", { ...rl, lossFn })).toBeUndefined();
    expect(backendAlgorithmProblem("tinker", { ...rl, lossFn: "ppo", advantage: "gae" })?.field).toBe("advantage");
  });
});

describe("a loss the server lacks is a config error before training (issue-16 review)", () => {
  it("tinkerServerFamily detects the fake TuFT; createBackend and --dry-run refuse gspo there, naming what it offers", async () => {
    const { createBackend, tinkerServerFamily } = await import("../src/train/backends.ts");
    const { resolveConfig, ConfigError } = await import("../src/train/config.ts");
    const { SMOKE_OVERRIDES } = await import("../src/envs/index.ts");
    const { applyOverrides } = await import("../src/train/configFile.ts");
    const { dryRun } = await import("../src/train/dryRun.ts");
    const { gptConfigOf, setupExperiment } = await import("../src/train/setup.ts");
    const { searchRecipe } = await import("../src/envs/index.ts");
    const fx = loadFixture("tuft");
    const fake = await startFake(fx, { apiKey: KEY });
    servers.push(fake);
    process.env.ALGO_TINKER_KEY = KEY;
    const base = { ...SMOKE_OVERRIDES, "policy.backend": "tinker", "policy.tinker.baseUrl": fake.url, "policy.tinker.baseModel": "fake/base", "policy.tinker.apiKeyEnv": "ALGO_TINKER_KEY", "policy.tinker.retryForMs": "2000" };
    const gspo = resolveConfig(applyOverrides({}, { ...base, "rl.lossFn": "gspo" }));
    expect(await tinkerServerFamily(gspo)).toBe("tuft");
    const offers = /rl\.lossFn: "gspo" needs the server loss "gspo"; this tuft server offers cispo, cross_entropy, dro, importance_sampling, ppo/;
    const s = setupExperiment(gspo, searchRecipe);
    await expect(createBackend(gspo, gptConfigOf(gspo, s.tokenizer.vocabSize))).rejects.toThrow(offers);
    await expect(createBackend(gspo, gptConfigOf(gspo, s.tokenizer.vocabSize))).rejects.toBeInstanceOf(ConfigError);
    await expect(dryRun(gspo, searchRecipe)).rejects.toThrow(offers);
    // What TuFT has passes, and the dry run names the family it found.
    const cispo = resolveConfig(applyOverrides({}, { ...base, "rl.lossFn": "cispo", "run.dir": "/tmp/arl-algo-tinker-none" }));
    expect((await dryRun(cispo, searchRecipe)).join("\n")).toMatch(/reachable \(a tuft server; rl\.lossFn cispo is one of its losses\)/);
    // Without RL steps (evaluation, serving) the loss is not needed and not checked.
    const noRl = resolveConfig(applyOverrides({}, { ...base, "rl.lossFn": "gspo", "rl.steps": "0" }));
    const be = await createBackend(noRl, gptConfigOf(noRl, s.tokenizer.vocabSize));
    be instanceof TinkerBackend ? be.close() : undefined;
  });

  it("a named server family is checked from the config alone", () => {
    expect(backendAlgorithmProblem("tinker", { lossFn: "gspo", clipLow: 0.2, clipHigh: 0.2, droBeta: 0.05, lossAggMode: "auto", advantage: "grpo" }, "tuft")).toEqual({
      field: "lossFn",
      message: expect.stringMatching(/"gspo" needs the server loss "gspo"; this tuft server offers/),
    });
    expect(backendAlgorithmProblem("tinker", { lossFn: "gspo", clipLow: 0.2, clipHigh: 0.2, droBeta: 0.05, lossAggMode: "auto", advantage: "grpo" }, "skyrl")).toBeUndefined();
    // dro's β is one number per request: per-token weights that differ cannot be sent (droDatums).
    expect(backendAlgorithmProblem("tinker", { lossFn: "dro", clipLow: 0.2, clipHigh: 0.2, droBeta: 0.05, lossAggMode: "seq-mean-token-mean", advantage: "grpo" }, "tuft")?.field).toBe("lossAggMode");
    expect(backendAlgorithmProblem("tinker", { lossFn: "dro", clipLow: 0.2, clipHigh: 0.2, droBeta: 0.05, lossAggMode: "token-mean", advantage: "grpo" }, "tuft")).toBeUndefined();
  });
});
