/**
 * The flags every `arl serve …` server (and `arl view`) takes, and their parsing into `ServeOptions`
 * (src/http/server.ts). The serve subcommands import this module and `serve.ts` imports them, so the graph has no
 * circle.
 */
import { basename, dirname, resolve } from "node:path";
import type { Command } from "commander";
import { MAX_TIMER_MS } from "../env/tool.ts";
import { ConfigError } from "../train/config.ts";
import { DEFAULT_BODY_LIMIT } from "../http/limits.ts";
import type { ServeOptions } from "../http/server.ts";

/** Flags every server takes. */
export interface ServeFlags {
  host: string;
  port: string;
  apiKey?: string;
  /** Absent: the server's default (16 MiB; 1 MiB retrieval / mcp; the gateway and `serve openai` derive theirs from the context). */
  maxBody?: string;
  requestTimeout: string;
}

/** Adds `--host`, `--port`, `--api-key` to a serve subcommand. */
export function serveFlags(cmd: Command, defaultPort: number): Command {
  return cmd
    .option("--host <host>", "interface to bind (0.0.0.0 serves other machines)", "127.0.0.1")
    .option("--port <port>", "TCP port (0 = any free port)", String(defaultPort))
    .option("--api-key <key>", "require Authorization: Bearer <key> on every request (default: env ARL_API_KEY, else none)")
    .option("--max-body <bytes>", `largest accepted request body (bytes; larger ones get 413; default ${DEFAULT_BODY_LIMIT}, 1 MiB for retrieval and mcp, and for a model server 8 × context × 32 bytes, at least 1 MiB)`)
    .option("--request-timeout <ms>", "most time to receive a whole request (ms; slower clients get 408)", "30000");
}

/** Host names and addresses that reach this machine only. */
const LOOPBACK = /^(localhost|127(\.\d{1,3}){3}|::1|\[::1\])$/i;

/**
 * The warning for a server bound beyond loopback without an API key (anyone who can reach the port may use it:
 * read runs, sample or train the policy), or undefined when the host is loopback or a key is set.
 * @param host the `--host` value
 * @param apiKey the key in effect (`--api-key` or `ARL_API_KEY`)
 */
export function openHostWarning(host: string, apiKey: string | undefined): string | undefined {
  if (apiKey !== undefined || LOOPBACK.test(host.trim())) return undefined;
  return `warning: --host ${host} serves other machines and no --api-key (or ARL_API_KEY) is set: anyone who can reach this port can use it. Set --api-key <key>, or bind 127.0.0.1.`;
}

/**
 * Parses an integer flag (decimal digits only, surrounding spaces allowed).
 * @param flag the flag's name for the error (`--port`)
 * @param value the flag's text
 * @param min smallest allowed value
 * @param max largest allowed value
 * @throws ConfigError naming the flag and the range unless an integer in [min, max]
 */
export function intFlag(flag: string, value: string, min: number, max: number): number {
  const n = Number(value);
  if (!/^\d+$/.test(value.trim()) || n < min || n > max) throw new ConfigError([`${flag}: expected an integer in [${min}, ${max}], got ${JSON.stringify(value)}`]);
  return n;
}

/** Serve flags → `ServeOptions` (warns on stderr when `--host` reaches beyond loopback without a key: `openHostWarning`). @throws ConfigError naming a bad port, body limit, timeout or empty API key */
export function serveOptions(flags: ServeFlags): ServeOptions {
  const port = intFlag("--port", flags.port, 0, 65535);
  const apiKey = flags.apiKey ?? process.env.ARL_API_KEY;
  if (apiKey !== undefined && apiKey.trim() === "") throw new ConfigError(["--api-key: expected a non-empty key (or leave it out to serve without one)"]);
  const warning = openHostWarning(flags.host, apiKey);
  if (warning !== undefined) console.warn(warning);
  return {
    host: flags.host,
    port,
    apiKey,
    ...(flags.maxBody !== undefined ? { bodyLimit: intFlag("--max-body", flags.maxBody, 1, 2 ** 31 - 1) } : {}),
    requestTimeoutMs: intFlag("--request-timeout", flags.requestTimeout ?? "30000", 0, MAX_TIMER_MS), // Node's timer limit
  };
}

/** The base-model name of a checkpoint folder: `runs/default/checkpoints/sft` → `arl/default-sft`. */
export function checkpointModelName(dir: string): string {
  const abs = resolve(dir);
  return `arl/${basename(dirname(dirname(abs)))}-${basename(abs)}`.replace(/[^A-Za-z0-9/_.-]/g, "-");
}
