import type { GuestSurface } from "@codecell/bridge";
import { nameKey } from "@codecell/catalog";
import { closestMatches, GUEST_GLOBAL_NAMES } from "@codecell/contract";
import type { ResultShapes } from "./result-shapes.js";

const QUICKJS_TYPE_ERROR = /^TypeError: (.*) \(line (\d+), column (\d+)\)$/;
const QUICKJS_REFERENCE_ERROR =
  /^ReferenceError: '?([\p{ID_Start}$_][\p{ID_Continue}$\u200c\u200d]*)'? is not defined/u;
const QUICKJS_UNINITIALIZED =
  /^ReferenceError: '?([\p{ID_Start}$_][\p{ID_Continue}$\u200c\u200d]*)'? is not initialized/u;

/**
 * Globals that models reach for and a cell does not have, by design (no network, no timers, no host
 * environment) or from another language's habits (print), each group with what to do instead.
 */
const ABSENT_BY_DESIGN: ReadonlyArray<readonly [ReadonlySet<string>, string]> = [
  [
    new Set([
      "fetch",
      "XMLHttpRequest",
      "WebSocket",
      "EventSource",
      "navigator",
      "Request",
      "Response",
      "Headers",
    ]),
    'A cell has no network: reach other services through tools (tools.search("<what it does>")) or MCP servers (API.search("<what it does>")).',
  ],
  [
    new Set([
      "setTimeout",
      "setInterval",
      "setImmediate",
      "clearTimeout",
      "clearInterval",
      "clearImmediate",
      "requestAnimationFrame",
    ]),
    'A cell has no timers: await each call where its result is needed; to hand control back and go on later, await yield_control("<why>").',
  ],
  [
    new Set([
      "process",
      "Buffer",
      "global",
      "__dirname",
      "__filename",
      "module",
      "exports",
      "window",
      "document",
      "localStorage",
      "sessionStorage",
      "Deno",
      "Bun",
    ]),
    "A cell runs in a sandbox without Node's or a browser's globals (no process, environment, file system or DOM); files and the rest are reached through tools.",
  ],
  [
    new Set(["print", "println", "puts", "echo", "display", "alert"]),
    "To show text, write console.log(...) or text(...); the cell's result is what it returns (return value).",
  ],
];

function closest(word: string, names: readonly string[]): string[] {
  const byKey = new Map(names.map((name) => [nameKey(name), name]));
  return closestMatches(nameKey(word), byKey.keys()).map((key) => byKey.get(key)!);
}

function didYouMean(prefix: string, candidates: string[]): string {
  return candidates.length > 0 ? ` Closest: ${candidates.map((name) => `${prefix}${name}`).join(", ")}.` : "";
}

/** Where to look for a member that does not exist under `path` (`["tools", "x"]`, `["MCP", "s", "t"]`). */
function missingMemberHint(path: string[], surface: GuestSurface): string | null {
  const [root, first, second] = path;
  if (root === "tools" && path.length === 2 && first !== undefined) {
    const names = surface.toolFunctions.map((entry) => entry.name);
    const mcpTools = surface.mcpServers.flatMap((server) =>
      server.tools
        .filter((tool) => nameKey(tool.identifier) === nameKey(first) || tool.aliases?.includes(first))
        .map((tool) => `MCP.${server.identifier}.${tool.identifier}`),
    );
    const mcpHint = mcpTools.length > 0 ? ` It is an MCP tool: call ${mcpTools.join(" or ")}.` : "";
    return `There is no tool "${first}".${mcpHint}${didYouMean("tools.", closest(first, names))} Find tools with tools.search("<what it does>") or ALL_TOOLS; call any by id with tools.call(id, input).`;
  }
  if (root === "MCP" && first !== undefined) {
    const server = surface.mcpServers.find(
      (candidate) => candidate.identifier === first || candidate.aliases?.includes(first),
    );
    const servers = surface.mcpServers.map((candidate) => candidate.identifier);
    if (!server) {
      return `There is no MCP server "${first}".${didYouMean("MCP.", closest(first, servers))} The servers are ${servers.join(", ") || "none"}; see API.read("mcp/index.d.ts").`;
    }
    if (path.length === 3 && second !== undefined) {
      const tools = server.tools.map((tool) => tool.identifier);
      return `MCP server "${server.identifier}" has no tool "${second}".${didYouMean(`MCP.${server.identifier}.`, closest(second, tools))} Its signatures: API.read("mcp/${server.identifier}.d.ts").`;
    }
    return null;
  }
  const namespace = surface.namespaces.find((entry) => entry.globalName === root);
  if (namespace && path.length >= 2) {
    let scope: unknown = namespace.scope;
    for (let index = 1; index < path.length; index++) {
      const member = path[index]!;
      if (typeof scope !== "object" || scope === null) return null;
      const members = Object.keys(scope);
      if (!members.includes(member)) {
        const owner = path.slice(0, index).join(".");
        return `${owner} has no member "${member}".${didYouMean(`${owner}.`, closest(member, members))} Its members: ${members.join(", ")}.`;
      }
      scope = (scope as Record<string, unknown>)[member];
    }
  }
  return null;
}

