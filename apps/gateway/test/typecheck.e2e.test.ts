import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { baseConfig, type Connected, callCodeMode, connectStdio, makeSetup, runCli } from "./harness.js";

// The real gateway (`codecell serve` over stdio) with the demo's core tools, the notes plugin and the
// real server-memory, in each typecheck mode; cells as a model sends them through an MCP client.
const modes = ["strict", "warn", "off"] as const;
const gateways = new Map<(typeof modes)[number], Connected>();
// Strict with a checker timeout no check can meet: every cell's check is unfinished.
let hasty: Connected;

beforeAll(async () => {
  const connect = (codeMode: Record<string, unknown>) =>
    connectStdio(
      makeSetup(baseConfig({ tools: { codeMode: { enabled: true, timeoutMs: 5000, ...codeMode } } }))
        .configPath,
    );
  await Promise.all([
    ...modes.map(async (mode) => {
      gateways.set(mode, await connect({ typecheck: mode }));
    }),
    connect({ typecheck: "strict", typecheckTimeoutMs: 1 }).then((connected) => {
      hasty = connected;
    }),
  ]);
}, 60_000);

afterAll(async () => {
  for (const gateway of gateways.values()) await gateway.close();
  await hasty?.close();
});

const exec = (mode: (typeof modes)[number], code: string, language?: string) =>
  callCodeMode(gateways.get(mode)!.client, "exec", { code, ...(language ? { language } : {}) });

// Writes a note first, then misspells the memory server's field: without strict mode the note is written.
const misspelt = `await Notes.add({ title: "before the mistake", body: "written" });
await MCP.memory.createEntities({
  entities: [{ name: "codecell", entityType: "project", observation: ["typed"] }],
});
return "done";`;

const countWritten =
  'return (await Notes.list()).filter((note) => note.title === "before the mistake").length;';

const correct = `const hits = await tools.search("read a file", { limit: 3 });
const readme = await tools.read_file({ path: "README.md" });
await MCP.memory.create_entities({
  entities: [{ name: "typecheck", entityType: "feature", observations: ["checked before it runs"] }],
});
const found = await MCP.memory.searchNodes({ query: "typecheck" });
const names = (found.structuredContent?.entities ?? []).map((entity) => entity.name);
const notes = await Notes.list();
const files = await API.list("mcp");
text(\`\${hits.length} hits, \${notes.length} notes, \${files.length} files\`);
json({ names });
return { names, tools: ALL_TOOLS.length, readme: typeof readme };`;

