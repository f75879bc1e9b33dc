/**
 * `arl export <target>`: files another trainer needs to train on our environment. `arl export verl` writes veRL's
 * tool config, a `compute_score` calling `arl serve reward`, the world's tasks as parquet and a run script
 * (src/export/verl.ts).
 */
import type { Command } from "commander";
import { exportVerl, VERL_VERSION } from "../export/verl.ts";
import { applyOverrides, readConfigFile, resolveConfig } from "../train/config.ts";

/** Registers `arl export` and its subcommands; `overrides` gives the dotted config flags (`--env.topK 5`). */
export function registerExport(program: Command, overrides: () => Record<string, string> = () => ({})): void {
  const exp = program.command("export").description("Export the environment, data and reward for another trainer (veRL)");
  exp
    .command("verl")
    .description(`veRL ${VERL_VERSION} files: tool_config.yaml, reward_fn.py, train/test.parquet, run.sh`)
    .requiredOption("--out <dir>", "folder to write into (created if missing)")
    .option("-c, --config <file>", "YAML/JSON experiment config (world, env.topK, env.maxTurns); dotted flags override it")
    .option("--reward-url <url>", "base URL of `arl serve reward`", "http://127.0.0.1:8100")
    .option("--retrieval-url <url>", "URL of `arl serve retrieval`'s endpoint", "http://127.0.0.1:8000/retrieve")
    .option("--model <id>", "Hugging Face model in run.sh", "Qwen/Qwen2.5-3B-Instruct")
    .option("--bare-prompt", "prompts are the env's prompt only (no veRL system message or search instructions)")
    .option("--overwrite", "replace existing output files")
    .action(async (opts: { out: string; config?: string; rewardUrl: string; retrievalUrl: string; model: string; barePrompt?: boolean; overwrite?: boolean }) => {
      const config = resolveConfig(applyOverrides(opts.config ? readConfigFile(opts.config) : {}, overrides()));
      const r = await exportVerl({
        outDir: opts.out,
        config,
        rewardUrl: opts.rewardUrl,
        retrievalUrl: opts.retrievalUrl,
        model: opts.model,
        barePrompt: opts.barePrompt === true,
        overwrite: opts.overwrite === true,
        configFile: opts.config,
      });
      console.log(`veRL ${VERL_VERSION} export: ${r.rows.train} train / ${r.rows.test} test rows`);
      for (const f of Object.values(r.files)) console.log(`  ${f}`);
      console.log(`next: start \`arl serve retrieval\` and \`arl serve reward\`, then \`bash ${r.files.runScript}\` on the veRL machine`);
    });
}
