/**
 * Bounds on config input, checked before the expensive work: a config file's bytes before it is read whole, its YAML
 * tokens before it is parsed (the `yaml` package parses ~100 k nodes/s and checks duplicate keys in O(n²), so a
 * 25 MB file with a 5 M-item list ran out of memory after 103 s), its lists and nesting before it becomes objects;
 * and the names `__proto__`, `constructor`, `prototype`, refused as config keys and dotted-path segments so no
 * input can reach `Object.prototype` (`--rl.__proto__.polluted 1` did).
 */
import { closeSync, fstatSync, openSync, readSync } from "node:fs";
import { isAlias, isMap, isScalar, isSeq, Lexer, LineCounter, parseDocument, type Node as YamlNode } from "yaml";

/** Largest config file (bytes): 256 KiB. A config is a few KB; the resolved config a run writes is ~6 KB. */
export const MAX_CONFIG_BYTES = 256 * 1024;
/** Most YAML tokens (keys, values, indicators, line breaks) in one document: ≈ 8 000 lines of `key: value`. */
export const MAX_CONFIG_TOKENS = 50_000;
/** Most items in one list of a config. */
export const MAX_CONFIG_LIST_ITEMS = 10_000;
/** Deepest nesting of mappings and lists in a config (the schema's is 4). */
export const MAX_CONFIG_DEPTH = 64;
/** Aliases (`*a`) `yaml` may expand per document (its default; bounds "billion laughs" expansion). */
const MAX_ALIAS_COUNT = 100;

/** Names that, as a key or path segment, would reach an object's prototype chain instead of a field. */
export const RESERVED_KEYS: ReadonlySet<string> = new Set(["__proto__", "constructor", "prototype"]);

/** A config input over one of the bounds above, or holding a reserved name; `message` says which and the limit. */
export class ConfigInputError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ConfigInputError";
  }
}

/** Why a reserved name cannot be used, for messages. */
const RESERVED_WHY = `"__proto__", "constructor" and "prototype" are refused (JavaScript names that reach Object.prototype, never config fields)`;

/**
 * The text of a file, read only when it is at most `maxBytes`: a regular file's size is checked before reading; a
 * pipe or device is read up to `maxBytes` + 1 bytes and refused past that (so `/dev/zero` cannot hang it).
 * @throws ConfigInputError `<n> bytes; at most <maxBytes> …` when larger; fs errors (ENOENT, EISDIR…) as thrown
 */
export function readBoundedText(path: string, maxBytes = MAX_CONFIG_BYTES): string {
  const tooLarge = (size: string) => new ConfigInputError(`${size} bytes; at most ${maxBytes} (${maxBytes / 1024} KiB) — a config is a few KB of YAML or JSON`);
  const fd = openSync(path, "r");
  try {
    const stat = fstatSync(fd);
    if (stat.isFile() && stat.size > maxBytes) throw tooLarge(String(stat.size));
    const buf = Buffer.alloc(maxBytes + 1);
    let n = 0;
    for (let r; n < buf.length && (r = readSync(fd, buf, n, buf.length - n, null)) > 0; ) n += r;
    if (n > maxBytes) throw tooLarge(`more than ${maxBytes}`);
    return buf.subarray(0, n).toString("utf8");
  } finally {
    closeSync(fd);
  }
}

/**
 * Parses YAML (or JSON) config text within the bounds: at most `MAX_CONFIG_TOKENS` tokens (counted by `yaml`'s
 * linear lexer before the parser runs), lists of at most `MAX_CONFIG_LIST_ITEMS`, nesting at most
 * `MAX_CONFIG_DEPTH`, unique keys (checked here in O(n); `yaml`'s own check is O(n²)), at most 100 alias expansions,
 * and no reserved key (`RESERVED_KEYS`) anywhere.
 * @returns the document as plain JS values (undefined for an empty document)
 * @throws ConfigInputError naming the bound, the place (`at rl.x (line 3)`) and the limit; YAMLParseError on invalid
 *   YAML (`yaml`'s message, with line and column)
 */
