import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { renderApiHeader } from "../src/api-header.js";
import { renderMcpDeclarations } from "../src/render-declarations.js";
import type { McpServerDescription } from "../src/types.js";
import { compileDeclarations } from "./support/compile-declarations.js";

const packageDir = resolve(dirname(fileURLToPath(import.meta.url)), "..");
// Captured `tools/list` answers of public MCP servers, kept in the repository (see its README).
const catalogDir = resolve(packageDir, "../../fixtures/mcp-catalogs");
const goldenDir = join(packageDir, "golden");
const update = process.env.UPDATE_GOLDEN === "1";

type Catalog = {
  server: string;
  serverInfo: { name: string; title?: string };
  instructions?: string;
  tools: McpServerDescription["tools"];
};

function loadCatalogs(): McpServerDescription[] {
  return readdirSync(catalogDir)
    .filter((name) => name.endsWith(".json"))
    .sort()
    .map((name) => {
      const catalog = JSON.parse(readFileSync(join(catalogDir, name), "utf8")) as Catalog;
      const description: McpServerDescription = {
        name: catalog.server,
        tools: catalog.tools,
        // The captures hold tools only; server-everything is the one of them that offers both.
        resources: catalog.server === "everything",
        prompts: catalog.server === "everything",
      };
      if (catalog.serverInfo.title) description.title = catalog.serverInfo.title;
      if (catalog.instructions) description.instructions = catalog.instructions;
      return description;
    });
}

const goldenFiles = existsSync(join(goldenDir, "mcp"))
  ? readdirSync(join(goldenDir, "mcp")).map((name) => ({
      path: `mcp/${name.replace(/\.golden$/, "")}`,
      content: readFileSync(join(goldenDir, "mcp", name), "utf8"),
    }))
  : [];

const haveCatalogs = existsSync(catalogDir);
if (!haveCatalogs) {
  console.warn(
    `golden: skipping the catalog comparison, ${catalogDir} is missing (shared/ beside the repo).`,
  );
}

describe.skipIf(!haveCatalogs)("declarations of the eight captured MCP servers", () => {
  const declarations = haveCatalogs ? renderMcpDeclarations(loadCatalogs()) : { files: [], servers: [] };

  it("match the golden files", () => {
    if (update) {
      mkdirSync(join(goldenDir, "mcp"), { recursive: true });
      for (const file of declarations.files)
        writeFileSync(join(goldenDir, `${file.path}.golden`), file.content);
    }
    const rendered = declarations.files.map((file) => file.path).sort();
    expect(goldenFiles.map((file) => file.path).sort()).toEqual(rendered);
    for (const file of declarations.files) {
      const golden = readFileSync(join(goldenDir, `${file.path}.golden`), "utf8");
      expect(file.content, file.path).toBe(golden);
    }
  });

  it("declare all 97 tools with unique identifiers per server", () => {
    const count = declarations.servers.reduce((sum, server) => sum + server.tools.length, 0);
    expect(count).toBe(97);
    for (const server of declarations.servers) {
      const identifiers = server.tools.map((tool) => tool.identifier);
      expect(new Set(identifiers).size).toBe(identifiers.length);
      for (const identifier of identifiers) expect(identifier).toMatch(/^[a-z_][A-Za-z0-9_]*$/);
    }
    const memory = declarations.servers.find((server) => server.name === "memory")!;
    expect(memory.tools.map((tool) => tool.identifier)).toContain("createEntities");
    expect(declarations.servers.map((server) => server.identifier)).toContain("sequentialThinking");
  });

  it("type results of tools with an output schema, and only those", () => {
    const github = renderApiHeader(declarations.servers.find((server) => server.name === "github")!);
    expect(github).not.toContain("McpToolResultOf");
    const memory = declarations.servers.find((server) => server.name === "memory")!;
    const readGraph = renderApiHeader(memory, "read_graph");
    expect(readGraph).toContain("Promise<McpToolResultOf<ReadGraphResult>>");
    expect(readGraph).toContain("type ReadGraphResult = {");
  });

  it("keep every tool's declaration within the size budget", () => {
    for (const server of declarations.servers) {
      for (const tool of server.tools) expect(tool.declaration.length, tool.name).toBeLessThanOrEqual(6000);
    }
  });
});

describe("the committed golden declaration files", () => {
  it("exist", () => {
    expect(goldenFiles.length).toBe(9);
  });

  it("type-check with tsc --noEmit --strict, with code that uses them", () => {
    const usage = {
      path: "usage.ts",
      content: `
async function cell() {
  const issue = await MCP.github.createIssue({ owner: "o", repo: "r", title: "t" });
  const failed: boolean | undefined = issue.isError;
  const graph = await MCP.memory.readGraph();
  const names: string[] = (graph.structuredContent?.entities ?? []).map((entity) => entity.name);
  const text = await MCP.filesystem.readTextFile({ path: "README.md", head: 3 });
  const content: string | undefined = text.structuredContent?.content;
  const header: string = await MCP.everything.$api("echo", { schema: true });
  const resource = await MCP.everything.resources.read({ uri: "demo://resource/static/document/1" });
  const prompt = await MCP.everything.prompts.get({ name: "simple-prompt" });
  return { failed, names, content, header, resource: resource.contents.length, prompt: prompt.messages.length };
}
export { cell };
`,
    };
    expect(compileDeclarations([...goldenFiles, usage])).toEqual([]);
  });

  it("reject calls that break the declared types", () => {
    const misuse = {
      path: "misuse.ts",
      content: `
async function cell() {
  await MCP.github.createIssue({ owner: "o", repo: "r" });
  await MCP.memory.createEntities({ entities: [{ name: 1 }] });
}
export { cell };
`,
    };
    const errors = compileDeclarations([...goldenFiles, misuse]);
    expect(errors.some((error) => error.includes("title"))).toBe(true);
    expect(errors.length).toBeGreaterThanOrEqual(2);
  });
});
