/**
 * Config input (issue 29, part 7 and part 10): files are bounded before they are read and parsed (bytes, YAML tokens,
 * list lengths, nesting), `__proto__` / `constructor` / `prototype` are refused as dotted-path segments and as keys
 * wherever a config is applied or merged, and `Object.prototype` is untouched after each attempt; unknown fields are
 * named with the nearest allowed ones; the resolved config records only the fields the env uses.
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { stringify as toYaml } from "yaml";
import { didYouMean, editDistance, nearestNames } from "../src/core/suggest.ts";
import type { EnvRecipe } from "../src/env/recipe.ts";
import { searchRecipe, travelRecipe } from "../src/envs/index.ts";
import { labConfig } from "../src/lab/cli.ts";
import { designConfigs, resolveDesigns } from "../src/lab/designs.ts";
import { withDefaults, withRecipeDefaults } from "../src/train/recipeDefaults.ts";
import { ConfigError, resolveConfig } from "../src/train/config.ts";
import { buildInstance, personaMix, setupExperiment } from "../src/train/setup.ts";
import { SEARCH_PERSONAS } from "../src/envs/search/demos.ts";
import { applyOverrides, readConfigFile } from "../src/train/configFile.ts";
import { MAX_CONFIG_BYTES, MAX_CONFIG_DEPTH, MAX_CONFIG_LIST_ITEMS, MAX_CONFIG_TOKENS } from "../src/train/configGuards.ts";
import { configError } from "./config-helpers.ts";

const travel = travelRecipe as EnvRecipe;
const dir = mkdtempSync(join(tmpdir(), "arl-config-input-"));
let files = 0;
/** Writes `text` to a new file in the test folder and returns its path. */
const file = (text: string, ext = "yaml"): string => {
  const path = join(dir, `c${files++}.${ext}`);
  writeFileSync(path, text);
  return path;
};


/** Own properties of Object.prototype now (a pollution adds one: `polluted`, `x`…). */
const protoKeys = () => Object.getOwnPropertyNames(Object.prototype).sort();
const cleanProto = protoKeys();
afterEach(() => {
  // Every test ends with Object.prototype as it was; a leak is removed so the next tests stay meaningful.
  const now = protoKeys();
  for (const k of now) if (!cleanProto.includes(k)) delete (Object.prototype as Record<string, unknown>)[k];
  expect(now).toEqual(cleanProto);
  expect(({} as Record<string, unknown>).polluted).toBeUndefined();
});

