import { CodeModeError } from "@codecell/contract";
import type { NamespaceInputMapper } from "./types.js";

/** A scope member that calls a catalog tool. Only `createCodeModeNamespaceTool` makes real ones. */
export type NamespaceToolMarker = Readonly<{
  toolName: string;
  inputMapper: NamespaceInputMapper | undefined;
}>;

// Markers are recognised by identity, so a look-alike plain object in scope data is just data. The set
// is the process's, under a registry symbol, not this module's: a plugin imports this package by name
// while the host that loads it may carry its own copy (the gateway's CLI is one bundle), and a marker
// made by either copy must be known to both, as CodeModeError is (see @codecell/contract).
const MARKERS_KEY = Symbol.for("codecell.namespaceToolMarkers");
const processGlobals = globalThis as unknown as Record<symbol, WeakSet<object> | undefined>;
processGlobals[MARKERS_KEY] ??= new WeakSet<object>();
const markers: WeakSet<object> = processGlobals[MARKERS_KEY];

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
