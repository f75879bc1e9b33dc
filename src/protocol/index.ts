/**
 * The text protocols of tool-using policies (see `./types.ts` for the `Protocol` interface): `search-r1`
 * (`<search>` / `<information>` / `<answer>`), `hermes` (Qwen2.5 / Qwen3 `<tool_call>` JSON with `<tool_response>`
 * observations) and `react` (`Thought:` / `Action:` / `Action Input:` / `Observation:` / `Final Answer:`), a registry
 * by name. Tools reach a protocol as `ToolJsonSchema` declarations (`renderTools` of src/env/tool.ts).
 */
import { hermesProtocol } from "./hermes.ts";
import { reactProtocol } from "./react.ts";
import { searchR1Protocol } from "./searchR1.ts";
import { PROTOCOL_NAMES, type Protocol, type ProtocolName } from "./types.ts";

export { hermesProtocol, parseHermes, toJsonLikeTemplate, chatToolSpec, trimKeys } from "./hermes.ts";
export { reactProtocol, parseReact } from "./react.ts";
export { searchR1Protocol } from "./searchR1.ts";
export { PROTOCOL_NAMES } from "./types.ts";
export type { ParseOptions, Protocol, ProtocolName, ToolJsonSchema } from "./types.ts";

/** Every protocol by name. */
export const PROTOCOLS: Readonly<Record<ProtocolName, Protocol>> = {
  "search-r1": searchR1Protocol,
  hermes: hermesProtocol,
  react: reactProtocol,
};

/**
 * The protocol named `name` (a config value).
 * @throws Error `protocol: unknown protocol "x"; allowed: search-r1, hermes, react` for any other name
 */
export function getProtocol(name: string): Protocol {
  if (Object.prototype.hasOwnProperty.call(PROTOCOLS, name)) return PROTOCOLS[name as ProtocolName];
  throw new Error(`protocol: unknown protocol ${JSON.stringify(name)}; allowed: ${PROTOCOL_NAMES.join(", ")}`);
}
