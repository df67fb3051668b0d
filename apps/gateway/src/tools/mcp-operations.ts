import { CodeModeError } from "@codecell/contract";
import type { McpServerRequest } from "@codecell/engine";
import type { McpConnector } from "@codecell/mcp-connector";

/**
 * A cell's resource and prompt operations on a downstream MCP server (`mcp.<server>.resources.read()`
 * and the like): the guest's arguments checked and handed to the connector.
 */
export async function mcpRequest(connector: McpConnector, request: McpServerRequest): Promise<unknown> {
  const { server, op, args, signal } = request;
  const first = args[0];
  switch (op) {
    case "resources.list":
      return connector.listResources(server, { signal });
    case "resources.read": {
      const uri = typeof first === "string" ? first : (first as { uri?: unknown } | null)?.uri;
      if (typeof uri !== "string") {
        throw new CodeModeError(
          "invalid_input",
          'resources.read needs { uri: "..." } (a URI from resources.list()).',
        );
      }
      return connector.readResource(server, { uri }, { signal });
    }
    case "prompts.list":
      return connector.listPrompts(server, { signal });
    case "prompts.get": {
      const input = (typeof first === "string" ? { name: first } : first) as {
        name?: unknown;
        arguments?: Record<string, string>;
      } | null;
      if (typeof input?.name !== "string") {
        throw new CodeModeError("invalid_input", 'prompts.get needs { name: "...", arguments?: {...} }.');
      }
      return connector.getPrompt(
        server,
        { name: input.name, ...(input.arguments ? { arguments: input.arguments } : {}) },
        { signal },
      );
    }
  }
}