describe("reserved names in dotted paths (flags, designs, recipe and --agent defaults)", () => {
  it("--rl.__proto__.polluted 1 and its kin are refused naming the path; Object.prototype stays clean", () => {
    for (const key of ["rl.__proto__.polluted", "__proto__.polluted", "rl.constructor.prototype.x", "env.options.__proto__.x", "constructor.prototype.polluted", "rl.prototype", "lab.define.__proto__.preset"]) {
      const m = configError(() => resolveConfig(applyOverrides({}, { [key]: "1" })));
      expect(m).toContain(`${key}: "`);
      expect(m).toContain("is not allowed in a config path");
    }
  });

  it("a flag's value holding a reserved key is refused (`--env.options '{__proto__: {x: 1}}'`)", () => {
    for (const value of ['{"__proto__": {"polluted": 1}}', "{constructor: {prototype: {x: 1}}}", "[{prototype: 1}]"]) {
      const m = configError(() => applyOverrides({}, { "env.options": value }));
      expect(m).toMatch(/env\.options: key "(__proto__|constructor|prototype)"/);
    }
  });

  it("a path through an inherited name (`--rl.toString.x`) is an unknown field, not a crash", () => {
    expect(configError(() => resolveConfig(applyOverrides({}, { "rl.toString.x": "1" })))).toContain("rl: unknown field(s) toString");
  });

  it("recipe / --agent defaults (withDefaults) and a library caller's JSON-parsed config are refused too", () => {
    expect(configError(() => withDefaults({}, { "rl.__proto__.polluted": "1" }))).toContain("rl.__proto__.polluted");
    const parsed = JSON.parse('{"rl": {"__proto__": {"steps": 5}}, "__proto__": {"polluted": 1}}') as Record<string, unknown>;
    expect(configError(() => resolveConfig(parsed))).toMatch(/(rl\.)?__proto__: "__proto__", "constructor" and "prototype" are refused/);
    expect(configError(() => withRecipeDefaults(parsed, travel))).toContain("__proto__");
    const ctor = JSON.parse('{"env": {"options": {"constructor": {"prototype": {"x": 1}}}}}') as Record<string, unknown>;
    expect(configError(() => resolveConfig(ctor))).toContain("env.options.constructor");
  });

  it("a lab design's overrides with __proto__ (search lab and env lab) are refused, naming the design", () => {
    const path = file(toYaml({ lab: { designs: ["x"], define: { x: { overrides: { "rl.__proto__.polluted": 1 } } } } }));
    const config = resolveConfig(readConfigFile(path));
    const m = configError(() => designConfigs(config, resolveDesigns(config, searchRecipe)));
    expect(m).toContain('design x: rl.__proto__.polluted: "__proto__" is not allowed in a config path');
    const envRaw = readConfigFile(file(toYaml({ lab: { define: { y: { preset: "tool-env", overrides: { "env.options.constructor.prototype.polluted": 1 } } } } })));
    expect(configError(() => labConfig(travel, envRaw, { designs: "y" }, {}))).toContain("design y: env.options.constructor.prototype.polluted");
  });

  it("design names that objects inherit (constructor, toString) are unknown designs, not a TypeError", () => {
    const config = resolveConfig({ lab: { designs: ["constructor", "toString", "hasOwnProperty"] } });
    const m = configError(() => resolveDesigns(config, searchRecipe));
    for (const n of ["constructor", "toString", "hasOwnProperty"]) expect(m).toContain(`lab.designs: unknown design "${n}"`);
  });
});

