import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import type { HostTool } from "@codecell/contract";

/** The repository root: the nearest folder above this file that holds pnpm-workspace.yaml. */
export function repositoryRoot(): string {
  let folder = dirname(fileURLToPath(import.meta.url));
  for (let depth = 0; depth < 12; depth++) {
    if (existsSync(join(folder, "pnpm-workspace.yaml"))) return folder;
    folder = dirname(folder);
  }
  throw new Error("repository root not found above " + fileURLToPath(import.meta.url));
}

/** Real `tools/list` answers, captured from public MCP servers and kept in the repository as fixtures. */
export function realCatalogsFolder(): string {
  return resolve(repositoryRoot(), "fixtures", "mcp-catalogs");
}

type CapturedServer = {
  server: string;
  tools: Array<{
    name: string;
    title?: string;
    description?: string;
    inputSchema?: unknown;
    outputSchema?: unknown;
    annotations?: { title?: string };
  }>;
};

/** Every captured MCP server's tools as host tools of source `mcp`, owned by the server id. */
export function loadRealMcpTools(): HostTool[] {
  const folder = realCatalogsFolder();
  const tools: HostTool[] = [];
  for (const file of readdirSync(folder)
    .filter((name) => name.endsWith(".json"))
    .sort()) {
    const captured = JSON.parse(readFileSync(join(folder, file), "utf8")) as CapturedServer;
    for (const tool of captured.tools) {
      const label = tool.title ?? tool.annotations?.title;
      tools.push({
        name: tool.name,
        ...(label === undefined ? {} : { label }),
        description: tool.description ?? "",
        parameters: tool.inputSchema ?? { type: "object" },
        ...(tool.outputSchema === undefined ? {} : { outputSchema: tool.outputSchema }),
        source: "mcp",
        owner: captured.server,
      });
    }
  }
  return tools;
}

const objectSchema = (properties: Record<string, unknown>, required: string[]) => ({
  type: "object",
  properties,
  required,
});

/** A handful of host, plugin and client tools in the style agent hosts ship. */
export const CORE_STYLE_TOOLS: HostTool[] = [
  {
    name: "read_file",
    label: "Read file",
    description: "Read a text file from the workspace and return its contents.",
    parameters: objectSchema({ path: { type: "string" } }, ["path"]),
    source: "core",
    owner: "host",
  },
  {
    name: "write_file",
    label: "Write file",
    description: "Write text content to a file in the workspace, creating it or replacing what was there.",
    parameters: objectSchema({ path: { type: "string" }, content: { type: "string" } }, ["path", "content"]),
    source: "core",
    owner: "host",
  },
  {
    name: "list_dir",
    label: "List directory",
    description: "List the files and subdirectories of a workspace directory.",
    parameters: objectSchema({ path: { type: "string" } }, ["path"]),
    source: "core",
    owner: "host",
  },
  {
    name: "exec",
    label: "Shell",
    description: "Run a shell command on the host machine and return its exit code, stdout and stderr.",
    parameters: objectSchema({ command: { type: "string" }, cwd: { type: "string" } }, ["command"]),
    source: "core",
    owner: "host",
  },
  {
    name: "web_search",
    label: "Web search",
    description: "Search the web and return matching result titles, URLs and snippets.",
    parameters: objectSchema({ query: { type: "string" }, count: { type: "number" } }, ["query"]),
    source: "core",
    owner: "host",
  },
  {
    name: "web_fetch",
    label: "Fetch URL",
    description: "Fetch a URL over HTTP and return the page converted to markdown text.",
    parameters: objectSchema({ url: { type: "string" } }, ["url"]),
    source: "core",
    owner: "host",
  },
  {
    name: "message",
    label: "Send message",
    description: "Send a message to a user or a chat channel the agent is connected to.",
    parameters: objectSchema({ to: { type: "string" }, text: { type: "string" } }, ["to", "text"]),
    source: "core",
    owner: "host",
  },
  {
    name: "calendar_create_event",
    label: "Create calendar event",
    description: "Create an event with a title, start and end time and attendees on the user's calendar.",
    parameters: objectSchema(
      { title: { type: "string" }, start: { type: "string" }, end: { type: "string" } },
      ["title", "start"],
    ),
    source: "plugin",
    owner: "calendar",
  },
  {
    name: "select_file",
    label: "Select file",
    description: "Ask the user to choose a file in the client app and return its name and contents.",
    parameters: objectSchema({ accept: { type: "string" } }, []),
    source: "client",
    owner: "app",
  },
];
