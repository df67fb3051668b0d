import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { CodeModeError } from "../src/code-mode-error.js";
import { CODE_MODE_LIMITS, resolveCodeModeConfig } from "../src/config.js";

/** Property-based: any config value resolves or fails as invalid_config; nothing else escapes. */

const runs = Number(process.env.FUZZ_RUNS ?? 200);
const fields = [
  "enabled",
  "runtime",
  "mode",
  "languages",
  "typecheck",
  ...Object.keys(CODE_MODE_LIMITS),
  "timeoutMS",
  "__proto__",
];
const configLike = fc.oneof(
  fc.anything({ withBigInt: true, withDate: true, withMap: true, withNullPrototype: true, maxDepth: 3 }),
  fc.dictionary(
    fc.constantFrom(...fields),
    fc.oneof(
      fc.integer(),
      fc.double(),
      fc.boolean(),
      fc.string(),
      fc.constantFrom(["javascript"], ["typescript", "x"], [], null, "off", "warn", "strict"),
    ),
  ),
);

describe("config fuzz", () => {
  it("resolves any input to a config inside the ranges, or throws invalid_config", () => {
    fc.assert(
      fc.property(configLike, (input) => {
        let config: ReturnType<typeof resolveCodeModeConfig>;
        try {
          config = resolveCodeModeConfig(input as never);
        } catch (error) {
          expect(CodeModeError.is(error)).toBe(true);
          expect((error as CodeModeError).code).toBe("invalid_config");
          return;
        }
        expect(["off", "warn", "strict"]).toContain(config.typecheck);
        for (const [field, range] of Object.entries(CODE_MODE_LIMITS)) {
          const value = config[field as keyof typeof CODE_MODE_LIMITS];
          expect(Number.isInteger(value)).toBe(true);
          expect(value).toBeGreaterThanOrEqual(range.min);
          expect(value).toBeLessThanOrEqual(range.max);
        }
      }),
      { numRuns: runs },
    );
  });
});
