/**
 * The viewer's page script: `src/view/client/main.ts` (lit-html views, vega-lite charts) bundled by esbuild into
 * one browser script with every library inlined — nothing is fetched from a CDN or anywhere else at run time.
 *
 * Built on demand and kept in memory: from the repository (TypeScript under tsx) it is bundled the first time a page
 * is served (~1 s on 2 cores); an installed package uses `dist/view/client.bundle.js`, which `npm run build` writes
 * (`src/view/build.ts`), so esbuild — a devDependency — is not needed there. Nothing generated is committed.
 */
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
/** Name of the prebuilt bundle next to the compiled `bundle.js` in `dist/view/`. */
export const PREBUILT_BUNDLE = "client.bundle.js";

let cached: Promise<string> | null = null;

/**
 * Bundles the client with esbuild (IIFE, minified, ES2020, licence comments kept at the end).
 * @param entry the client's entry file (default: `client/main.ts` beside this file)
 * @param minify false keeps names readable (for profiling the page)
 * @returns the script's text
 * @throws Error when esbuild is not installed or the client does not compile
 */
export async function buildClientBundle(entry: string = join(here, "client", existsSync(join(here, "client", "main.ts")) ? "main.ts" : "main.js"), minify = true): Promise<string> {
  let esbuild: typeof import("esbuild");
  try {
    esbuild = await import("esbuild");
  } catch {
    throw new Error("arl view: the page script is not built (no dist/view/client.bundle.js) and esbuild is not installed; run `npm run build` in the agentic-rl folder");
  }
  const r = await esbuild.build({
    entryPoints: [entry],
    bundle: true,
    write: false,
    format: "iife",
    platform: "browser",
    target: "es2020",
    minify,
    legalComments: "eof",
    logLevel: "silent",
  });
  const out = r.outputFiles[0];
  if (out === undefined) throw new Error("arl view: esbuild produced no output");
  return out.text;
}

/**
 * The page script: the prebuilt bundle when running compiled from `dist/` and it exists, else bundled now (once per
 * process).
 * @throws what `buildClientBundle` throws
 */
export function clientBundle(): Promise<string> {
  if (cached === null) {
    const prebuilt = join(here, PREBUILT_BUNDLE);
    const fromDist = import.meta.url.endsWith(".js");
    cached = fromDist && existsSync(prebuilt) ? Promise.resolve(readFileSync(prebuilt, "utf8")) : buildClientBundle();
    cached.catch(() => {
      cached = null; // a failed build is retried on the next call
    });
  }
  return cached;
}
