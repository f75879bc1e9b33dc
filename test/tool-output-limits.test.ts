/**
 * Issue 29, part 2 and the tool half of parts 9–10: what a tool gives back cannot exhaust the heap, and what it
 * throws or grades is shown as it is.
 * - a result over the hard limit (`maxResultBytes`, bytes) is an error observation naming the tool and its size, and
 *   the run goes on; a huge object, array or typed array is refused without being serialised whole;
 * - a cut (capped) result, a string value, an object holding a slice or a hidden property, and an error text keep
 *   only their own characters: measured in a child process with `--expose-gc` (heap after a full collection), 40
 *   results of fresh 5 MB strings retain well under the 200 MB they kept when a kept string was a V8 slice of the
 *   whole output (or the object itself was kept); a huge typed array is refused without growing the RSS;
 * - a thrown non-Error shows its JSON (or a bounded description), never `[object Object]`;
 * - a grade or option of the wrong type is quoted with its type (`"1" (a string)`), never `got 1`.
 */
import { spawnSync } from "node:child_process";
import { createRequire } from "node:module";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { runInNewContext } from "node:vm";
import { afterAll, describe, expect, it, vi } from "vitest";
import { z } from "zod";
import type { Grade, Task } from "../src/core/types.ts";
import { describeValue, ownCopy } from "../src/core/values.ts";
import { callTool, tool, truncateChars } from "../src/env/tool.ts";
import { checkGrade, toolEnv } from "../src/env/toolEnv.ts";
import { getRecipe } from "../src/envs/index.ts";
import { hermesProtocol } from "../src/protocol/hermes.ts";
import { WordTokenizer } from "../src/policy/tokenizer.ts";
import { ScriptedAgent } from "../src/rollout/agent.ts";
import { rolloutGroups } from "../src/rollout/rollout.ts";
import { resolveConfig } from "../src/train/config.ts";
import { applyOverrides } from "../src/train/configFile.ts";
import { recipeContext } from "../src/train/setup.ts";

