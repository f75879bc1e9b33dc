/**
 * `arl serve <kind>`: the project's services over HTTP — `trainer` (Tinker training API over the embedded backend),
 * `openai` (the embedded policy as OpenAI chat completions), `retrieval` (Search-R1 / veRL `POST /retrieve`),
 * `reward` (veRL `compute_score` as `POST /reward`), `mcp` (an environment's tools over MCP Streamable HTTP).
 * Every server binds 127.0.0.1 unless `--host` widens it, and checks `--api-key` when given.
 */
import type { Command } from "commander";
import { MAX_TIMER_MS } from "../env/tool.ts";
import { ConfigError } from "../train/config.ts";
import { DEFAULT_BODY_LIMIT, type ServeOptions } from "../serve/http.ts";
import { registerServeTrainer } from "./serveTrainer.ts";
import { registerServeGateway } from "./serveGateway.ts";
import { registerServeOpenAI } from "./serveOpenai.ts";
import { registerServeMcp, registerServeRetrieval, registerServeReward } from "./serveVerl.ts";

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

/** Serve flags → `ServeOptions` (warns on stderr when `--host` reaches beyond loopback without a key: `openHostWarning`). @throws ConfigError naming a bad port, body limit, timeout or empty API key */
export function serveOptions(flags: ServeFlags): ServeOptions {
  const int = (flag: string, v: string, min: number, max: number): number => {
    const n = Number(v);
    if (!/^\d+$/.test(v) || n < min || n > max) throw new ConfigError([`${flag}: expected an integer in [${min}, ${max}], got ${JSON.stringify(v)}`]);
    return n;
  };
  const port = int("--port", flags.port, 0, 65535);
  const apiKey = flags.apiKey ?? process.env.ARL_API_KEY;
  if (apiKey !== undefined && apiKey.trim() === "") throw new ConfigError(["--api-key: expected a non-empty key (or leave it out to serve without one)"]);
  const warning = openHostWarning(flags.host, apiKey);
  if (warning !== undefined) console.warn(warning);
  return {
    host: flags.host,
    port,
    apiKey,
    ...(flags.maxBody !== undefined ? { bodyLimit: int("--max-body", flags.maxBody, 1, 2 ** 31 - 1) } : {}),
    requestTimeoutMs: int("--request-timeout", flags.requestTimeout ?? "30000", 0, MAX_TIMER_MS), // Node's timer limit
  };
}

/** Registers `arl serve` and its subcommands on the program. */
export function registerServe(program: Command, overrides: () => Record<string, string> = () => ({})): void {
  const serve = program.command("serve").description("Serve the trainer, policy, retrieval, reward or tools over HTTP");
  registerServeTrainer(serve, overrides);
  registerServeGateway(serve, overrides);
  registerServeOpenAI(serve);
  registerServeRetrieval(serve, overrides);
  registerServeReward(serve, overrides);
  registerServeMcp(serve, overrides);
}
