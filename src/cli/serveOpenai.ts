/**
 * `arl serve openai`: a policy checkpoint as an OpenAI-compatible server (`GET /v1/models`,
 * `POST /v1/completions`, `POST /v1/chat/completions` with tools; see src/serve/openai.ts), so the prompt-driven
 * agents (`arl eval --policy openai:MODEL`) and `OpenAISamplingClient` run against the embedded policy through real
 * HTTP with no external model.
 */
import type { Command } from "commander";
import { checkpointModelName, serveFlags, serveOptions, type ServeFlags } from "./serveFlags.ts";

/** Registers `serve openai` under `serve` (default port 8300). */
export function registerServeOpenAI(serve: Command): void {
  serveFlags(
    serve
      .command("openai")
      .description("A checkpoint's policy as an OpenAI-compatible server (/v1/models, /v1/completions, /v1/chat/completions with tools)")
      .requiredOption("--checkpoint <dir>", "policy checkpoint folder, e.g. runs/default/checkpoints/final")
      .option("--model-name <name>", "the model id clients send (default arl/<run>-<checkpoint>, e.g. arl/default-final)"),
    8300,
  ).action(async (opts: ServeFlags & { checkpoint: string; modelName?: string }) => {
    const [{ untilSignal }, { serveOpenAI }, { loadPolicy }] = await Promise.all([import("../http/server.ts"), import("../serve/openai.ts"), import("../train/checkpoint.ts")]);
    const options = serveOptions(opts);
    const policy = await loadPolicy(opts.checkpoint);
    const name = opts.modelName ?? checkpointModelName(opts.checkpoint);
    const server = await serveOpenAI(
      { name, sampler: policy.backend.samplingClient(), tokenizer: policy.tokenizer, contextLength: policy.gpt.contextLength },
      options,
    );
    console.log(`OpenAI-compatible API at ${server.url}/v1  model: ${name}`);
    await untilSignal(server);
  });
}
