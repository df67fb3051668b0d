import { symlinkSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { baseConfig, type Connected, callCodeMode, connectStdio, makeSetup } from "./harness.js";

describe("codecell serve over stdio", () => {
  let gateway: Connected;
  let setup: ReturnType<typeof makeSetup>;

  beforeAll(async () => {
    setup = makeSetup(
      baseConfig({
        tools: {
          codeMode: { enabled: true, timeoutMs: 3000 },
          deny: ["notes_delete_all", "core:codecell:write_file"],
          // The exact id turns the shell tool on; it stays hidden from the model.
          allow: ["core:codecell:*", "plugin:notes:*", "mcp:memory:*", "core:codecell:exec"],
        },
      }),
    );
    // A link inside the workspace that points out of it.
    symlinkSync("/etc", join(setup.workspace, "escape"));
    gateway = await connectStdio(setup.configPath);
  });
  afterAll(() => gateway?.close());

  it("lists exactly exec and wait, with schemas and the engine's description", async () => {
    const { tools } = await gateway.client.listTools();
    expect(tools.map((tool) => tool.name)).toEqual(["exec", "wait"]);
    const exec = tools[0]!;
    expect(exec.inputSchema).toMatchObject({ type: "object", properties: { code: { type: "string" } } });
    expect(exec.description).toContain("MCP servers (memory)");
    expect(exec.description).toContain("Notes.search(query, limit?)");
    expect(exec.outputSchema).toMatchObject({ type: "object" });
    expect(tools[1]!.inputSchema).toMatchObject({ required: ["runId"] });
  });

  it("runs a cell that searches, describes and calls core and plugin tools", async () => {
    const result = await callCodeMode(gateway.client, "exec", {
      code: `
        const hits = await tools.search("read a text file");
        const schema = await tools.describe(hits[0].id);
        const file = await tools.call(hits[0].id, { path: "data/sales.csv" });
        const rows = file.content.trim().split("\\n").slice(1).map((line) => line.split(","));
        const byRegion = {};
        for (const [region, , amount] of rows) byRegion[region] = (byRegion[region] ?? 0) + Number(amount);
        const note = await tools.notes_add({ title: "Sales", body: JSON.stringify(byRegion), tags: ["report"] });
        const listed = await tools.list_dir({ path: "." });
        text("totals ready");
        return { first: hits[0].id, required: schema.parameters.required, byRegion, note: note.id,
                 files: listed.entries.map((e) => e.name), ids: ALL_TOOLS.map((t) => t.id) };`,
    });
    expect(result.status, `${result.code}: ${result.error}`).toBe("completed");
    expect(result.value).toMatchObject({
      first: "core:codecell:read_file",
      required: ["path"],
      byRegion: { north: 2550, south: 1880, east: 400 },
      note: "note-3",
    });
    const value = result.value as { files: string[]; ids: string[] };
    expect(value.files).toContain("todo.md");
    // Denied tools are not in the catalog; MCP tools are reached through MCP, not ALL_TOOLS.
    expect(value.ids).not.toContain("core:codecell:write_file");
    expect(value.ids).toContain("plugin:notes:notes_search");
    expect(result.output).toEqual([{ type: "text", text: "totals ready" }]);
  });

  it("reads API files and calls a real MCP server", async () => {
    const result = await callCodeMode(gateway.client, "exec", {
      code: `
        const files = (await API.list("mcp")).map((f) => f.path);
        const decl = await API.read("mcp/memory.d.ts");
        await MCP.memory.createEntities({ entities: [{ name: "codecell", entityType: "project", observations: ["runs cells"] }] });
        const graph = await MCP.memory.readGraph({});
        return { files, hasCreate: decl.includes("function createEntities"), graph: graph.structuredContent };`,
    });
    expect(result.status, `${result.code}: ${result.error}`).toBe("completed");
    const value = result.value as {
      files: string[];
      hasCreate: boolean;
      graph: { entities: Array<{ name: string }> };
    };
    expect(value.files).toEqual(["mcp/index.d.ts", "mcp/memory.d.ts"]);
    expect(value.hasCreate).toBe(true);
    expect(value.graph.entities.map((entity) => entity.name)).toContain("codecell");
  });

  it("calls the plugin's namespace", async () => {
    const result = await callCodeMode(gateway.client, "exec", {
      code: `
        const added = await Notes.add({ title: "Namespace note", body: "made through Notes.add" });
        const again = await Notes.get(added.id);
        const found = await Notes.search("namespace");
        return { title: again.title, found: found.map((n) => n.id).includes(added.id) };`,
    });
    expect(result).toMatchObject({ status: "completed", value: { title: "Namespace note", found: true } });
  });

  it("keeps a denied tool out of reach, by name and by id", async () => {
    const result = await callCodeMode(gateway.client, "exec", {
      code: `
        const errors = [];
        try { await tools.call("core:codecell:write_file", { path: "x.txt", content: "no" }); } catch (e) { errors.push(e.message); }
        try { await tools.describe("write_file"); } catch (e) { errors.push(e.message); }
        return { errors, listed: ALL_TOOLS.some((t) => t.name === "write_file"), shortcut: typeof tools.write_file };`,
    });
    expect(result.status, `${result.code}: ${result.error}`).toBe("completed");
    const value = result.value as { errors: string[]; listed: boolean; shortcut: string };
    expect(value.listed).toBe(false);
    expect(value.shortcut).toBe("undefined");
    expect(value.errors).toHaveLength(2);
    for (const message of value.errors) expect(message).toMatch(/write_file/);
  });

  it("refuses workspace escapes with catchable errors", async () => {
    const result = await callCodeMode(gateway.client, "exec", {
      code: `
        const attempts = ["../codecell.json5", "/etc/hostname", "escape/hostname", "data/../../codecell.json5"];
        const out = [];
        for (const path of attempts) {
          try { await tools.read_file({ path }); out.push("read " + path); } catch (e) { out.push(e.message); }
        }
        try { await tools.list_dir({ path: "escape" }); out.push("listed"); } catch (e) { out.push(e.message); }
        return out;`,
    });
    expect(result.status, `${result.code}: ${result.error}`).toBe("completed");
    const messages = result.value as string[];
    expect(messages[0]).toMatch(/climbs out of the workspace/);
    expect(messages[1]).toMatch(/absolute path outside the workspace/);
    expect(messages[2]).toMatch(/symbolic link that points outside/);
    expect(messages[3]).toMatch(/climbs out of the workspace/);
    expect(messages[4]).toMatch(/symbolic link that points outside/);
  });

  it("keeps the shell tool hidden from the model but callable by id, never confused with exec", async () => {
    // The spec's collision rule: the model's exec is code mode; the shell exec is an ordinary catalog
    // tool (its unique safe name gives it the tools.exec shortcut), and code mode never reaches itself.
    const result = await callCodeMode(gateway.client, "exec", {
      code: `
        const shell = await tools.call("core:codecell:exec", { command: "echo hello from sh" });
        const shortcut = await tools.exec({ command: "echo via shortcut" });
        const described = await tools.describe("exec");
        return { stdout: shell.stdout, exitCode: shell.exitCode, shortcut: shortcut.stdout, described: described.id,
                 inAllTools: ALL_TOOLS.filter((t) => t.name === "exec").map((t) => t.id) };`,
    });
    expect(result.status, `${result.code}: ${result.error}`).toBe("completed");
    expect(result.value).toEqual({
      stdout: "hello from sh\n",
      exitCode: 0,
      shortcut: "via shortcut\n",
      described: "core:codecell:exec",
      inAllTools: ["core:codecell:exec"],
    });
    const { tools } = await gateway.client.listTools();
    expect(tools.map((tool) => tool.name)).toEqual(["exec", "wait"]);
  });

  it("returns failures as data with a code", async () => {
    const result = await callCodeMode(gateway.client, "exec", { code: "return await import('fs')" });
    expect(result.status).toBe("failed");
    expect(result.code).toBe("module_access_denied");
  });
});
