#!/usr/bin/env node
// An installed package (dist/ built, no src/) runs the compiled CLI; in the repo (src/ present) the TypeScript runs
// directly through tsx's loader, so a fresh clone needs no build step.
import { existsSync } from "node:fs";

if (existsSync(new URL("../dist/cli/main.js", import.meta.url)) && !existsSync(new URL("../src", import.meta.url))) {
  await import("../dist/cli/main.js");
} else {
  const { register } = await import("tsx/esm/api");
  register();
  await import("../src/cli/main.ts");
}
