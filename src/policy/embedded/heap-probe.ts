/**
 * Records the `WebAssembly.Memory` objects created after this module loads, so the size of jax-js's wasm heap can
 * be observed (jax-js exposes no allocator statistics). The heap only grows when live buffers exceed what its free
 * lists hold, so a heap that stops growing in a steady loop means no leaked arrays. Behaviour of `Memory` is
 * unchanged (a subclass that only remembers its instances).
 */
const memories: WebAssembly.Memory[] = [];
const Original = WebAssembly.Memory;
if (!(Original as unknown as { __arlProbe?: boolean }).__arlProbe) {
  class ProbedMemory extends Original {
    static __arlProbe = true;
    constructor(descriptor: WebAssembly.MemoryDescriptor) {
      super(descriptor);
      memories.push(this);
    }
  }
  (WebAssembly as { Memory: typeof WebAssembly.Memory }).Memory = ProbedMemory;
}

/** Size of the largest wasm heap created since load (bytes); jax-js's heap is the only large one. */
export function wasmHeapBytes(): number {
  return memories.reduce((m, mem) => Math.max(m, mem.buffer.byteLength), 0);
}
