/**
 * Raw config input before validation: a YAML/JSON config file read within the bounds of `./configGuards.ts`, and
 * the dotted-path overrides (`--rl.groupSize 8`, lab designs', recipes' and `--agent`'s defaults) applied onto it.
 * `resolveConfig` (./config.ts) then validates the result and fills defaults.
 */
import { ConfigError } from "./config.ts";
import { ConfigInputError, parseBoundedYaml, readBoundedText, reservedSegmentProblem } from "./configGuards.ts";

/**
 * Reads a YAML or JSON config file (JSON is YAML), within the bounds of `./configGuards.ts`: at most 256 KiB
 * (checked before reading), 50 000 YAML tokens (before parsing), 10 000 items per list, 64 levels of nesting, and no
 * `__proto__` / `constructor` / `prototype` key.
 * @throws ConfigError `config file <path>: <size or count>; at most <limit>` past a bound or on a reserved key;
 *   Error naming the file when unreadable, not valid YAML or not a mapping
 */
export function readConfigFile(path: string): Record<string, unknown> {
  let text: string;
  try {
    text = readBoundedText(path);
  } catch (e) {
    if (e instanceof ConfigInputError) throw new ConfigError([`config file ${path}: ${e.message}`]);
    throw new Error(`config file ${path}: cannot read (${(e as Error).message})`);
  }
  let doc: unknown;
  try {
    doc = parseBoundedYaml(text);
  } catch (e) {
    if (e instanceof ConfigInputError) throw new ConfigError([`config file ${path}: ${e.message}`]);
    throw new Error(`config file ${path}: not valid YAML/JSON (${(e as Error).message})`);
  }
  if (doc === null || doc === undefined) return {};
  if (typeof doc !== "object" || Array.isArray(doc)) throw new Error(`config file ${path}: expected a mapping at the top level`);
  return doc as Record<string, unknown>;
}

/**
 * A flag's value as YAML reads it (`8` → 8, `true`, `[a, b]`, `.inf`); text that is not a YAML scalar or list (`,`,
 * `a: b`, `[x`) is kept as the string given, so validation names the field and shows it.
 * @throws ConfigError naming `key` when the value is over the config bounds or holds a reserved key (`{__proto__: …}`)
 */
function overrideValue(key: string, value: string): unknown {
  try {
    return parseBoundedYaml(value);
  } catch (e) {
    if (e instanceof ConfigInputError) throw new ConfigError([`${key}: ${e.message}`]);
    return value;
  }
}

/**
 * Applies `--a.b value` overrides onto a raw config. Values are parsed as YAML scalars (numbers, booleans, lists).
 * Every dotted path of the program goes through here (flags, lab designs' and recipes' overrides, `--agent`'s
 * defaults), so here `__proto__`, `constructor` and `prototype` segments are refused and only own fields are walked.
 * @throws Error when a key is empty; ConfigError naming the key on a reserved segment or value (`./configGuards.ts`)
 */
export function applyOverrides(raw: Record<string, unknown>, overrides: Record<string, string>): Record<string, unknown> {
  const out = structuredClone(raw);
  for (const [key, value] of Object.entries(overrides)) {
    const parts = key.split(".").filter(Boolean);
    if (parts.length === 0) throw new Error(`config override: empty key`);
    const reserved = reservedSegmentProblem(key);
    if (reserved !== undefined) throw new ConfigError([reserved]);
    let node: Record<string, unknown> = out;
    for (const [i, p] of parts.slice(0, -1).entries()) {
      // Own fields only: `toString` and the like are inherited by every object, not config sections.
      if (!Object.hasOwn(node, p) || node[p] === undefined || node[p] === null) node[p] = {};
      else if (typeof node[p] !== "object" || Array.isArray(node[p])) {
        // A section given as a scalar (`rl: 5`) is an error to report, not something to replace silently.
        throw new ConfigError([`${parts.slice(0, i + 1).join(".")}: expected a mapping of fields, got ${JSON.stringify(node[p])}`]);
      }
      node = node[p] as Record<string, unknown>;
    }
    node[parts[parts.length - 1]] = overrideValue(key, value);
  }
  return out;
}
