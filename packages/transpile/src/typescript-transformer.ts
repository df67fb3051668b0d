import { CodeModeError } from "@codecell/contract";
import { type ModuleAccessFinding, moduleAccessError } from "./module-access.js";
import { locationAt, type SourceLocation, withoutLocationSuffix } from "./source-location.js";

/**
 * TypeScript support is type stripping with sucrase (chosen by measurement, see the README): it loads in
 * tens of milliseconds, transforms a cell in well under a millisecond and keeps every line where it was.
 * Sucrase is loaded on the first TypeScript cell and never for JavaScript cells.
 */

// The shapes of the sucrase modules we use. Its parser lives at deep paths that ship no typings for
// Node's resolution, so they are declared here against the exact version pinned in package.json.
type SucraseOptions = { transforms: string[]; disableESTransforms: boolean; keepUnusedImports: boolean };
type SucraseModule = { transform(code: string, options: SucraseOptions): { code: string } };
type SucraseToken = { type: number; contextualKeyword: number; start: number; end: number; isType: boolean };
type SucraseParserModule = {
  parse(input: string, jsx: boolean, typescript: boolean, flow: boolean): { tokens: SucraseToken[] };
};
type TokenTypeTable = { _import: number; _export: number; at: number; parenL: number };
type ContextualKeywordTable = { _namespace: number; _module: number; _declare: number; _type: number };

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
  // Specifiers held in variables: sucrase is CommonJS without an exports map, and TypeScript must not
  // try to resolve typings for its deep paths.
  const parserPath: string = "sucrase/dist/parser/index.js";
  const typesPath: string = "sucrase/dist/parser/tokenizer/types.js";
  const keywordsPath: string = "sucrase/dist/parser/tokenizer/keywords.js";
  const [sucrase, parser, types, keywords] = await Promise.all([
    import("sucrase") as Promise<unknown>,
    import(parserPath),
    import(typesPath),
    import(keywordsPath),
  ]);
  return createTransformer(
    commonJsExports<SucraseModule>(sucrase),
    commonJsExports<SucraseParserModule>(parser),
    commonJsExports<{ TokenType: TokenTypeTable }>(types).TokenType,
    commonJsExports<{ ContextualKeyword: ContextualKeywordTable }>(keywords).ContextualKeyword,
  );
}

function commonJsExports<T>(namespace: unknown): T {
  return (namespace as { default: T }).default;
}

function createTransformer(
  sucrase: SucraseModule,
  parser: SucraseParserModule,
  tokenType: TokenTypeTable,
  keyword: ContextualKeywordTable,
): TypeScriptTransformer {
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

  return {
    transform(typescript: string): string {
      let tokens: SucraseToken[];
      let javascript: string;
      try {
        tokens = parser.parse(typescript, false, true, false).tokens;
        scanTokens(typescript, tokens);
        javascript = sucrase.transform(typescript, options).code;
      } catch (error) {
        if (CodeModeError.is(error)) throw error;
        throw fromSucraseError(typescript, error);
      }
      return javascript;
    },
  };
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
  if (error instanceof Error) {
    const position = (error as Error & { pos?: unknown }).pos;
    const location = locationAt(typescript, typeof position === "number" ? position : 0);
    return transformError(location, withoutLocationSuffix(error.message), error);
  }
  return transformError({ line: 1, column: 1 }, String(error), error);
}
