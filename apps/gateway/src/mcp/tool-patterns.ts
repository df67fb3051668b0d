/** `*` globs over tool ids or names, as in `tools.allow` / `tools.deny` (the catalog's policy syntax). */
export function compilePatterns(patterns: readonly string[]): (id: string, name: string) => boolean {
  const compiled = patterns.map(
    (pattern) =>
      new RegExp(
        `^${pattern
          .trim()
          .split("*")
          .map((part) => part.replace(/[.+?^${}()|[\]\\]/g, "\\$&"))
          .join(".*")}$`,
        "s",
      ),
  );
  return (id, name) => compiled.some((pattern) => pattern.test(id) || pattern.test(name));
}
