// The prepared run of a run where code mode is off (disabled, or no tools): it refuses exec and wait.
import { CodeModeError, type CodeModeResult } from "@codecell/contract";
import { hookMetadataOf } from "./control-input.js";
import type { ModelTool, PreparedRun } from "./types.js";

export function inactiveRun(reason: "disabled" | "no_tools", modelTools: ModelTool[]): PreparedRun {
  const refuse = async (): Promise<CodeModeResult> => {
    throw new CodeModeError(
      "invalid_input",
      reason === "disabled"
        ? "Code mode is disabled for this run (tools.codeMode.enabled is not true)."
        : "Code mode is not active for a run without tools.",
    );
  };
  return { active: false, reason, modelTools, exec: refuse, wait: refuse, hookMetadata: hookMetadataOf };
}
