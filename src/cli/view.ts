/**
 * `arl view [RUN_OR_LAB …]`: a local web page over run and lab folders as they are on disk — curves, trajectories
 * (turns, tokens with the loss mask, reward terms), compare — that follows a run still training (src/view/).
 * `--export FILE.html` writes the same views into one self-contained file instead of serving.
 */
import { existsSync } from "node:fs";
import type { Command } from "commander";
import { ConfigError } from "../train/config.ts";
import { DEFAULT_POLL_MS, DEFAULT_VIEW_PORT } from "../view/defaults.ts";
import { serveFlags, serveOptions, type ServeFlags } from "./serveFlags.ts";

/** Flags of `arl view`. */
interface ViewFlags extends ServeFlags {
  export?: string;
  force?: boolean;
  poll: string;
}

/** Registers `arl view` on the program. */
export function registerView(program: Command): void {
  serveFlags(
    program
      .command("view")
      .description("A local web page over runs and labs: curves, trajectories (turns, tokens, loss mask, reward terms), compare; follows a run still training")
      .argument("[folders...]", "run folders (runs/default), labs (runs/lab) or folders of them (default: runs)")
      .option("--export <file>", "write the views with their data into one self-contained HTML file (no server, no network) and exit")
      .option("--force", "with --export: overwrite the file even when it is not an earlier export")
      .option("--poll <ms>", "how often the page looks for new lines (ms; 0 = never)", String(DEFAULT_POLL_MS)),
    DEFAULT_VIEW_PORT,
  ).action(async (folders: string[], opts: ViewFlags) => {
    const [{ untilSignal }, { exportView }, { startViewServer }] = await Promise.all([import("../http/server.ts"), import("../view/export.ts"), import("../view/server.ts")]);
    const paths = folders.length > 0 ? folders : ["runs"];
    if (folders.length === 0 && !existsSync("runs")) throw new ConfigError(["arl view: no folders given and no runs/ here; give run or lab folders (arl view runs/default runs/lab)"]);
    if (opts.export !== undefined) {
      let r: { sources: number; bytes: number };
      try {
        r = await exportView(paths, opts.export, { force: opts.force === true });
      } catch (e) {
        if ((e as Error).message.startsWith("--export")) throw new ConfigError([(e as Error).message]);
        throw e;
      }
      console.log(`wrote ${opts.export} (${(r.bytes / 1024 / 1024).toFixed(1)} MiB, ${r.sources} source(s); self-contained, opens offline)`);
      return;
    }
    const pollMs = Number(opts.poll);
    if (!/^\d+$/.test(opts.poll) || pollMs > 3_600_000) throw new ConfigError([`--poll: expected an integer in [0, 3600000] (ms), got ${JSON.stringify(opts.poll)}`]);
    const options = serveOptions(opts);
    const server = await startViewServer(paths, { ...options, pollMs });
    const n = server.catalog.sources().length;
    console.log(`arl view: ${n} source(s) at ${server.url}/${options.apiKey !== undefined ? "?token=<your --api-key>" : ""}  (Ctrl-C stops)`);
    await untilSignal(server);
  });
}
