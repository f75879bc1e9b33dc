/**
 * The shape of `src/` (issue 30, "Names and edges"): imports point down the layers, no env is named outside
 * `src/envs`, the file-level import graph has no cycle, no function takes more than 5 parameters, and no file is
 * over 500 lines. Imports are listed by the `typescript` package's `ts.preProcessFile` (static imports, `import
 * type`, re-exports, dynamic `import()` and `typeof import()`), functions found by walking its syntax tree — no
 * regexes over source text. Each check prints every violation it finds.
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import ts from "typescript";
import { describe, expect, it } from "vitest";

/**
 * The layers of `src/`, lowest first: each entry is one layer, the top folders of `src/` in it (`index.ts` is the
 * file `src/index.ts`). A file may import its own folder or a folder of a LOWER layer — never a folder of its own
 * layer or of one above.
 */
const LAYERS: readonly (readonly string[])[] = [
  ["core"],
  ["retrieval", "http"],
  ["protocol"],
  ["env"],
  ["rollout"],
  ["reward"],
  ["algo"],
  ["policy"],
  ["train"],
  // The base model's pretraining (corpus, later `arl pretrain`): above the trainer, below every env (it names none).
  ["pretrain"],
  ["envs"],
  ["serve"],
  ["lab", "gateway", "view", "export", "baselines"],
  ["external"],
  ["run"],
  ["cli", "index.ts"],
];

/** Files allowed over `MAX_FILE_LINES` (paths relative to `src/`), each with its reason. Empty: none is. */
const LONG_FILE_EXCEPTIONS: Readonly<Record<string, string>> = {};
const MAX_FILE_LINES = 500;
const MAX_PARAMETERS = 5;

const SRC = resolve(import.meta.dirname, "../src");

/** Every `.ts` file under `dir`, as paths relative to `src/` with `/` separators, sorted. */
function tsFiles(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...tsFiles(p));
    else if (name.endsWith(".ts")) out.push(relative(SRC, p).split("\\").join("/"));
  }
  return out.sort();
}

const FILES = tsFiles(SRC);
const TEXT = new Map(FILES.map((f) => [f, readFileSync(join(SRC, f), "utf8")]));

/** The file a relative specifier of `from` names (relative to `src/`), or undefined when it is outside `src/`. */
function target(from: string, spec: string): string | undefined {
  const abs = resolve(SRC, dirname(from), spec);
  const rel = relative(SRC, abs).split("\\").join("/");
  if (rel.startsWith("..")) return undefined;
  for (const candidate of [rel, rel.replace(/\.js$/, ".ts"), `${rel}.ts`, `${rel}/index.ts`]) {
    if (TEXT.has(candidate)) return candidate;
  }
  return rel;
}

/** The `src/` files each file imports (relative specifiers only), in source order, without repeats. */
const IMPORTS = new Map<string, string[]>(
  FILES.map((f) => {
    const info = ts.preProcessFile(TEXT.get(f) as string, true, true);
    const targets = info.importedFiles
      .map((r) => r.fileName)
      .filter((spec) => spec.startsWith("."))
      .map((spec) => target(f, spec))
      .filter((t): t is string => t !== undefined);
    return [f, [...new Set(targets)]];
  }),
);

/** The top folder of a file (`index.ts` for `src/index.ts`). */
const folderOf = (file: string): string => file.split("/")[0];
const RANK = new Map<string, number>(LAYERS.flatMap((layer, i) => layer.map((folder) => [folder, i] as const)));

describe("src/ import layers", () => {
  it("every top folder of src/ is in LAYERS", () => {
    const unknown = [...new Set(FILES.map(folderOf))].filter((f) => !RANK.has(f));
    expect(unknown, "top folders of src/ missing from LAYERS (place them in a layer)").toEqual([]);
  });

  it("imports point down the layers (or stay in their folder)", () => {
    const bad: string[] = [];
    for (const [from, targets] of IMPORTS) {
      const a = folderOf(from);
      for (const to of targets) {
        const b = folderOf(to);
        if (a === b) continue;
        const ra = RANK.get(a);
        const rb = RANK.get(b);
        if (ra === undefined || rb === undefined || rb >= ra) bad.push(`${from} → ${to}`);
      }
    }
    expect(bad, `imports that do not point down (layers: ${LAYERS.map((l) => l.join(", ")).join(" → ")})`).toEqual([]);
  });

  it("nothing outside src/envs imports an env's own folder (only the registry src/envs/index.ts)", () => {
    const bad: string[] = [];
    for (const [from, targets] of IMPORTS) {
      if (folderOf(from) === "envs") continue;
      for (const to of targets) if (folderOf(to) === "envs" && to !== "envs/index.ts") bad.push(`${from} → ${to}`);
    }
    expect(bad).toEqual([]);
  });

  it("the file-level import graph has no cycle", () => {
    expect(importCycles().map((c) => c.join(" → "))).toEqual([]);
  });
});

