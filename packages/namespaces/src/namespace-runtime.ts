import { CodeModeError, type CodeModeErrorData, closestMatches, type JsonValue } from "@codecell/contract";
import type { NamespaceToolMarker } from "./namespace-tool.js";
import { type RegisteredNamespace, registeredNamespaces } from "./registry.js";
import { serializeScope, toJsonInput } from "./serialize-scope.js";
import type {
  NamespaceCall,
  NamespaceCallablePath,
  NamespaceCatalogView,
  NamespaceDescriptor,
  NamespaceRunContext,
  NamespaceRuntime,
  NamespaceScopeContext,
} from "./types.js";

type Callable = { toolId: string; toolName: string; marker: NamespaceToolMarker; label: string };

/**
 * Builds the run's namespaces from the registry and the run's catalog. A namespace is visible only when
 * every required tool is in the catalog as a plugin tool owned by the registering plugin, so another
 * plugin's same-named tool never exposes it and policy that hides the tools hides the namespace. Each
 * visible namespace's scope is built for this run and serialized; one whose scope is refused is left out
 * and listed in `rejected`.
 */
export function createCodeModeNamespaceRuntime(
  context: NamespaceRunContext,
  catalog: NamespaceCatalogView,
): NamespaceRuntime {
  const descriptors: NamespaceDescriptor[] = [];
  const callablePaths: NamespaceCallablePath[] = [];
  const rejected: Array<{ namespaceId: string; pluginId: string; error: CodeModeErrorData }> = [];
  const tables = new Map<string, Map<string, Callable>>();
  const prompts: string[] = [];

  for (const registered of registeredNamespaces()) {
    const owned = ownedTools(registered, catalog);
    if (owned === undefined) continue;
    try {
      const built = buildNamespace(registered, owned, context);
      descriptors.push(built.descriptor);
      tables.set(registered.id, built.table);
      for (const [path, callable] of built.table) {
        callablePaths.push({
          namespaceId: registered.id,
          path,
          toolId: callable.toolId,
          toolName: callable.toolName,
        });
      }
      prompts.push(promptLine(registered));
    } catch (error) {
      const data: CodeModeErrorData = CodeModeError.is(error)
        ? error.toData()
        : {
            name: "Error",
            message: `Namespace "${registered.id}": createScope threw: ${messageOf(error)}`,
            code: "internal_error",
          };
      rejected.push({ namespaceId: registered.id, pluginId: registered.pluginId, error: data });
    }
  }

  const promptText =
    prompts.length === 0
      ? ""
      : [
          "Namespaces: each is a global (also reachable as namespaces.<Name>); its functions are async and run catalog tools.",
          ...prompts,
        ].join("\n");

  return Object.freeze({
    namespaces: Object.freeze(descriptors),
    callablePaths: Object.freeze(callablePaths),
    promptText,
    rejected: Object.freeze(rejected),
    resolveCall(namespaceId: string, path: string, args: JsonValue[]): NamespaceCall {
      const table = typeof namespaceId === "string" ? tables.get(namespaceId) : undefined;
      if (table === undefined) {
        const suggestions = typeof namespaceId === "string" ? closestMatches(namespaceId, tables.keys()) : [];
        throw new CodeModeError(
          "invalid_input",
          `Unknown namespace ${JSON.stringify(namespaceId)} in this run.${suggestions.length > 0 ? ` Did you mean ${suggestions.map((id) => `"${id}"`).join(", ")}?` : ""}`,
          { namespaceId: typeof namespaceId === "string" ? namespaceId : null, suggestions },
        );
      }
      const callable = typeof path === "string" ? table.get(path) : undefined;
      if (callable === undefined) {
        const suggestions = typeof path === "string" ? closestMatches(path, table.keys()) : [];
        throw new CodeModeError(
          "invalid_input",
          `Namespace "${namespaceId}" has no function at ${JSON.stringify(path)}.${suggestions.length > 0 ? ` Did you mean ${suggestions.map((known) => `"${known}"`).join(", ")}?` : ` Its functions: ${[...table.keys()].join(", ")}.`}`,
          { namespaceId, path: typeof path === "string" ? path : null, suggestions },
        );
      }
      if (!Array.isArray(args)) {
        throw new CodeModeError("invalid_input", `${callable.label} expects its arguments as an array.`, {
          namespaceId,
          path,
        });
      }
      return {
        namespaceId,
        path,
        toolId: callable.toolId,
        toolName: callable.toolName,
        input: mapInput(callable, args),
      };
    },
  });
}

/** The catalog ids of the namespace's required tools, or undefined when it is not visible. */
function ownedTools(
  registered: RegisteredNamespace,
  catalog: NamespaceCatalogView,
): Map<string, string> | undefined {
  const owned = new Map<string, string>();
  for (const toolName of registered.requiredToolNames) {
    const entry = catalog.entries.find(
      (candidate) =>
        candidate.name === toolName &&
        candidate.source === "plugin" &&
        candidate.sourceName === registered.pluginId,
    );
    if (entry === undefined) return undefined;
    owned.set(toolName, entry.id);
  }
  return owned;
}

function buildNamespace(
  registered: RegisteredNamespace,
  owned: ReadonlyMap<string, string>,
  context: NamespaceRunContext,
): { descriptor: NamespaceDescriptor; table: Map<string, Callable> } {
  const scopeContext: NamespaceScopeContext = Object.freeze({
    ...context,
    aborted: context.signal?.aborted === true,
    pluginId: registered.pluginId,
    namespaceId: registered.id,
  });
  const label = `Namespace "${registered.id}" (${registered.globalName})`;
  const { scope, callables } = serializeScope(registered.createScope(scopeContext), `${label} scope`);
  const table = new Map<string, Callable>();
  for (const { path, marker } of callables) {
    const toolId = owned.get(marker.toolName);
    if (toolId === undefined) {
      throw new CodeModeError(
        "invalid_config",
        `${label}: ${registered.globalName}.${path} targets tool "${marker.toolName}", which is not in requiredToolNames (${registered.requiredToolNames.join(", ")}). Declare it there.`,
        { namespaceId: registered.id, path, toolName: marker.toolName },
      );
    }
    table.set(path, { toolId, toolName: marker.toolName, marker, label: `${registered.globalName}.${path}` });
  }
  const descriptor: NamespaceDescriptor = {
    namespaceId: registered.id,
    globalName: registered.globalName,
    description: registered.description,
    scope,
  };
  if (registered.prompt !== undefined) descriptor.prompt = registered.prompt;
  return { descriptor, table };
}

function mapInput(callable: Callable, args: JsonValue[]): JsonValue {
  const mapper = callable.marker.inputMapper;
  if (mapper === undefined)
    return args.length > 0 && args[0] !== undefined && args[0] !== null ? args[0] : {};
  let mapped: unknown;
  try {
    mapped = mapper([...args]);
  } catch (error) {
    throw new CodeModeError(
      "invalid_input",
      `${callable.label} rejected its arguments: ${messageOf(error)}`,
      {
        path: callable.label,
      },
    );
  }
  return toJsonInput(mapped, `${callable.label} input`);
}

function promptLine(registered: RegisteredNamespace): string {
  const prompt =
    registered.prompt === undefined || registered.prompt.trim() === "" ? "" : ` ${registered.prompt.trim()}`;
  return `- ${registered.globalName}: ${registered.description.trim()}${prompt}`;
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
