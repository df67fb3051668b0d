import type { CodeModeResult } from "@codecell/contract";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadGatewayConfig } from "../src/config/load-config.js";
import { Gateway } from "../src/gateway.js";
import { NO_APPROVAL_CLIENT } from "../src/mcp/approvals.js";
import type { GatewaySession } from "../src/sessions/session.js";
import { baseConfig, makeSetup } from "./harness.js";

/**
 * The declarations `typecheck` checks cells against must say what the runtime returns. Each probe is a
 * guest expression a cell may write; the test runs every probe in the real sandbox, takes the value it
 * really gave, and then type-checks (in "warn", which reports without refusing) a cell that assigns
 * that value, as a literal, to the probe's declared type and reads every key the value really has
 * through that type. A declaration that drifts from the runtime (a missing or renamed key, a wrong
 * shape) fails here, whichever guest API it is.
 */
const probes: Array<[name: string, expression: string]> = [
  ["ALL_TOOLS", "ALL_TOOLS"],
  ["tools.search", 'await tools.search("read a file", { limit: 3 })'],
  ["tools.search(query, limit)", 'await tools.search("note", 2)'],
  ["tools.search({ query })", 'await tools.search({ query: "list", limit: 2 })'],
  ["tools.describe", 'await tools.describe("read_file")'],
  ["tools.describe(id)", 'await tools.describe("plugin:notes:notes_add")'],
  ["tools.call", 'await tools.call("core:codecell:read_file", { path: "todo.md" })'],
  ["tools.<name>", 'await tools.list_dir({ path: "." })'],
  ["tools.<plugin tool>", "await tools.notes_list({})"],
  ["API.list()", "await API.list()"],
  ["API.list(prefix)", 'await API.list("mcp")'],
  ["API.read", 'await API.read("mcp/memory.d.ts")'],
  ["API.search", 'await API.search("create entities", { limit: 3 })'],
  ["API.search({ query })", 'await API.search({ query: "weather" })'],
  ["text", 'text("a line")'],
  ["json", "json({ a: 1 })"],
  ["console.log", 'console.log("logged")'],
  ["yield_control", 'await yield_control("a pause")'],
  ["MCP.<server>.$api()", "await MCP.memory.$api()"],
  ["MCP.<server>.$api(tool)", 'await MCP.memory.$api("read_graph", { schema: true })'],
  [
    "MCP.<server>.<tool>",
    'await MCP.memory.createEntities({ entities: [{ name: "probe", entityType: "test", observations: ["x"] }] })',
  ],
  ["MCP.<server>.<tool> (read)", "await MCP.memory.readGraph({})"],
  [
    "MCP.<server>.<tool> with outputSchema",
    'await MCP.everything.getStructuredContent({ location: "Chicago" })',
  ],
  ["MCP.<server>.<tool> (text)", "await MCP.everything.getSum({ a: 2, b: 3 })"],
  [
    "MCP.<server>.<tool> (annotated content)",
    'await MCP.everything.getAnnotatedMessage({ messageType: "error", includeImage: true })',
  ],
  ["MCP.<server>.resources.list", "await MCP.everything.resources.list()"],
  [
    "MCP.<server>.resources.read",
    'await MCP.everything.resources.read({ uri: (await MCP.everything.resources.list()).resources.find((r) => r.uri.endsWith(".md")).uri })',
  ],
  ["MCP.<server>.prompts.list", "await MCP.everything.prompts.list()"],
  [
    "MCP.<server>.prompts.get",
    'await MCP.everything.prompts.get({ name: "args-prompt", arguments: { city: "Lisbon" } })',
  ],
  ["<Namespace>.<fn>", 'await Notes.add({ title: "probe", body: "b", tags: ["t"] })'],
  ["<Namespace>.<fn> (list)", "await Notes.list({})"],
  ["namespaces.<Namespace>", 'await namespaces.Notes.search("probe")'],
];

const UNDEFINED = "$undefined";

/** One cell that runs every probe and returns what each gave (undefined marked, since JSON drops it). */
function captureCell(): string {
  const lines = probes.map(
    ([name, expression]) =>
      `out[${JSON.stringify(name)}] = await (async () => ${expression})().then((v) => v === undefined ? ${JSON.stringify(UNDEFINED)} : v);`,
  );
  return `const out = {};\n${lines.join("\n")}\nreturn out;`;
}

