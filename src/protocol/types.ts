/**
 * A protocol is how a policy sees its tools and how its text becomes actions: the system prompt that declares the
 * tools, the parser of one turn's text, the text an observation is shown as, and the strings that end a turn.
 * Tools are declared once (zod, `src/env/tool.ts`), described as `ToolJsonSchema`, and every protocol renders them
 * its own way.
 * Sources: Search-R1 `search_r1/llm_agent/generation.py` (search-r1); the Qwen2.5 / Qwen3 chat template's tool
 * section and veRL `verl/experimental/agent_loop/tool_parser.py` `HermesToolParser` (hermes); Yao et al. 2023
 * "ReAct" §3 and LangChain's ReAct output parser (react).
 */
import type { Action, ToolCallResult } from "../core/types.ts";

/**
 * A tool as a protocol declares it to a model (and an API to a server): the name, description and JSON Schema (draft
 * 2020-12) of its input. `toolJsonSchema` / `renderTools` (src/env/tool.ts) make it from a zod tool.
 */
export interface ToolJsonSchema {
  name: string;
  description: string;
  parameters: Record<string, unknown>;
}

/** The protocols agentic-rl speaks. */
export type ProtocolName = "search-r1" | "hermes" | "react";

/** Every protocol name, for config errors and `arl envs`. */
export const PROTOCOL_NAMES: readonly ProtocolName[] = ["search-r1", "hermes", "react"];

/** Options of `Protocol.parse`. */
export interface ParseOptions {
  /** Tools the turn may call: a call of any other name is invalid (`unknown tool`). */
  tools: readonly ToolJsonSchema[];
  /** Most calls one turn may make (default 1); more is an invalid action (`N calls where at most M are allowed`). */
  maxCallsPerTurn?: number;
}

/**
 * One protocol. All methods are pure and never throw on model text.
 * - `system(tools, instructions)`: the system prompt text declaring `tools` (search-r1: the env's own prompt);
 * - `prompt(system, user)`: the first context text, before the policy's first turn (a chat protocol renders the
 *   system and user messages and the assistant header, as the chat template does with `add_generation_prompt`);
 * - `parse(turnText, options)`: the action of one turn; malformed text → `{type: "invalid", reason}`;
 * - `observation(results)`: the text appended after a tool-call turn, and `close`, the text that ends it (kept
 *   whole when the rollout caps the observation, see `StepResult.observationClose`);
 * - `invalidObservation(reason)`: the text appended after an invalid turn (the episode goes on);
 * - `format(action)`: the text a model writes for `action` (scripted warm-start agents write through it, so their
 *   demonstrations are in the protocol's exact format); `parse(format(a))` gives back `a`;
 * - `stops`: strings that end a turn (the rollout cuts a sample after the first);
 * - `specialTokens`: protocol tags the embedded word tokenizer must keep as single tokens.
 */
export interface Protocol {
  readonly name: ProtocolName;
  system(tools: readonly ToolJsonSchema[], instructions: string): string;
  prompt(system: string, user: string): string;
  parse(turnText: string, options: ParseOptions): Action;
  observation(results: readonly ToolCallResult[]): { text: string; close: string };
  invalidObservation(reason: string): string;
  format(action: Action): string;
  readonly stops: readonly string[];
  readonly specialTokens: readonly string[];
}
