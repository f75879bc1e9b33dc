/**
 * The training gateway (issue 15): an OpenAI-compatible chat-completions server in front of the policy being trained,
 * with exact per-rollout records and rewards. See `./server.ts` (routes, semantics), `./registry.ts` (rollout
 * lifecycle), `./render.ts` (messages → tokens), `./records.ts` (calls → segments) and `./types.ts` (the records).
 */
export { gatewayApp, startGateway, deriveSeed, DEFAULT_CALL_TIMEOUT_MS, DEFAULT_MAX_TOKENS } from "./server.ts";
export type { Gateway, GatewayOptions, GatewayPolicy, RunningGateway } from "./server.ts";
export { RolloutRegistry, checkReward, checkRolloutId, DEFAULT_DEADLINE_MS, MAX_DEADLINE_MS, ROLLOUT_ID_RE, ROLLOUT_ID_RULE } from "./registry.ts";
export type { CallTicket, OpenOptions, RegistryOptions, RolloutSnapshot, RolloutStatus } from "./registry.ts";
export { renderChat, renderChatText, renderPieces, encodePieces, assistantKey, canonicalArguments, toolSchemas, QWEN_DEFAULT_SYSTEM } from "./render.ts";
export type { ChatCall, ChatMsg, ChatTool, RenderOptions, RenderedChat, RenderedPieces } from "./render.ts";
export { mergeCalls, isPrefix } from "./records.ts";
export { GatewayError, openAIError, parseRequest, fieldName, defaultCode } from "./errors.ts";
export type { OpenAIErrorBody } from "./errors.ts";
export { ChatCompletionBody, RewardBody, OpenBody, MAX_STOP, MAX_STOP_CHARS, TOOL_NAME_RE } from "./schema.ts";
export type { ChatCompletionRequest } from "./schema.ts";
export type { GatewayCall, GatewayReward, GatewaySegment, RolloutRecord } from "./types.ts";
