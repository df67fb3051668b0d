import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

// The in-thread sandbox as built (scripts/bundle-worker.mjs): its modules are one script compiled with
// the V8 code cache the build wrote beside it, and its lazy loads go through the build's import helper.
// The rest of the suite runs from source, where there is no bundle; this runs the built package in a
// plain `node` (test/fixtures/in-thread-built.mjs).
const FIXTURE = fileURLToPath(new URL("fixtures/in-thread-built.mjs", import.meta.url));

/** A V8 flag a host may set (the `codecell` command does): V8 refuses a cache made without it. */
const HOST_FLAG = "--wasm-tiering-budget=180000000";

function runBuilt(codeCache: string, flags: string[] = [], storeDir?: string): Record<string, unknown> {
  const output = execFileSync(process.execPath, [...flags, FIXTURE], {
    env: {
      ...process.env,
      NODE_OPTIONS: "",
      CODECELL_CODE_CACHE: codeCache,
      ...(storeDir ? { CACHE_STORE_DIR: storeDir } : {}),
    },
    encoding: "utf8",
    timeout: 60_000,
  });
  return JSON.parse(output) as Record<string, unknown>;
}

const cells = {
  plain: { type: "completed", value: 42 },
  typed: { type: "completed", value: 42 },
  resumed: { type: "completed", value: "resumed" },
};

describe("the built in-thread sandbox", () => {
  it("takes the code cache the build wrote, and runs plain, TypeScript and suspended cells", () => {
    // cachedDataRejected is set only when cached data was given: false means V8 took the cache.
    expect(runBuilt("1")).toMatchObject({ rejected: false, ...cells });
  });

  it("runs the same with the cache turned off", () => {
    expect(runBuilt("0")).toMatchObject({ rejected: null, ...cells });
  });

  it("under V8 flags of the host's own, keeps a cache in the host's store that the next process takes", () => {
    const store = mkdtempSync(join(tmpdir(), "codecell-in-thread-cache-"));
    // V8 refuses the shipped cache under other flags; the store had none, so one is written.
    expect(runBuilt("1", [HOST_FLAG], store)).toMatchObject({ rejected: true, saved: true, ...cells });
    expect(readdirSync(store)).toEqual([expect.stringMatching(/^in-thread\.bundle\.[0-9a-f]{16}\.v8cache$/)]);
    // The next process under the same flags takes the store's cache, and has nothing to write.
    expect(runBuilt("1", [HOST_FLAG], store)).toMatchObject({ rejected: false, saved: false, ...cells });
  });

  it("with a store but without flags of its own, takes the shipped cache and writes none", () => {
    const store = mkdtempSync(join(tmpdir(), "codecell-in-thread-cache-"));
    expect(runBuilt("1", [], store)).toMatchObject({ rejected: false, saved: false, ...cells });
    expect(readdirSync(store)).toEqual([]);
  });

  it("with the cache turned off, neither reads nor writes the store", () => {
    const store = mkdtempSync(join(tmpdir(), "codecell-in-thread-cache-"));
    expect(runBuilt("0", [HOST_FLAG], store)).toMatchObject({ rejected: null, saved: false, ...cells });
    expect(readdirSync(store)).toEqual([]);
  });
});
