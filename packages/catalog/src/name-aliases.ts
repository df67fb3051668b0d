/**
 * Forgiving names: the spellings a model writes for a member that exists under another spelling
 * (`tools.readFile` for `read_file`, `MCP.memory.create_entities` for `createEntities`). An alias is
 * offered only when it cannot mislead: it never equals a real name or a reserved one, and a spelling
 * that two members could both mean (same words, different members) resolves to neither.
 */

/**
 * `readFile`, `read_file`, `Read-File`, `READ_FILE` to `["read", "file"]`. A name of ASCII only (almost
 * every tool name) is split by the same rules written for ASCII: V8 compiles the Unicode property classes
 * (`\p{L}` and the like) on a process's first call, which lies on `codecell serve`'s path to its first
 * `tools/list`, while the ASCII classes are cheap to compile. `name-aliases.test.ts` checks both give the
 * same words.
 */
export function nameWords(name: string): string[] {
  if (ASCII_ONLY.test(name)) {
    return name
      .replace(/([a-z0-9])([A-Z])/g, "$1 $2")
      .replace(/([A-Z])([A-Z][a-z])/g, "$1 $2")
      .split(/[^A-Za-z0-9$]+/)
      .filter((word) => word.length > 0)
      .map((word) => word.toLowerCase());
  }
  return unicodeNameWords(name);
}

/** The splitting rules written for any text: what nameWords does for a name that is not ASCII only. */
export function unicodeNameWords(name: string): string[] {
  return name
    .replace(/([\p{Ll}\p{N}])(\p{Lu})/gu, "$1 $2")
    .replace(/(\p{Lu})(\p{Lu}\p{Ll})/gu, "$1 $2")
    .split(/[^\p{L}\p{N}$]+/u)
    .filter((word) => word.length > 0)
    .map((word) => word.toLowerCase());
}

// biome-ignore lint/suspicious/noControlCharactersInRegex: the whole ASCII range, control characters included
const ASCII_ONLY = /^[\x00-\x7f]*$/;

/** The spelling-insensitive key two names share when they differ only in case and separators. */
export function nameKey(name: string): string {
  return nameWords(name).join("");
}

function variantsOf(name: string): string[] {
  const words = nameWords(name);
  if (words.length === 0) return [];
  const capital = (word: string) => word[0]!.toUpperCase() + word.slice(1);
  return [
    words.map((word, index) => (index === 0 ? word : capital(word))).join(""),
    words.map(capital).join(""),
    words.join("_"),
    words.join(""),
    words.join("_").toUpperCase(),
  ];
}

export type AliasTarget = {
  /** The member's real name on the guest object. */
  name: string;
  /** Further honest names for it, such as the MCP server's original tool name. */
  originalNames?: readonly string[];
  /**
   * False for a thing that has no member of its own (a tool that lost its shortcut to a collision): it
   * gets no alias, but still makes every spelling it shares with another target ambiguous.
   */
  isMember?: boolean;
};

/**
 * The aliases of each target, keyed by real name. `reserved` holds every name the object already uses
 * or must never answer to (helpers such as `search`, `then`, prototype members).
 */
export function aliasNamesFor(
  targets: readonly AliasTarget[],
  reserved: Iterable<string> = [],
): Map<string, string[]> {
  const taken = new Set<string>(reserved);
  for (const target of targets) if (target.isMember !== false) taken.add(target.name);
  // A key two targets share is ambiguous: no alias under it resolves at all.
  const owners = new Map<string, Set<number>>();
  const claim = (key: string, owner: number) => {
    const set = owners.get(key);
    if (set) set.add(owner);
    else owners.set(key, new Set([owner]));
  };
  targets.forEach((target, index) => {
    claim(nameKey(target.name), index);
    for (const original of target.originalNames ?? []) claim(nameKey(original), index);
  });
  const unambiguous = (name: string) => owners.get(nameKey(name))?.size === 1;
  const aliases = new Map<string, string[]>();
  const given = new Set<string>();
  for (const target of targets) {
    if (target.isMember === false) continue;
    const names: string[] = [];
    const offer = (alias: string) => {
      if (alias === "" || taken.has(alias) || given.has(alias) || !unambiguous(alias)) return;
      given.add(alias);
      names.push(alias);
    };
    for (const original of target.originalNames ?? []) offer(original);
    for (const variant of variantsOf(target.name)) offer(variant);
    for (const original of target.originalNames ?? [])
      for (const variant of variantsOf(original)) offer(variant);
    if (names.length > 0) aliases.set(target.name, names);
  }
  return aliases;
}
