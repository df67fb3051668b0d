export type { PreparedCell } from "./cell-result.js";
export {
  checkModuleAccess,
  MODULE_ACCESS_CONSTRUCTS,
  type ModuleAccessConstruct,
} from "./module-access.js";
export { isPlainJavaScriptCell } from "./plain-cell.js";
export { isTypeScriptOnly, prepareCell } from "./prepare-cell.js";
export {
  type BindingOrigin,
  findBindingOrigin,
  findRuntimeErrorSite,
  type RuntimeErrorSite,
} from "./runtime-error-site.js";
export { isTypeScriptLoaded } from "./typescript-transformer.js";
