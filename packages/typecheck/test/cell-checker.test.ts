import type { CodeModeDiagnostic } from "@codecell/contract";
import { afterAll, describe, expect, it } from "vitest";
import { CellChecker, guestDeclarations, renderGuestDeclarations } from "../src/index.js";
import { guestInput } from "./support.js";

// One checker for the file, as an engine keeps one: every case after the first is a warm check.
const checker = new CellChecker();
const declarations = guestDeclarations(renderGuestDeclarations(guestInput()));
afterAll(() => checker.close());

async function diagnosticsOf(code: string, language: "javascript" | "typescript" = "javascript") {
  const result = await checker.check({ declarations, code, language });
  if (result.status !== "checked") throw new Error(`not checked: ${result.reason}`);
  return result.diagnostics;
}

type Expected = { line: number; column?: number; code: string; message: RegExp; accepts?: string[] };

function expectFindings(found: CodeModeDiagnostic[], expected: Expected[]) {
  expect(found.map((item) => `${item.line}:${item.column} ${item.code} ${item.message}`)).toHaveLength(
    expected.length,
  );
  expected.forEach((want, index) => {
    const item = found[index]!;
    expect(item.file).toBe("cell.ts");
    expect(item.line).toBe(want.line);
    if (want.column !== undefined) expect(item.column).toBe(want.column);
    expect(item.code).toBe(want.code);
    expect(item.message).toMatch(want.message);
    if (want.accepts) expect(item.accepts).toEqual(want.accepts);
  });
}

// Cells as models write them, each with a mistake the sandbox would only find once the call is made.
const wrongCells: Array<[string, string, "javascript" | "typescript", Expected[]]> = [
  [
    "a misspelt argument of a tool shortcut",
    'const file = await tools.read_file({ pth: "README.md" });\nreturn file.content;',
    "javascript",
    [
      {
        line: 1,
        column: 38,
        code: "TS2561",
        message: /'pth'.*Did you mean to write 'path'/,
        accepts: ["path", "maxBytes"],
      },
    ],
  ],
  [
    "a misspelt nested field of an MCP tool",
    'await MCP.memory.createEntities({\n  entities: [{ name: "codecell", entityType: "project", observation: ["x"] }],\n});',
    "javascript",
    [
      {
        line: 2,
        code: "TS2561",
        message: /'observation'.*'observations'/,
        accepts: ["name", "entityType", "observations"],
      },
    ],
  ],
  [
    "a misspelt argument through the MCP tool's own name",
    'await MCP.github.create_issue({ owner: "o", repo: "r", titel: "Bug" });',
    "typescript",
    [{ line: 1, code: "TS2561", message: /'titel'.*'title'/ }],
  ],
  [
    "a missing required field through tools.call by id",
    'const file = await tools.call("core:read_file", {});\nreturn file.bytes;',
    "javascript",
    [{ line: 1, code: "TS2345", message: /Property 'path' is missing/, accepts: ["path", "maxBytes"] }],
  ],
  [
    "a missing required field of an MCP tool",
    "const found = await MCP.memory.searchNodes({});\nreturn found;",
    "javascript",
    [{ line: 1, code: "TS2345", message: /Property 'query' is missing/ }],
  ],
  [
    "a wrong argument type",
    "await tools.add_note({ title: 42, body: 'b' });",
    "javascript",
    [{ line: 1, code: "TS2322", message: /'number' is not assignable to type 'string'/ }],
  ],
  [
    "a misspelt property of a typed result",
    'const file = await tools.readFile({ path: "README.md" });\nreturn file.contents.length;',
    "javascript",
    [
      {
        line: 2,
        column: 13,
        code: "TS2551",
        message: /'contents'.*Did you mean 'content'/,
        accepts: ["path", "content", "bytes"],
      },
    ],
  ],
  [
    "an MCP result used as the tool's structured value",
    "const graph = await MCP.memory.readGraph({});\nreturn graph.entities.map((entity) => entity.name);",
    "javascript",
    [
      {
        line: 2,
        column: 14,
        code: "TS2339",
        message:
          /'graph.entities' is unknown: the value has no property 'entities' \(it has content, structuredContent, isError\)/,
        accepts: ["content", "structuredContent", "isError"],
      },
    ],
  ],
  [
    "ALL_TOOLS sorted in place (it is frozen)",
    "ALL_TOOLS.sort((a, b) => a.name.localeCompare(b.name));\nreturn ALL_TOOLS[0].id;",
    "javascript",
    [{ line: 1, code: "TS2339", message: /'sort' does not exist on type 'readonly CodecellToolEntry\[\]'/ }],
  ],
  [
    "globals the sandbox does not have",
    'const page = await fetch("https://example.com");\nsetTimeout(() => {}, 10);\nreturn process.env.HOME;',
    "javascript",
    [
      { line: 1, column: 20, code: "TS2304", message: /'fetch'/ },
      { line: 2, column: 1, code: "TS2304", message: /'setTimeout'/ },
      { line: 3, column: 8, code: "TS2591", message: /'process': the sandbox has no such global/ },
    ],
  ],
  [
    "a plain type error in a TypeScript cell",
    "const count: number = (await tools.search('notes')).length;\nconst label: string = count;\nreturn label;",
    "typescript",
    [{ line: 2, column: 7, code: "TS2322", message: /'number' is not assignable to type 'string'/ }],
  ],
  [
    "a wrong property of a search hit",
    "const [hit] = await tools.search('read');\nreturn hit.toolId;",
    "javascript",
    [
      {
        line: 2,
        code: "TS2339",
        message: /'toolId' does not exist/,
        accepts: ["id", "name", "label", "description", "source", "sourceName"],
      },
    ],
  ],
];

