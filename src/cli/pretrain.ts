/**
 * `arl pretrain`: trains the embedded base model (src/pretrain) — flags by config path (`--optim.steps 200`), a YAML
 * or JSON `--config`, `--smoke` for a seconds-long run, `--resume` after a kill or Ctrl-C. Also the hidden
 * `arl __train-bpe <input.json> <output.json>`, the child process `arl pretrain` trains its tokenizer in.
 */
import { readFileSync, writeFileSync } from "node:fs";
import type { Command } from "commander";
import { ConfigError } from "../train/config.ts";
import { applyOverrides, readConfigFile } from "../train/configFile.ts";
import { ProgressLines, formatElapsed } from "./progress.ts";

/** Registers `pretrain` and `__train-bpe` on the program; `overrides` returns the dotted flags of this invocation. */
export function registerPretrain(program: Command, overrides: () => Record<string, string>): void {
  program
    .command("pretrain")
    .description("Pretrain the embedded base model from scratch on generated tool-use episodes and drills (tokenizer, then the model); writes <dir>/base")
    .option("-c, --config <file>", "YAML or JSON pretraining config (sections: run, model, tokenizer, data, optim)")
    .option("--dir <folder>", "run folder (default runs/pretrain; --smoke: runs/pretrain-smoke)")
    .option("--smoke", "tiny model, a few steps (seconds; for tests)")
    .option("--resume", "continue the run in the folder from its last checkpoint (same config); ends identical to an uninterrupted run")
    .option("--overwrite", "replace an earlier run's files in the folder")
    .option("--print-config", "print the resolved config and exit")
    .addHelpText("after", "\nAny config field can be set with its path, e.g. --optim.steps 2000 --model.dModel 128 --tokenizer.vocabSize 2048")
    .action(async (opts: { config?: string; dir?: string; smoke?: boolean; resume?: boolean; overwrite?: boolean; printConfig?: boolean }) => {
      const [{ resolvePretrainConfig, PRETRAIN_SMOKE }, { runPretrain, PretrainInterrupted }] = await Promise.all([import("../pretrain/config.ts"), import("../pretrain/pretrain.ts")]);
      let raw: Record<string, unknown> = opts.config ? readConfigFile(opts.config) : {};
      if (opts.smoke) raw = applyOverrides(raw, PRETRAIN_SMOKE);
      raw = applyOverrides(raw, overrides());
      if (opts.dir !== undefined) raw = applyOverrides(raw, { "run.dir": opts.dir });
      const config = resolvePretrainConfig(raw);
      if (opts.printConfig) {
        console.log(JSON.stringify(config, null, 2));
        return;
      }
      if (opts.resume && opts.overwrite) throw new ConfigError(["--resume and --overwrite: choose one"]);
      const controller = new AbortController();
      const onSignal = (): void => {
        if (controller.signal.aborted) process.exit(130);
        process.stderr.write("\nstopping after the next step's checkpoint (Ctrl-C again to quit now)…\n");
        controller.abort();
      };
      process.on("SIGINT", onSignal);
      process.on("SIGTERM", onSignal);
      const t0 = performance.now();
      const progress = new ProgressLines("pretrain", config.optim.steps, { intervalMs: process.stderr.isTTY ? 5000 : 30_000 });
      try {
        const s = await runPretrain(config, {
          resume: opts.resume === true,
          overwrite: opts.overwrite === true,
          signal: controller.signal,
          reporter: {
            step: (step, _total, info) => progress.update(step, { loss: info.loss.toFixed(3), lr: info.lr.toExponential(2), tokens: `${(info.tokens / 1e6).toFixed(2)}M` }),
            line: (text) => process.stderr.write(`${text}\n`),
          },
        });
        console.log(`base model: ${s.baseDir} (${s.steps} steps, ${(s.tokens / 1e6).toFixed(1)}M tokens, held-out loss ${s.heldOutLoss.toFixed(3)} nats/token) in ${formatElapsed(performance.now() - t0)}`);
        console.log(`fingerprint: ${s.fingerprint}`);
      } catch (e) {
        if (e instanceof PretrainInterrupted) {
          const args = process.argv.slice(2);
          const rest = args.slice(args.indexOf("pretrain") + 1).filter((a) => a !== "--resume" && a !== "--overwrite");
          console.error(`${e.message}: arl pretrain --resume ${rest.join(" ")}`.trimEnd());
          process.exitCode = 130;
          return;
        }
        throw e;
      } finally {
        process.off("SIGINT", onSignal);
        process.off("SIGTERM", onSignal);
      }
    });

  program
    .command("__train-bpe", { hidden: true })
    .argument("<input>", "JSON {texts, vocabSize, specialTokens}")
    .argument("<output>", "tokenizer.json to write")
    .action(async (input: string, output: string) => {
      const { trainByteLevelBpe } = await import("../policy/hf/trainBpe.ts");
      const req = JSON.parse(readFileSync(input, "utf8")) as { texts: string[]; vocabSize: number; specialTokens: string[] };
      writeFileSync(output, JSON.stringify(trainByteLevelBpe(req.texts, { vocabSize: req.vocabSize, specialTokens: req.specialTokens }).json));
    });
}
