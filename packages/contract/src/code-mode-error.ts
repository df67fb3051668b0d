import { type CodeModeErrorCode, isCodeModeErrorCode } from "./error-codes.js";
import type { JsonObject } from "./json.js";

// A registry symbol, not a module-local one, so that two copies of this package (a host that bundles
// its own, say) still recognise each other's errors.
const brand = Symbol.for("codecell.CodeModeError");

/** The plain-data form of an error: what crosses process, worker and sandbox boundaries. */
export type CodeModeErrorData = {
  name: string;
  message: string;
  code?: CodeModeErrorCode;
  details?: JsonObject;
};

/** The project's one error class: a stable `code` from the closed set and JSON-safe `details`. */
export class CodeModeError extends Error {
  readonly code: CodeModeErrorCode;
  readonly details: JsonObject | undefined;

  constructor(code: CodeModeErrorCode, message: string, details?: JsonObject, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "CodeModeError";
    this.code = code;
    this.details = details;
    Object.defineProperty(this, brand, { value: true });
  }

  /**
   * `error instanceof CodeModeError` holds for an instance made by another copy of this package too (a
   * bundle that inlines its own, such as the published engine, beside the host's): it is
   * `CodeModeError.is`. A subclass keeps the ordinary prototype check.
   */
  static override [Symbol.hasInstance](value: unknown): boolean {
    // `this` is the class on the right of instanceof: this one, or a subclass inheriting this method.
    // biome-ignore lint/complexity/noThisInStatic: see above; the class name would make every subclass match
    if (this === CodeModeError && CodeModeError.is(value)) return true;
    // biome-ignore lint/complexity/noThisInStatic: see above
    return Function.prototype[Symbol.hasInstance].call(this, value);
  }

  /** True for any CodeModeError, including instances made by another copy of this package. */
  static is(value: unknown): value is CodeModeError {
    return (
      typeof value === "object" &&
      value !== null &&
      (value as Record<symbol, unknown>)[brand] === true &&
      isCodeModeErrorCode((value as { code?: unknown }).code)
    );
  }

  toData(): CodeModeErrorData {
    const data: CodeModeErrorData = { name: this.name, message: this.message, code: this.code };
    if (this.details !== undefined) data.details = this.details;
    return data;
  }
}