describe("src/ size limits", () => {
  it(`no function, method, arrow function or constructor has more than ${MAX_PARAMETERS} parameters`, () => {
    const bad: string[] = [];
    for (const f of FILES) {
      const sf = ts.createSourceFile(f, TEXT.get(f) as string, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
      const visit = (node: ts.Node): void => {
        if (isFunctionLike(node)) {
          const n = node.parameters.filter((p) => !(ts.isIdentifier(p.name) && p.name.text === "this")).length;
          if (n > MAX_PARAMETERS) {
            const line = sf.getLineAndCharacterOfPosition(node.getStart(sf)).line + 1;
            bad.push(`${f}:${line} ${functionName(node)} (${n} parameters)`);
          }
        }
        ts.forEachChild(node, visit);
      };
      visit(sf);
    }
    expect(bad).toEqual([]);
  });

  it(`no file is over ${MAX_FILE_LINES} lines`, () => {
    const long: string[] = [];
    for (const [f, text] of TEXT) {
      const lines = text.split("\n").length - (text.endsWith("\n") ? 1 : 0);
      if (lines > MAX_FILE_LINES && !(f in LONG_FILE_EXCEPTIONS)) long.push(`${f} (${lines} lines)`);
    }
    expect(long).toEqual([]);
  });
});

type FunctionLike = ts.FunctionDeclaration | ts.MethodDeclaration | ts.ArrowFunction | ts.FunctionExpression | ts.ConstructorDeclaration;

function isFunctionLike(node: ts.Node): node is FunctionLike {
  return ts.isFunctionDeclaration(node) || ts.isMethodDeclaration(node) || ts.isArrowFunction(node) || ts.isFunctionExpression(node) || ts.isConstructorDeclaration(node);
}

/** A readable name of a function: its own, the variable or property it is assigned to, or `<anonymous>`. */
function functionName(node: FunctionLike): string {
  if (ts.isConstructorDeclaration(node)) {
    const cls = node.parent;
    return `${ts.isClassLike(cls) && cls.name ? cls.name.text : "<class>"}.constructor`;
  }
  if (node.name !== undefined) return node.name.getText();
  const parent = node.parent;
  if ((ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent) || ts.isPropertyDeclaration(parent)) && parent.name !== undefined) {
    return parent.name.getText();
  }
  return "<anonymous>";
}

/**
 * One cycle per strongly connected component of the import graph with more than one file (or a file importing
 * itself), each as the files around it, starting and ending at the same file. Tarjan's algorithm, iterative.
 */
function importCycles(): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const components: string[][] = [];
  let next = 0;
  const edges = (v: string) => (IMPORTS.get(v) ?? []).filter((w) => IMPORTS.has(w));
  for (const root of IMPORTS.keys()) {
    if (index.has(root)) continue;
    const work: Array<{ v: string; i: number }> = [{ v: root, i: 0 }];
    index.set(root, next);
    low.set(root, next++);
    stack.push(root);
    onStack.add(root);
    while (work.length > 0) {
      const frame = work[work.length - 1];
      const out = edges(frame.v);
      if (frame.i < out.length) {
        const w = out[frame.i++];
        if (!index.has(w)) {
          index.set(w, next);
          low.set(w, next++);
          stack.push(w);
          onStack.add(w);
          work.push({ v: w, i: 0 });
        } else if (onStack.has(w)) {
          low.set(frame.v, Math.min(low.get(frame.v) as number, index.get(w) as number));
        }
        continue;
      }
      work.pop();
      if (work.length > 0) {
        const parent = work[work.length - 1].v;
        low.set(parent, Math.min(low.get(parent) as number, low.get(frame.v) as number));
      }
      if (low.get(frame.v) === index.get(frame.v)) {
        const component: string[] = [];
        let w: string;
        do {
          w = stack.pop() as string;
          onStack.delete(w);
          component.push(w);
        } while (w !== frame.v);
        if (component.length > 1 || edges(frame.v).includes(frame.v)) components.push(component);
      }
    }
  }
  return components.map((c) => cycleIn(new Set(c), edges));
}

/** A shortest cycle through the first (sorted) file of a strongly connected component (breadth-first search). */
function cycleIn(component: ReadonlySet<string>, edges: (v: string) => string[]): string[] {
  const start = [...component].sort()[0];
  const prev = new Map<string, string>();
  const queue = [start];
  for (let q = 0; q < queue.length; q++) {
    const v = queue[q];
    for (const w of edges(v)) {
      if (!component.has(w)) continue;
      if (w === start) {
        const path = [v];
        while (path[0] !== start) path.unshift(prev.get(path[0]) as string);
        return [...path, start];
      }
      if (!prev.has(w)) {
        prev.set(w, v);
        queue.push(w);
      }
    }
  }
  return [start];
}
