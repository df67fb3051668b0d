import { CodeModeError } from "@codecell/contract/errors";
import { type ModuleAccessFinding, moduleAccessError } from "./module-access.js";
import { locationAt, type SourceLocation, withoutLocationSuffix } from "./source-location.js";
import {
  requireSucraseInternals,
  type SucraseInternals,
  type SucraseOptions,
  type SucraseToken,
} from "./sucrase-internals.js";

/**
 * TypeScript support is type stripping with sucrase (chosen by measurement, see the README): it loads in
 * tens of milliseconds, transforms a cell in well under a millisecond and keeps every line where it was.
 * Sucrase is loaded on the first TypeScript cell and never for JavaScript cells. It is driven through
 * its own parser and transformer classes (see sucrase-internals.ts): the token scan below and the
 * transform share one parse.
 */

export type TypeScriptTransformer = {
  /** Type-stripped JavaScript with the same line numbers. Throws `typescript_transform_failed` or `module_access_denied`. */
  transform(typescript: string): string;
};

let loading: Promise<TypeScriptTransformer> | undefined;

/** True once a TypeScript cell asked for the transformer; false means sucrase was never imported. */
export function isTypeScriptLoaded(): boolean {
  return loading !== undefined;
}

/** The transformer, imported on first use and shared afterwards. */
export function loadTypeScriptTransformer(): Promise<TypeScriptTransformer> {
  loading ??= importTransformer().catch((error: unknown) => {
    // Let a later cell retry instead of caching the failure forever.
    loading = undefined;
    throw new CodeModeError(
      "typescript_transform_failed",
      `The TypeScript transformer could not be loaded (${String(error)}); run the cell as JavaScript instead.`,
      undefined,
      { cause: error },
    );
  });
  return loading;
}

async function importTransformer(): Promise<TypeScriptTransformer> {
  return createTransformer(requireSucraseInternals());
}

