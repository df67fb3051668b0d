import { createRequire } from "node:module";

/**
 * Sucrase's parser and transformer classes, reached by deep `require`s of its `dist/` files: the one
 * place this package depends on sucrase's internals.
 *
 * Why not its public `transform()`: that parses a cell for the transform only, and the TypeScript
 * transformer also scans the same tokens (module syntax that lives only in types, constructs sucrase
 * would drop silently, the statement guards), so with `transform()` every cell would be parsed twice,
 * and it also loads option validation, source maps and the CommonJS import machinery a cell never
 * uses. Sucrase's public API exposes no tokens.
 *
 * Written for sucrase 3.35.1, which package.json pins exactly. These paths ship no typings for Node's
 * resolution, so their shapes are declared here against that version. Guarded by
 * test/sucrase-internals.test.ts: an update that moves or renames one of these files or members fails
 * there with "sucrase <version> moved <file>; update src/sucrase-internals.ts".
 */
export const SUCRASE_VERSION = "3.35.1";

export type SucraseToken = {
  type: number;
  contextualKeyword: number;
  start: number;
  end: number;
  isType: boolean;
};
export type SucraseFile = { tokens: SucraseToken[]; scopes: unknown[] };
export type SucraseOptions = {
  transforms: string[];
  disableESTransforms: boolean;
  keepUnusedImports: boolean;
};
export type SucraseInternals = {
  parse(input: string, jsx: boolean, typescript: boolean, flow: boolean): SucraseFile;
  NameManager: new (code: string, tokens: SucraseToken[]) => unknown;
  HelperManager: new (nameManager: unknown) => unknown;
  TokenProcessor: new (
    code: string,
    tokens: SucraseToken[],
    isFlowEnabled: boolean,
    disableESTransforms: boolean,
    helperManager: unknown,
  ) => unknown;
  RootTransformer: new (
    context: Record<string, unknown>,
    transforms: string[],
    enableLegacyBabel5ModuleInterop: boolean,
    options: SucraseOptions,
  ) => { transform(): { code: string } };
  tokenType: TokenTypeTable;
  keyword: ContextualKeywordTable;
};
/** The token types and contextual keywords the transformer's token scan reads. */
export const TOKEN_TYPES_READ = [
  "_import",
  "_export",
  "_function",
  "at",
  "parenL",
  "bracketL",
  "backQuote",
  "colon",
  "semi",
  "braceL",
] as const;
export const KEYWORDS_READ = [
  "_namespace",
  "_module",
  "_declare",
  "_type",
  "_interface",
  "_abstract",
  "_as",
  "_satisfies",
] as const;
type TokenTypeTable = Record<(typeof TOKEN_TYPES_READ)[number], number>;
type ContextualKeywordTable = Record<(typeof KEYWORDS_READ)[number], number>;

/** Where each of SucraseInternals is: the file under sucrase's package and the export it is. */
export const SUCRASE_INTERNAL_FILES = {
  parse: { file: "dist/parser/index.js", member: "parse" },
  NameManager: { file: "dist/NameManager.js", member: "default" },
  HelperManager: { file: "dist/HelperManager.js", member: "HelperManager" },
  TokenProcessor: { file: "dist/TokenProcessor.js", member: "default" },
  RootTransformer: { file: "dist/transformers/RootTransformer.js", member: "default" },
  tokenType: { file: "dist/parser/tokenizer/types.js", member: "TokenType" },
  keyword: { file: "dist/parser/tokenizer/keywords.js", member: "ContextualKeyword" },
} as const satisfies Record<keyof SucraseInternals, { file: string; member: string }>;

/**
 * Sucrase's internals, required now (the first TypeScript cell: nothing of sucrase is loaded before).
 * Sucrase is CommonJS; createRequire gives its exports exactly as Node defines them, whatever ESM
 * interop the caller's loader applies.
 */
export function requireSucraseInternals(): SucraseInternals {
  const require = createRequire(import.meta.url);
  const take = ({ file, member }: { file: string; member: string }) => require(`sucrase/${file}`)[member];
  const files = SUCRASE_INTERNAL_FILES;
  return {
    parse: take(files.parse),
    NameManager: take(files.NameManager),
    HelperManager: take(files.HelperManager),
    TokenProcessor: take(files.TokenProcessor),
    RootTransformer: take(files.RootTransformer),
    tokenType: take(files.tokenType),
    keyword: take(files.keyword),
  };
}
