/**
 * `arl serve <kind>`: the project's services over HTTP — `trainer` (Tinker training API over the embedded backend),
 * `openai` (the embedded policy as OpenAI chat completions), `retrieval` (Search-R1 / veRL `POST /retrieve`),
 * `reward` (veRL `compute_score` as `POST /reward`), `mcp` (an environment's tools over MCP Streamable HTTP).
 * Every server binds 127.0.0.1 unless `--host` widens it, and checks `--api-key` when given.
 */
import type { Command } from "commander";
import { ConfigError } from "../train/config.ts";
import type { ServeOptions } from "../serve/http.ts";
import { registerServeTrainer } from "./serveTrainer.ts";
import { registerServeOpenAI } from "./serveOpenai.ts";
import { registerServeMcp, registerServeRetrieval, registerServeReward } from "./serveVerl.ts";

/** Flags every server takes. */
export interface ServeFlags {
  host: string;
  port: string;
  apiKey?: string;
}

/** Adds `--host`, `--port`, `--api-key` to a serve subcommand. */
export function serveFlags(cmd: Command, defaultPort: number): Command {
  return cmd
    .option("--host <host>", "interface to bind (0.0.0.0 serves other machines)", "127.0.0.1")
    .option("--port <port>", "TCP port (0 = any free port)", String(defaultPort))
    .option("--api-key <key>", "require Authorization: Bearer <key> on every request (default: env ARL_API_KEY, else none)");
}

/** Serve flags → `ServeOptions`. @throws ConfigError naming a bad port */
export function serveOptions(flags: ServeFlags): ServeOptions {
  const port = Number(flags.port);
  if (!/^\d+$/.test(flags.port) || port > 65535) throw new ConfigError([`--port: expected an integer in [0, 65535], got ${JSON.stringify(flags.port)}`]);
  return { host: flags.host, port, apiKey: flags.apiKey ?? process.env.ARL_API_KEY };
}

/** Registers `arl serve` and its subcommands on the program. */
export function registerServe(program: Command, overrides: () => Record<string, string> = () => ({})): void {
  const serve = program.command("serve").description("Serve the trainer, policy, retrieval, reward or tools over HTTP");
  void serve;
  // serve subcommands: one `serve.command(...)` block per kind below, each in its own section.
  // -- serve trainer --
  registerServeTrainer(serve, overrides);
  // -- serve openai --
  registerServeOpenAI(serve);
  // -- serve retrieval --
  registerServeRetrieval(serve, overrides);
  // -- serve reward --
  registerServeReward(serve, overrides);
  // -- serve mcp --
  registerServeMcp(serve, overrides);
}