function createTransformer(sucrase: SucraseInternals): TypeScriptTransformer {
  const { tokenType, keyword } = sucrase;
  const options: SucraseOptions = {
    transforms: ["typescript"],
    // Keep modern syntax as written: QuickJS runs it, and down-levelling would add helpers and shift code.
    disableESTransforms: true,
    // An import that slipped past the token scan must reach the JavaScript check, not be dropped.
    keepUnusedImports: true,
  };

  /**
   * Sucrase erases type-only code, so module syntax that lives only in types (`import type`, `export
   * interface`, `import("x").T`) and constructs it cannot translate must be caught on its tokens first.
   */
  function scanTokens(typescript: string, tokens: SucraseToken[]): void {
    for (let index = 0; index < tokens.length; index++) {
      const token = tokens[index]!;
      const next = tokens[index + 1];
      if (token.type === tokenType._import) {
        const typeOnly = token.isType || next?.contextualKeyword === keyword._type;
        const description =
          next?.type === tokenType.parenL
            ? typeOnly
              ? "an import type (import(...) in a type)"
              : "a dynamic import()"
            : typeOnly
              ? "a type-only import"
              : "an import declaration";
        throw moduleAccessError(finding(typescript, token, "import-declaration", description));
      }
      if (token.type === tokenType._export) {
        throw moduleAccessError(finding(typescript, token, "export-declaration", "an export statement"));
      }
      if (token.type === tokenType.at) {
        throw transformError(
          locationAt(typescript, token.start),
          "decorators are not supported in cells (QuickJS does not run them); call the function on the class or method instead",
        );
      }
      const namespaceKeyword =
        token.contextualKeyword === keyword._namespace || token.contextualKeyword === keyword._module;
      if (namespaceKeyword && token.isType && tokens[index - 1]?.contextualKeyword !== keyword._declare) {
        // Sucrase drops a namespace body without a word, which would leave `N.x` undefined at run time.
        throw transformError(
          locationAt(typescript, token.start),
          "namespace declarations are not supported in cells; use a plain object (const N = { ... }) or type aliases",
        );
      }
    }
  }

  /**
   * Where erasing types would change how the JavaScript is split into statements. TypeScript ends a
   * statement before a line that starts with `(`, `[` or a template when what precedes it is a type
   * (`const a = b as T` / `(f)()`, a `type`/`interface`/`declare` line before `[1].forEach(...)`), but
   * once the type is gone JavaScript joins the lines into one call or index. A `;` is inserted at each
   * such place, on the same line, so the output keeps TypeScript's meaning and its line numbers.
   */
  function statementGuards(typescript: string, tokens: SucraseToken[]): number[] {
    const offsets: number[] = [];
    const statementStarters = new Set([
      keyword._type,
      keyword._interface,
      keyword._declare,
      keyword._abstract,
    ]);
    const hazards = new Set([tokenType.parenL, tokenType.bracketL, tokenType.backQuote]);
    for (let index = 0; index < tokens.length; index++) {
      const token = tokens[index]!;
      if (!token.isType || tokens[index - 1]?.isType === true) continue;
      let last = index;
      while (tokens[last + 1]?.isType === true) last++;
      const next = tokens[last + 1];
      const end = tokens[last]!.end;
      // Only a line that starts with `(`, `[` or a template after the erased run can be joined.
      if (next === undefined || !hazards.has(next.type)) {
        index = last;
        continue;
      }
      if (statementStarters.has(token.contextualKeyword) || token.type === tokenType._function) {
        const previous = tokens[index - 1];
        if (
          previous !== undefined &&
          previous.type !== tokenType.semi &&
          previous.type !== tokenType.braceL
        ) {
          offsets.push(token.start);
        }
      } else if (
        (token.contextualKeyword === keyword._as ||
          token.contextualKeyword === keyword._satisfies ||
          token.type === tokenType.colon) &&
        /[\n\r\u2028\u2029]/.test(typescript.slice(end, next.start))
      ) {
        offsets.push(end);
      }
      index = last;
    }
    return offsets;
  }

  return {
    transform(typescript: string): string {
      try {
        const parsed = sucrase.parse(typescript, false, true, false);
        scanTokens(typescript, parsed.tokens);
        const guards = statementGuards(typescript, parsed.tokens);
        const code = guards.length > 0 ? withSemicolonsAt(typescript, guards) : typescript;
        const { tokens, scopes } = guards.length > 0 ? sucrase.parse(code, false, true, false) : parsed;
        // The same steps as sucrase's transform() for these options: no imports transform, so no
        // import processor and no shadowed-globals pass (keepUnusedImports).
        const nameManager = new sucrase.NameManager(code, tokens);
        const helperManager = new sucrase.HelperManager(nameManager);
        const tokenProcessor = new sucrase.TokenProcessor(code, tokens, false, true, helperManager);
        const context = { tokenProcessor, scopes, nameManager, importProcessor: null, helperManager };
        return new sucrase.RootTransformer(context, options.transforms, false, options).transform().code;
      } catch (error) {
        if (CodeModeError.is(error)) throw error;
        throw fromSucraseError(typescript, error);
      }
    },
  };
}

function withSemicolonsAt(source: string, offsets: number[]): string {
  let result = "";
  let from = 0;
  for (const offset of offsets) {
    result += `${source.slice(from, offset)};`;
    from = offset;
  }
  return result + source.slice(from);
}

function finding(
  source: string,
  token: SucraseToken,
  construct: ModuleAccessFinding["construct"],
  description: string,
): ModuleAccessFinding {
  return { ...locationAt(source, token.start), construct, description };
}

/** `typescript_transform_failed` with the place and the reason as data. */
export function transformError(location: SourceLocation, reason: string, cause?: unknown): CodeModeError {
  return new CodeModeError(
    "typescript_transform_failed",
    `TypeScript transform failed at line ${location.line}:${location.column}: ${reason}. ` +
      "Fix the cell and run it again (TypeScript cells are stripped of types, not type-checked).",
    { line: location.line, column: location.column, message: reason },
    cause === undefined ? undefined : { cause },
  );
}

function fromSucraseError(typescript: string, error: unknown): CodeModeError {
  if (error instanceof RangeError) {
    return transformError({ line: 1, column: 1 }, "the code is nested too deeply to parse", error);
  }
  // A TypeError or ReferenceError is a fault in this package's glue, not in the cell.
  if (error instanceof TypeError || error instanceof ReferenceError) {
    return new CodeModeError(
      "internal_error",
      `The TypeScript transformer failed: ${error.message}`,
      undefined,
      {
        cause: error,
      },
    );
  }
  if (error instanceof Error) {
    const position = (error as Error & { pos?: unknown }).pos;
    const location = locationAt(typescript, typeof position === "number" ? position : 0);
    return transformError(location, withoutLocationSuffix(error.message), error);
  }
  return transformError({ line: 1, column: 1 }, String(error), error);
}
