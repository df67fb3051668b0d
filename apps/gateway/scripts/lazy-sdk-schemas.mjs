// Used by scripts/bundle-cli.mjs: the MCP SDK's types module with each zod schema built on first use.
//
// `@modelcontextprotocol/sdk/dist/esm/types.js` defines some 150 zod schemas at its top level, every
// message type of the protocol, and building them was about a sixth of the main thread's CPU on the way
// to `codecell serve`'s first `tools/list`. A stdio server touches a few dozen. Here each top-level
// `const XSchema = <expression>;` becomes `const XSchema = lazySchema(() => <expression>)`: a proxy that
// builds the schema the first time anything reads from it and then forwards every operation to it. The
// schemas are immutable once built, so building later changes nothing but when the work is done.
import { transformSync } from "esbuild";

/** The runtime half, prepended to the transformed module. */
const LAZY_SCHEMA_RUNTIME = `
function lazySchema(build) {
  let built;
  const schema = () => (built ??= build());
  return new Proxy(Object.create(null), {
    get: (_, key) => Reflect.get(schema(), key, schema()),
    set: (_, key, value) => Reflect.set(schema(), key, value, schema()),
    has: (_, key) => Reflect.has(schema(), key),
    ownKeys: () => Reflect.ownKeys(schema()),
    getOwnPropertyDescriptor: (_, key) => {
      const descriptor = Reflect.getOwnPropertyDescriptor(schema(), key);
      // The proxy's own target is empty and extensible: a property it reports must be configurable.
      if (descriptor) descriptor.configurable = true;
      return descriptor;
    },
    defineProperty: (_, key, descriptor) => Reflect.defineProperty(schema(), key, descriptor),
    deleteProperty: (_, key) => Reflect.deleteProperty(schema(), key),
    getPrototypeOf: () => Reflect.getPrototypeOf(schema()),
  });
}
`;

/**
 * The end of the statement that starts at `from` (the index just past its `;`), skipping strings,
 * template literals and comments; the module is tsc's output, with no regular expression literals
 * (checked: a `/` that starts neither a comment nor is a division stops the transformation).
 */
function statementEnd(source, from) {
  let depth = 0;
  for (let index = from; index < source.length; index++) {
    const char = source[index];
    if (char === "'" || char === '"' || char === "`") {
      for (index++; source[index] !== char; index++) if (source[index] === "\\") index++;
    } else if (char === "/" && source[index + 1] === "/") {
      index = source.indexOf("\n", index);
    } else if (char === "/" && source[index + 1] === "*") {
      index = source.indexOf("*/", index) + 1;
    } else if ("([{".includes(char)) depth++;
    else if (")]}".includes(char)) depth--;
    else if (char === ";" && depth === 0) return index + 1;
  }
  throw new Error("unterminated statement");
}

const DEFINITION = /^(export )?const (\w+Schema) = /gm;

/** Returns the module with each top-level schema definition made lazy, and how many were. */
export function lazySdkSchemas(source) {
  let output = "";
  let last = 0;
  let count = 0;
  for (const match of source.matchAll(DEFINITION)) {
    if (match.index < last) continue;
    const start = match.index + match[0].length;
    const end = statementEnd(source, start);
    const expression = source.slice(start, end - 1);
    // Each expression must be one on its own; esbuild refuses anything the scanner cut wrongly.
    transformSync(`(${expression}\n)`, { loader: "js" });
    output += `${source.slice(last, start)}/* @__PURE__ */ lazySchema(() => (${expression}\n));`;
    last = end;
    count++;
  }
  output += source.slice(last);
  return { contents: `${LAZY_SCHEMA_RUNTIME}\n${output}`, count };
}
