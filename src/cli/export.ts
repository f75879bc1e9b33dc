/**
 * `arl export <target>`: files another trainer needs to train on our environment. `arl export verl` writes veRL's
 * search tool (`search_tool.py` for the current release, `tool_config.yaml` for `--verl-version 0.5`), a
 * `compute_score` calling `arl serve reward`, the world's tasks as parquet and a run script sized from the dataset
 * (src/export/verl.ts).
 */
import type { Command } from "commander";
import { DEFAULT_MIN_STEPS } from "../export/verlSchedule.ts";
import { DEFAULT_VERL_TARGET, parseVerlTarget, VERL_RELEASES, type VerlTarget } from "../export/verlTarget.ts";
import { ConfigError, resolveConfig } from "../train/config.ts";
import { applyOverrides, readConfigFile } from "../train/configFile.ts";

/** Parses a positive integer flag. @throws ConfigError naming the flag */
function positiveInt(flag: string, value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value) || !Number.isSafeInteger(n) || n < 1) throw new ConfigError([`${flag}: expected a positive integer, got ${JSON.stringify(value)}`]);
  return n;
}

/** Flags of `arl export verl`. */
interface ExportVerlFlags {
  out: string;
  config?: string;
  rewardUrl: string;
  retrievalUrl: string;
  model: string;
  barePrompt?: boolean;
  overwrite?: boolean;
  verlVersion: string;
  minSteps?: string;
  trainBatchSize?: string;
}

/** Registers `arl export` and its subcommands; `overrides` gives the dotted config flags (`--env.options.topK 5`). */
export function registerExport(program: Command, overrides: () => Record<string, string> = () => ({})): void {
  const exp = program.command("export").description("Export the environment, data and reward for another trainer (veRL)");
  const releases = `current = ${VERL_RELEASES.current.tag}, 0.5 = ${VERL_RELEASES["0.5"].tag}`;
  exp
    .command("verl")
    .description(`veRL files (${releases}): search tool, reward_fn.py, train/test.parquet, run.sh sized from the dataset`)
    .requiredOption("--out <dir>", "folder to write into (created if missing)")
    .option("-c, --config <file>", "YAML/JSON experiment config (env.options: the search world and topK; env.maxTurns); dotted flags override it")
    .option("--reward-url <url>", "base URL of `arl serve reward`", "http://127.0.0.1:8100")
    .option("--retrieval-url <url>", "URL of `arl serve retrieval`'s endpoint", "http://127.0.0.1:8000/retrieve")
    .option("--model <id>", "Hugging Face model in run.sh", "Qwen/Qwen2.5-3B-Instruct")
    .option("--verl-version <v>", `veRL release the files target: current or 0.5 (${releases})`, DEFAULT_VERL_TARGET)
    .option("--min-steps <n>", `least number of training steps in run.sh (epochs are added to reach it; default ${DEFAULT_MIN_STEPS})`)
    .option("--train-batch-size <n>", "prompts per training step (default: from the train rows, see docs/scale-out.md)")
    .option("--bare-prompt", "prompts are the env's prompt only (no veRL system message or search instructions)")
    .option("--overwrite", "replace existing output files")
    .action(async (opts: ExportVerlFlags) => {
      const [{ exportVerl }] = await Promise.all([import("../export/verl.ts")]);
      const config = resolveConfig(applyOverrides(opts.config ? readConfigFile(opts.config) : {}, overrides()));
      let verlVersion: VerlTarget;
      try {
        verlVersion = parseVerlTarget(opts.verlVersion);
      } catch (e) {
        throw new ConfigError([(e as Error).message.replace(/^export verl: --verl-version must be /, "--verl-version: expected ")]);
      }
      const r = await exportVerl({
        outDir: opts.out,
        config,
        rewardUrl: opts.rewardUrl,
        retrievalUrl: opts.retrievalUrl,
        model: opts.model,
        barePrompt: opts.barePrompt === true,
        overwrite: opts.overwrite === true,
        configFile: opts.config,
        verlVersion,
        minSteps: opts.minSteps === undefined ? undefined : positiveInt("--min-steps", opts.minSteps),
        trainBatchSize: opts.trainBatchSize === undefined ? undefined : positiveInt("--train-batch-size", opts.trainBatchSize),
      });
      const sc = r.schedule;
      console.log(`veRL ${r.release} export: ${r.rows.train} train / ${r.rows.test} test rows`);
      console.log(
        `run.sh: batch ${sc.trainBatchSize} prompts × ${sc.stepsPerEpoch} steps/epoch × ${sc.epochs} epochs = ${sc.totalSteps} steps (${sc.updates} optimizer updates, mini-batch ${sc.ppoMiniBatchSize})`,
      );
      for (const f of Object.values(r.files)) console.log(`  ${f}`);
      console.log(`next: start \`arl serve retrieval\` and \`arl serve reward\`, then \`bash ${r.files.runScript}\` on the veRL machine`);
    });
}
