import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { CodeModeError } from "../src/code-mode-error.js";
import { CODE_MODE_LIMITS, resolveCodeModeConfig } from "../src/config.js";
import { execInputJsonSchema, parseExecInput, parseWaitInput, waitInputJsonSchema } from "../src/inputs.js";
import { codeModeConfigObjectSchema, execInputSchema, waitInputSchema } from "../src/schemas.js";

// The main entry checks common configs and inputs by hand so that importing it does not load zod; zod
// decides and explains everything else. These properties hold the hand-written checks to the schemas:
// whatever the input, the parsers accept exactly what the zod schemas accept.

const runs = Number(process.env.FUZZ_RUNS ?? 300);
const both = ["javascript", "typescript"] as const;

function outcome(run: () => unknown): { ok: unknown } | { error: string } {
  try {
    return { ok: run() };
  } catch (error) {
    if (!CodeModeError.is(error)) throw error;
    return { error: `${error.code}: ${error.message}` };
  }
}

const anyValue = fc.oneof(
  fc.integer(),
  fc.double(),
  fc.boolean(),
  fc.string(),
  fc.constant(undefined),
  fc.constant(null),
  fc.constantFrom(["javascript"], ["typescript", "javascript"], ["typescript", "x"], [], [1]),
  fc.constantFrom("quickjs-wasi", "only", "javascript", "typescript", ""),
  fc.constantFrom(2 ** 53, -(2 ** 53), 1e300, Number.NaN, Number.POSITIVE_INFINITY, 0.5),
);

describe("hand-written checks agree with the zod schemas", () => {
  it("resolveCodeModeConfig accepts exactly the configs codeModeConfigObjectSchema accepts", () => {
    const fields = ["enabled", "runtime", "mode", "languages", ...Object.keys(CODE_MODE_LIMITS), "timeoutMS"];
    fc.assert(
      fc.property(fc.dictionary(fc.constantFrom(...fields), anyValue), (input) => {
        const result = outcome(() => resolveCodeModeConfig(input));
        const reference = codeModeConfigObjectSchema.safeParse(input);
        expect("ok" in result).toBe(reference.success);
        if (reference.success && "ok" in result) {
          // The same config as resolving zod's own output of the input.
          expect(result.ok).toEqual(resolveCodeModeConfig(reference.data));
        }
      }),
      { numRuns: runs },
    );
  });

  it("parseExecInput and parseWaitInput accept exactly what the input schemas accept", () => {
    const execLike = fc.dictionary(fc.constantFrom("code", "command", "language", "lang"), anyValue);
    fc.assert(
      fc.property(execLike, (input) => {
        const result = outcome(() => parseExecInput(input, both));
        if ("ok" in result) expect(execInputSchema.safeParse(input).success).toBe(true);
        if (!execInputSchema.safeParse(input).success) expect("error" in result).toBe(true);
      }),
      { numRuns: runs },
    );
    const waitLike = fc.dictionary(fc.constantFrom("runId", "code"), anyValue);
    fc.assert(
      fc.property(waitLike, (input) => {
        const result = outcome(() => parseWaitInput(input));
        expect("ok" in result).toBe(waitInputSchema.safeParse(input).success);
      }),
      { numRuns: runs },
    );
  });

  it("explains a refused input with zod's first problem", () => {
    expect(outcome(() => parseExecInput({ code: 42 }, both))).toEqual({
      error: `invalid_input: exec input: code: ${execInputSchema.safeParse({ code: 42 }).error?.issues[0]?.message}.`,
    });
    expect(outcome(() => parseWaitInput({ runId: "" }))).toEqual({
      error: `invalid_input: wait input: runId: ${waitInputSchema.safeParse({ runId: "" }).error?.issues[0]?.message}.`,
    });
  });

  it("accepts an input object that is not a plain literal when zod does", () => {
    // An object from a class (or another realm) skips the hand-written check; zod still decides.
    class Input {
      code = "return 1";
    }
    expect(parseExecInput(new Input(), both)).toEqual({ code: "return 1", language: "javascript" });
  });

  it("writes out the tools' input JSON Schemas exactly as zod derives them", () => {
    const derive = (schema: z.ZodType) => {
      const { $schema: _dialect, ...rest } = z.toJSONSchema(schema, { target: "draft-7" });
      return rest;
    };
    expect(execInputJsonSchema).toEqual(derive(execInputSchema));
    expect(waitInputJsonSchema).toEqual(derive(waitInputSchema));
  });
});
