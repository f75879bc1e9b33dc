#!/usr/bin/env node
// An installed package (dist/ built, no src/) runs the compiled CLI; in the repo (src/ present) the TypeScript runs
// directly through tsx's loader, so a fresh clone needs no build step.
import { existsSync } from "node:fs";

if (existsSync(new URL("../dist/cli/main.js", import.meta.url)) && !existsSync(new URL("../src", import.meta.url))) {
  await import("../dist/cli/main.js");
} else {
  const { register } = await import("tsx/esm/api");
  register();
  // An env file (`--env ./my-env.ts`, examples/own-env) imports "agentic-rl": in the repo that must be this source —
  // the package's exports name dist/, which a clone does not have until `npm run build` (and a stale dist/ would be a
  // second copy of the library beside the CLI's). Hooks registered last resolve first, so this runs before tsx's.
  const { register: registerHooks } = await import("node:module");
  const hooks = `export async function resolve(specifier, context, next) {
  return specifier === "agentic-rl" ? next(${JSON.stringify(new URL("../src/index.ts", import.meta.url).href)}, context) : next(specifier, context);
}`;
  registerHooks(`data:text/javascript,${encodeURIComponent(hooks)}`);
  await import("../src/cli/main.ts");
}
