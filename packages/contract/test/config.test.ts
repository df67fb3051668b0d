import { describe, expect, it } from "vitest";
import { CodeModeError } from "../src/code-mode-error.js";
import { CODE_MODE_LIMITS, type CodeModeLimitField, resolveCodeModeConfig } from "../src/config.js";

function configError(input: unknown): CodeModeError {
  try {
    resolveCodeModeConfig(input);
  } catch (error) {
    if (CodeModeError.is(error)) return error;
    throw error;
  }
  throw new Error("expected resolveCodeModeConfig to throw");
}

describe("activation", () => {
  it.each([
    ["absent", undefined, false],
    ["null", null, false],
    ["false", false, false],
    ["true shorthand", true, true],
    ["empty object", {}, false],
    ["enabled false", { enabled: false }, false],
    ["other fields only", { timeoutMs: 5000, languages: ["typescript"] }, false],
    ["enabled true", { enabled: true }, true],
  ])("%s -> enabled %s", (_name, input, enabled) => {
    expect(resolveCodeModeConfig(input).enabled).toBe(enabled);
  });

  it("true is enabled with every default", () => {
    const config = resolveCodeModeConfig(true);
    expect(config).toEqual({
      enabled: true,
      runtime: "quickjs-wasi",
      mode: "only",
      languages: ["javascript", "typescript"],
      typecheck: "off",
      images: false,
      timeoutMs: 10_000,
      memoryLimitBytes: 67_108_864,
      maxOutputBytes: 65_536,
      maxSnapshotBytes: 10_485_760,
      maxPendingToolCalls: 16,
      maxQueuedToolCalls: 1_000,
      maxCodeBytes: 262_144,
      snapshotTtlSeconds: 900,
      searchDefaultLimit: 8,
      maxSearchLimit: 50,
      typecheckTimeoutMs: 15_000,
      typecheckBudgetMs: 5_000,
      storeTtlSeconds: 3_600,
      maxStoreValueBytes: 1_048_576,
      maxStoreBytes: 4_194_304,
      maxStorePrincipalBytes: 16_777_216,
      maxImageBytes: 1_048_576,
      clamped: [],
    });
  });

  it("keeps explicit values inside their ranges", () => {
    const config = resolveCodeModeConfig({
      enabled: true,
      runtime: "quickjs-wasi",
      mode: "only",
      languages: ["typescript"],
      timeoutMs: 2500,
      maxSearchLimit: 20,
      searchDefaultLimit: 5,
    });
    expect(config).toMatchObject({
      languages: ["typescript"],
      timeoutMs: 2500,
      maxSearchLimit: 20,
      searchDefaultLimit: 5,
    });
    expect(config.clamped).toEqual([]);
  });
});

const clampCases = (Object.keys(CODE_MODE_LIMITS) as CodeModeLimitField[]).flatMap((field) => {
  const { min, max } = CODE_MODE_LIMITS[field];
  return [
    { field, value: min, expected: min, clamped: false },
    { field, value: max, expected: max, clamped: false },
    { field, value: min - 1, expected: min, clamped: true },
    { field, value: max + 1, expected: max, clamped: true },
  ];
});

describe("runtime ranges", () => {
  it.each(clampCases)(
    "$field = $value resolves to $expected (clamped: $clamped)",
    ({ field, value, expected, clamped }) => {
      const config = resolveCodeModeConfig({ enabled: true, [field]: value });
      expect(config[field]).toBe(expected);
      const note = config.clamped.find((entry) => entry.field === field);
      expect(note).toEqual(clamped ? { field, received: value, applied: expected } : undefined);
    },
  );

  it("clamps searchDefaultLimit to the resolved maxSearchLimit", () => {
    const config = resolveCodeModeConfig({ enabled: true, maxSearchLimit: 10, searchDefaultLimit: 30 });
    expect(config.searchDefaultLimit).toBe(10);
    expect(config.clamped).toEqual([{ field: "searchDefaultLimit", received: 30, applied: 10 }]);
  });

  it("clamps the default searchDefaultLimit when maxSearchLimit is smaller", () => {
    const config = resolveCodeModeConfig({ enabled: true, maxSearchLimit: 3 });
    expect(config.searchDefaultLimit).toBe(3);
  });

  it("refuses a checker timeout that is not an integer, saying what it takes", () => {
    const error = configError({ enabled: true, typecheck: "strict", typecheckTimeoutMs: "5s" });
    expect(error.message).toBe(
      'Invalid code-mode config: tools.codeMode.typecheckTimeoutMs: received "5s"; expected an integer; the runtime range is 1..120000 (default 15000).',
    );
  });

  it.each(["off", "warn", "strict"] as const)("keeps typecheck %s", (mode) => {
    expect(resolveCodeModeConfig({ enabled: true, typecheck: mode }).typecheck).toBe(mode);
  });

  it("de-duplicates languages", () => {
    expect(resolveCodeModeConfig({ languages: ["javascript", "javascript"] }).languages).toEqual([
      "javascript",
    ]);
  });
});

