import type { CodeModeErrorData, JsonValue, ToolSource } from "@codecell/contract";

/** What the host knows about the run a namespace runtime is built for. */
export type NamespaceRunContext = {
  runId: string;
  agentId?: string;
  sessionKey?: string;
  sessionId?: string;
  /** Host configuration handed to namespaces (for example the plugin's own settings). */
  config?: unknown;
  /** The run's abort signal; `createScope` sees its state as `aborted`. */
  signal?: AbortSignal;
};

/** The context `createScope` receives: the run context plus which namespace is being built. */
export type NamespaceScopeContext = Readonly<
  NamespaceRunContext & { aborted: boolean; pluginId: string; namespaceId: string }
>;

/** Maps the guest's call arguments to the underlying catalog tool's input. */
export type NamespaceInputMapper = (args: JsonValue[]) => unknown;

/** One namespace, as a trusted loader registers it for the plugin that owns its tools. */
export type CodeModeNamespaceRegistration = {
  /** Unique across the process, e.g. "github-issues". */
  id: string;
  /** The guest global, e.g. "Issues"; also `namespaces.Issues`. */
  globalName: string;
  description: string;
  /** The plugin-owned catalog tools behind the namespace: both visibility gate and ownership check. */
  requiredToolNames: readonly string[];
  /** Extra usage text appended to the exec description when the namespace is visible. */
  prompt?: string;
  /** Builds the run's scope: plain data plus markers from `createCodeModeNamespaceTool`. */
  createScope: (context: NamespaceScopeContext) => unknown;
};

/** The part of a run's tool catalog that namespaces read: `ToolCatalog` from `@codecell/catalog` fits. */
export type NamespaceCatalogView = {
  readonly entries: ReadonlyArray<{ id: string; name: string; source: ToolSource; sourceName?: string }>;
};

/** A visible namespace as the sandbox installs it. */
export type NamespaceDescriptor = {
  namespaceId: string;
  globalName: string;
  description: string;
  prompt?: string;
  /** JSON data; each callable member is `{"$codecellCall": "<path>"}`. */
  scope: JsonValue;
};

/** A callable path of a visible namespace and the catalog tool it runs. */
export type NamespaceCallablePath = { namespaceId: string; path: string; toolId: string; toolName: string };

/** What a guest namespace call resolves to: the catalog tool to run and its input. */
export type NamespaceCall = {
  namespaceId: string;
  path: string;
  toolId: string;
  toolName: string;
  input: JsonValue;
};

export type NamespaceRuntime = {
  /** Visible namespaces in namespace-id order. */
  readonly namespaces: readonly NamespaceDescriptor[];
  /** The callable-path table behind `resolveCall`. */
  readonly callablePaths: readonly NamespaceCallablePath[];
  /** Text to append to the exec tool description; empty when no namespace is visible. */
  readonly promptText: string;
  /** Visible namespaces whose scope was refused (raw function, cycle, unsafe key, undeclared tool...). */
  readonly rejected: ReadonlyArray<{ namespaceId: string; pluginId: string; error: CodeModeErrorData }>;
  /** Maps a guest call to its catalog tool; forged namespace ids and paths are `invalid_input`. */
  resolveCall(namespaceId: string, path: string, args: JsonValue[]): NamespaceCall;
};