const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

/** Every key path the real value has (arrays through their first item), as TypeScript accesses. */
function accessesOf(value: unknown, path: string, depth: number, out: string[]): string[] {
  if (depth > 4 || value === null || typeof value !== "object") return out;
  if (Array.isArray(value)) {
    if (value.length > 0) accessesOf(value[0], `${path}[0]`, depth + 1, out);
    return out;
  }
  for (const [key, member] of Object.entries(value)) {
    const access = IDENTIFIER.test(key) ? `${path}.${key}` : `${path}[${JSON.stringify(key)}]`;
    out.push(access);
    accessesOf(member, access, depth + 1, out);
  }
  return out;
}

/** The check cell: the real value, as a literal, typed as the probe's declared result, keys read. */
function checkCell(expression: string, value: unknown): string {
  const literal = value === UNDEFINED ? "undefined" : JSON.stringify(value);
  const reads = accessesOf(value, "real", 0, []).map((access) => `void ${access};`);
  return [
    // Never called: the probe's declared type, exactly as a cell writes the expression.
    `async function declared() { return ${expression}; }`,
    `const real: Awaited<ReturnType<typeof declared>> = ${literal};`,
    ...reads,
    "return 1;",
  ].join("\n");
}

let gateway: Gateway;
let session: GatewaySession;
let real: Record<string, unknown>;

async function settle(result: CodeModeResult): Promise<CodeModeResult> {
  for (let waits = 0; result.status === "waiting" && waits < 20; waits++) {
    result = await session.wait({ runId: result.runId });
  }
  return result;
}

beforeAll(async () => {
  const setup = makeSetup(
    baseConfig({
      // "warn" runs every cell and reports what the check found, so one gateway both captures and checks.
      tools: {
        codeMode: { enabled: true, timeoutMs: 60_000, typecheck: "warn", typecheckTimeoutMs: 60_000 },
      },
      mcpServers: {
        ...(baseConfig().mcpServers as Record<string, unknown>),
        everything: { package: "@modelcontextprotocol/server-everything", args: ["stdio"] },
      },
    }),
  );
  const loaded = loadGatewayConfig(setup.configPath);
  if (!loaded.config) throw new Error(JSON.stringify(loaded.problems));
  gateway = await Gateway.start(loaded.config);
  session = gateway.openSession("declarations-truth", NO_APPROVAL_CLIENT);
  const result = await settle(await session.exec({ code: captureCell(), language: "javascript" }));
  if (result.status !== "completed") throw new Error(`the probes did not run: ${JSON.stringify(result)}`);
  real = result.value as Record<string, unknown>;
}, 180_000);

afterAll(async () => {
  await session?.end();
  await gateway?.close();
});

describe("guest declarations say what the runtime returns", () => {
  it("ran every probe", () => {
    expect(Object.keys(real).sort()).toEqual(probes.map(([name]) => name).sort());
  });

  it.each(probes)(
    "%s: the real value fits its declared type, every key of it declared",
    async (name, expression) => {
      const code = checkCell(expression, real[name]);
      const result = await session.exec({ code, language: "typescript" });
      const diagnostics =
        (result as { diagnostics?: Array<{ line: number; message: string }> }).diagnostics ?? [];
      const lines = code.split("\n");
      expect(
        diagnostics.map(
          (diagnostic) => `${diagnostic.message}\n    at: ${lines[diagnostic.line - 1]?.slice(0, 200)}`,
        ),
      ).toEqual([]);
      expect(result).toMatchObject({ status: "completed", value: 1 });
    },
  );

  // The check is not vacuous: a value the declaration does not promise is reported.
  it("reports a value whose shape the declaration does not have", async () => {
    const code = checkCell('await tools.describe("read_file")', { id: "x", inputSchema: {} });
    const result = await session.exec({ code, language: "typescript" });
    const messages = ((result as { diagnostics?: Array<{ message: string }> }).diagnostics ?? []).map(
      (diagnostic) => diagnostic.message,
    );
    expect(messages.join("\n")).toMatch(/inputSchema/);
  });
});
