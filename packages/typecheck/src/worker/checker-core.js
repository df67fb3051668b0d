// @ts-check
// The type checker itself: plain JavaScript, so the same file runs in the checker's worker thread (from
// the source tree in tests, from dist in a build) and inline in a bench that measures both.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
// The zod-free entry: the worker starts sooner without the rest of the contract.
import { closestMatches, editDistance } from "@codecell/contract/errors";
import { prepareCell } from "@codecell/transpile";

/** @typedef {import("typescript")} TypeScript */
/** @typedef {{ file: "cell.ts"; line: number; column: number; code: string; message: string; accepts?: string[] }} CellDiagnostic */
/** @typedef {{ status: "checked"; diagnostics: CellDiagnostic[]; total: number } | { status: "skipped" | "unfinished"; reason: string } | { status: "missing" }} CheckOutcome */
/** @typedef {import("typescript").TypeChecker & { getDiagnostics(file: import("typescript").SourceFile): readonly import("typescript").Diagnostic[] }} Checker */
/** @typedef {{ key: string; declarations?: string; code: string; language: "javascript" | "typescript"; maxDiagnostics?: number }} CheckRequest */

// The cell runs as the body of an async function: the checker sees it the same way, with the header on
// a line of its own so that line n of the cell is line n of the file and columns do not move.
const HEADER = "async function __codecellCell() {\n";
// `export {}` makes the cell a module, so nothing it declares becomes a global of the shared checker.
const FOOTER = "\n}\nexport {};\n";
// What a run's first cell most likely touches: checked once when its declarations arrive.
const PREPARE_CELL = `const hits = await tools.search("files", { limit: 2 });
const first = ALL_TOOLS.find((tool) => tool.id === hits[0]?.id);
const files = await API.list("mcp");
text(\`\${hits.length} \${first ? first.name : ""} \${files.length}\`);
json({ ids: hits.map((hit) => hit.id).filter(Boolean), all: Object.keys(tools).length });
return JSON.stringify(await Promise.all([Promise.resolve(1)]));`;
// The warm-up's guest and cell: the kinds of code a cell is (calls with object literals, a misspelt
// argument and result property, Promise.all, array methods, templates), so the checker's code for each,
// diagnostics included, is compiled before the first real cell.
const WARM_DECLARATIONS = `interface WarmFile { path: string; content: string; bytes: number }
declare const tools: {
  read_file(input: { path: string; maxBytes?: number }): Promise<WarmFile>;
  search(query: string, options?: { limit?: number }): Promise<Array<{ id: string; name: string }>>;
};
declare function text(value: unknown): void;
declare function json(value: unknown): void;`;
const WARM_CELL = `const [file, hits] = await Promise.all([
  tools.read_file({ pth: "README.md" }),
  tools.search("files", { limit: 2 }),
]);
const names = hits.filter((hit) => hit.name.length > 0).map((hit) => ({ id: hit.id, name: hit.name }));
for (const line of file.contents.split("\\n")) text(\`\${line.trim()} \${names.length}\`);
json({ names, bytes: file.bytes, found: names.find((entry) => entry.id === "x")?.name ?? null });
return Object.keys(file).length + JSON.stringify(names).length;`;
const MAX_MESSAGE_CHARS = 400;
const MAX_ACCEPTS = 20;
const MAX_PROGRAMS = 4;
const MAX_CHECKS_PER_PROGRAM = 200;

// TypeScript error codes handled below.
const PROPERTY_MISSING = new Set([2339, 2551]);
const UNKNOWN_OBJECT_PROPERTY = new Set([2353, 2561]);
const NOT_ASSIGNABLE = new Set([2322, 2345]);
// "Cannot find name 'x'. Do you need to install type definitions for node / change your lib?"
const MISSING_GLOBAL = new Set([2580, 2581, 2582, 2583, 2584, 2591, 2592, 2593]);

/**
 * Loose where a model's honest JavaScript would otherwise be flagged (no implicit-any or null checks, as
 * a plain `checkJs` project has them), exact where a call would fail at run time: unknown names, wrong
 * or missing tool arguments, properties a result does not have. The libraries are the language only:
 * the guest has no DOM, timers, fetch or Node, so using one is an error here too.
 * @param {TypeScript} ts
 * @returns {import("typescript").CompilerOptions}
 */
