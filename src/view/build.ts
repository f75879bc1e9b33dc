/**
 * `npm run build`'s last step: writes the viewer's page script (`bundle.ts`) to `dist/view/client.bundle.js`, so an
 * installed package serves it without esbuild. Usage: `node --import tsx src/view/build.ts [outFile]`.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { PREBUILT_BUNDLE, buildClientBundle } from "./bundle.ts";

const out = process.argv[2] ?? join(dirname(fileURLToPath(import.meta.url)), "..", "..", "dist", "view", PREBUILT_BUNDLE);
const script = await buildClientBundle();
mkdirSync(dirname(out), { recursive: true });
writeFileSync(out, script);
console.log(`view: wrote ${out} (${(script.length / 1024).toFixed(0)} KiB)`);