describe("cells with mistakes", () => {
  it.each(wrongCells)("%s", async (_name, code, language, expected) => {
    expectFindings(await diagnosticsOf(code, language), expected);
  });
});

// Cells that run as they are: not one finding may come back.
const correctCells: Array<[string, string, "javascript" | "typescript"]> = [
  [
    "every guest global",
    `const hits = await tools.search("read a file", { limit: 3 });
const described = await tools.describe(hits[0].id);
const schema = described.parameters;
const file = await tools.read_file({ path: "README.md" });
const again = await tools.call("core:read_file", { path: "README.md", maxBytes: 10 });
const listed = await tools.call("list_files");
const byAlias = await tools.readFile({ path: file.path });
const names = ALL_TOOLS.map((tool) => tool.name).filter((name) => name.includes("file"));
const files = await API.list("mcp");
const index = await API.read(files[0].path);
const mcpHits = await API.search("entities", { limit: 2 });
const header = await MCP.memory.$api("create_entities");
const notes = await Notes.list();
await namespaces.Notes.add({ title: "t" });
text(\`\${names.length} names, \${index.length} chars, \${header.length}\`);
json({ schema, listed, bytes: again.bytes + byAlias.bytes, limit: Notes.limits.maxNotes });
console.log("notes", notes.length);
console.warn(mcpHits.map((hit) => hit.call));
await yield_control("checkpoint");
return { hits: hits.length, notes };`,
    "javascript",
  ],
  [
    "MCP tools with typed results, aliases and parallel calls",
    `const created = await MCP.memory.create_entities({
  entities: [{ name: "codecell", entityType: "project", observations: ["a code-mode runtime"] }],
});
const [graph, found] = await Promise.all([
  MCP.memory.readGraph({}),
  MCP.memory.searchNodes({ query: "codecell" }),
]);
const first = graph.content?.[0];
const textOut = first && first.type === "text" ? first.text : "";
const loose = graph.content[0].text;
const entities = found.structuredContent?.entities ?? [];
for (const entity of entities) text(entity.name + " " + entity.observations.join(", "));
if (created.isError) throw new Error("create failed");
const issues = await MCP.github.searchIssues({ q: "is:open label:bug", per_page: 5 });
return { textOut, loose, count: entities.length, issues: issues.content.length };`,
    "javascript",
  ],
  [
    "any-heavy code",
    `const raw = await tools.call(ALL_TOOLS[0].id, { anything: true });
const data = JSON.parse(raw.text ?? "{}");
const rows = data.items.map((item) => ({ id: item.id, score: item.meta.score * 2 }));
const acc = {};
for (const row of rows) acc[row.id] = (acc[row.id] || 0) + row.score;
const summary = { total: 0 };
summary.extra = Object.keys(acc).length;
let last = null;
last = rows.at(-1);
const list = [];
list.push(1, "two", { three: 3 });
function pick(value, key) { return value?.[key]; }
const picked = pick(data, "name");
try {
  await tools.call("no such tool", {});
} catch (error) {
  text(error.message + error.code);
}
const pending = new Promise((resolve) => resolve());
await pending;
return { acc, summary, last, list, picked };`,
    "javascript",
  ],
  [
    "a TypeScript cell with types of its own",
    `type Row = { id: string; score: number };
interface Summary { rows: Row[]; best?: Row }
const hits = await tools.search("notes");
const rows: Row[] = hits.map((hit, index) => ({ id: hit.id, score: index }));
const byId = new Map<string, Row>(rows.map((row) => [row.id, row]));
const best = rows.toSorted((a, b) => b.score - a.score)[0];
const grouped = Object.groupBy(rows, (row) => (row.score > 1 ? "high" : "low"));
const unique = new Set(rows.map((row) => row.id)).union(new Set(["x"]));
const note = await tools.add_note({ title: "t", body: "b", tags: ["x"] });
const result: Summary = { rows, best };
const anyValue = note as any;
return { result, size: byId.size, grouped, unique: [...unique], id: anyValue.id };`,
    "typescript",
  ],
  [
    "QuickJS's own globals and search options the guest ignores",
    `const started = performance.now();
const encoded = btoa("codecell");
const decoded = atob(encoded);
queueMicrotask(() => text("later"));
const hits = await tools.search("files", { limit: 2, sources: ["core"] });
const mcpHits = await API.search("graph", { limit: 1, exact: true });
return { decoded, ms: performance.now() - started, origin: performance.timeOrigin, n: hits.length + mcpHits.length };`,
    "javascript",
  ],
  [
    "the language beyond ES2023 that QuickJS runs",
    `const { promise, resolve } = Promise.withResolvers();
resolve(1);
const value = await promise;
const doubled = [1, 2, 3].values().map((n) => n * 2).toArray();
const escaped = RegExp.escape("a.b");
const tried = await Promise.try(() => 2);
return { value, doubled, escaped, tried, last: [1, 2].findLast((n) => n > 0) };`,
    "javascript",
  ],
];