function compilerOptions(ts) {
  return {
    target: ts.ScriptTarget.ESNext,
    lib: ["lib.esnext.d.ts"],
    types: [],
    noEmit: true,
    allowJs: true,
    checkJs: true,
    strict: false,
    noImplicitAny: false,
    strictNullChecks: false,
    useUnknownInCatchVariables: false,
    allowUnreachableCode: true,
    allowUnusedLabels: true,
    skipLibCheck: true,
    noResolve: true,
  };
}

/**
 * A declaration file's text without its comments (its triple-slash directives too, which the joined
 * files replace): in a `.d.ts` they are documentation, most of the library's text, which
 * the compiler would otherwise scan on every start. Strings (quotes and backticks, with escapes) are
 * kept as they are; a line comment's newline stays.
 * @param {string} text
 */
export function withoutComments(text) {
  let out = "";
  let start = 0;
  let index = 0;
  while (index < text.length) {
    const char = text[index];
    if (char === '"' || char === "'" || char === "`") {
      index++;
      while (index < text.length && text[index] !== char) index += text[index] === "\\" ? 2 : 1;
      index++;
    } else if (char === "/" && text[index + 1] === "/") {
      out += text.slice(start, index);
      index = text.indexOf("\n", index);
      if (index === -1) index = text.length;
      start = index;
    } else if (char === "/" && text[index + 1] === "*") {
      out += text.slice(start, index);
      const end = text.indexOf("*/", index + 2);
      index = end === -1 ? text.length : end + 2;
      start = index;
    } else {
      index++;
    }
  }
  return out + text.slice(start);
}

/**
 * The language's library (`lib.esnext.d.ts` and the 79 files it references) as a few files. The
 * compiler merges library files in one fixed order (its list of library names, whatever references
 * what), so the files are joined in that order: each run of global declaration files into one, served
 * under the name of the run's first file. A file that is a module (`lib.esnext.iterator.d.ts`, whose
 * globals are in `declare global`) cannot join a script and stays a file of its own at its place.
 * `lib.esnext.d.ts`, which declares nothing, references them all. The compiler parses and binds four
 * files instead of 80, and the declarations, and the order they merge in, are the same (a test holds
 * it). Undefined when the library is not as this expects: the compiler then reads its own files.
 * @param {TypeScript} ts
 * @param {string} directory
 * @returns {Map<string, string> | undefined} the text of each file the compiler asks for, by path
 */
export function joinedLibrary(ts, directory) {
  const internals = /** @type {{ libMap?: Map<string, string>; libs?: string[] }} */ (
    /** @type {unknown} */ (ts)
  );
  const { libMap, libs } = internals;
  if (!libMap || !libs) return undefined;
  const root = "lib.esnext.d.ts";
  const reference = /^\/\/\/\s*<reference\s+lib="([^"]+)"\s*\/>/gm;
  /** @type {Map<string, { text: string; module: boolean }>} */
  const found = new Map();
  /** @param {string} file */
  const visit = (file) => {
    if (found.has(file)) return;
    const text = readFileSync(`${directory}/${file}`, "utf8");
    const body = withoutComments(text);
    found.set(file, { text: body, module: /^(export|import)\b/m.test(body) });
    for (const match of text.matchAll(reference)) {
      const name = /** @type {string} */ (match[1]).toLowerCase();
      const referenced = libMap.get(name);
      if (!referenced) throw new Error(`unknown library ${name}`);
      visit(referenced);
    }
  };
  visit(root);
  if (found.get(root)?.text.trim() !== "") return undefined;
  found.delete(root);
  /** @param {string} file */
  const nameOf = (file) => file.replace(/^lib\./, "").replace(/\.d\.ts$/, "");
  const priority = (/** @type {string} */ file) => libs.indexOf(nameOf(file));
  const ordered = [...found.keys()].sort((a, b) => priority(a) - priority(b));
  if (ordered.some((file) => priority(file) === -1 || libMap.get(nameOf(file)) !== file)) return undefined;
  /** @type {Map<string, string>} */
  const files = new Map();
  const header = '/// <reference no-default-lib="true"/>\n';
  /** @type {string[]} */
  const containers = [];
  /** @type {string[]} */
  let run = [];
  /** @type {string | undefined} */
  let first;
  const close = () => {
    if (first === undefined) return;
    files.set(`${directory}/${first}`, header + run.join("\n"));
    containers.push(first);
    first = undefined;
    run = [];
  };
  for (const file of ordered) {
    const entry = /** @type {{ text: string; module: boolean }} */ (found.get(file));
    if (entry.module) {
      close();
      files.set(`${directory}/${file}`, header + entry.text);
      containers.push(file);
    } else {
      first ??= file;
      run.push(entry.text);
    }
  }
  close();
  const references = containers.map((file) => `/// <reference lib="${nameOf(file)}" />\n`).join("");
  files.set(`${directory}/${root}`, header + references);
  return files;
}

