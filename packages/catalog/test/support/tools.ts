import type { HostTool, ToolSource } from "@codecell/contract";
import { CodeModeError, type CodeModeErrorCode } from "@codecell/contract";
import { expect } from "vitest";

/** A small host tool with a one-field schema. */
export function hostTool(
  source: ToolSource,
  owner: string,
  name: string,
  extra: Partial<HostTool> = {},
): HostTool {
  return {
    name,
    description: `${name.replace(/[_-]/g, " ")} tool`,
    parameters: { type: "object", properties: { value: { type: "string" } } },
    source,
    owner,
    ...extra,
  };
}

/** Runs `action`, expecting a CodeModeError with this code whose message contains every fragment. */
export function expectCodeModeError(
  action: () => unknown,
  code: CodeModeErrorCode,
  ...fragments: string[]
): CodeModeError {
  let caught: unknown;
  try {
    action();
  } catch (error) {
    caught = error;
  }
  expect(CodeModeError.is(caught), `expected a CodeModeError, got ${String(caught)}`).toBe(true);
  const error = caught as CodeModeError;
  expect(error.code).toBe(code);
  for (const fragment of fragments) expect(error.message).toContain(fragment);
  return error;
}
