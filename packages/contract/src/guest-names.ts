/**
 * Names the guest relies on, shared by everything that hands out guest-visible names (tool shortcuts,
 * namespace globals) so none of them can shadow the code-mode globals or the language itself.
 */

/** The globals the sandbox prelude installs in every VM. */
export const GUEST_GLOBAL_NAMES = [
  "ALL_TOOLS",
  "tools",
  "MCP",
  "API",
  "namespaces",
  "text",
  "json",
  "yield_control",
  "console",
  "store",
  "load",
  "image",
] as const;

/** The `console` methods a cell may call; each appends a text output item that keeps its level. */
export const CONSOLE_LEVELS = ["log", "info", "warn", "error", "debug"] as const;
export type ConsoleLevel = (typeof CONSOLE_LEVELS)[number];

/** The image types `image(source)` accepts: what every front's image form takes. */
export const IMAGE_MIME_TYPES = ["image/png", "image/jpeg", "image/gif", "image/webp"] as const;
export type ImageMimeType = (typeof IMAGE_MIME_TYPES)[number];

/** The prefix reserved for the prelude's private names; no guest-visible name may start with it. */
export const INTERNAL_NAME_PREFIX = "__codecell";

/**
 * Members that change how an object behaves when a guest object gets them as own properties: `then`
 * makes `await x` treat it as a promise, `toJSON` changes what `JSON.stringify` writes, and the rest are
 * `Object.prototype` members. No tool shortcut or alias may take one of these names.
 */
export const OBJECT_BEHAVIOUR_NAMES = [
  "then",
  "constructor",
  "prototype",
  "__proto__",
  "toString",
  "toLocaleString",
  "valueOf",
  "toJSON",
  "hasOwnProperty",
  "isPrototypeOf",
  "propertyIsEnumerable",
  "__defineGetter__",
  "__defineSetter__",
  "__lookupGetter__",
  "__lookupSetter__",
] as const;

/** ECMAScript reserved words (strict mode and contextual ones too) and the value-like globals. */
export const JAVASCRIPT_RESERVED_WORDS = [
  "await",
  "break",
  "case",
  "catch",
  "class",
  "const",
  "continue",
  "debugger",
  "default",
  "delete",
  "do",
  "else",
  "enum",
  "export",
  "extends",
  "false",
  "finally",
  "for",
  "function",
  "if",
  "implements",
  "import",
  "in",
  "instanceof",
  "interface",
  "let",
  "new",
  "null",
  "package",
  "private",
  "protected",
  "public",
  "return",
  "static",
  "super",
  "switch",
  "this",
  "throw",
  "true",
  "try",
  "typeof",
  "var",
  "void",
  "while",
  "with",
  "yield",
  "arguments",
  "eval",
  "undefined",
  "NaN",
  "Infinity",
  "async",
  "of",
] as const;
