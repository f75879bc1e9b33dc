/**
 * Prompt-driven baseline agents over OpenAI-compatible chat servers: `prompt` (instructions only), `function-calling`
 * (a JSON `search` tool) and `react` (Thought / Action / Observation). See `chat.ts` for the episode loop.
 */
import { AGENT_KINDS, ChatAgent, type AgentKind, type ChatAgentOptions, type ChatProtocol } from "./chat.ts";
import { FunctionCallingProtocol } from "./functionCalling.ts";
import { PromptProtocol } from "./prompt.ts";
import { ReactProtocol } from "./react.ts";

export { AGENT_KINDS, ChatAgent, type AgentKind, type AgentTrajectory, type ChatAgentOptions } from "./chat.ts";

/** The protocol of an agent kind. */
export function protocolOf(kind: AgentKind): ChatProtocol {
  switch (kind) {
    case "prompt":
      return new PromptProtocol();
    case "function-calling":
      return new FunctionCallingProtocol();
    case "react":
      return new ReactProtocol();
  }
}

/**
 * Parses an agent list: `prompt`, `function-calling`, `react`, a comma-separated list of them, or `all`.
 * @throws Error naming the flag, the bad value and the allowed values
 */
export function parseAgentKinds(value: string, flag = "--agent"): AgentKind[] {
  const out: AgentKind[] = [];
  for (const part of value.split(",").map((s) => s.trim()).filter(Boolean)) {
    if (part === "all") out.push(...AGENT_KINDS);
    else if ((AGENT_KINDS as readonly string[]).includes(part)) out.push(part as AgentKind);
    else throw new Error(`${flag}: expected one of ${AGENT_KINDS.join(", ")} or all (comma-separated), got ${JSON.stringify(part)}`);
  }
  if (out.length === 0) throw new Error(`${flag}: expected one of ${AGENT_KINDS.join(", ")} or all, got ${JSON.stringify(value)}`);
  return [...new Set(out)];
}

/** A chat agent of the given kind. @throws Error on invalid options (see `ChatAgent`) */
export function makeChatAgent(kind: AgentKind, options: ChatAgentOptions): ChatAgent {
  return new ChatAgent(protocolOf(kind), options);
}