describe("typecheck over codecell serve", () => {
  it("strict: refuses the cell with its diagnostics before any nested call", async () => {
    const result = await exec("strict", misspelt);
    expect(result).toMatchObject({ status: "failed", code: "invalid_input" });
    expect(result.error).toMatch(/did not run/);
    expect(result.diagnostics).toEqual([
      expect.objectContaining({
        file: "cell.ts",
        line: 3,
        column: 57,
        code: "TS2561",
        accepts: ["name", "entityType", "observations"],
      }),
    ]);
    const telemetry = result.telemetry as { nested: { calls: number } };
    expect(telemetry.nested.calls).toBe(0);
    const notes = await exec("strict", countWritten);
    expect(notes).toMatchObject({ status: "completed", value: 0 });
  });

  it("strict: runs correct JavaScript and TypeScript cells with no diagnostics", async () => {
    const result = await exec("strict", correct);
    expect(result, JSON.stringify(result.diagnostics)).toMatchObject({
      status: "completed",
      value: { names: ["typecheck"] },
    });
    expect(result).not.toHaveProperty("diagnostics");
    const typed = await exec(
      "strict",
      "const listed: { name: string }[] = (await tools.search('note')).map((hit) => ({ name: hit.name }));\nreturn listed.length > 0;",
      "typescript",
    );
    expect(typed).toMatchObject({ status: "completed", value: true });
  });

  it("strict: the exec description says cells are type-checked; the other modes do not", async () => {
    const descriptions = await Promise.all(
      modes.map(async (mode) => {
        const { tools } = await gateways.get(mode)!.client.listTools();
        return tools.find((tool) => tool.name === "exec")!.description ?? "";
      }),
    );
    expect(descriptions[0]).toMatch(/type-checked/);
    expect(descriptions[1]).not.toMatch(/type-checked/);
    expect(descriptions[2]).not.toMatch(/type-checked/);
  });

  it("strict: a cell whose check does not finish does not run, and the error says what to do", async () => {
    // 300 typed calls: far more than the 1 ms the checker is given, however warm it is.
    const calls = Array.from(
      { length: 300 },
      (_, index) => `await Notes.add({ title: "n${index}", body: "b" });`,
    );
    const result = await callCodeMode(hasty.client, "exec", { code: calls.join("\n") });
    expect(result).toMatchObject({ status: "failed", code: "runtime_unavailable" });
    expect(result.error).toMatch(/type check did not finish \(.+\), so nothing of it ran/);
    expect(result.error).toMatch(/typecheckTimeoutMs \(now 1 ms\)/);
    const telemetry = result.telemetry as { nested: { calls: number } };
    expect(telemetry.nested.calls).toBe(0);
  });

  it("warn: runs the cell and the diagnostics travel with its result (and the model's text)", async () => {
    const result = await exec("warn", misspelt);
    expect(result).toMatchObject({ status: "completed", value: "done" });
    expect(result.diagnostics).toEqual([expect.objectContaining({ line: 3, column: 57, code: "TS2561" })]);
    const notes = await exec("warn", countWritten);
    expect(notes).toMatchObject({ status: "completed", value: 1 });
  });

  it("off: the same cell runs with no diagnostics", async () => {
    const result = await exec("off", misspelt);
    expect(result).toMatchObject({ status: "completed", value: "done" });
    expect(result).not.toHaveProperty("diagnostics");
  });
});

describe("codecell exec --typecheck", () => {
  it("prints each finding on stderr at the file's line and column, and in the result", async () => {
    const setup = makeSetup(baseConfig());
    const cell = join(setup.dir, "cell.js");
    writeFileSync(cell, 'const file = await tools.read_file({ pth: "README.md" });\nreturn file.content;\n');
    const { code, stdout, stderr } = await runCli([
      "exec",
      "--config",
      setup.configPath,
      "--typecheck",
      cell,
    ]);
    const result = JSON.parse(stdout);
    expect(result.diagnostics).toEqual([expect.objectContaining({ line: 1, column: 38, code: "TS2561" })]);
    expect(stderr).toContain(`${cell}:1:38 TS2561 `);
    expect(stderr).toContain("(accepts: path");
    // warn: the cell ran, and read_file refused the input it got.
    expect(code).toBe(4);
    const plain = await runCli(["exec", "--config", setup.configPath, cell]);
    expect(JSON.parse(plain.stdout)).not.toHaveProperty("diagnostics");
    expect(plain.stderr).not.toContain("TS2561");
  }, 60_000);

  it("prints the note of a check that did not finish (the cell ran unchecked)", async () => {
    // exec sends its cell right after start: the checker is still loading the compiler 1 ms later.
    const setup = makeSetup(baseConfig({ tools: { codeMode: { enabled: true, typecheckTimeoutMs: 1 } } }));
    const { code, stdout, stderr } = await runCli([
      "exec",
      "--config",
      setup.configPath,
      "--typecheck",
      "--code",
      "return 2;",
    ]);
    expect(code).toBe(0);
    const result = JSON.parse(stdout);
    expect(result).toMatchObject({
      status: "completed",
      value: 2,
      typecheckNote: expect.stringMatching(/did not finish/),
    });
    expect(stderr).toContain("cell.ts: The type check did not finish (");
  }, 60_000);
});
