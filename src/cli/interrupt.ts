/**
 * Ctrl-C (SIGINT) and SIGTERM during `arl train` / `arl lab`: say what was stopped and how to go on, release the run
 * folder's `.lock`, exit 130 (SIGINT) or 143 (SIGTERM). Without this the process died by the signal at once, silently,
 * and left its `.lock` behind (issue 29).
 *
 * Compatible with the `--agent` trainer's own handler (src/train/agentRollouts.ts), which kills the live agent process
 * groups and re-raises the signal: this handler exits on the next tick, after every listener of the signal has run,
 * and ignores the re-raised signal. The lock is released by runDir.ts's `exit` hook, which `process.exit` runs.
 */
import { sep } from "node:path";
import { heldRunFolders } from "../train/runDir.ts";
import { lastWholeCheckpoint } from "../train/runFolder.ts";

/** The command line with `--overwrite` dropped and `--resume` added (arguments with spaces or quotes single-quoted). */
export function resumeCommand(args: readonly string[], launcher: string = arlLauncher()): string {
  const kept = args.filter((a) => a !== "--overwrite");
  if (!kept.includes("--resume")) kept.push("--resume");
  return [launcher, ...kept.map((a) => (/^[\w@%+=:,./-]+$/.test(a) ? a : `'${a.replace(/'/g, `'\\''`)}'`))].join(" ");
}

/**
 * How the user started arl, for a command they can paste: `npx arl` under npx (npm sets `npm_command=exec`; in a
 * consumer project `arl` is not on PATH), else `arl`.
 */
export function arlLauncher(env: NodeJS.ProcessEnv = process.env): string {
  return env.npm_command === "exec" ? "npx arl" : "arl";
}

/**
 * What the stop message says: the command, the run folders it held (a lab's design folders folded into the lab),
 * each one's newest whole checkpoint, that the lock is released, and how to go on.
 * @param signal the signal received
 * @param command `train` (continues with `--resume`) or `lab` (has no `--resume`)
 * @param folders the run folders this process held (absolute paths)
 * @param args the command line after `arl` (to show the resume command)
 * @returns the message, lines joined with newlines, ending in one
 */
export function stopMessage(signal: NodeJS.Signals, command: "train" | "lab", folders: readonly string[], args: readonly string[]): string {
  const top = folders.filter((f) => !folders.some((g) => g !== f && f.startsWith(g + sep)));
  if (top.length === 0) return `\nstopped by ${signal}: arl ${command} stopped before its run folder was opened; nothing was written\n`;
  const lines = [`\nstopped by ${signal}: arl ${command} in ${top.join(", ")}`];
  const checkpoints = top.map((f) => lastWholeCheckpoint(f));
  top.forEach((f, i) => lines.push(`  ${top.length > 1 ? `${f}: ` : ""}last whole checkpoint: ${checkpoints[i] ?? "none yet (the warm start had not finished)"}; lock released`));
  const sft = checkpoints.find((c) => c !== undefined && c.endsWith(`${sep}sft`));
  lines.push(
    command === "train"
      ? `  continue it (the same command and flags): ${resumeCommand(args)}`
      : `  arl lab cannot continue a stopped lab: rerun it with --overwrite (or another --name) to start it again` +
          (sft === undefined ? "" : `; with another --name, --warm-start ${sft} skips the warm start`),
  );
  return `${lines.join("\n")}\n`;
}

let installed: ((signal: NodeJS.Signals) => void) | undefined;

/**
 * Installs the SIGINT/SIGTERM handler for a training command (once per process).
 * @param command `train` or `lab`, for the message
 * @param args the command line after `arl` (default `process.argv.slice(2)`)
 */
export function installInterruptHandler(command: "train" | "lab", args: readonly string[] = process.argv.slice(2)): void {
  if (installed !== undefined) return;
  let stopping = false;
  installed = (signal) => {
    if (stopping) return; // the agent trainer's re-raised signal, or a second Ctrl-C: the exit is already on its way
    stopping = true;
    process.stderr.write(stopMessage(signal, command, heldRunFolders(), args));
    const code = signal === "SIGINT" ? 130 : 143;
    // Next tick: the signal's other listeners (the agent trainer's) run first; exit hooks release the locks.
    process.nextTick(() => process.exit(code));
  };
  process.on("SIGINT", installed);
  process.on("SIGTERM", installed);
}