/** What the run knows about the values its nested calls returned, to say what a name holds. */
export type ValueOrigins = {
  shapes: ResultShapes;
  /** The catalog id `tools.call(target)` / `tools.describe(target)` would reach, or null. */
  resolveTarget(target: string): string | null;
  /** The tool id behind a namespace function (`Notes.search` is namespace "notes", path "search"). */
  namespaceToolId(namespaceId: string, path: string): string | null;
};

/** The tool id a call expression reaches in this run's surface, or null when it is no tool call. */
function toolIdOfCallee(
  path: string[],
  firstArgument: string | null,
  surface: GuestSurface,
  origins: ValueOrigins,
): string | null {
  const [root, first, second] = path;
  if (root === "tools" && path.length === 2 && first !== undefined) {
    if (first === "call") return firstArgument === null ? null : origins.resolveTarget(firstArgument);
    const entry = surface.toolFunctions.find(
      (candidate) => candidate.name === first || candidate.aliases?.includes(first),
    );
    return entry?.toolId ?? null;
  }
  if (root === "MCP" && path.length === 3 && first !== undefined && second !== undefined) {
    const server = surface.mcpServers.find(
      (candidate) => candidate.identifier === first || candidate.aliases?.includes(first),
    );
    const tool = server?.tools.find(
      (candidate) => candidate.identifier === second || candidate.aliases?.includes(second),
    );
    return tool?.toolId ?? null;
  }
  const namespace = surface.namespaces.find((entry) => entry.globalName === root);
  if (namespace && path.length >= 2) {
    let scope: unknown = namespace.scope;
    for (const member of path.slice(1)) {
      if (typeof scope !== "object" || scope === null || !Object.hasOwn(scope, member)) return null;
      scope = (scope as Record<string, unknown>)[member];
    }
    const marker = (scope as { $codecellCall?: unknown } | null)?.$codecellCall;
    return typeof marker === "string" ? origins.namespaceToolId(namespace.namespaceId, marker) : null;
  }
  return null;
}

/** Functions of the guest surface that return a promise besides tool calls. */
const PROMISE_FUNCTIONS = new Set(["tools.search", "tools.describe", "tools.call", "API.read", "API.list"]);

/**
 * What the name an expression starts with holds, when one declaration gave it the result of one tool
 * call: `t holds an object with keys path, content (the result of tools.read_file).`, or that it holds a
 * promise because the call was not awaited. Null whenever that is not certain.
 */
async function bindingHint(
  path: string[] | null,
  javascript: string,
  surface: GuestSurface,
  origins: ValueOrigins | undefined,
): Promise<string | null> {
  if (!origins || path === null || path.length < 2) return null;
  const name = path[0]!;
  const { findBindingOrigin } = await import("@codecell/transpile");
  const origin = findBindingOrigin(javascript, name);
  if (!origin) return null;
  const callee = origin.calleePath.join(".");
  const toolId = toolIdOfCallee(origin.calleePath, origin.firstArgument, surface, origins);
  if (!origin.awaited) {
    if (toolId === null && !PROMISE_FUNCTIONS.has(callee)) return null;
    return `${name} holds a promise: ${callee}(...) returns one, so write \`const ${name} = await ${callee}(...)\`.`;
  }
  if (toolId === null) return null;
  const shape = origins.shapes.of(toolId);
  return shape === null ? null : `${name} holds ${shape} (the result of ${callee}).`;
}

/** The globals a cell of this surface has: code mode's own and its namespaces'. */
function cellGlobals(surface: GuestSurface): string[] {
  return [...GUEST_GLOBAL_NAMES, ...surface.namespaces.map((entry) => entry.globalName)];
}