describe("invalid_config", () => {
  it.each([
    ["a string instead of the shorthand", "yes", 'tools.codeMode: received "yes"'],
    ["a number instead of the shorthand", 1, "tools.codeMode: received 1"],
    ["an array", [], "tools.codeMode: received []"],
    [
      "enabled as a string",
      { enabled: "true" },
      'tools.codeMode.enabled: received "true"; expected true or false',
    ],
    [
      "an unknown runtime",
      { runtime: "v8" },
      'tools.codeMode.runtime: received "v8"; expected "quickjs-wasi"',
    ],
    ["an unknown mode", { mode: "mixed" }, 'tools.codeMode.mode: received "mixed"; expected "only"'],
    ["an unknown language", { languages: ["python"] }, 'tools.codeMode.languages.0: received "python"'],
    [
      "an empty languages list",
      { languages: [] },
      "tools.codeMode.languages: received []; expected a non-empty array",
    ],
    [
      "languages not an array",
      { languages: "javascript" },
      'tools.codeMode.languages: received "javascript"',
    ],
    [
      "an unknown typecheck mode",
      { typecheck: "on" },
      'tools.codeMode.typecheck: received "on"; expected "off" (default), "warn" or "strict"',
    ],
    ["typecheck as a boolean", { typecheck: true }, "tools.codeMode.typecheck: received true; expected"],
    [
      "a misspelt typecheck key",
      { typeCheck: "warn" },
      'tools.codeMode.typeCheck: unknown key. Did you mean "typecheck"?',
    ],
    [
      "a non-integer",
      { timeoutMs: 12.5 },
      "tools.codeMode.timeoutMs: received 12.5; expected an integer; the runtime range is 100..60000",
    ],
    [
      "a numeric string",
      { maxOutputBytes: "65536" },
      'tools.codeMode.maxOutputBytes: received "65536"; expected an integer',
    ],
    ["NaN", { memoryLimitBytes: Number.NaN }, "tools.codeMode.memoryLimitBytes: received NaN"],
    [
      "Infinity",
      { snapshotTtlSeconds: Number.POSITIVE_INFINITY },
      "tools.codeMode.snapshotTtlSeconds: received Infinity",
    ],
    [
      "a misspelt key",
      { enabled: true, timeoutMS: 100 },
      'tools.codeMode.timeoutMS: unknown key. Did you mean "timeoutMs"?',
    ],
    ["another misspelt key", { maxPendingToolCall: 3 }, 'Did you mean "maxPendingToolCalls"?'],
    [
      "an unknown key with no near match",
      { colour: "red" },
      "tools.codeMode.colour: unknown key. Known keys: enabled, runtime",
    ],
  ])("%s", (_name, input, fragment) => {
    const error = configError(input);
    expect(error.code).toBe("invalid_config");
    expect(error.message).toContain(fragment);
  });

  it("reports every problem at once", () => {
    const error = configError({ enabled: "y", timeoutMs: 1.5, langauges: ["javascript"] });
    expect(error.message).toContain("3 problems");
    expect(error.details?.problems).toHaveLength(3);
    expect(error.message).toContain('Did you mean "languages"?');
  });

  it("names the configured path", () => {
    expect(() => resolveCodeModeConfig({ mode: 1 }, { path: "agents.main.tools.codeMode" })).toThrow(
      "agents.main.tools.codeMode.mode",
    );
  });
});
