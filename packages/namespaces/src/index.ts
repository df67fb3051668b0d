export { createCodeModeNamespaceRuntime } from "./namespace-runtime.js";
export {
  createCodeModeNamespaceTool,
  isNamespaceToolMarker,
  type NamespaceToolMarker,
} from "./namespace-tool.js";
export {
  clearCodeModeNamespacesForPlugin,
  clearCodeModeNamespacesForTest,
  registerCodeModeNamespaceForPlugin,
} from "./registry.js";
export { CALL_MARKER_KEY, NAMESPACE_PATH_SEPARATOR } from "./scope-format.js";
export type {
  CodeModeNamespaceRegistration,
  NamespaceCall,
  NamespaceCallablePath,
  NamespaceCatalogView,
  NamespaceDescriptor,
  NamespaceInputMapper,
  NamespaceRunContext,
  NamespaceRuntime,
  NamespaceScopeContext,
} from "./types.js";
