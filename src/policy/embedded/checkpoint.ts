/**
 * Checkpoint files of the embedded backend. Layout of a checkpoint directory:
 * - `meta.json`: `{ format, config, adamStep, tensors: [{ name, shape?, offset, length }] }` (offsets in float32s)
 * - `tensors.bin`: all tensors as little-endian float32, concatenated in `meta.tensors` order
 * - `manifest.json`: `{ files: { "meta.json": sha256, "tensors.bin": sha256 } }`, written last
 * Every file is written to a temporary name and renamed into place (atomic on POSIX), so a crash leaves either the
 * old or the new file, never a torn one; the manifest, written last, vouches for the set.
 */
import { createHash } from "node:crypto";
import { mkdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";

const FORMAT = "agentic-rl/embedded-checkpoint@1";

/** Checkpoint metadata besides the tensors (JSON-serialisable). */
export interface CheckpointMeta {
  config: object;
  adamStep: number;
  [key: string]: unknown;
}

interface TensorEntry {
  name: string;
  offset: number;
  length: number;
}

function sha256(data: Uint8Array): string {
  return createHash("sha256").update(data).digest("hex");
}

/** Writes `data` to `path` atomically (temp file + rename). */
async function writeAtomic(path: string, data: Uint8Array | string): Promise<void> {
  const tmp = `${path}.tmp-${process.pid}-${Date.now()}`;
  await writeFile(tmp, data);
  await rename(tmp, path);
}

/**
 * Saves tensors and metadata under `dir` (created if missing), overwriting a previous checkpoint there.
 * @param tensors `[name, float32 data]`, names unique
 * @throws Error on duplicate tensor names or I/O failure
 */
export async function saveCheckpoint(dir: string, meta: CheckpointMeta, tensors: [string, Float32Array][]): Promise<void> {
  await mkdir(dir, { recursive: true });
  // Overwriting a folder: drop the old manifest first, so a crash mid-save leaves no manifest vouching for a mix.
  await rm(join(dir, "manifest.json"), { force: true });
  const names = new Set<string>();
  let total = 0;
  const entries: TensorEntry[] = tensors.map(([name, data]) => {
    if (names.has(name)) throw new Error(`duplicate tensor name ${name}`);
    names.add(name);
    const e = { name, offset: total, length: data.length };
    total += data.length;
    return e;
  });
  const all = new Float32Array(total);
  tensors.forEach(([, data], i) => all.set(data, entries[i].offset));
  // Float32Array is host-endian; every supported host (x86, arm64) is little-endian.
  const bin = new Uint8Array(all.buffer, all.byteOffset, all.byteLength);
  const metaText = JSON.stringify({ format: FORMAT, ...meta, tensors: entries }, null, 1);
  const metaBytes = new TextEncoder().encode(metaText);
  await writeAtomic(join(dir, "tensors.bin"), bin);
  await writeAtomic(join(dir, "meta.json"), metaBytes);
  const manifest = { files: { "meta.json": sha256(metaBytes), "tensors.bin": sha256(bin) } };
  await writeAtomic(join(dir, "manifest.json"), JSON.stringify(manifest, null, 1));
}

async function readNamed(dir: string, file: string): Promise<Uint8Array> {
  try {
    return new Uint8Array(await readFile(join(dir, file)));
  } catch (e) {
    throw new Error(`checkpoint ${dir}: cannot read ${file} (${(e as Error).message})`);
  }
}

/**
 * Loads and verifies a checkpoint written by `saveCheckpoint`.
 * @returns the metadata and the tensors by name
 * @throws Error naming the file when `manifest.json`, `meta.json` or `tensors.bin` is missing, unparsable, fails
 *   its sha256 check, or the tensor table does not match the data
 */
export async function loadCheckpoint(dir: string): Promise<{ meta: CheckpointMeta; tensors: Map<string, Float32Array> }> {
  const manifestBytes = await readNamed(dir, "manifest.json");
  let manifest: { files?: Record<string, string> };
  try {
    manifest = JSON.parse(new TextDecoder().decode(manifestBytes));
  } catch {
    throw new Error(`checkpoint ${dir}: manifest.json is not valid JSON`);
  }
  const files = manifest.files ?? {};
  const read = async (file: string): Promise<Uint8Array> => {
    const expected = files[file];
    if (!expected) throw new Error(`checkpoint ${dir}: manifest.json lists no checksum for ${file}`);
    const data = await readNamed(dir, file);
    if (sha256(data) !== expected) throw new Error(`checkpoint ${dir}: ${file} is corrupt (sha256 mismatch)`);
    return data;
  };
  const metaBytes = await read("meta.json");
  const bin = await read("tensors.bin");
  const meta = JSON.parse(new TextDecoder().decode(metaBytes)) as CheckpointMeta & { format?: string; tensors?: TensorEntry[] };
  if (meta.format !== FORMAT) throw new Error(`checkpoint ${dir}: meta.json has unknown format ${meta.format}`);
  if (bin.byteLength % 4 !== 0) throw new Error(`checkpoint ${dir}: tensors.bin size is not a multiple of 4`);
  // Copy into an aligned buffer (the read buffer may not be 4-byte aligned).
  const all = new Float32Array(bin.slice().buffer);
  const tensors = new Map<string, Float32Array>();
  for (const e of meta.tensors ?? []) {
    if (e.offset < 0 || e.offset + e.length > all.length) {
      throw new Error(`checkpoint ${dir}: tensor ${e.name} lies outside tensors.bin`);
    }
    tensors.set(e.name, all.slice(e.offset, e.offset + e.length));
  }
  const { tensors: _t, format: _f, ...rest } = meta;
  return { meta: rest as CheckpointMeta, tensors };
}
