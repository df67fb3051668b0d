// @ts-check
// The type checker itself: plain JavaScript, so the same file runs in the checker's worker thread (from
// the source tree in tests, from dist in a build) and inline in a bench that measures both.
import { createRequire } from "node:module";
import { closestMatches, editDistance } from "@codecell/contract";
import { prepareCell } from "@codecell/transpile";
import { loadCompiler } from "./compiler-loader.js";

/** @typedef {import("typescript")} TypeScript */
/** @typedef {{ file: "cell.ts"; line: number; column: number; code: string; message: string; accepts?: string[] }} CellDiagnostic */
/** @typedef {{ status: "checked"; diagnostics: CellDiagnostic[]; total: number } | { status: "skipped"; reason: string } | { status: "missing" }} CheckOutcome */
/** @typedef {import("typescript").TypeChecker & { getDiagnostics(file: import("typescript").SourceFile): readonly import("typescript").Diagnostic[] }} Checker */
/** @typedef {{ key: string; declarations?: string; code: string; language: "javascript" | "typescript"; maxDiagnostics?: number }} CheckRequest */

// The cell runs as the body of an async function: the checker sees it the same way, with the header on
// a line of its own so that line n of the cell is line n of the file and columns do not move.
const HEADER = "async function __codecellCell() {\n";
// `export {}` makes the cell a module, so nothing it declares becomes a global of the shared checker.
const FOOTER = "\n}\nexport {};\n";
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
  const compiler = loadCompiler(createRequire(import.meta.url));
  /** @type {TypeScript & { bindSourceFile?: (file: import("typescript").SourceFile, options: import("typescript").CompilerOptions) => void }} */
  const ts = compiler.ts;
  if (typeof ts.bindSourceFile !== "function") {
    throw new Error(`typescript ${ts.version} lacks bindSourceFile; the checker needs typescript 5.9.3`);
  }
  const bindSourceFile = ts.bindSourceFile;
  const options = compilerOptions(ts);
  // Library files are parsed once per thread, whichever run asks.
  /** @type {Map<string, import("typescript").SourceFile | undefined>} */
  const libraryFiles = new Map();
  const baseHost = ts.createCompilerHost(options);
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
        if (!libraryFiles.has(name)) libraryFiles.set(name, baseHost.getSourceFile(name, languageVersion));
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
      let entry = programs.get(request.key);
      if (entry) {
        // Most recently used last, so the oldest is the one dropped.
        programs.delete(request.key);
      } else {
        if (request.declarations === undefined) return { status: "missing" };
        const globalsName = `/globals-${nextFileId++}.d.ts`;
        entry = {
          checker: createProgram(request.declarations, globalsName),
          checks: 0,
          declarations: request.declarations,
          globalsName,
        };
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
      programs.set(request.key, entry);
      const { checker } = entry;

      const javascript = request.language === "javascript";
      // A name of its own per cell: the checker keeps its findings by file name.
      const source = ts.createSourceFile(
        `/cell-${nextFileId++}.${javascript ? "js" : "ts"}`,
        HEADER + request.code + FOOTER,
        options.target ?? ts.ScriptTarget.ES2023,
        true,
        javascript ? ts.ScriptKind.JS : ts.ScriptKind.TS,
      );
      const parsed = /** @type {{ parseDiagnostics?: readonly import("typescript").Diagnostic[] }} */ (
        /** @type {unknown} */ (source)
      );
      if ((parsed.parseDiagnostics ?? []).length > 0) {
        return { status: "skipped", reason: "the compiler does not parse the cell as the sandbox does" };
      }
      bindSourceFile(source, options);
      const bound = /** @type {{ bindDiagnostics?: readonly import("typescript").Diagnostic[] }} */ (
        /** @type {unknown} */ (source)
      );
      const lastLine = request.code.split(/\r\n|\r|\n|\u2028|\u2029/).length;
      const findings = [...(bound.bindDiagnostics ?? []), ...checker.getDiagnostics(source)]
        .filter((diagnostic) => diagnostic.category === ts.DiagnosticCategory.Error)
        .sort((a, b) => (a.start ?? 0) - (b.start ?? 0));
      /** @type {CellDiagnostic[]} */
      const diagnostics = [];
      let total = 0;
      const max = request.maxDiagnostics ?? 10;
      for (const diagnostic of findings) {
        const examined = examine(diagnostic, checker, source);
        if (examined.drop) continue;
        total++;
        if (diagnostics.length < max)
          diagnostics.push(toCellDiagnostic(diagnostic, source, lastLine, examined));
      }
      return { status: "checked", diagnostics, total };
    },

    /**
     * Readies the thread before the first cell: parses the library files (shared by every program)
     * and runs one small check through the compiler and the transpile checks, so that their code is
     * loaded and compiled when the first real cell comes.
     */
    async warm() {
      const checker = createProgram(
        "declare const warm: { ready(): Promise<string> };",
        `/globals-${nextFileId++}.d.ts`,
      );
      await prepareCell("return await warm.ready();", "javascript");
      const source = ts.createSourceFile(
        `/cell-${nextFileId++}.js`,
        `${HEADER}const ready = await warm.ready();\nreturn ready.length;${FOOTER}`,
        ts.ScriptTarget.ESNext,
        true,
        ts.ScriptKind.JS,
      );
      bindSourceFile(source, options);
      checker.getDiagnostics(source);
    },

    /** Writes the compiler's code cache if it needs writing (after the first check or warm-up). */
    saveCodeCache() {
      compiler.save();
    },

    dispose() {
      programs.clear();
    },
  };
}
