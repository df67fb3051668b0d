import { jsDoc, oneLine, truncate } from "./comments.js";
import { isPlainIdentifier } from "./identifiers.js";
import type { NamedTypes } from "./named-types.js";

type Schema = Record<string, unknown>;

export type PrinterLimits = {
  maxDepth: number;
  maxNodes: number;
  /** Property descriptions as inline JSDoc inside object types. */
  propertyDocs: boolean;
};

const MAX_LITERALS = 64;
const INLINE_OBJECT_CHARS = 72;
// A tool's input sits after `function name(input: `, so it goes multi-line sooner.
const TOP_LEVEL_INLINE_CHARS = 48;
const DEFINITION_POINTER = /^#\/(\$defs|definitions)\/([^/]+)$/;

function isSchemaObject(value: unknown): value is Schema {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function indentOf(level: number): string {
  return "  ".repeat(level);
}

/** True when a type needs parentheses before `[]`: a union, intersection or function at top level. */
function isCompound(type: string): boolean {
  let depth = 0;
  let quote: string | undefined;
  for (let index = 0; index < type.length; index++) {
    const char = type[index]!;
    if (quote) {
      if (char === "\\") index++;
      else if (char === quote) quote = undefined;
      continue;
    }
    if (char === '"') quote = char;
    else if ("{[(<".includes(char)) depth++;
    else if ("}])>".includes(char)) depth--;
    else if (depth === 0 && (char === "|" || char === "&")) return true;
  }
  return false;
}

/** A JSON value as a TypeScript literal type, or undefined when it has none. */
function literalType(value: unknown): string | undefined {
  if (value === null) return "null";
  if (typeof value === "string") return JSON.stringify(value);
  if (typeof value === "boolean") return String(value);
  if (typeof value === "number" && Number.isFinite(value)) return String(value);
  return undefined;
}

function union(types: string[]): string {
  const unique = [...new Set(types)];
  if (unique.includes("unknown")) return "unknown";
  return unique.length === 0 ? "never" : unique.join(" | ");
}

/** JSON pointer (`#/a/b~1c`) into a document, or undefined. */
function resolvePointer(root: unknown, pointer: string): unknown {
  if (pointer === "#") return root;
  if (!pointer.startsWith("#/")) return undefined;
  let node: unknown = root;
  for (const raw of pointer.slice(2).split("/")) {
    let segment: string;
    try {
      segment = decodeURIComponent(raw).replace(/~1/g, "/").replace(/~0/g, "~");
    } catch {
      return undefined;
    }
    if (Array.isArray(node)) node = node[Number(segment)];
    else if (isSchemaObject(node) && Object.hasOwn(node, segment)) node = node[segment];
    else return undefined;
  }
  return node;
}

/** The doc line that says which `$ref`s were typed `unknown` because they point nowhere resolvable. */
export function unresolvedRefsNote(pointers: Iterable<string>): string {
  const shown = [...pointers].slice(0, 3).map((pointer) => JSON.stringify(truncate(oneLine(pointer), 80)));
  return `$ref ${shown.join(", ")} cannot be resolved from this schema, so it is typed unknown.`;
}

/** The description and default of a schema, as JSDoc lines. */
export function schemaDocLines(schema: unknown): string[] {
  if (!isSchemaObject(schema)) return [];
  const lines: string[] = [];
  if (typeof schema.description === "string" && schema.description.trim() !== "") {
    lines.push(truncate(schema.description.trim(), 600));
  }
  if (schema.default !== undefined) {
    let shown: string | undefined;
    try {
      shown = JSON.stringify(schema.default);
    } catch {
      shown = undefined;
    }
    if (shown !== undefined) lines.push(`Default: ${truncate(shown, 80)}`);
  }
  if (schema.deprecated === true) lines.push("@deprecated");
  return lines;
}

/**
 * Renders JSON Schema (draft-07 and 2020-12 as MCP servers send them) as TypeScript type text. One
 * printer serves one schema document (a tool's input or output schema); shared definitions and
 * recursive types become aliases in the server's `NamedTypes`. It never throws on a malformed schema
 * and, past its budget, degrades to `unknown` / `Record<string, unknown>` and says so in `degraded`.
 */
export class SchemaPrinter {
  degraded = false;
  /** Named types this schema refers to. */
  readonly uses = new Set<string>();
  /**
   * The subset of `uses` referred to outside any object member or array element: a type alias may refer to
   * itself only through such a guard, so these are the edges a declaration cycle must not consist of.
   */
  readonly unguardedUses = new Set<string>();
  /** `$ref` values that point nowhere this document can resolve (remote or broken); typed `unknown`. */
  readonly unresolvedRefs = new Set<string>();
  private guard = 0;
  private restElements = 0;
  private nodes = 0;
  private readonly stack: string[] = [];
  private definitionsJson: string | undefined;

  constructor(
    private readonly root: unknown,
    private readonly named: NamedTypes,
    private readonly limits: PrinterLimits,
    /** Alias name for a reference to the whole document (`"$ref": "#"`). */
    private readonly rootName: string,
  ) {}

  /** The type of `schema`, laid out for a position at `level` (two spaces each). */
  type(schema: unknown, level: number, depth = 0): string {
    if (schema === true || schema === undefined) return "unknown";
    if (schema === false) return "never";
    if (!isSchemaObject(schema)) {
      this.degraded = true;
      return "unknown";
    }
    this.nodes++;
    if (this.nodes > this.limits.maxNodes || depth > this.limits.maxDepth) {
      this.degraded = true;
      return this.looksLikeObject(schema) ? "Record<string, unknown>" : "unknown";
    }
    if (typeof schema.$ref === "string") return this.reference(schema.$ref, level, depth);

    const parts: string[] = [];
    const base = this.baseType(schema, level, depth);
    if (base !== undefined) parts.push(base);
    for (const keyword of ["anyOf", "oneOf"] as const) {
      const options = schema[keyword];
      if (Array.isArray(options) && options.length > 0) {
        const members = union(options.map((option) => this.type(option, level, depth + 1)));
        parts.push(members);
      }
    }
    if (Array.isArray(schema.allOf)) {
      for (const member of schema.allOf) parts.push(this.type(member, level, depth + 1));
    }
    const meaningful = parts.filter((part) => part !== "unknown");
    let result: string;
    if (meaningful.length === 0) result = "unknown";
    else if (meaningful.length === 1) result = meaningful[0]!;
    else result = meaningful.map((part) => (isCompound(part) ? `(${part})` : part)).join(" & ");
    if (schema.nullable === true && result !== "unknown" && !/(^|\| )null( \||$)/.test(result)) {
      result = isCompound(result) && result.includes("&") ? `(${result}) | null` : `${result} | null`;
    }
    return result;
  }

  /**
   * An object schema's members as lines at `level`, for the top level of a tool's input where the
   * caller puts property descriptions into `@param` tags instead. Undefined when it is no plain object.
   */
  topLevelObject(schema: unknown, level: number): { type: string; required: number } | undefined {
    if (!isSchemaObject(schema) || typeof schema.$ref === "string") return undefined;
    if (schema.anyOf !== undefined || schema.oneOf !== undefined || schema.allOf !== undefined)
      return undefined;
    if (schema.type !== undefined && schema.type !== "object") return undefined;
    this.nodes++;
    const required = Array.isArray(schema.required) ? schema.required.length : 0;
    return { type: this.objectType(schema, level, 0, false, TOP_LEVEL_INLINE_CHARS), required };
  }

  private looksLikeObject(schema: Schema): boolean {
    return schema.type === "object" || isSchemaObject(schema.properties);
  }

  private baseType(schema: Schema, level: number, depth: number): string | undefined {
    if (Object.hasOwn(schema, "const")) return literalType(schema.const) ?? "unknown";
    if (Array.isArray(schema.enum)) {
      const literals = schema.enum.map(literalType);
      if (
        schema.enum.length > 0 &&
        schema.enum.length <= MAX_LITERALS &&
        literals.every((l) => l !== undefined)
      ) {
        return union(literals as string[]);
      }
    }
    const declared = schema.type;
    const types = Array.isArray(declared) ? declared : declared === undefined ? [] : [declared];
    if (types.length === 0) {
      if (
        isSchemaObject(schema.properties) ||
        schema.additionalProperties !== undefined ||
        isSchemaObject(schema.patternProperties)
      ) {
        return this.objectType(schema, level, depth, true);
      }
      if (schema.items !== undefined || Array.isArray(schema.prefixItems))
        return this.arrayType(schema, level, depth);
      return undefined;
    }
    return union(
      types.map((type) => {
        switch (type) {
          case "string":
            return "string";
          case "number":
          case "integer":
            return "number";
          case "boolean":
            return "boolean";
          case "null":
            return "null";
          case "array":
            return this.arrayType(schema, level, depth);
          case "object":
            return this.objectType(schema, level, depth, true);
          default:
            this.degraded = true;
            return "unknown";
        }
      }),
    );
  }

  private arrayType(schema: Schema, level: number, depth: number): string {
    // 2020-12 spells tuples `prefixItems` (+ `items` for the rest); draft-07 `items: [...]` (+ `additionalItems`).
    const tuple = Array.isArray(schema.prefixItems)
      ? { items: schema.prefixItems as unknown[], rest: schema.items }
      : Array.isArray(schema.items)
        ? { items: schema.items as unknown[], rest: schema.additionalItems }
        : undefined;
    if (tuple) {
      const elements = tuple.items.map((item) =>
        this.guarded(() => this.type(item, level, depth + 1), "element"),
      );
      const closed = tuple.rest === false || schema.maxItems === tuple.items.length;
      if (!closed) {
        // TypeScript resolves a tuple's rest element eagerly: no guard there, not even an array's.
        this.restElements++;
        let rest: string;
        try {
          rest = this.type(tuple.rest, level, depth + 1);
        } finally {
          this.restElements--;
        }
        elements.push(`...${isCompound(rest) ? `(${rest})` : rest}[]`);
      }
      return `[${elements.join(", ")}]`;
    }
    const element = this.guarded(() => this.type(schema.items, level, depth + 1), "element");
    return isCompound(element) ? `(${element})[]` : `${element}[]`;
  }

  private objectType(
    schema: Schema,
    level: number,
    depth: number,
    propertyDocs: boolean,
    inlineChars = INLINE_OBJECT_CHARS,
  ): string {
    const properties = isSchemaObject(schema.properties) ? Object.entries(schema.properties) : [];
    const required = new Set(
      Array.isArray(schema.required) ? schema.required.filter((key) => typeof key === "string") : [],
    );
    const additional = schema.additionalProperties;
    const patterns = isSchemaObject(schema.patternProperties) ? Object.values(schema.patternProperties) : [];
    const openValues: unknown[] = [...patterns];
    if (additional !== undefined && additional !== false) openValues.push(additional);

    if (properties.length === 0) {
      // `properties: {}` with nothing else says "no arguments"; a bare `type: "object"` says "anything".
      const closed = additional === false || (isSchemaObject(schema.properties) && additional === undefined);
      if (closed && patterns.length === 0) return "{}";
      const value =
        openValues.length === 0 ? "unknown" : union(openValues.map((v) => this.type(v, level, depth + 1)));
      return `Record<string, ${value}>`;
    }

    const members: Array<{ doc: string[]; line: string }> = [];
    for (const [key, value] of properties) {
      const name = isPlainIdentifier(key) ? key : JSON.stringify(key);
      const optional = required.has(key) ? "" : "?";
      const type = this.guarded(() => this.type(value, level + 1, depth + 1), "member");
      const doc = propertyDocs && this.limits.propertyDocs ? schemaDocLines(value) : [];
      members.push({ doc, line: `${name}${optional}: ${type};` });
    }
    // A typed index signature would have to cover every named property, so extra keys stay unknown.
    if (openValues.length > 0 && additional !== undefined)
      members.push({ doc: [], line: "[key: string]: unknown;" });

    const oneLineForm = `{ ${members.map((member) => member.line).join(" ")} }`.replace(/; }$/, " }");
    if (
      members.every((member) => member.doc.length === 0 && !member.line.includes("\n")) &&
      oneLineForm.length <= inlineChars
    ) {
      return oneLineForm;
    }
    const inner = indentOf(level + 1);
    const body = members.map((member) => jsDoc(member.doc, inner) + inner + member.line).join("\n");
    return `{\n${body}\n${indentOf(level)}}`;
  }

  /**
   * Renders inside an object member or an array or tuple element, where a type alias may refer to itself
   * (TypeScript defers those). An element inside a tuple's rest element is no such place.
   */
  private guarded(render: () => string, position: "member" | "element"): string {
    const guards = position === "member" || this.restElements === 0;
    if (guards) this.guard++;
    try {
      return render();
    } finally {
      if (guards) this.guard--;
    }
  }

  private reference(pointer: string, level: number, depth: number): string {
    const target = resolvePointer(this.root, pointer);
    if (target === undefined) {
      // Remote and unresolvable references: nothing to declare from here.
      this.degraded = true;
      this.unresolvedRefs.add(pointer);
      return "unknown";
    }
    const definition = DEFINITION_POINTER.exec(pointer);
    const recursive = this.stack.includes(pointer);
    if (definition || pointer === "#" || recursive) {
      const suggested = definition
        ? decodeURIComponent(definition[2]!).replace(/~1/g, "/").replace(/~0/g, "~")
        : pointer === "#"
          ? this.rootName
          : (pointer.split("/").pop() ?? "Type");
      const name = this.namedType(pointer, target, suggested);
      if (name === undefined) {
        this.degraded = true;
        return "unknown";
      }
      this.uses.add(name);
      if (this.guard === 0) this.unguardedUses.add(name);
      return name;
    }
    this.stack.push(pointer);
    try {
      return this.type(target, level, depth);
    } finally {
      this.stack.pop();
    }
  }

  private namedType(pointer: string, target: unknown, suggested: string): string | undefined {
    const targetJson = JSON.stringify(target);
    // Definitions that refer further are only the same when the definitions they refer to are too.
    const key = targetJson.includes('"$ref"') ? `${targetJson}@${this.definitions()}` : targetJson;
    return this.named.nameFor(key, suggested, (name) => {
      const printer = new SchemaPrinter(this.root, this.named, this.limits, this.rootName);
      printer.stack.push(pointer);
      const type = printer.type(target, 1, 0);
      if (printer.degraded) this.degraded = true;
      for (const unresolved of printer.unresolvedRefs) this.unresolvedRefs.add(unresolved);
      const doc = schemaDocLines(target).map(oneLine);
      if (printer.unresolvedRefs.size > 0) doc.push(unresolvedRefsNote(printer.unresolvedRefs));
      const text = `${jsDoc(doc, "  ")}  type ${name} = ${type};\n`;
      return { text, uses: printer.uses, unguardedUses: printer.unguardedUses };
    });
  }

  private definitions(): string {
    if (this.definitionsJson === undefined) {
      const root = isSchemaObject(this.root) ? this.root : {};
      this.definitionsJson = JSON.stringify([root.$defs ?? null, root.definitions ?? null]);
    }
    return this.definitionsJson;
  }
}
