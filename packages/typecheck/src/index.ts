export {
  CellChecker,
  type CellCheckerOptions,
  type CellCheckRequest,
  type CellCheckResult,
  type GuestDeclarations,
  guestDeclarations,
  typecheckWorkersStarted,
  type UnfinishedCause,
} from "./cell-checker.js";
export {
  type GuestCatalogTool,
  type GuestDeclarationInput,
  renderGuestDeclarations,
} from "./guest-declarations.js";
export { strictFailureMessage } from "./strict-failure.js";
