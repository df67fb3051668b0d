import { CodeModeError } from "@codecell/contract";
import { globalNameProblem } from "./guest-globals.js";
import type { CodeModeNamespaceRegistration } from "./types.js";

export type RegisteredNamespace = Readonly<CodeModeNamespaceRegistration & { pluginId: string }>;

// The process's, keyed by namespace id; only trusted loaders write to it. It is kept under a registry
// symbol, not in this module, for the same reason as the tool markers (namespace-tool.ts): a host that
// registers its plugins' namespaces through its own import of this package may run an engine that
// carries another copy of it (the published @codecell/engine is one bundle), and both must see one
// registry.
const REGISTRY_KEY = Symbol.for("codecell.namespaceRegistry");
const processGlobals = globalThis as unknown as Record<symbol, Map<string, RegisteredNamespace> | undefined>;
processGlobals[REGISTRY_KEY] ??= new Map<string, RegisteredNamespace>();
const registry: Map<string, RegisteredNamespace> = processGlobals[REGISTRY_KEY];

/**
 * Registers a namespace for the plugin that owns its tools. Ids and global names are unique across the
 * process; a plugin that reloads clears its namespaces first.
 */
export function registerCodeModeNamespaceForPlugin(
  pluginId: string,
  registration: CodeModeNamespaceRegistration,
): void {
  if (typeof pluginId !== "string" || pluginId === "") {
    throw new CodeModeError(
      "invalid_config",
      "registerCodeModeNamespaceForPlugin needs the owning plugin's id.",
    );
  }
  if (typeof registration !== "object" || registration === null) {
    throw new CodeModeError(
      "invalid_config",
      `Plugin "${pluginId}" registered a namespace that is not an object.`,
      {
        pluginId,
      },
    );
  }
  const { id, globalName, description, requiredToolNames, prompt, createScope } = registration;
  const fail = (problem: string): never => {
    throw new CodeModeError(
      "invalid_config",
      `Namespace ${JSON.stringify(id)} of plugin "${pluginId}": ${problem}`,
      {
        pluginId,
        namespaceId: typeof id === "string" ? id : null,
      },
    );
  };
  if (typeof id !== "string" || id.trim() === "")
    fail('"id" must be a non-empty string such as "github-issues".');
  const nameProblem = globalNameProblem(globalName);
  if (nameProblem !== undefined)
    fail(`globalName ${JSON.stringify(globalName)} ${nameProblem}; pick another name.`);
  if (typeof description !== "string" || description.trim() === "") {
    fail('"description" must say in a sentence what the namespace is for.');
  }
  if (prompt !== undefined && typeof prompt !== "string") fail('"prompt" must be a string when given.');
  if (
    !Array.isArray(requiredToolNames) ||
    requiredToolNames.length === 0 ||
    requiredToolNames.some((name) => typeof name !== "string" || name === "")
  ) {
    fail(
      '"requiredToolNames" must list the plugin-owned catalog tools the namespace calls (at least one name).',
    );
  }
  if (typeof createScope !== "function") fail('"createScope" must be a function of the run context.');

  const existing = registry.get(id);
  if (existing !== undefined) {
    fail(`the id is already registered by plugin "${existing.pluginId}"; ids are unique across plugins.`);
  }
  for (const other of registry.values()) {
    if (other.globalName === globalName) {
      fail(
        `globalName "${globalName}" is already used by namespace "${other.id}" of plugin "${other.pluginId}".`,
      );
    }
  }
  const stored: RegisteredNamespace = Object.freeze({
    pluginId,
    id,
    globalName,
    description,
    requiredToolNames: Object.freeze([...requiredToolNames]),
    ...(prompt === undefined ? {} : { prompt }),
    createScope,
  });
  registry.set(id, stored);
}

/** Drops every namespace of a plugin: on disable, uninstall or a failed (rolled back) load. */
export function clearCodeModeNamespacesForPlugin(pluginId: string): void {
  for (const [id, registered] of registry) {
    if (registered.pluginId === pluginId) registry.delete(id);
  }
}

/** Empties the registry so registrations do not leak between test cases. */
export function clearCodeModeNamespacesForTest(): void {
  registry.clear();
}

/** Registered namespaces in id order (deterministic, whatever the registration order). */
export function registeredNamespaces(): RegisteredNamespace[] {
  return [...registry.values()].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}
