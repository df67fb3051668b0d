import type { GuestSurface } from "@codecell/bridge";
import { nameKey } from "@codecell/catalog";
import { closestMatches } from "@codecell/contract";

const QUICKJS_TYPE_ERROR = /^TypeError: (.*) \(line (\d+), column (\d+)\)$/;

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

/**
 * Turns QuickJS's bare `not a function` / `cannot read property 'x' of undefined` into a message that
 * names the expression and, for a code-mode name that does not exist, the closest names and where to
 * look. Returns the message unchanged when the place cannot be pinned to one expression.
 */
export async function explainGuestFailure(
  message: string,
  javascript: string,
  surface: GuestSurface,
): Promise<string> {
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
  if (site.kind === "not_a_function") {
    const hint = site.path ? missingMemberHint(site.path, surface) : null;
    return `TypeError: ${site.expression} is not a function${where}.${hint ? ` ${hint}` : ""}`;
  }
  const hint = site.path ? missingMemberHint(site.path, surface) : null;
  return `TypeError: ${site.expression} is undefined or null, so reading .${site.property} fails${where}.${hint ? ` ${hint}` : ""}`;
}