/**
 * What an undeclared name in a cell most likely is: a global the sandbox leaves out on purpose, a
 * misspelt code-mode global, a tool called without `tools.` or `MCP.<server>.`, or a name from an
 * earlier cell (each exec starts fresh).
 */
function undeclaredNameHint(name: string, surface: GuestSurface): string {
  const globals = cellGlobals(surface);
  const listed = `The cell's globals: ${globals.join(", ")}.`;
  // A tool of that name comes first: the fetch MCP server has a tool `fetch`, a printer's may have `print`.
  const tool = surface.toolFunctions.find((entry) => entry.name === name || entry.aliases?.includes(name));
  if (tool) return `${name} is a tool: call it as tools.${tool.name}(input).`;
  const mcpCalls = surface.mcpServers.flatMap((server) =>
    server.tools
      .filter((entry) => entry.identifier === name || entry.aliases?.includes(name))
      .map((entry) => `MCP.${server.identifier}.${entry.identifier}(input)`),
  );
  if (mcpCalls.length > 0) return `${name} is an MCP tool: call it as ${mcpCalls.join(" or ")}.`;
  for (const [names, hint] of ABSENT_BY_DESIGN) if (names.has(name)) return `${hint} ${listed}`;
  const near = closest(name, globals);
  if (near.length > 0) return `Did you mean ${near.join(" or ")}? ${listed}`;
  return `${name} is not declared in this cell. If it comes from an earlier cell: each exec starts in a fresh sandbox and keeps no variables from the cells before, so declare it again here, or keep its value with await store(key, value) in that cell and await load(key) in this one. ${listed}`;
}

/**
 * What a name read before its `let`, `const` or `class` declaration ran most likely is. A model that
 * names its own variable after a global (`const tools = await tools.search("x")`) hides that global for
 * the whole cell, so the read on the right of the declaration already meets the cell's own name.
 */
function uninitializedNameHint(name: string, surface: GuestSurface): string {
  if (cellGlobals(surface).includes(name)) {
    return `The cell declares its own ${name} (with let, const or class), which hides the global ${name} everywhere in the cell, so ${name} cannot be read before that declaration has run. Give the cell's variable another name (for example results or found).`;
  }
  return `${name} is read before its let, const or class declaration has run (those are not hoisted): move the declaration above its first use.`;
}

/**
 * Turns QuickJS's bare `not a function` / `cannot read property 'x' of undefined` into a message that
 * names the expression and, for a code-mode name that does not exist, the closest names and where to
 * look; a `ReferenceError` gets what the undeclared or not yet initialized name most likely is (any
 * language: it needs only the name). Returns the message unchanged when the place cannot be pinned to one expression.
 */
export async function explainGuestFailure(
  message: string,
  javascript: string | null,
  surface: GuestSurface,
  origins?: ValueOrigins,
): Promise<string> {
  const undeclared = QUICKJS_REFERENCE_ERROR.exec(message);
  if (undeclared) return `${message.replace(/\.$/, "")}. ${undeclaredNameHint(undeclared[1]!, surface)}`;
  const uninitialized = QUICKJS_UNINITIALIZED.exec(message);
  if (uninitialized) {
    return `${message.replace(/\.$/, "")}. ${uninitializedNameHint(uninitialized[1]!, surface)}`;
  }
  // The place of a TypeError is looked up in the source that ran, so only a JavaScript cell has one.
  if (javascript === null) return message;
  const parsed = QUICKJS_TYPE_ERROR.exec(message);
  if (!parsed) return message;
  const [, detail, line, column] = parsed;
  const { findRuntimeErrorSite } = await import("@codecell/transpile");
  const site = findRuntimeErrorSite(javascript, {
    message: detail!,
    line: Number(line),
    column: Number(column),
  });
  if (!site) return message;
  const where = ` (line ${line}, column ${column})`;
  const hint =
    (site.path ? missingMemberHint(site.path, surface) : null) ??
    (await bindingHint(site.path, javascript, surface, origins));
  if (site.kind === "not_a_function") {
    return `TypeError: ${site.expression} is not a function${where}.${hint ? ` ${hint}` : ""}`;
  }
  return `TypeError: ${site.expression} is undefined or null, so reading .${site.property} fails${where}.${hint ? ` ${hint}` : ""}`;
}
