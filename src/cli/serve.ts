/**
 * `arl serve <kind>`: the project's services over HTTP — `trainer` (Tinker training API over the embedded backend),
 * `gateway` (the OpenAI-compatible training gateway), `openai` (the embedded policy as OpenAI chat completions),
 * `retrieval` (Search-R1 / veRL `POST /retrieve`), `reward` (veRL `compute_score` as `POST /reward`), `mcp` (an
 * environment's tools over MCP Streamable HTTP). Every server binds 127.0.0.1 unless `--host` widens it, and checks
 * `--api-key` when given (flags: ./serveFlags.ts).
 */
import type { Command } from "commander";
import { registerServeTrainer } from "./serveTrainer.ts";
import { registerServeGateway } from "./serveGateway.ts";
import { registerServeOpenAI } from "./serveOpenai.ts";
import { registerServeMcp, registerServeRetrieval, registerServeReward } from "./serveVerl.ts";

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
