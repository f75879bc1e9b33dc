// docs/api.md documents the public API: every name src/index.ts exports has its line there (`- \`name\` — …`), and
// the page names nothing the package does not export. Names are read with the TypeScript compiler (the module's
// export symbols), not by pattern, so re-exports and `export type` count alike.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import ts from "typescript";
import { describe, expect, it } from "vitest";

const repo = join(import.meta.dirname, "..");

/** The names `src/index.ts` exports (values and types), sorted. */
function publicNames(): string[] {
  const entry = join(repo, "src", "index.ts");
  const program = ts.createProgram([entry], {
    allowImportingTsExtensions: true,
    noEmit: true,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    target: ts.ScriptTarget.ES2022,
    skipLibCheck: true,
  });
  const checker = program.getTypeChecker();
  const source = program.getSourceFile(entry);
  if (source === undefined) throw new Error("src/index.ts not found");
  const symbol = checker.getSymbolAtLocation(source);
  if (symbol === undefined) throw new Error("src/index.ts has no module symbol");
  return checker.getExportsOfModule(symbol).map((s) => s.getName()).sort();
}

/** The names docs/api.md documents: the first code span of each `- ` list item. */
function documentedNames(): string[] {
  const text = readFileSync(join(repo, "docs", "api.md"), "utf8");
  return [...text.matchAll(/^- `([A-Za-z_$][\w$]*)`/gm)].map((m) => m[1]).sort();
}

describe("docs/api.md", () => {
  it("documents every export of src/index.ts, one line each, and nothing else", () => {
    const exported = publicNames();
    const documented = documentedNames();
    expect(exported.length).toBeGreaterThan(50);
    expect(exported.filter((n) => !documented.includes(n))).toEqual([]);
    expect(documented.filter((n) => !exported.includes(n))).toEqual([]);
    expect(documented.filter((n, i) => documented.indexOf(n) !== i)).toEqual([]);
  }, 120_000);
});
