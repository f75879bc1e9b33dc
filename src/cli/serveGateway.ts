/**
 * `arl serve gateway`: the OpenAI-compatible training gateway (src/gateway/) in front of a policy — a checkpoint's
 * embedded policy (`--checkpoint <dir>`, loaded as `arl serve openai` does), a fresh smoke model (`--smoke`: the
 * travel recipe's smoke shape and hermes vocabulary, untrained), or a Tinker server's sampler
 * (`--policy.backend tinker`, `loadTinkerGatewayPolicy`). An agent points its OpenAI base URL at
 * `<url>/rollout/<id>/v1` and reports `POST <url>/rollout/<id>/reward {value, parts?}`.
 *
 * Rollouts are opened with `POST /rollout/<id>/open {meta?, deadline_ms?}` (an external trainer), or, with
 * `--open-on-demand`, by their first chat call (handy for trying an agent by hand; every id an agent invents becomes
 * a rollout). Each resolved rollout (rewarded, or dropped at its deadline / shutdown) is appended as one JSON line
 * (`RolloutRecord`, src/gateway/types.ts) to `--records <file>` when given.
 */
import type { Command } from "commander";
import { intFlag, serveFlags, serveOptions, type ServeFlags } from "./serveFlags.ts";

/** Flags of `serve gateway`. */
export interface GatewayFlags extends ServeFlags {
  checkpoint?: string;
  smoke?: boolean;
  modelName?: string;
  openOnDemand?: boolean;
  records?: string;
  deadline: string;
  callTimeout: string;
  maxTokens: string;
  seed: string;
}

/** Registers `serve gateway` under `serve` (default port 8500). */
export function registerServeGateway(serve: Command, overrides: () => Record<string, string> = () => ({})): void {
  serveFlags(
    serve
      .command("gateway")
      .description("An OpenAI-compatible training gateway: agents call /rollout/<id>/v1/chat/completions and report POST /rollout/<id>/reward; --policy.backend tinker --policy.tinker.baseUrl URL --policy.tinker.baseModel NAME serves a Tinker server's sampler (tokenizer: --policy.tinker.tokenizer DIR, or --checkpoint DIR the server serves)")
      .option("--checkpoint <dir>", "policy checkpoint folder to serve, e.g. runs/travel/checkpoints/final")
      .option("--smoke", "serve a fresh, untrained smoke model (the travel recipe's smoke shape and hermes vocabulary)")
      .option("--model-name <name>", "the model id the gateway reports (default arl/<run>-<checkpoint>, or arl/smoke)")
      .option("--open-on-demand", "open an unknown rollout on its first chat call (otherwise POST /rollout/<id>/open first)")
      .option("--records <file>", "append each finished rollout's record (RolloutRecord) as one JSON line to this file")
      .option("--deadline <ms>", "time a rollout has to be rewarded before it is dropped (ms)", "600000")
      .option("--call-timeout <ms>", "most time one sampling call may take (ms; then 504)", "120000")
      .option("--max-tokens <n>", "completion tokens when a request sends no max_tokens", "512")
      .option("--seed <n>", "base of the sampling seeds of requests that send no seed", "0"),
    8500,
  ).action(async (opts: GatewayFlags) => {
    const [{ loadGatewayPolicy, jsonlRecorder }, { startGateway }, { untilSignal }] = await Promise.all([import("./gatewayPolicy.ts"), import("../gateway/server.ts"), import("../http/server.ts")]);
    const options = serveOptions(opts);
    const deadlineMs = intFlag("--deadline", opts.deadline, 1, 2 ** 31 - 1);
    const callTimeoutMs = intFlag("--call-timeout", opts.callTimeout, 1, 2 ** 31 - 1);
    const maxTokens = intFlag("--max-tokens", opts.maxTokens, 1, 2 ** 31 - 1);
    const seed = intFlag("--seed", opts.seed, 0, 2 ** 31 - 2);
    const loaded = await loadGatewayPolicy({ checkpoint: opts.checkpoint, smoke: opts.smoke, modelName: opts.modelName, maxTokens }, overrides());
    if (loaded.warning) console.warn(`warning: ${loaded.warning}`);
    const gateway = await startGateway({
      ...options,
      policy: loaded.policy,
      seed,
      deadlineMs,
      callTimeoutMs,
      openOnDemand: opts.openOnDemand === true,
      ...(opts.records ? { onRecord: jsonlRecorder(opts.records) } : {}),
    });
    console.log(`training gateway at ${gateway.url}  model: ${loaded.policy.name}`);
    console.log(`  agent base URL: ${gateway.url}/rollout/<id>/v1   reward: POST ${gateway.url}/rollout/<id>/reward {"value": …}`);
    if (opts.openOnDemand !== true) console.log(`  open a rollout first: POST ${gateway.url}/rollout/<id>/open {"meta": {…}}`);
    await untilSignal(gateway);
    gateway.registry.close("the gateway shut down before a reward");
    loaded.dispose();
  });
}
