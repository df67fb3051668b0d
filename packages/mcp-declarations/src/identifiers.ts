// Words that cannot name a namespace member or a declared function: JavaScript reserved words (strict
// mode included), names TypeScript refuses for a namespace, and the built-in type names.
const LANGUAGE_RESERVED = new Set(
  (
    "break case catch class const continue debugger default delete do else enum export extends false " +
    "finally for function if import in instanceof new null return super switch this throw true try typeof " +
    "var void while with implements interface let package private protected public static yield await " +
    "arguments eval undefined any unknown never string number boolean symbol object bigint"
  ).split(" "),
);

/** Member names every `MCP.<server>` namespace keeps for itself. */
export const RESERVED_TOOL_IDENTIFIERS: readonly string[] = ["$api", "resources", "prompts"];

/** True for a name that can stand bare as a TypeScript property key. */
export function isPlainIdentifier(name: string): boolean {
  return /^[\p{L}_$][\p{L}\p{N}_$]*$/u.test(name);
}

/** `create_issue`, `get-annotated-message`, `Create Issue` to `createIssue`, `getAnnotatedMessage`. */
export function toCamelCase(name: string): string {
  const words = name.split(/[^\p{L}\p{N}]+/u).filter((word) => word.length > 0);
  let result = words
    .map((word, index) => {
      if (index === 0) {
        // An all-capitals first word (`API_list`, `URL`) reads better fully lowered.
        return word === word.toUpperCase() ? word.toLowerCase() : word[0]!.toLowerCase() + word.slice(1);
      }
      return word[0]!.toUpperCase() + word.slice(1);
    })
    .join("");
  if (result.length === 0) result = "unnamed";
  if (/^\p{N}/u.test(result)) result = "_" + result;
  return result;
}

/** `createIssue` to `CreateIssue`. */
export function toPascalCase(name: string): string {
  const camel = toCamelCase(name).replace(/^_/, "");
  // A type name must not start with a digit (a `$ref` ending in an array index, `#/anyOf/0`).
  return /^\p{N}/u.test(camel) ? `T${camel}` : camel[0]!.toUpperCase() + camel.slice(1);
}

/**
 * Hands out unique identifiers: camelCase of the name, with `_` appended to reserved words and a number
 * appended on a collision (`search`, `search2`), first come first served.
 */
export class IdentifierAllocator {
  private readonly taken = new Set<string>();
  private readonly reserved: ReadonlySet<string>;

  constructor(extraReserved: Iterable<string> = []) {
    this.reserved = new Set([...LANGUAGE_RESERVED, ...extraReserved]);
  }

  allocate(name: string, transform: (name: string) => string = toCamelCase): string {
    let base = transform(name);
    if (this.reserved.has(base)) base = base + "_";
    let candidate = base;
    for (let counter = 2; this.taken.has(candidate) || this.reserved.has(candidate); counter++) {
      candidate = base + counter;
    }
    this.taken.add(candidate);
    return candidate;
  }

  /** Marks a name used without transforming it. */
  claim(identifier: string): void {
    this.taken.add(identifier);
  }

  /** Gives a name back (a render attempt that was thrown away). */
  release(identifier: string): void {
    this.taken.delete(identifier);
  }
}