describe("correct cells", () => {
  it.each(correctCells)("%s has no findings", async (_name, code, language) => {
    expect(await diagnosticsOf(code, language)).toEqual([]);
  });
});

describe("bounds and skips", () => {
  it("keeps at most 10 findings and counts the rest", async () => {
    const code = Array.from(
      { length: 14 },
      (_, index) => `await tools.read_file({ pth${index}: "x" });`,
    ).join("\n");
    const result = await checker.check({ declarations, code, language: "javascript" });
    expect(result).toMatchObject({ status: "checked", total: 14 });
    if (result.status === "checked") {
      expect(result.diagnostics).toHaveLength(10);
      expect(result.diagnostics.map((item) => item.line)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
      for (const item of result.diagnostics) expect(item.message.length).toBeLessThanOrEqual(400);
    }
  });

  it.each([
    ["module access", 'import fs from "node:fs";\nreturn 1;', "javascript"],
    ["a JavaScript syntax error", "return (1 + ;", "javascript"],
    ["TypeScript in a JavaScript cell", "const n: number = 1;", "javascript"],
    ["a decorator the transform refuses", "@sealed class A {}\nreturn 1;", "typescript"],
  ] as const)("leaves %s to the sandbox's own checks", async (_name, code, language) => {
    const result = await checker.check({ declarations, code, language });
    expect(result.status).toBe("skipped");
  });

  it("places a finding on the cell's own line and column after blank and CRLF lines", async () => {
    const code = '\r\n\r\n  const file = await tools.read_file({ path: "a" });\r\n  return file.nope;';
    expectFindings(await diagnosticsOf(code), [{ line: 4, column: 15, code: "TS2339", message: /'nope'/ }]);
  });

  it("lists the closest of many accepted names first", async () => {
    const input = guestInput([]);
    const many = Array.from({ length: 60 }, (_, index) => ({
      id: `plugin:bulk:tool_${index}`,
      name: `tool_${index}`,
      inputSchema: { type: "object", properties: { id: { type: "string" } } },
    }));
    const bulk = guestDeclarations(
      renderGuestDeclarations({
        ...input,
        tools: [...input.tools, ...many],
        toolFunctions: [
          ...input.toolFunctions,
          ...many.map((tool) => ({ name: tool.name, toolId: tool.id })),
        ],
      }),
    );
    const result = await checker.check({
      declarations: bulk,
      code: 'return await tools.read_fil({ path: "a" });',
      language: "javascript",
    });
    expect(result.status === "checked" && result.diagnostics[0]).toMatchObject({
      code: "TS2551",
      message: expect.stringContaining("Did you mean 'read_file'?"),
    });
    if (result.status === "checked") {
      expect(result.diagnostics[0]!.accepts).toHaveLength(20);
      expect(result.diagnostics[0]!.accepts![0]).toBe("read_file");
    }
  });

  it("names declared in one cell are not seen by the next", async () => {
    expect(await diagnosticsOf("const shared = 1;\nreturn shared;")).toEqual([]);
    expectFindings(await diagnosticsOf("return shared;"), [{ line: 1, code: "TS2304", message: /'shared'/ }]);
  });

  it("checks against other declarations under their own key", async () => {
    const bare = guestDeclarations(
      renderGuestDeclarations({ ...guestInput([]), namespaces: [], tools: [], toolFunctions: [] }),
    );
    const result = await checker.check({
      declarations: bare,
      code: "return await MCP.memory.readGraph({});",
      language: "javascript",
    });
    expect(result.status === "checked" && result.diagnostics[0]?.message).toMatch(/'memory' does not exist/);
    expect(await diagnosticsOf("return await MCP.memory.readGraph({});")).toEqual([]);
  });
});

/** A cell of `count` statements, each reading the one before: the compiler's time grows faster than the count. */
function chainedCell(count: number): string {
  return Array.from(
    { length: count },
    (_, index) =>
      `const v${index} = await tools.read_file({ path: String(${index > 0 ? `v${index - 1}` : 0}) });`,
  ).join("\n");
}

describe("a check that does not finish", () => {
  const cell = 'const file = await tools.read_file({ pth: "a" });\nreturn file.content;';

  it("is unfinished when the checker stops while it checks", async () => {
    const stopping = new CellChecker();
    const pending = stopping.check({ declarations, code: cell, language: "javascript" });
    await stopping.close();
    expect(await pending).toMatchObject({
      status: "unfinished",
      reason: "the checker was closed",
      cause: "failed",
    });
  });

  it("a check that runs away does not fail the checks queued behind it", async () => {
    // A cell of 10,000 chained statements keeps the compiler busy for far longer than 8 s (2,000 of them
    // take about a second, and the time grows faster than the count); the cell queued behind it is
    // sent to a new checker once the runaway one is stopped, with a timer of its own, which covers that
    // checker's load of the compiler from source on a loaded machine.
    const patient = new CellChecker({ timeoutMs: 8_000 });
    try {
      await patient.warmUp();
      const runaway = patient.check({ declarations, code: chainedCell(10_000), language: "javascript" });
      const queued = patient.check({ declarations, code: cell, language: "javascript" });
      expect(await runaway).toMatchObject({
        status: "unfinished",
        reason: "the type check took longer than 8000 ms",
        cause: "budget",
      });
      const behind = await queued;
      expect(behind.status).toBe("checked");
      expect(behind.status === "checked" && behind.diagnostics[0]?.message).toMatch(/'pth'/);
    } finally {
      await patient.close();
    }
  }, 60_000);

  it("a runaway check sent to a cold checker is stopped as a runaway, not taken for a slow load", async () => {
    // No warm-up: the first check loads the compiler, then runs away. The thread says when the compiler
    // is loaded, so the runaway is told the truth and stopped, and the cell queued behind it (another
    // principal's, in a gateway) is checked on a new thread instead of being refused as "still loading".
    // 12 s covers loading the compiler from source on a loaded machine; 20,000 chained statements keep
    // it busy far longer than that.
    const cold = new CellChecker({ timeoutMs: 12_000 });
    try {
      const runaway = cold.check({ declarations, code: chainedCell(20_000), language: "javascript" });
      const queued = cold.check({ declarations, code: cell, language: "javascript" });
      expect(await runaway).toMatchObject({
        status: "unfinished",
        reason: "the type check took longer than 12000 ms",
        cause: "budget",
      });
      const behind = await queued;
      expect(behind.status).toBe("checked");
      expect(behind.status === "checked" && behind.diagnostics[0]?.message).toMatch(/'pth'/);
    } finally {
      await cold.close();
    }
  }, 90_000);

  it("is unfinished past its timeout, and a checker still loading the compiler is kept", async () => {
    // 1 ms: no thread can start and load the compiler in that time.
    const hasty = new CellChecker({ timeoutMs: 1 });
    try {
      const first = await hasty.check({ declarations, code: cell, language: "javascript" });
      expect(first).toMatchObject({
        status: "unfinished",
        reason: "the checker was still loading the compiler after 1 ms",
        cause: "loading",
      });
      expect(hasty.started).toBe(true);
      await hasty.warmUp();
      // Ready now; new declarations and a 400-line cell are far more than 1 ms of checking, and a check
      // that runs over on a ready checker has it restarted.
      const long = Array.from({ length: 400 }, (_, index) => `await tools.read_file({ path: "f${index}" });`);
      const other = guestDeclarations(renderGuestDeclarations(guestInput([])));
      const second = await hasty.check({
        declarations: other,
        code: long.join("\n"),
        language: "javascript",
      });
      expect(second).toMatchObject({
        status: "unfinished",
        reason: "the type check took longer than 1 ms",
        cause: "budget",
      });
      expect(hasty.started).toBe(false);
    } finally {
      await hasty.close();
    }
  });
});

describe("checks of several owners", () => {
  const small = 'const file = await tools.read_file({ pth: "a" });\nreturn file.content;';

  it("answers another owner's small check before the heavy checks one owner queued after the first", async () => {
    // Owner "a" queues two cells that keep the compiler busy far past the budget (20,000 chained
    // statements; 10,000 already take longer than 8 s), then owner "b" one small cell. Round robin
    // between owners: b's check goes right after a's first, not behind a's second; each heavy check is
    // ended by the budget with the true reason. Only the order of the answers is asserted.
    const shared = new CellChecker({ timeoutMs: 60_000, budgetMs: 8_000 });
    const order: string[] = [];
    const track = <T>(name: string, promise: Promise<T>) =>
      promise.then((value) => {
        order.push(name);
        return value;
      });
    try {
      await shared.warmUp();
      const heavy = chainedCell(20_000);
      const first = track(
        "a1",
        shared.check({ declarations, code: heavy, language: "javascript", owner: "a" }),
      );
      const second = track(
        "a2",
        shared.check({ declarations, code: heavy, language: "javascript", owner: "a" }),
      );
      const other = track(
        "b",
        shared.check({ declarations, code: small, language: "javascript", owner: "b" }),
      );
      expect(shared.queued).toBe(2);
      const answered = await other;
      expect(answered.status).toBe("checked");
      expect(answered.status === "checked" && answered.diagnostics[0]?.message).toMatch(/'pth'/);
      for (const result of [await first, await second]) {
        expect(result).toMatchObject({
          status: "unfinished",
          reason: "the type check took longer than 8000 ms",
          cause: "budget",
        });
      }
      expect(order).toEqual(["a1", "b", "a2"]);
    } finally {
      await shared.close();
    }
  }, 120_000);

  it("takes owners in turn: one owner's many small checks do not hold another's behind them", async () => {
    const shared = new CellChecker();
    const order: string[] = [];
    try {
      await shared.warmUp();
      const checks = [
        ...Array.from({ length: 4 }, (_, index) => ["a", `a${index}`] as const),
        ["b", "b0"] as const,
        ["c", "c0"] as const,
      ].map(([owner, name]) =>
        shared.check({ declarations, code: small, language: "javascript", owner }).then((result) => {
          order.push(name);
          return result;
        }),
      );
      for (const result of await Promise.all(checks)) expect(result.status).toBe("checked");
      expect(order).toEqual(["a0", "b0", "c0", "a1", "a2", "a3"]);
    } finally {
      await shared.close();
    }
  });

  it("keeps the checks not started in its own queue: one check on the thread at a time", async () => {
    // The thread works on one check at a time; the rest wait in the checker, where the round robin can
    // reorder them (a thread's own queue could not be).
    const shared = new CellChecker();
    try {
      const pending = [1, 2, 3].map(() =>
        shared.check({ declarations, code: small, language: "javascript", owner: "a" }),
      );
      expect(shared.queued).toBe(2);
      await Promise.all(pending);
      expect(shared.queued).toBe(0);
    } finally {
      await shared.close();
    }
  });
});
