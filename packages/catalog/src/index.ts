export { buildToolCatalog } from "./build-tool-catalog.js";
export { isControlTool } from "./control-tools.js";
export { type AliasTarget, aliasNamesFor, nameKey } from "./name-aliases.js";
export { type ToolPolicy, toolsAllowedBy } from "./policy.js";
export { GUEST_GLOBAL_NAMES, isBlockedConvenienceName, normalizeToolName } from "./safe-names.js";
export type {
  CatalogSearchOptions,
  CatalogTool,
  CatalogViewOptions,
  DescribedTool,
  ToolCatalog,
  ToolCatalogOptions,
} from "./tool-catalog.js";
export { toolId } from "./tool-id.js";
