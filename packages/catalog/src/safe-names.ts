import {
  GUEST_GLOBAL_NAMES as CODE_MODE_GUEST_GLOBALS,
  INTERNAL_NAME_PREFIX,
  JAVASCRIPT_RESERVED_WORDS,
  OBJECT_BEHAVIOUR_NAMES,
} from "@codecell/contract";
import { aliasNamesFor } from "./name-aliases.js";

/**
 * Convenience names: `tools.<safeName>(input)` in the guest. A name is offered only when it is a plain
 * identifier that cannot shadow anything the guest relies on, and only when exactly one guest-visible
 * tool normalizes to it.
 */

// Not reserved, but accessor keywords: a shortcut named `get` or `set` reads as a typo in guest code.
const ACCESSOR_WORDS = ["get", "set"];

/** The guest's own globals; a tool must never be reachable under one of these names. */
export const GUEST_GLOBAL_NAMES: readonly string[] = [...CODE_MODE_GUEST_GLOBALS, "globalThis"];

// The catalog helpers on `tools`; the shared object-behaviour names are added below.
const TOOLS_HELPER_NAMES = ["search", "describe", "call"];

const blocked: ReadonlySet<string> = new Set([
  ...JAVASCRIPT_RESERVED_WORDS,
  ...ACCESSOR_WORDS,
  ...GUEST_GLOBAL_NAMES,
  ...TOOLS_HELPER_NAMES,
  ...OBJECT_BEHAVIOUR_NAMES,
]);

/** A tool name as a JS identifier: every other character becomes `_`, and a leading digit gets a `_`. */
export function normalizeToolName(name: string): string {
  const replaced = name.replace(/[^A-Za-z0-9_$]/g, "_");
  return /^[0-9]/.test(replaced) ? `_${replaced}` : replaced;
}

export function isBlockedConvenienceName(name: string): boolean {
  return name === "" || blocked.has(name) || name.startsWith(INTERNAL_NAME_PREFIX);
}

/**
 * The unique safe names of the given tools, in their order. Two tools that normalize to the same name
 * both lose it (the guest calls them by id), so a collision never silently picks a winner. Each name
 * carries its unambiguous case and separator variants (`readFile` for `read_file`) as `aliases`.
 */
export function convenienceNamesFor(
  tools: ReadonlyArray<{ id: string; name: string }>,
): Array<{ name: string; toolId: string; aliases?: string[] }> {
  const owners = new Map<string, string[]>();
  for (const tool of tools) {
    const safe = normalizeToolName(tool.name);
    const ids = owners.get(safe);
    if (ids === undefined) owners.set(safe, [tool.id]);
    else ids.push(tool.id);
  }
  const names: Array<{ name: string; toolId: string; aliases?: string[] }> = [];
  for (const [name, ids] of owners) {
    if (ids.length === 1 && !isBlockedConvenienceName(name)) names.push({ name, toolId: ids[0]! });
  }
  const offered = new Set(names.map((entry) => entry.name));
  const aliases = aliasNamesFor(
    [...owners.keys()].map((name) => ({ name, isMember: offered.has(name) })),
    [...owners.keys()],
  );
  for (const entry of names) {
    const usable = (aliases.get(entry.name) ?? []).filter((alias) => !isBlockedConvenienceName(alias));
    if (usable.length > 0) entry.aliases = usable;
  }
  return names;
}