export function parseBoundedYaml(text: string): unknown {
  let tokens = 0;
  for (const _ of new Lexer().lex(text)) {
    if (++tokens > MAX_CONFIG_TOKENS) throw new ConfigInputError(`more than ${MAX_CONFIG_TOKENS} YAML tokens (keys, values, separators); at most ${MAX_CONFIG_TOKENS} — a config is a few hundred lines`);
  }
  const lines = new LineCounter();
  let doc: ReturnType<typeof parseDocument>;
  try {
    doc = parseDocument(text, { uniqueKeys: false, stringKeys: true, lineCounter: lines, prettyErrors: true });
  } catch (e) {
    // `yaml` composes nested collections recursively: ~800 levels overflow the stack before our depth check runs.
    if (e instanceof RangeError || /Maximum call stack/.test((e as Error).message)) throw new ConfigInputError(`nested too deeply; at most ${MAX_CONFIG_DEPTH} levels of mappings and lists`);
    throw e;
  }
  if (doc.errors.length > 0) {
    if (doc.errors.some((e) => /Maximum call stack/.test(e.message))) throw new ConfigInputError(`nested too deeply; at most ${MAX_CONFIG_DEPTH} levels of mappings and lists`);
    throw doc.errors[0];
  }
  const at = (node: YamlNode | null | undefined, path: string) => {
    const line = node?.range ? ` (line ${lines.linePos(node.range[0]).line})` : "";
    const shown = path.length > 80 ? `${path.slice(0, 77)}…` : path; // a deep path is cut, its line is exact
    return `at ${shown || "the top level"}${line}`;
  };
  // Iterative, so a deep document cannot overflow the stack here either.
  const stack: Array<{ node: unknown; path: string; depth: number }> = [{ node: doc.contents, path: "", depth: 0 }];
  while (stack.length > 0) {
    const { node, path, depth } = stack.pop()!;
    if (isScalar(node) || isAlias(node) || node === null || node === undefined) continue;
    if (depth >= MAX_CONFIG_DEPTH) throw new ConfigInputError(`nested more than ${MAX_CONFIG_DEPTH} levels deep ${at(node as YamlNode, path)}; at most ${MAX_CONFIG_DEPTH}`);
    if (isSeq(node)) {
      if (node.items.length > MAX_CONFIG_LIST_ITEMS) throw new ConfigInputError(`a list of ${node.items.length} items ${at(node, path)}; at most ${MAX_CONFIG_LIST_ITEMS} items per list`);
      node.items.forEach((item, i) => stack.push({ node: item, path: path ? `${path}.${i}` : String(i), depth: depth + 1 }));
    } else if (isMap(node)) {
      if (node.items.length > MAX_CONFIG_LIST_ITEMS) throw new ConfigInputError(`a mapping of ${node.items.length} keys ${at(node, path)}; at most ${MAX_CONFIG_LIST_ITEMS} keys per mapping`);
      const seen = new Set<string>();
      for (const pair of node.items) {
        const key = isScalar(pair.key) ? String(pair.key.value) : String(pair.key);
        const here = path ? `${path}.${key}` : key;
        if (RESERVED_KEYS.has(key)) throw new ConfigInputError(`key "${key}" ${at(pair.key as YamlNode, here)}: ${RESERVED_WHY}`);
        if (seen.has(key)) throw new ConfigInputError(`key "${key}" appears twice ${at(pair.key as YamlNode, here)} (map keys must be unique)`);
        seen.add(key);
        stack.push({ node: pair.value, path: here, depth: depth + 1 });
      }
    }
  }
  const value: unknown = doc.toJS({ maxAliasCount: MAX_ALIAS_COUNT });
  // Aliases and YAML 1.1 merge keys (`<<`) copy keys checked above; this catches any that arrive another way.
  const reserved = reservedKeyPath(value);
  if (reserved !== undefined) throw new ConfigInputError(`key ${reserved}: ${RESERVED_WHY}`);
  return value;
}

/**
 * The dotted path of the first own key of `value` (at any depth, arrays included) that is a reserved name
 * (`RESERVED_KEYS`), or undefined. Iterative, and each object is visited once (a cycle ends the walk there).
 */
export function reservedKeyPath(value: unknown): string | undefined {
  const stack: Array<[unknown, string]> = [[value, ""]];
  const seen = new Set<object>();
  while (stack.length > 0) {
    const [v, path] = stack.pop()!;
    if (v === null || typeof v !== "object" || seen.has(v)) continue;
    seen.add(v);
    for (const k of Object.keys(v)) {
      const here = path ? `${path}.${k}` : k;
      if (RESERVED_KEYS.has(k)) return here;
      stack.push([(v as Record<string, unknown>)[k], here]);
    }
  }
  return undefined;
}

/** A problem with a raw config's keys (`<path>: …`), or undefined: a reserved name anywhere in it. */
export function reservedKeyProblem(raw: unknown): string | undefined {
  const path = reservedKeyPath(raw);
  return path === undefined ? undefined : `${path}: ${RESERVED_WHY}`;
}

/** A problem with a dotted config path (`--rl.__proto__.x`, a design's or recipe's override), or undefined. */
export function reservedSegmentProblem(key: string): string | undefined {
  const bad = key.split(".").find((p) => RESERVED_KEYS.has(p));
  return bad === undefined ? undefined : `${key}: "${bad}" is not allowed in a config path; ${RESERVED_WHY}`;
}
