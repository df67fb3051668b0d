import { CodeModeError } from "@codecell/contract";
import type { NamespaceInputMapper } from "./types.js";

/** A scope member that calls a catalog tool. Only `createCodeModeNamespaceTool` makes real ones. */
export type NamespaceToolMarker = Readonly<{
  toolName: string;
  inputMapper: NamespaceInputMapper | undefined;
}>;

// Markers are recognised by identity, so a look-alike plain object in scope data is just data.
const markers = new WeakSet<object>();

/**
 * Marks a scope member as a namespace function backed by the catalog tool `toolName`. The optional
 * mapper turns the guest's arguments into the tool input; without one, the first argument is the input
 * (or `{}` when there is none).
 */
export function createCodeModeNamespaceTool(
  toolName: string,
  inputMapper?: NamespaceInputMapper,
): NamespaceToolMarker {
  if (typeof toolName !== "string" || toolName === "") {
    throw new CodeModeError(
      "invalid_config",
      "createCodeModeNamespaceTool needs the name of a catalog tool listed in the namespace's requiredToolNames.",
    );
  }
  if (inputMapper !== undefined && typeof inputMapper !== "function") {
    throw new CodeModeError(
      "invalid_config",
      `createCodeModeNamespaceTool("${toolName}"): the input mapper must be a function of the guest arguments.`,
    );
  }
  const marker: NamespaceToolMarker = Object.freeze({ toolName, inputMapper });
  markers.add(marker);
  return marker;
}

export function isNamespaceToolMarker(value: unknown): value is NamespaceToolMarker {
  return typeof value === "object" && value !== null && markers.has(value);
}
