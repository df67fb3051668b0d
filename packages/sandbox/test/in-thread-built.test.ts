import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

// The in-thread sandbox as built (scripts/bundle-worker.mjs): its modules are one script compiled with
// the V8 code cache the build wrote beside it, and its lazy loads go through the build's import helper.
// The rest of the suite runs from source, where there is no bundle; this runs the built package in a
// plain `node` (test/fixtures/in-thread-built.mjs).
const FIXTURE = fileURLToPath(new URL("fixtures/in-thread-built.mjs", import.meta.url));

function runBuilt(codeCache: string): Record<string, unknown> {
  const output = execFileSync(process.execPath, [FIXTURE], {
    env: { ...process.env, NODE_OPTIONS: "", CODECELL_CODE_CACHE: codeCache },
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
});
