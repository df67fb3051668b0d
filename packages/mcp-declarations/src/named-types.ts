import { IdentifierAllocator, toPascalCase } from "./identifiers.js";

type NamedType = { key: string; name: string; text: string; uses: Set<string> };

// Names a type alias must not take: it would hide a global the declarations themselves use.
const GLOBAL_TYPE_NAMES = [
  "Array",
  "Boolean",
  "Date",
  "Error",
  "Function",
  "Map",
  "Number",
  "Object",
  "Omit",
  "Partial",
  "Pick",
  "Promise",
  "Readonly",
  "Record",
  "Required",
  "Set",
  "String",
  "Symbol",
  "McpToolResult",
  "McpToolResultOf",
  "McpContent",
  "McpApiHeader",
];

/**
 * The type aliases of one server namespace (shared `$defs`, recursive types, large results), keyed by
 * what they declare so that the same definition used by many tools is declared once.
 */
export class NamedTypes {
  private readonly byKey = new Map<string, NamedType>();
  private readonly byName = new Map<string, NamedType>();
  private readonly order: NamedType[] = [];
  private readonly names = new IdentifierAllocator(GLOBAL_TYPE_NAMES);

  constructor(private readonly maxTypes = 200) {}

  get size(): number {
    return this.order.length;
  }

  /**
   * The alias name for `key`, declaring it on first use. The name is registered before the body is
   * rendered so that a recursive definition can refer to itself. Undefined past the alias budget.
   */
  nameFor(
    key: string,
    suggestedName: string,
    renderBody: (name: string) => { text: string; uses: Set<string> },
  ) {
    const known = this.byKey.get(key);
    if (known) return known.name;
    if (this.order.length >= this.maxTypes) return undefined;
    const name = this.names.allocate(suggestedName, toPascalCase);
    const entry: NamedType = { key, name, text: "", uses: new Set() };
    this.byKey.set(key, entry);
    this.byName.set(name, entry);
    this.order.push(entry);
    const body = renderBody(name);
    entry.text = body.text;
    entry.uses = body.uses;
    return name;
  }

  /** A position to roll back to when a render attempt is discarded. */
  checkpoint(): number {
    return this.order.length;
  }

  rollback(checkpoint: number): void {
    for (const entry of this.order.splice(checkpoint)) {
      this.byKey.delete(entry.key);
      this.byName.delete(entry.name);
      this.names.release(entry.name);
    }
  }

  /** The named types `roots` use, directly or through other named types, in declaration order. */
  closure(roots: Iterable<string>): string[] {
    const seen = new Set<string>();
    const pending = [...roots];
    while (pending.length > 0) {
      const name = pending.pop()!;
      if (seen.has(name)) continue;
      const entry = this.byName.get(name);
      if (!entry) continue;
      seen.add(name);
      pending.push(...entry.uses);
    }
    return this.order.filter((entry) => seen.has(entry.name)).map((entry) => entry.text);
  }

  /** Every alias declaration, in the order first used. */
  all(): string[] {
    return this.order.map((entry) => entry.text);
  }
}
