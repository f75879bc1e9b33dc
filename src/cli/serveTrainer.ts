/**
 * `arl serve trainer`: the embedded backend behind the Tinker training API (see src/serve/trainer.ts). Base models:
 * `arl/init` (fresh weights of the config's shape and seed, with the world's tokenizer) and one per `--checkpoint`
 * folder (named `arl/<run>-<checkpoint>`, e.g. `arl/default-sft`, or `--name`).
 */
import type { Command } from "commander";
import { ConfigError, resolveConfig } from "../train/config.ts";
import { applyOverrides, readConfigFile } from "../train/configFile.ts";
import { getRecipe } from "../envs/index.ts";
import { envNameOf } from "../train/recipeDefaults.ts";
import type { TrainerBaseModel } from "../serve/trainerState.ts";
import { checkpointModelName, serveFlags, serveOptions, type ServeFlags } from "./serveFlags.ts";

/** Registers `serve trainer` under `serve`. */
export function registerServeTrainer(serve: Command, overrides: () => Record<string, string>): void {
  serveFlags(
    serve
      .command("trainer")
      .description("The embedded backend over the Tinker training API (forward_backward, optim_step, asample, …)")
      .option("--checkpoint <dir...>", "policy checkpoint folders to serve as base models (e.g. runs/default/checkpoints/sft)")
      .option("--name <name...>", "base-model names for the checkpoints, in order (default arl/<run>-<checkpoint>)")
      .option("-c, --config <file>", "config whose model shape, seed and world tokenizer make the fresh base model arl/init")
      .option("--smoke", "the smoke preset's tiny model for arl/init")
      .option("--tokenizer <dir>", "a model folder (tokenizer.json + tokenizer_config.json) whose vocabulary arl/init uses instead of the world's words")
      .option("--dir <dir>", "folder for weights saved through the API", "runs/serve-trainer"),
    8400,
  ).action(async (opts: ServeFlags & { checkpoint?: string[]; name?: string[]; config?: string; smoke?: boolean; tokenizer?: string; dir: string }) => {
    const [{ loadPolicy }, { setupExperiment }, { listen, untilSignal }, { trainerApp }] = await Promise.all([import("../train/checkpoint.ts"), import("../train/setup.ts"), import("../http/server.ts"), import("../serve/trainer.ts")]);
    let raw: Record<string, unknown> = opts.config ? readConfigFile(opts.config) : {};
    if (opts.smoke) raw = applyOverrides(raw, getRecipe(envNameOf(raw)).smoke); // the env's smoke sizes (a tiny model)
    if (opts.tokenizer) raw = applyOverrides(raw, { "policy.backend": "tinker", "policy.tinker.tokenizer": opts.tokenizer });
    const config = resolveConfig(applyOverrides(raw, overrides()));
    const s = setupExperiment(config, getRecipe(config.env.name)); // arl/init: the env's vocabulary and the config's model shape
    if (opts.name && opts.name.length !== (opts.checkpoint ?? []).length) {
      throw new ConfigError([`--name: ${opts.name.length} name(s) for ${(opts.checkpoint ?? []).length} --checkpoint folder(s); give one name per checkpoint, in order`]);
    }
    const bases: TrainerBaseModel[] = [{ name: "arl/init", gpt: s.gpt, tokenizer: s.tokenizer, seed: config.run.seed }];
    for (const [i, dir] of (opts.checkpoint ?? []).entries()) {
      const p = await loadPolicy(dir);
      bases.push({ name: opts.name?.[i] ?? checkpointModelName(dir), gpt: p.gpt, tokenizer: p.tokenizer, checkpoint: dir, seed: config.run.seed });
    }
    const server = await listen(trainerApp({ ...serveOptions(opts), baseModels: bases, dir: opts.dir }), serveOptions(opts));
    console.log(`Tinker API (embedded backend) at ${server.url}/api/v1  base models: ${bases.map((b) => b.name).join(", ")}`);
    await untilSignal(server);
  });
}