const dir = mkdtempSync(join(tmpdir(), "arl-tool-limits-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const task: Task = { id: "t1", question: "dump the table", answers: [], kind: "dump" };
const returning = (name: string, v: () => unknown) => tool({ name, description: "", inputSchema: z.object({}), execute: v });
const MB50 = 50_000_000;

describe("the hard limit on a tool's output (maxResultBytes)", () => {
  it("a 50 MB string is an error observation naming the tool and its size; the rollout goes on to its answer", async () => {
    const env = toolEnv({ protocol: hermesProtocol, instructions: "Dump.", tools: [returning("dump", () => "x".repeat(MB50))], maxTurns: 3 });
    const call = hermesProtocol.format({ type: "tool_call", calls: [{ name: "dump", arguments: {} }] });
    const answer = hermesProtocol.format({ type: "answer", answer: "done" });
    const error = "error: tool dump: output of 50000000 bytes exceeds the hard limit of 16777216 bytes (maxResultBytes)";
    const prompt = await env().reset(task);
    const tok = WordTokenizer.fromTexts([prompt, call, answer, hermesProtocol.observation([{ name: "dump", ok: false, content: error }]).text], hermesProtocol.specialTokens);
    const script = new ScriptedAgent(tok, (ctx) => (ctx.turnIndex < 2 ? call : answer));
    const [g] = await rolloutGroups([task], { makeEnv: env, agent: script, tokenizer: tok, limits: { contextLength: 4096, maxObservationTokens: 256 } }, { groupSize: 2, seed: 1 });
    for (const t of g.trajectories) {
      expect(t.turns).toHaveLength(3);
      for (const turn of t.turns.slice(0, 2)) {
        expect(turn.toolResults).toEqual([{ name: "dump", ok: false, content: error, errorKind: "oversize" }]);
      }
      expect(t.answer).toBe("done");
    }
    const e = env();
    await e.reset(task);
    expect((await e.step(call)).observation).toContain(`<tool_response>\n${error}\n</tool_response>`);
  });

  it("counts UTF-8 bytes, is configurable, and refuses huge objects, arrays and typed arrays before serialising them whole", async () => {
    const opts = { maxResultBytes: 1_000_000 };
    // 400 000 × "é" is 400 000 chars but 800 000 bytes; 600 000 × "€" is 1 800 000 bytes.
    expect(await callTool(returning("t", () => "é".repeat(400_000)), {}, opts)).toMatchObject({ ok: false, kind: "oversize", error: "tool t: output of 400000 chars exceeds the cap of 100000 chars" });
    expect(await callTool(returning("t", () => "€".repeat(600_000)), {}, opts)).toEqual({
      ok: false, kind: "oversize", attempts: 1, error: "tool t: output of 1800000 bytes exceeds the hard limit of 1000000 bytes (maxResultBytes)",
    });
    const over = "tool t: output of more than 1000000 bytes exceeds the hard limit of 1000000 bytes (maxResultBytes)";
    for (const huge of [{ rows: Array.from({ length: 200_000 }, (_, i) => ({ id: i, name: "row" })) }, new Array(1_500_000).fill(0), new Uint8Array(1_500_000), Buffer.alloc(1_500_000)]) {
      expect(await callTool(returning("t", () => huge), {}, opts)).toEqual({ ok: false, kind: "oversize", attempts: 1, error: over });
    }
    // Under the hard limit, the soft cap still gives the head.
    const soft = await callTool(returning("t", () => ({ rows: new Array(50_000).fill("abc") })), {}, opts);
    expect(soft).toMatchObject({ ok: false, kind: "oversize", error: "tool t: output of 300010 chars exceeds the cap of 100000 chars" });
    expect(!soft.ok && soft.partial!.startsWith('{"rows":["abc","abc"')).toBe(true);
    // The option is checked, naming it and quoting a wrong type.
    expect(await callTool(returning("t", () => "x"), {}, { maxResultBytes: 0 })).toMatchObject({ ok: false, kind: "config", error: "tool t: maxResultBytes must be an integer > 0 (bytes), got 0" });
    expect(await callTool(returning("t", () => "x"), {}, { maxResultBytes: "100" as unknown as number })).toMatchObject({
      ok: false, kind: "config", error: 'tool t: maxResultBytes must be an integer > 0 (bytes), got "100" (a string)',
    });
    expect(await callTool(returning("t", () => "x"), {}, { timeoutMs: "100" as unknown as number })).toMatchObject({ ok: false, kind: "config" });
    // The config's env.tools.maxResultBytes reaches a recipe's tool calls.
    const config = resolveConfig(applyOverrides({ env: { name: "travel" } }, { "env.tools.maxResultBytes": "1000" }));
    expect(recipeContext(config, getRecipe("travel")).call.maxResultBytes).toBe(1000);
    expect(() => resolveConfig({ env: { tools: { maxResultBytes: 0 } } })).toThrow(/env\.tools\.maxResultBytes/);
  });

  it("a formatter's text is cut to the soft cap too, and a value whose JSON is empty is invalid output, not a crash", async () => {
    const env = toolEnv({ protocol: hermesProtocol, instructions: "x", tools: [returning("t", () => "abc")], formatResult: (_n, v) => String(v).repeat(100_000), call: { maxOutputChars: 1000 } })();
    await env.reset(task);
    const r = await env.step(hermesProtocol.format({ type: "tool_call", calls: [{ name: "t", arguments: {} }] }));
    expect(r.info.toolResults?.[0].content).toHaveLength(1000);
    expect(r.info.toolResults?.[0].content).toMatch(/^(abc)+a?b?…\[truncated 299000 chars\]$/);
    expect(await callTool(returning("t", () => ({ toJSON: () => undefined })), {})).toMatchObject({ ok: false, kind: "invalid_output", error: "tool t: invalid output: not JSON-serialisable (its JSON is empty)" });
  });
});

describe("what is kept holds only its own characters", () => {
  it("40 capped results, sliced values (alone or in an object), hidden properties and error texts of fresh 5 MB strings retain far less than 200 MB after GC", () => {
    const src = (p: string) => JSON.stringify(resolve(p));
    const script = join(dir, "retention.mts");
    writeFileSync(script, [
      `import { z } from ${JSON.stringify(pathToFileURL(createRequire(import.meta.url).resolve("zod")).href)};`,
      `import { callTool, tool } from ${src("src/env/tool.ts")};`,
      `import { toolEnv } from ${src("src/env/toolEnv.ts")};`,
      `import { hermesProtocol } from ${src("src/protocol/hermes.ts")};`,
      `const N = 40, SIZE = 5_000_000;`,
      // A new 5 MB string per call (a different letter and suffix each time, so none is shared).
      `const fresh = (i) => String.fromCharCode(97 + (i % 26)).repeat(SIZE) + i;`,
      `const heap = () => { gc(); gc(); return process.memoryUsage().heapUsed; };`,
      `const mk = (execute) => tool({ name: "t", description: "", inputSchema: z.object({}), execute });`,
      `const out = {};`,
      `async function measure(name, run) { const keep = []; const base = heap(); for (let i = 0; i < N; i++) keep.push(await run(i)); out[name] = (heap() - base) / 1e6; keep.length = 0; }`,
      `let i0 = 0;`,
      `await measure("capped", (i) => callTool(mk(() => fresh(i)), {}));`,
      `await measure("sliced value", (i) => callTool(mk(() => fresh(i).slice(0, 1000)), {}));`,
      `await measure("error text", (i) => callTool(mk(() => { throw new Error(fresh(i)); }), {}));`,
      `await measure("thrown string", (i) => callTool(mk(() => { throw fresh(i); }), {}));`,
      `const env = toolEnv({ protocol: hermesProtocol, instructions: "x", tools: () => [mk(() => fresh(i0++))], maxTurns: 100 });`,
      `const call = hermesProtocol.format({ type: "tool_call", calls: [{ name: "t", arguments: {} }] });`,
      `await measure("toolEnv step", async () => { const e = env(); await e.reset({ id: "a", question: "q", answers: [] }); return e.step(call); });`,
      // An object holding a 40-character slice of a fresh 5 MB string, or a hidden (non-enumerable) 5 MB string.
      `await measure("slice in an object", (i) => callTool(mk(() => ({ city: "oslo", note: fresh(i).slice(0, 40) })), {}));`,
      `await measure("hidden property", (i) => callTool(mk(() => { const o = { city: "oslo" }; const s = fresh(i); s.charCodeAt(7); Object.defineProperty(o, "blob", { value: s, enumerable: false }); return o; }), {}));`,
      // A 160 MB Float64Array over the hard limit is refused by its length: no key list of its 20 M indices is built.
      `const big = new Float64Array(20_000_000).fill(1.5); const rss0 = process.memoryUsage().rss;`,
      `await callTool(mk(() => big), {});`,
      `out["typed array rss"] = (process.memoryUsage().rss - rss0) / 1e6;`,
      `console.log(JSON.stringify(out));`,
    ].join("\n"));
    const r = spawnSync(process.execPath, ["--expose-gc", "--import", "tsx", script], { encoding: "utf8", timeout: 90_000 });
    expect(r.error, "the child did not finish within 90 s").toBeUndefined();
    expect(r.status, r.stderr).toBe(0);
    const retained = JSON.parse(r.stdout.trim().split("\n").pop()!) as Record<string, number>;
    expect(Object.keys(retained)).toEqual(["capped", "sliced value", "error text", "thrown string", "toolEnv step", "slice in an object", "hidden property", "typed array rss"]);
    // Each kept result holds ≤ 100 000 chars (≤ 0.2 MB): 40 of them are ≤ 8 MB; a slice of each output would be 200 MB.
    for (const [what, mb] of Object.entries(retained)) expect.soft(mb, `${what}: ${mb.toFixed(1)} MB retained`).toBeLessThan(25);
  }, 120_000);

  it("a kept object is a copy rebuilt from its JSON: plain data equal, hidden properties gone; a Buffer is refused by its length", async () => {
    const rows = { city: "oslo", temp_c: 7, tags: ["a", "é🎉"], nested: { ok: true, none: null } };
    const hidden = { ...rows };
    Object.defineProperty(hidden, "blob", { value: "q".repeat(1000), enumerable: false });
    const when = new Date(0);
    for (const [v, kept] of [[rows, rows], [hidden, rows], [{ when }, { when: when.toJSON() }], [[1, "x", null], [1, "x", null]]] as const) {
      const r = await callTool(returning("t", () => v), {});
      expect(r).toEqual({ ok: true, value: kept });
      expect(r.ok && r.value).not.toBe(v);
    }
    expect(await callTool(returning("t", () => NaN), {})).toEqual({ ok: true, value: NaN }); // primitives are kept as they are
    // Node's Buffer.toJSON would first build an array of every byte; the length alone shows it is over the limit.
    const toJSON = vi.spyOn(Buffer.prototype, "toJSON");
    try {
      const over = "tool t: output of more than 1000000 bytes exceeds the hard limit of 1000000 bytes (maxResultBytes)";
      expect(await callTool(returning("t", () => ({ file: Buffer.alloc(600_000) })), {}, { maxResultBytes: 1_000_000 })).toEqual({ ok: false, kind: "oversize", attempts: 1, error: over });
      expect(toJSON).not.toHaveBeenCalled();
    } finally {
      toJSON.mockRestore();
    }
  });

  it("ownCopy and truncateChars keep the characters exactly (lone surrogates too) and never split a pair", () => {
    for (const s of ["", "abc", "é€🎉", "a\ud800b", "\udc00"]) expect(ownCopy(s)).toBe(s);
    expect(truncateChars("🎉".repeat(100), 50)).toBe(`${"🎉".repeat(14)}…[truncated 150 chars]`);
    // A cut at 27 characters would split the 14th emoji: the head stops before it.
    expect(truncateChars("🎉".repeat(100), 49)).toBe(`${"🎉".repeat(13)}…[truncated 151 chars]`);
  });
});

describe("a thrown non-Error value and a grade of the wrong type are shown as they are", () => {
  it("the policy sees the thrown value's JSON, or a bounded description — never [object Object]", async () => {
    const throwing = (v: unknown) => tool({ name: "t", description: "", inputSchema: z.object({}), execute: () => { throw v; } });
    const err = async (v: unknown, cap?: number) => {
      const r = await callTool(throwing(v), {}, cap === undefined ? {} : { maxOutputChars: cap });
      return r.ok ? "ok" : r.error;
    };
    expect(await err({ code: 429, reason: "rate limited" })).toBe('tool t: {"code":429,"reason":"rate limited"}');
    expect(await err(["a", 1])).toBe('tool t: ["a",1]');
    expect(await err("plain text")).toBe("tool t: plain text");
    expect(await err(42)).toBe("tool t: 42");
    expect(await err(null)).toBe("tool t: null");
    expect(await err(new TypeError(""))).toBe("tool t: TypeError");
    expect(await err(runInNewContext('new RangeError("from a vm context")'))).toBe("tool t: from a vm context");
    class HttpFailure { status = 503; body = { retry: true }; }
    expect(await err(new HttpFailure())).toBe('tool t: {"status":503,"body":{"retry":true}}');
    class Opaque {}
    expect(await err(new Opaque())).toBe("tool t: Opaque {} (an object)");
    const cyclic: Record<string, unknown> = { code: 7 };
    cyclic.self = cyclic;
    expect(await err(cyclic)).toBe("tool t: <ref *1> { code: 7, self: [Circular *1] } (an object)");
    expect(await err({ n: BigInt(7) })).toBe("tool t: { n: 7n } (an object)");
    // A huge thrown object is described within the cap, its serialisation stopped early.
    const huge = await err({ rows: new Array(1_000_000).fill("row") }, 300);
    expect(huge.length).toBeLessThanOrEqual(300);
    expect(huge).toMatch(/^tool t: \{ rows: \[ 'row', 'row', .*\(an object\)$/);
    for (const e of [await err({ a: 1 }), await err(new Opaque()), huge]) expect(e).not.toContain("[object Object]");
  });

  it("a grade's score or part of the wrong type is quoted with its type, not read as a number", () => {
    const g = (score: unknown, parts: unknown = {}) => () => checkGrade({ score, parts } as unknown as Grade);
    expect(g("1")).toThrow('grade: score must be a number in [0, 1], got "1" (a string)');
    expect(g(1.5)).toThrow("grade: score must be a number in [0, 1], got 1.5");
    expect(g(NaN)).toThrow("grade: score must be a number in [0, 1], got NaN");
    expect(g(null)).toThrow("grade: score must be a number in [0, 1], got null");
    expect(g(1, { right: "0" })).toThrow('grade: part "right" must be a number in [0, 1], got "0" (a string)');
    expect(g(1, { right: [1] })).toThrow('grade: part "right" must be a number in [0, 1], got [ 1 ] (an array)');
    expect(g(1, null)).toThrow("grade: parts must be an object of numbers in [0, 1], got null");
    expect(() => checkGrade(undefined as unknown as Grade)).toThrow("grade: expected {score, parts}, got undefined");
    expect(checkGrade({ score: 1, parts: { right: 1 } })).toEqual({ score: 1, parts: { right: 1 } });
    expect(describeValue("x".repeat(1000))).toBe(`"${"x".repeat(80)}…" (a string)`);
  });
});
