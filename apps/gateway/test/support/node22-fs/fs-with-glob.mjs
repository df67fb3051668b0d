// Node 20's fs with the `globSync` of Node 22, enough for patterns of `*`, `**`, `?` and `{a,b}`
// relative to `options.cwd` (the uses a test runner has: finding files below a folder).
import fs from "node:fs";
import { join, relative, sep } from "node:path";

export * from "node:fs";

/** A glob pattern as a regular expression over "/"-separated relative paths. */
function patternToRegExp(pattern) {
  let source = "";
  for (let index = 0; index < pattern.length; index++) {
    const char = pattern[index];
    if (char === "*" && pattern[index + 1] === "*") {
      const slash = pattern[index + 2] === "/";
      source += slash ? "(?:.*/)?" : ".*";
      index += slash ? 2 : 1;
    } else if (char === "*") source += "[^/]*";
    else if (char === "?") source += "[^/]";
    else if (char === "{") {
      const end = pattern.indexOf("}", index);
      const options = pattern.slice(index + 1, end).split(",");
      source += `(?:${options.map((option) => option.replace(/[.+^$()|[\]\\]/g, "\\$&")).join("|")})`;
      index = end;
    } else source += char.replace(/[.+^$()|[\]\\]/g, "\\$&");
  }
  return new RegExp(`^${source}$`);
}

export function globSync(patterns, options = {}) {
  const cwd = options.cwd ? String(options.cwd) : process.cwd();
  const list = (Array.isArray(patterns) ? patterns : [patterns]).map((pattern) =>
    patternToRegExp(String(pattern).replace(/^\.\//, "")),
  );
  let entries;
  try {
    entries = fs.readdirSync(cwd, { recursive: true });
  } catch {
    return [];
  }
  return entries
    .map((entry) => String(entry))
    .filter((entry) => list.some((regexp) => regexp.test(entry.split(sep).join("/"))))
    .map((entry) =>
      options.withFileTypes ? fs.statSync(join(cwd, entry)) : relative(cwd, join(cwd, entry)),
    );
}

export default { ...fs, globSync };
