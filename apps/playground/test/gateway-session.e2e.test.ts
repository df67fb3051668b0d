import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CatalogService } from "../src/catalog-service.js";
import { EXAMPLES } from "../src/examples.js";
import { GatewaySession } from "../src/gateway-session.js";
import { statusLabel } from "../src/result-view.js";
import { type RunningGateway, startGateway } from "./browser-harness.mjs";
import { EXPECTATIONS } from "./example-expectations.js";

// The page's MCP client code, run in Node against the real gateway: the same SDK client and the same
// cells as in the browser, without a browser. The browser tests then check what the page shows.

describe("the playground's MCP client against codecell serve --http", () => {
  let gateway: RunningGateway;
  let session: GatewaySession;
  let browse: GatewaySession;

  beforeAll(async () => {
    gateway = await startGateway();
    session = new GatewaySession(new URL(gateway.mcpUrl), { clientName: "playground-test" });
    browse = new GatewaySession(new URL(gateway.mcpUrl), { clientName: "playground-test-browser" });
  });
  afterAll(async () => {
    await session?.close();
    await browse?.close();
    expect(await gateway?.stop()).toBe(0);
  });

  it("connects as an MCP client and sees the codecell server", async () => {
    await session.connect();
    expect(session.serverName).toBe("codecell");
    expect(session.sessionId).toMatch(/[0-9a-f-]{36}/);
  });

  for (const example of EXAMPLES) {
    it(`runs the example "${example.title}" as it stands`, async () => {
      const expected = EXPECTATIONS[example.id];
      expect(expected, `no expectation for example ${example.id}`).toBeDefined();
      let result = await session.exec(example.code, example.language);
      const badges = [statusLabel(result)];
      for (let round = 0; round < 5 && result.status === "waiting"; round++) {
        result = await session.wait(result.runId);
        badges.push(statusLabel(result));
      }
      expect(badges).toEqual(expected!.badges);
      const shown = JSON.stringify(result);
      for (const text of expected!.shows) expect(shown).toContain(text);

      const trajectory = await session.trajectory();
      const controls = trajectory.entries.filter((entry) => entry.kind === "control");
      const last = controls.slice(-expected!.badges.length);
      const nested = trajectory.entries
        .filter(
          (entry) =>
            entry.kind === "nested" && last.some((call) => call.toolCallId === entry.parentToolCallId),
        )
        .map((entry) => entry.tool);
      expect(nested.sort()).toEqual([...expected!.nestedTools].sort());
    });
  }

  it("keeps the browse session's cells out of the workbench trajectory", async () => {
    const before = (await session.trajectory()).entries.length;
    const service = new CatalogService(browse);
    await service.allTools();
    expect((await session.trajectory()).entries.length).toBe(before);
    expect((await browse.trajectory()).entries.length).toBeGreaterThan(0);
  });

  it("lists ALL_TOOLS, searches with tools.search's ranking and describes a tool", async () => {
    const service = new CatalogService(browse);
    const all = await service.allTools();
    expect(all.map((entry) => entry.id)).toEqual(
      expect.arrayContaining(["core:codecell:read_file", "core:codecell:list_dir", "plugin:notes:notes_add"]),
    );
    // MCP tools are reached through MCP.<server>, never through ALL_TOOLS.
    expect(all.some((entry) => entry.source === "mcp")).toBe(false);

    const hits = await service.search("read a text file");
    expect(hits[0]?.id).toBe("core:codecell:read_file");
    // The same query in a cell of another session ranks identically: the panel adds nothing of its own.
    const direct = await session.exec(
      'return (await tools.search("read a text file", { limit: 50 })).map((e) => e.id)',
      "javascript",
    );
    expect(direct.status).toBe("completed");
    expect(hits.map((entry) => entry.id)).toEqual((direct as { value: string[] }).value);

    const quoted = await service.search(`note "with quotes" and \`backticks\`\n`);
    expect(Array.isArray(quoted)).toBe(true);

    const described = await service.describe("plugin:notes:notes_add");
    expect(described.parameters).toMatchObject({ required: ["title", "body"] });
    await expect(service.describe("plugin:notes:nope")).rejects.toThrow(/nope/);
  });

  it("lists and reads the virtual API files", async () => {
    const service = new CatalogService(browse);
    const files = await service.apiFiles();
    expect(files.map((file) => file.path)).toEqual(["mcp/index.d.ts", "mcp/memory.d.ts"]);
    const text = await service.apiRead("mcp/memory.d.ts");
    expect(text).toContain("createEntities");
    await expect(service.apiRead("mcp/../secret")).rejects.toThrow();
  });

  it("opens a new session when the gateway forgot the old one", async () => {
    const fresh = new GatewaySession(new URL(gateway.mcpUrl), { clientName: "playground-test-expiry" });
    await fresh.connect();
    const id = fresh.sessionId!;
    // End the session behind the client's back, as a gateway restart would.
    const ended = await fetch(gateway.mcpUrl, {
      method: "DELETE",
      headers: { "mcp-session-id": id, "mcp-protocol-version": "2025-06-18" },
    });
    expect(ended.ok).toBe(true);
    const result = await fresh.exec("return 6 * 7", "javascript");
    expect(result).toMatchObject({ status: "completed", value: 42 });
    expect(fresh.sessionId).not.toBe(id);
    await fresh.close();
  });
});