/**
 * Loads TypeScript (once per thread) and answers checks against warm programs.
 *
 * A program, and its type checker, is made once per run's declarations. Each cell is then parsed as a
 * module file of its own (the footer's `export {}` keeps its names out of the globals), bound, and
 * checked by that same checker, which is not part of TypeScript's public API (`bindSourceFile` and the
 * checker's `getDiagnostics` are its internals, stable in the pinned 5.9.3; a test holds them). A fresh
 * program per cell would throw away every type the checker resolved, the library's and the tools',
 * and cost several times as much per check. Each checked cell leaves its nodes in the checker's
 * tables, so a program is made again after `MAX_CHECKS_PER_PROGRAM` cells.
 */
export function createCheckerCore() {
  /** @type {TypeScript & { bindSourceFile?: (file: import("typescript").SourceFile, options: import("typescript").CompilerOptions) => void }} */
  const ts = createRequire(import.meta.url)("typescript");
  if (typeof ts.bindSourceFile !== "function") {
    throw new Error(`typescript ${ts.version} lacks bindSourceFile; the checker needs typescript 5.9.3`);
  }
  const bindSourceFile = ts.bindSourceFile;
  const options = compilerOptions(ts);
  // Library files are parsed once per thread, whichever run asks.
  /** @type {Map<string, import("typescript").SourceFile | undefined>} */
  const libraryFiles = new Map();
  const baseHost = ts.createCompilerHost(options);
  // Comments in declaration files are documentation, never types (those are in JSDoc of JavaScript
  // files only, which the cell's own file still has parsed): the library's and the tools' are skipped.
  baseHost.jsDocParsingMode = ts.JSDocParsingMode.ParseForTypeErrors;
  const library = joinedLibrary(ts, /** @type {string} */ (baseHost.getDefaultLibLocation?.()));
  /** @type {Map<string, { checker: Checker; checks: number; declarations: string; globalsName: string }>} */
  const programs = new Map();
  let nextFileId = 0;

  /**
   * @param {string} declarations
   * @param {string} globalsName
   */
  function createProgram(declarations, globalsName) {
    /** @type {import("typescript").CompilerHost} */
    const host = {
      ...baseHost,
      getSourceFile: (name, languageVersion) => {
        if (name === globalsName) return ts.createSourceFile(name, declarations, languageVersion, true);
        if (!libraryFiles.has(name)) {
          libraryFiles.set(
            name,
            library?.has(name)
              ? ts.createSourceFile(name, /** @type {string} */ (library.get(name)), languageVersion, false)
              : baseHost.getSourceFile(name, languageVersion),
          );
        }
        return libraryFiles.get(name);
      },
      fileExists: (name) => name === globalsName || baseHost.fileExists(name),
      readFile: (name) => (name === globalsName ? declarations : baseHost.readFile(name)),
    };
    const program = ts.createProgram({ rootNames: [globalsName], options, host });
    return /** @type {Checker} */ (/** @type {unknown} */ (program.getTypeChecker()));
  }

  /**
   * @param {import("typescript").Node} node
   * @param {number} position
   * @returns {import("typescript").Node | undefined}
   */
  function tokenAt(node, position) {
    if (position < node.getStart() || position >= node.getEnd()) return undefined;
    /** @type {import("typescript").Node | undefined} */
    let found;
    node.forEachChild((child) => {
      found ??= tokenAt(child, position);
    });
    return found ?? node;
  }

  /**
   * @param {import("typescript").TypeChecker} checker
   * @param {import("typescript").Type | undefined} type
   */
  function propertyNames(checker, type) {
    if (!type) return [];
    const apparent = checker.getApparentType(type);
    return checker
      .getPropertiesOfType(apparent)
      .map((symbol) => symbol.getName())
      .filter((name) => !name.startsWith("__"));
  }

  /**
   * What the finding is about in the program, to add the properties a target accepts, or to drop it.
   * @param {import("typescript").Diagnostic} diagnostic
   * @param {import("typescript").TypeChecker} checker
   * @param {import("typescript").SourceFile} source
   * @returns {{ drop: true } | { drop: false; accepts?: string[]; name?: string; hint?: string; message?: string; start?: number }}
   */
  function examine(diagnostic, checker, source) {
    const node = diagnostic.start === undefined ? undefined : tokenAt(source, diagnostic.start);
    if (!node) return { drop: false };
    if (PROPERTY_MISSING.has(diagnostic.code) && ts.isIdentifier(node) && node.parent) {
      const access = node.parent;
      if (!ts.isPropertyAccessExpression(access) || access.name !== node) return { drop: false };
      const receiver = checker.getTypeAtLocation(access.expression);
      const name = node.text;
      // `result.entities.map` on an MCP result: `entities` is no property of it (only the index
      // signature answers, with unknown), which is the mistake to name, not the `map` after it.
      const inner = access.expression;
      if (receiver.flags & ts.TypeFlags.Unknown && ts.isPropertyAccessExpression(inner)) {
        const outer = checker.getTypeAtLocation(inner.expression);
        const innerName = inner.name.text;
        if (!checker.getPropertyOfType(outer, innerName) && !declaredInLibrary(outer)) {
          const accepts = propertyNames(checker, outer);
          const [closest] = closestMatches(innerName, accepts, 1);
          return {
            drop: false,
            accepts,
            name: innerName,
            message: `'${inner.getText()}' is unknown: the value has no property '${innerName}' (it has ${accepts.join(", ")}).${closest ? ` Did you mean '${closest}'?` : ""}`,
            start: inner.name.getStart(),
          };
        }
      }
      // A union some of whose members have the property (`result.content[0].text` on a content union)
      // works at run time once the value is the right member; the checker asks for narrowing a model
      // would not write, so this is not reported.
      if (receiver.isUnion() && receiver.types.some((member) => checker.getPropertyOfType(member, name))) {
        return { drop: true };
      }
      // The properties of the run's own shapes (tool results, catalog entries), not of the language's.
      if (
        receiver.flags & (ts.TypeFlags.Object | ts.TypeFlags.Intersection) &&
        !checker.isArrayType(receiver) &&
        !declaredInLibrary(receiver)
      ) {
        const accepts = propertyNames(checker, receiver);
        return { drop: false, accepts, name, hint: hintFor(name, accepts, diagnostic) };
      }
      return { drop: false };
    }
    if (UNKNOWN_OBJECT_PROPERTY.has(diagnostic.code)) {
      let object = node;
      while (object && !ts.isObjectLiteralExpression(object)) object = object.parent;
      if (!object) return { drop: false };
      const accepts = propertyNames(checker, checker.getContextualType(object));
      const name = ts.isIdentifier(node) || ts.isStringLiteral(node) ? node.text : "";
      return { drop: false, accepts, name, hint: hintFor(name, accepts, diagnostic) };
    }
    if (NOT_ASSIGNABLE.has(diagnostic.code)) {
      let object = node;
      while (object && !ts.isObjectLiteralExpression(object) && object.getStart() === node.getStart()) {
        object = object.parent;
      }
      if (object && ts.isObjectLiteralExpression(object)) {
        return { drop: false, accepts: propertyNames(checker, checker.getContextualType(object)) };
      }
    }
    return { drop: false };
  }

  /** @param {import("typescript").Type} type */
  function declaredInLibrary(type) {
    const types = type.isIntersection() ? type.types : [type];
    return types.some((part) =>
      (part.getSymbol()?.getDeclarations() ?? []).some((declaration) =>
        libraryFiles.has(declaration.getSourceFile().fileName),
      ),
    );
  }

  /**
   * The accepted names in declaration order; past the limit (a `tools` of hundreds of shortcuts), the
   * ones closest to the name that was written.
   * @param {string[]} accepts
   * @param {string | undefined} name
   */
  function acceptsFor(accepts, name) {
    if (accepts.length <= MAX_ACCEPTS || !name) return accepts.slice(0, MAX_ACCEPTS);
    const lower = name.toLowerCase();
    return accepts
      .map((candidate, index) => ({
        candidate,
        index,
        distance: editDistance(lower, candidate.toLowerCase()),
      }))
      .sort((a, b) => a.distance - b.distance || a.index - b.index)
      .slice(0, MAX_ACCEPTS)
      .map((entry) => entry.candidate);
  }

  /**
   * @param {string} name
   * @param {string[]} accepts
   * @param {import("typescript").Diagnostic} diagnostic
   */
  function hintFor(name, accepts, diagnostic) {
    if (name === "" || /Did you mean/.test(ts.flattenDiagnosticMessageText(diagnostic.messageText, "\n"))) {
      return undefined;
    }
    const [closest] = closestMatches(name, accepts, 1);
    return closest ? ` Did you mean "${closest}"?` : undefined;
  }

  /**
   * @param {import("typescript").Diagnostic} diagnostic
   * @param {import("typescript").SourceFile} source
   * @param {number} lastLine
   * @param {{ accepts?: string[]; name?: string; hint?: string; message?: string; start?: number }} extra
   * @returns {CellDiagnostic}
   */
  function toCellDiagnostic(diagnostic, source, lastLine, extra) {
    const position = source.getLineAndCharacterOfPosition(extra.start ?? diagnostic.start ?? 0);
    // Line 0 of the file is the header: line n of the file is line n of the cell.
    const inCell = position.line >= 1 && position.line <= lastLine;
    const line = Math.min(Math.max(position.line, 1), lastLine);
    let message = ts
      .flattenDiagnosticMessageText(diagnostic.messageText, "\n")
      .replaceAll("__codecellCell", "the cell");
    // The compiler's advice for a missing global (install @types/node, add "dom" to lib) does not apply
    // to a sandbox that has none of them.
    if (MISSING_GLOBAL.has(diagnostic.code)) {
      const name = /'([^']+)'/.exec(message)?.[1] ?? "";
      message = `Cannot find name '${name}': the sandbox has no such global (no DOM, Node, timers, fetch or network; tools, MCP, API and text/json are what a cell has).`;
    }
    if (extra.message) message = extra.message;
    if (extra.hint) message += extra.hint;
    if (message.length > MAX_MESSAGE_CHARS) message = `${message.slice(0, MAX_MESSAGE_CHARS - 3)}...`;
    /** @type {CellDiagnostic} */
    const result = {
      file: "cell.ts",
      line,
      column: inCell ? position.character + 1 : 1,
      code: `TS${diagnostic.code}`,
      message,
    };
    if (extra.accepts && extra.accepts.length > 0) result.accepts = acceptsFor(extra.accepts, extra.name);
    return result;
  }

  /**
   * The warm checker of a run's declarations (made when they are new), or undefined when the worker no
   * longer has them and they were not sent.
   * @param {string} key
   * @param {string | undefined} declarations
   * @returns {Checker | undefined}
   */
  function checkerFor(key, declarations) {
    let entry = programs.get(key);
    if (entry) {
      // Most recently used last, so the oldest is the one dropped.
      programs.delete(key);
    } else {
      if (declarations === undefined) return undefined;
      const globalsName = `/globals-${nextFileId++}.d.ts`;
      entry = { checker: createProgram(declarations, globalsName), checks: 0, declarations, globalsName };
      if (programs.size >= MAX_PROGRAMS) {
        const oldest = programs.keys().next().value;
        if (oldest !== undefined) programs.delete(oldest);
      }
    }
    if (entry.checks >= MAX_CHECKS_PER_PROGRAM) {
      entry.checker = createProgram(entry.declarations, entry.globalsName);
      entry.checks = 0;
    }
    entry.checks++;
    programs.set(key, entry);
    return entry.checker;
  }

  /**
   * The cell's findings from a checker: parsed as a module file of its own, bound, checked, each
   * finding examined and placed on the cell's own lines.
   * @param {Checker} checker
   * @param {string} code
   * @param {"javascript" | "typescript"} language
   * @param {number} max
   * @returns {CheckOutcome}
   */
  function diagnose(checker, code, language, max) {
    const javascript = language === "javascript";
    // A name of its own per cell: the checker keeps its findings by file name.
    const source = ts.createSourceFile(
      `/cell-${nextFileId++}.${javascript ? "js" : "ts"}`,
      HEADER + code + FOOTER,
      options.target ?? ts.ScriptTarget.ES2023,
      true,
      javascript ? ts.ScriptKind.JS : ts.ScriptKind.TS,
    );
    const parsed = /** @type {{ parseDiagnostics?: readonly import("typescript").Diagnostic[] }} */ (
      /** @type {unknown} */ (source)
    );
    if ((parsed.parseDiagnostics ?? []).length > 0) {
      return { status: "unfinished", reason: "the compiler does not parse the cell as the sandbox does" };
    }
    bindSourceFile(source, options);
    const bound = /** @type {{ bindDiagnostics?: readonly import("typescript").Diagnostic[] }} */ (
      /** @type {unknown} */ (source)
    );
    const lastLine = code.split(/\r\n|\r|\n|\u2028|\u2029/).length;
    const findings = [...(bound.bindDiagnostics ?? []), ...checker.getDiagnostics(source)]
      .filter((diagnostic) => diagnostic.category === ts.DiagnosticCategory.Error)
      .sort((a, b) => (a.start ?? 0) - (b.start ?? 0));
    /** @type {CellDiagnostic[]} */
    const diagnostics = [];
    let total = 0;
    for (const diagnostic of findings) {
      const examined = examine(diagnostic, checker, source);
      if (examined.drop) continue;
      total++;
      if (diagnostics.length < max)
        diagnostics.push(toCellDiagnostic(diagnostic, source, lastLine, examined));
    }
    return { status: "checked", diagnostics, total };
  }

  return {
    /** @param {string} key */
    has(key) {
      return programs.has(key);
    },

    /**
     * @param {CheckRequest} request
     * @returns {Promise<CheckOutcome>}
     */
    async check(request) {
      // The cell's own checks come first (module access, syntax, the TypeScript transform): a cell that
      // fails them fails in the sandbox with its own code, exactly as without the type check.
      try {
        await prepareCell(request.code, request.language);
      } catch (error) {
        return {
          status: "skipped",
          reason: `the cell does not pass its transpile checks (${String(error)})`,
        };
      }
      const checker = checkerFor(request.key, request.declarations);
      if (!checker) return { status: "missing" };

      return diagnose(checker, request.code, request.language, request.maxDiagnostics ?? 10);
    },

    /**
     * Makes the checker of a run's declarations before its first cell, and has it resolve what every
     * cell touches (the guest globals, promises, arrays), so that cell costs what a warm check does.
     * @param {{ key: string; declarations?: string }} request
     */
    prepare(request) {
      const checker = checkerFor(request.key, request.declarations);
      if (checker) diagnose(checker, PREPARE_CELL, "javascript", 0);
    },

    /**
     * Readies the thread before the first cell: parses the library files (shared by every program)
     * and runs one small check through the compiler and the transpile checks, so that their code is
     * loaded and compiled when the first real cell comes.
     */
    async warm() {
      const checker = createProgram(WARM_DECLARATIONS, `/globals-${nextFileId++}.d.ts`);
      await prepareCell(WARM_CELL, "javascript");
      diagnose(checker, WARM_CELL, "javascript", 10);
    },

    dispose() {
      programs.clear();
    },
  };
}
