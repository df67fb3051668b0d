// Run by `build` after tsc: compiles the guest prelude to QuickJS bytecode once, here, so a worker's
// first VM does not have to (compiling it costs a worker tens of ms of wasm in a VM of its own, before
// V8 has compiled that part of QuickJS). Writes dist/worker/guest-prelude.bytecode.json with what the
// bytecode was made from: the SHA-256 of the exact prelude source and of the exact quickjs.wasm, and
// the SHA-256 of the bytecode itself. The host hands the bytecode to its workers only when all three
// match what it runs (src/prelude-bytecode.ts); otherwise a worker compiles the prelude itself.
// The manifest also carries the export section the sandbox compiles quickjs.wasm with (only the functions
// quickjs-wasi calls, src/wasm-module.ts), worked out here for the same wasm and the same list of kept
// functions, so a host writes those bytes instead of filtering the section at every start.
// Last, it makes the VM a worker makes for a run of the default memory limit (the same options,
// runVmOptions), evaluates the bytecode in it, and writes that fresh VM's image (VmImage.capture, which
// also finds and checks where the VM's seed and time origin are) to dist/worker/fresh-vm.image, its
// SHA-256 in the manifest: a worker makes those VMs from it (src/worker/vm-image.js). Like the bytecode,
// the image is the same from every build of the same source and wasm.
import { createHash } from "node:crypto";
import { readFile, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { QuickJS } from "quickjs-wasi";

const dist = new URL("../dist/", import.meta.url);
const { compileGuestPrelude, GUEST_PRELUDE_SOURCE } = await import(
  new URL("worker/guest-prelude.js", dist).href
);
const { PRELUDE_BYTECODE_FORMAT, keptExportsKey } = await import(new URL("prelude-bytecode.js", dist).href);
const { keepFunctionExports, QUICKJS_EXPORTS_USED } = await import(new URL("wasm-module.js", dist).href);
const { shippedImageOf } = await import(new URL("worker/vm-image.js", dist).href);
const { CODE_MODE_LIMITS } = await import("@codecell/contract/errors");
const wasm = await readFile(createRequire(import.meta.url).resolve("quickjs-wasi/quickjs.wasm"));
const sha256 = (data) => createHash("sha256").update(data).digest("hex");

const wasmModule = await WebAssembly.compile(wasm);
const vm = await QuickJS.create({ wasm: wasmModule });
let bytecode;
try {
  bytecode = compileGuestPrelude(vm);
} finally {
  vm.dispose();
}

// The fresh VM of a default-limit run, given the bytecode, as an image (see the comment at the top):
// the same bytes from every build of the same source (see shippedImageOf).
const image = await shippedImageOf(wasmModule, bytecode, CODE_MODE_LIMITS.memoryLimitBytes.default);
await writeFile(new URL("worker/fresh-vm.image", dist), image);
/** The bytes keepFunctionExports rewrites, as one run from the first changed byte to the last. */
function exportFilterOf(original) {
  const filtered = new Uint8Array(original);
  if (!keepFunctionExports(filtered, (name) => QUICKJS_EXPORTS_USED.has(name))) {
    throw new Error("quickjs.wasm's export section could not be filtered; see keepFunctionExports");
  }
  let first = 0;
  while (filtered[first] === original[first]) first++;
  let last = filtered.length - 1;
  while (filtered[last] === original[last]) last--;
  const bytes = filtered.subarray(first, last + 1);
  return {
    offset: first,
    bytes: Buffer.from(bytes).toString("base64"),
    bytesSha256: sha256(bytes),
    keptSha256: sha256(keptExportsKey(QUICKJS_EXPORTS_USED)),
  };
}
const exportFilter = exportFilterOf(new Uint8Array(wasm));

const manifest = {
  format: PRELUDE_BYTECODE_FORMAT,
  source: GUEST_PRELUDE_SOURCE,
  sourceSha256: sha256(GUEST_PRELUDE_SOURCE),
  wasmSha256: sha256(wasm),
  bytecodeSha256: sha256(bytecode),
  bytecode: Buffer.from(bytecode).toString("base64"),
  exportFilter,
  image: { bytes: image.length, sha256: sha256(image) },
};
await writeFile(new URL("worker/guest-prelude.bytecode.json", dist), `${JSON.stringify(manifest)}\n`);
process.stdout.write(
  `prelude bytecode: ${bytecode.length} bytes; export filter: ${Buffer.from(exportFilter.bytes, "base64").length} bytes at ${exportFilter.offset}; fresh VM image: ${image.length} bytes\n`,
);
