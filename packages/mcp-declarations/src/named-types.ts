import { IdentifierAllocator, toPascalCase } from "./identifiers.js";

type NamedType = {
  key: string;
  name: string;
  text: string;
  uses: Set<string>;
  /** Names used outside any object member or array element (see `SchemaPrinter.unguardedUses`). */
  unguardedUses: Set<string>;
};

type RenderedBody = { text: string; uses: Set<string>; unguardedUses?: Set<string> };

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
  "McpResourceContent",
  "McpResourceList",
  "McpResourceContents",
  "McpPromptList",
  "McpPromptResult",
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
  nameFor(key: string, suggestedName: string, renderBody: (name: string) => RenderedBody) {
    const known = this.byKey.get(key);
    if (known) return known.name;
    if (this.order.length >= this.maxTypes) return undefined;
    const name = this.names.allocate(suggestedName, toPascalCase);
    const entry: NamedType = { key, name, text: "", uses: new Set(), unguardedUses: new Set() };
    this.byKey.set(key, entry);
    this.byName.set(name, entry);
    this.order.push(entry);
    const body = renderBody(name);
    entry.text = body.text;
    entry.uses = body.uses;
    entry.unguardedUses = body.unguardedUses ?? new Set();
    return name;
  }

  /**
   * TypeScript rejects a type alias that reaches itself without passing through an object member or an
   * array element (`type A = A`, `type A = B; type B = A | string`, from `"$ref": "#"` or `$defs` that
   * refer to each other). Every alias on such a cycle is declared `unknown`, with a comment saying why,
   * so that the file always type-checks. Cycles through objects and arrays stay recursive types.
   */
  breakUnguardedCycles(): void {
    for (const entry of this.order.filter((candidate) => this.onUnguardedCycle(candidate))) {
      entry.text = `  /** Defined only through itself (a $ref cycle with no object or array in between), so its shape is unknown. */\n  type ${entry.name} = unknown;\n`;
      entry.uses = new Set();
      entry.unguardedUses = new Set();
    }
  }

  private onUnguardedCycle(start: NamedType): boolean {
    const seen = new Set<string>();
    const pending = [...start.unguardedUses];
    while (pending.length > 0) {
      const name = pending.pop()!;
      if (name === start.name) return true;
      if (seen.has(name)) continue;
      seen.add(name);
      const entry = this.byName.get(name);
      if (entry) pending.push(...entry.unguardedUses);
    }
    return false;
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