describe("config files are bounded before they are read and parsed", () => {
  it("a 30 MB YAML with a 5 M-item list is refused by its size, with the file and the limit (before: out of memory)", () => {
    const path = file("a:\n" + "  - 0\n".repeat(5_000_000));
    const m = configError(() => readConfigFile(path));
    expect(m).toContain(`config file ${path}: 30000003 bytes; at most ${MAX_CONFIG_BYTES} (256 KiB)`);
  });

  it("a device or pipe is read only up to the limit (/dev/zero does not hang)", () => {
    expect(configError(() => readConfigFile("/dev/zero"))).toContain(`config file /dev/zero: more than ${MAX_CONFIG_BYTES} bytes; at most ${MAX_CONFIG_BYTES}`);
  });

  it("under the byte limit: too many tokens, a list too long, nesting too deep, repeated keys", () => {
    const keys = file("env:\n  options:\n" + Array.from({ length: 13_000 }, (_, i) => `    k${i}: 0\n`).join(""));
    expect(configError(() => readConfigFile(keys))).toContain(`config file ${keys}: more than ${MAX_CONFIG_TOKENS} YAML tokens`);
    const list = file(`reward:\n  options:\n    abstentions: [${Array(12_000).fill("x").join(",")}]\n`);
    expect(configError(() => readConfigFile(list))).toContain(`config file ${list}: a list of 12000 items at reward.options.abstentions (line 3); at most ${MAX_CONFIG_LIST_ITEMS} items per list`);
    const deep = file(`env:\n  options:\n    a: ${"[".repeat(100)}${"]".repeat(100)}\n`);
    expect(configError(() => readConfigFile(deep))).toMatch(new RegExp(`config file .*: nested more than ${MAX_CONFIG_DEPTH} levels deep at env\\.options\\.a\\.0\\.0.*\\(line 3\\); at most ${MAX_CONFIG_DEPTH}`));
    const deeper = file(`a: ${"[".repeat(20_000)}${"]".repeat(20_000)}\n`);
    expect(configError(() => readConfigFile(deeper))).toContain(`config file ${deeper}: nested too deeply; at most ${MAX_CONFIG_DEPTH}`);
    const twice = file("rl:\n  groupSize: 4\n  groupSize: 5\n");
    expect(configError(() => readConfigFile(twice))).toContain(`config file ${twice}: key "groupSize" appears twice at rl.groupSize (line 3)`);
  });

  it("an alias bomb stops at the alias limit with an error naming the file", () => {
    const rows = ["a: &a [x, x, x, x, x, x, x, x, x, x]"];
    for (let i = 1; i < 9; i++) rows.push(`${String.fromCharCode(97 + i)}: &${String.fromCharCode(97 + i)} [${Array(10).fill(`*${String.fromCharCode(96 + i)}`).join(", ")}]`);
    const path = file(rows.join("\n") + "\n");
    expect(() => readConfigFile(path)).toThrow(new RegExp(`config file ${path}: .*alias`, "i"));
  });

  it("reserved keys in YAML and JSON files are refused with the key's path and line", () => {
    const cases: Array<[string, string, string]> = [
      ["rl:\n  __proto__:\n    polluted: 1\n", "yaml", 'key "__proto__" at rl.__proto__ (line 2)'],
      ['{"rl": {"constructor": {"prototype": {"x": 1}}}}', "json", 'key "constructor" at rl.constructor (line 1)'],
      ["lab:\n  define:\n    __proto__:\n      preset: default\n", "yaml", 'key "__proto__" at lab.define.__proto__ (line 3)'],
      ["env:\n  options:\n    items:\n      - prototype: 1\n", "yaml", 'key "prototype" at env.options.items.0.prototype (line 4)'],
      ["lab:\n  define:\n    x:\n      overrides:\n        constructor: 1\n", "yaml", 'key "constructor" at lab.define.x.overrides.constructor (line 5)'],
    ];
    for (const [text, ext, where] of cases) {
      const path = file(text, ext);
      expect(configError(() => readConfigFile(path))).toContain(`config file ${path}: ${where}: "__proto__", "constructor" and "prototype" are refused`);
    }
  });

  it("an ordinary config still reads as before (JSON, YAML, an empty file)", () => {
    expect(readConfigFile(file('{"rl": {"groupSize": 4}, "reward": {"options": {"abstentions": ["a", "b"]}}}', "json"))).toEqual({ rl: { groupSize: 4 }, reward: { options: { abstentions: ["a", "b"] } } });
    expect(readConfigFile(file("rl:\n  groupSize: 4\nenv:\n  faults:\n    kinds: [hang, slow]\n"))).toEqual({ rl: { groupSize: 4 }, env: { faults: { kinds: ["hang", "slow"] } } });
    expect(readConfigFile(file(""))).toEqual({});
  });
});

