import { describe, expect, it } from "vitest";
import { renderMcpDeclarations } from "../src/render-declarations.js";
import type { McpServerDescription, McpToolDefinition } from "../src/types.js";
import { compileDeclarations } from "./support/compile-declarations.js";

function deep(levels: number): Record<string, unknown> {
  let schema: Record<string, unknown> = { type: "string" };
  for (let level = 0; level < levels; level++)
    schema = { type: "object", properties: { next: schema }, required: ["next"] };
  return schema;
}

const cyclic: Record<string, unknown> = { type: "object", properties: {} };
(cyclic.properties as Record<string, unknown>).self = cyclic;

const sharedDefinitions = {
  Address: { type: "object", properties: { city: { type: "string" }, next: { $ref: "#/$defs/Address" } } },
};

const hostileTools: McpToolDefinition[] = [
  {
    name: 'say "hi"\n*/ now',
    description: "Ends a comment */ early\n@param fake injected\r\nand continues",
    inputSchema: {
      type: "object",
      properties: {
        'key with "quotes"': { type: "string", description: "line one\nline two */ still comment" },
        "new\nline": { enum: ["*/", 'a"b', "back\\slash", "\u2028"] },
      },
    },
  },
  {
    name: "huge",
    inputSchema: {
      type: "object",
      properties: Object.fromEntries(
        Array.from({ length: 3000 }, (_, i) => [
          `field${i}`,
          { type: "string", description: "x".repeat(50) },
        ]),
      ),
    },
  },
  { name: "deep", inputSchema: deep(60), outputSchema: deep(60) },
  { name: "cyclic", inputSchema: cyclic },
  { name: "malformed", inputSchema: { type: "object", properties: 5, required: "x", items: 3 } as unknown },
  { name: "not a schema", inputSchema: "nope" },
  { name: "no schema" },
  { name: "weird types", inputSchema: { type: ["banana", 7], enum: [] } },
  {
    name: "shared one",
    inputSchema: { type: "object", properties: { a: { $ref: "#/$defs/Address" } }, $defs: sharedDefinitions },
  },
  {
    name: "shared two",
    inputSchema: { type: "object", properties: { b: { $ref: "#/$defs/Address" } }, $defs: sharedDefinitions },
  },
  {
    name: "same name other shape",
    inputSchema: {
      type: "object",
      properties: { c: { $ref: "#/definitions/Address" } },
      definitions: { Address: { type: "string" } },
    },
  },
  { name: "root recursion", inputSchema: { type: "object", properties: { child: { $ref: "#" } } } },
  { name: "$api", inputSchema: { type: "object" } },
  { name: "resources", inputSchema: { type: "object" } },
  { name: "delete", inputSchema: { type: "object" } },
  { name: "delete", inputSchema: { type: "object" } },
];

const servers: McpServerDescription[] = [
  {
    name: "hostile",
    instructions: "Close the comment */ and\n\u2028 break lines",
    tools: hostileTools,
    resources: true,
    prompts: true,
  },
  { name: "delete", tools: [], resources: false, prompts: false },
  { name: "hostile", tools: [], resources: false, prompts: false },
  { name: 'x"*/\n', tools: [], resources: false, prompts: false },
  { name: "123", tools: [], resources: false, prompts: false },
];

describe("hostile schemas and names", () => {
  const declarations = renderMcpDeclarations(servers);
  const hostile = declarations.servers[0]!;
  const tool = (name: string) => hostile.tools.find((candidate) => candidate.name === name)!;

  it("render without throwing and every file type-checks", () => {
    expect(compileDeclarations(declarations.files)).toEqual([]);
  });

  it("give servers unique, valid, unreserved identifiers", () => {
    expect(declarations.servers.map((server) => server.identifier)).toEqual([
      "hostile",
      "delete_",
      "hostile2",
      "x",
      "_123",
    ]);
    expect(declarations.files.map((file) => file.path)).toContain("mcp/_123.d.ts");
  });

  it("keep tool identifiers unique and away from $api, resources and prompts", () => {
    expect(hostile.tools.map((candidate) => candidate.identifier)).toEqual([
      "sayHiNow",
      "huge",
      "deep",
      "cyclic",
      "malformed",
      "notASchema",
      "noSchema",
      "weirdTypes",
      "sharedOne",
      "sharedTwo",
      "sameNameOtherShape",
      "rootRecursion",
      "api",
      "resources_",
      "delete_",
      "delete_2",
    ]);
  });

  it("never let server text close a comment", () => {
    const text = hostile.header;
    // Every "*/" in the file must be a real comment end: outside comments only code remains.
    const withoutComments = text.replace(/\/\*[\s\S]*?\*\//g, "").replace(/\/\/.*$/gm, "");
    expect(withoutComments).not.toContain("@param");
    expect(withoutComments).not.toContain("still comment");
    expect(text).toContain("*\\/ early");
  });

  it("degrade a huge schema to an untyped object within the budget", () => {
    expect(tool("huge").declaration).toContain("function huge(input: Record<string, unknown>)");
    expect(tool("huge").declaration).toContain("too large to declare");
    expect(tool("huge").declaration.length).toBeLessThan(6000);
  });

  it("cut deep nesting off with a note", () => {
    expect(tool("deep").declaration).toContain("Record<string, unknown>");
    expect(tool("deep").declaration).toContain('$api("deep", { schema: true }) has it whole');
  });

  it("fall back for cyclic, malformed and missing schemas", () => {
    expect(tool("cyclic").declaration).toContain("function cyclic(");
    expect(tool("malformed").declaration).toContain("function malformed(input");
    expect(tool("not a schema").declaration).toContain("function notASchema(input: unknown)");
    expect(tool("no schema").declaration).toContain("function noSchema(input: unknown)");
  });

  it("declare a $defs entry shared by many tools once, and rename a clash", () => {
    expect(hostile.header.match(/type Address = /g)).toHaveLength(1);
    expect(tool("shared one").declaration).toContain("type Address = { city?: string; next?: Address }");
    expect(tool("shared two").declaration).toContain("b?: Address");
    expect(tool("same name other shape").declaration).toContain("c?: Address2");
    expect(hostile.header).toContain("type Address2 = string;");
  });

  it("name a reference to the whole input", () => {
    expect(tool("root recursion").declaration).toContain(
      "type RootRecursionInput = { child?: RootRecursionInput }",
    );
  });
});