describe("unknown fields are named with the nearest allowed ones", () => {
  it("nearestNames: case, '_' and '-' first, then a small edit distance; nothing far or huge", () => {
    expect(nearestNames("groupsize", ["steps", "groupSize", "tasksPerStep"])).toEqual(["groupSize"]);
    expect(nearestNames("group_size", ["steps", "groupSize"])).toEqual(["groupSize"]);
    expect(nearestNames("grupSize", ["steps", "groupSize"])).toEqual(["groupSize"]);
    expect(nearestNames("lr", ["steps", "learningRate"])).toEqual([]);
    expect(nearestNames("x".repeat(100_000), ["steps"])).toEqual([]);
    expect(editDistance("kitten", "sitting")).toBe(3);
    expect(didYouMean("polcy", ["run", "env", "policy"])).toBe(" (did you mean policy?)");
    expect(didYouMean("zzz", ["run"])).toBe("");
  });

  it("flags, YAML files and nested sections: `--rl.groupsize 4` suggests groupSize", () => {
    const err = (overrides: Record<string, string>, raw: Record<string, unknown> = {}) => configError(() => resolveConfig(applyOverrides(raw, overrides)));
    expect(err({ "rl.groupsize": "4" })).toContain("rl: unknown field(s) groupsize (did you mean groupSize?)");
    expect(err({ "env.tools.timeoutMS": "5" })).toContain("env.tools: unknown field(s) timeoutMS (did you mean timeoutMs?)");
    expect(err({ "polcy.dModel": "8" })).toContain("(top level): unknown field(s) polcy (did you mean policy?)");
    expect(err({ "reward.weights.serch_cost": "1" })).toContain("reward.weights.serch_cost: unknown reward term (did you mean search_cost?)");
    expect(err({}, readConfigFile(file("rl:\n  group_size: 4\n")))).toContain("rl: unknown field(s) group_size (did you mean groupSize?)");
    // No near name: the allowed ones are listed instead.
    expect(err({ "rl.zzz": "1" })).toMatch(/rl: unknown field\(s\) zzz; allowed: steps, tasksPerStep, groupSize, /);
  });

  it("a lab design's overrides and a recipe's options suggest too", () => {
    const config = resolveConfig({ lab: { designs: ["x", "compsite"], define: { x: { overrides: { "rl.groupsize": 4 } } } } });
    expect(configError(() => resolveDesigns(config, searchRecipe))).toContain('lab.designs: unknown design "compsite" for the search env (did you mean composite?)');
    const x = resolveConfig({ lab: { designs: ["x"], define: { x: { overrides: { "rl.groupsize": 4 } } } } });
    expect(configError(() => designConfigs(x, resolveDesigns(x, searchRecipe)))).toContain("design x: rl: unknown field(s) groupsize (did you mean groupSize?)");
    const ctx = { seed: 0, protocol: "hermes" as const, maxTurns: 4, call: {} };
    expect(() => travel.build({ ...ctx, options: { failurerate: 0.1 } })).toThrow("env.options.failurerate: unknown option (did you mean failureRate?); allowed: failureRate");
    expect(() => (searchRecipe as EnvRecipe).build({ ...ctx, protocol: "search-r1", options: { numcountries: 12 } })).toThrow("env.options.numcountries: unknown option (did you mean numCountries?)");
  });
});

describe("the resolved config records the fields the env uses", () => {
  it("sft.personas is recorded only when set: neither the search nor the travel config carries a persona mix by default", () => {
    expect(resolveConfig({}).sft.personas).toBeUndefined();
    const t = resolveConfig(withRecipeDefaults({}, travel));
    expect(t.env.name).toBe("travel");
    expect(t.sft.personas).toBeUndefined();
    expect(toYaml(t)).not.toContain("guesser"); // what config.yaml and --print-config write
    expect(JSON.stringify(t)).not.toContain("personas");
  });

  it("sft.personas weighs any env's own personas over its mix; a persona the env lacks is refused with the allowed names", () => {
    const search = resolveConfig({ sft: { personas: { careful: 1 } } });
    expect(personaMix(buildInstance(search, searchRecipe), search, "search")).toEqual({ ...SEARCH_PERSONAS, careful: 1 });
    const t = resolveConfig(withRecipeDefaults({ sft: { personas: { ...SEARCH_PERSONAS } } }, travel));
    const m = configError(() => setupExperiment(t, travel));
    expect(m).toContain("sft.personas.overSearcher: not a persona of the travel env; allowed: ");
    expect(configError(() => resolveConfig({ sft: { personas: { careful: -1 } } }))).toContain("sft.personas.careful");
  });

  it("keys that moved name their new path: env.world.* and env.topK are the search env's env.options", () => {
    const m = configError(() => resolveConfig({ env: { world: { numCountries: 12 }, topK: 5 } }));
    expect(m).toContain("env.world.numCountries: moved to env.options.numCountries");
    expect(m).toContain("env.topK: moved to env.options.topK");
  });
});
