import { describe, expect, it } from "vitest";
import { NamedTypes } from "../src/named-types.js";
import { SchemaPrinter } from "../src/schema-printer.js";

const limits = { maxDepth: 8, maxNodes: 600, propertyDocs: true };

function print(schema: unknown): { type: string; aliases: string[]; degraded: boolean } {
  const named = new NamedTypes();
  const printer = new SchemaPrinter(schema, named, limits, "RootInput");
  const type = printer.type(schema, 0);
  return { type, aliases: named.all(), degraded: printer.degraded };
}

describe("JSON Schema to TypeScript", () => {
  const cases: Array<[string, unknown, string]> = [
    ["string", { type: "string" }, "string"],
    ["integer as number", { type: "integer" }, "number"],
    ["boolean", { type: "boolean" }, "boolean"],
    ["null", { type: "null" }, "null"],
    ["no constraints", {}, "unknown"],
    ["true schema", true, "unknown"],
    ["false schema", false, "never"],
    ["string enum", { type: "string", enum: ["a", "b"] }, '"a" | "b"'],
    ["mixed enum", { enum: ["a", 1, true, null] }, '"a" | 1 | true | null'],
    ["const", { const: "fixed" }, '"fixed"'],
    ["type list with null", { type: ["string", "null"] }, "string | null"],
    ["OpenAPI nullable", { type: "number", nullable: true }, "number | null"],
    ["array of strings", { type: "array", items: { type: "string" } }, "string[]"],
    [
      "array of a union",
      { type: "array", items: { anyOf: [{ type: "string" }, { type: "number" }] } },
      "(string | number)[]",
    ],
    ["array without items", { type: "array" }, "unknown[]"],
    [
      "2020-12 tuple",
      { type: "array", prefixItems: [{ type: "string" }, { type: "number" }], items: false },
      "[string, number]",
    ],
    [
      "draft-07 tuple with rest",
      { type: "array", items: [{ type: "string" }], additionalItems: { type: "boolean" } },
      "[string, ...boolean[]]",
    ],
    ["oneOf", { oneOf: [{ type: "string" }, { type: "integer" }] }, "string | number"],
    ["anyOf with unknown collapses", { anyOf: [{ type: "string" }, {}] }, "unknown"],
    [
      "allOf intersection",
      {
        allOf: [
          { type: "object", properties: { a: { type: "string" } }, required: ["a"] },
          { type: "object", properties: { b: { type: "number" } } },
        ],
      },
      "{ a: string } & { b?: number }",
    ],
    ["record", { type: "object", additionalProperties: { type: "number" } }, "Record<string, number>"],
    ["bare object", { type: "object" }, "Record<string, unknown>"],
    ["empty closed object", { type: "object", properties: {}, additionalProperties: false }, "{}"],
    ["no arguments", { type: "object", properties: {} }, "{}"],
    [
      "pattern properties",
      { type: "object", patternProperties: { "^x-": { type: "string" } } },
      "Record<string, string>",
    ],
    [
      "object with extra keys",
      { type: "object", properties: { a: { type: "string" } }, additionalProperties: true },
      "{ a?: string; [key: string]: unknown }",
    ],
    ["untyped properties", { properties: { n: { type: "integer" } }, required: ["n"] }, "{ n: number }"],
    [
      "quoted keys",
      { type: "object", properties: { "a-b": { type: "string" }, 'q"': {} } },
      '{ "a-b"?: string; "q\\""?: unknown }',
    ],
    [
      "inline ref",
      { type: "object", properties: { a: { $ref: "#/properties/b" }, b: { type: "string" } } },
      "{ a?: string; b?: string }",
    ],
    ["remote ref", { $ref: "https://example.com/schema.json" }, "unknown"],
    ["missing ref", { $ref: "#/$defs/Nope" }, "unknown"],
    ["unknown type name", { type: "banana" }, "unknown"],
    ["object enum member", { enum: [{ a: 1 }] }, "unknown"],
  ];

  it.each(cases)("%s", (_label, schema, expected) => {
    expect(print(schema).type).toBe(expected);
  });

  it("puts descriptions and defaults into JSDoc, with */ escaped", () => {
    const { type } = print({
      type: "object",
      properties: {
        size: { type: "integer", description: "How big */ it is\nin bytes", default: 10 },
      },
    });
    expect(type).toBe(
      "{\n  /**\n   * How big *\\/ it is\n   * in bytes\n   * Default: 10\n   */\n  size?: number;\n}",
    );
  });

  it("declares $defs once as named types, recursion included", () => {
    const schema = {
      type: "object",
      properties: { root: { $ref: "#/$defs/TreeNode" } },
      $defs: {
        TreeNode: {
          type: "object",
          properties: {
            label: { type: "string" },
            children: { type: "array", items: { $ref: "#/$defs/TreeNode" } },
          },
          required: ["label"],
        },
      },
    };
    const result = print(schema);
    expect(result.type).toBe("{ root?: TreeNode }");
    expect(result.aliases).toEqual(["  type TreeNode = { label: string; children?: TreeNode[] };\n"]);
  });

  it("names a reference to the whole document", () => {
    const result = print({ type: "object", properties: { next: { $ref: "#" } } });
    expect(result.type).toBe("{ next?: RootInput }");
    expect(result.aliases).toEqual(["  type RootInput = { next?: RootInput };\n"]);
  });

  it("names a recursive reference that is not under $defs", () => {
    const result = print({
      type: "object",
      properties: { node: { type: "object", properties: { child: { $ref: "#/properties/node" } } } },
    });
    // The first expansion is inline; the reference back into it is where the name is needed.
    expect(result.type).toBe("{ node?: { child?: { child?: Node } } }");
    expect(result.aliases).toEqual(["  type Node = { child?: Node };\n"]);
  });

  it("degrades past the depth budget instead of failing", () => {
    let schema: Record<string, unknown> = { type: "string" };
    for (let level = 0; level < 40; level++) schema = { type: "object", properties: { inner: schema } };
    const result = print(schema);
    expect(result.degraded).toBe(true);
    expect(result.type).toContain("Record<string, unknown>");
    expect(result.type.split("\n").length).toBeLessThan(40);
  });

  it("degrades past the node budget instead of failing", () => {
    const properties = Object.fromEntries(
      Array.from({ length: 2000 }, (_, i) => [`p${i}`, { type: "string" }]),
    );
    const result = print({ type: "object", properties });
    expect(result.degraded).toBe(true);
    expect(result.type).toContain("p500?: string");
    expect(result.type).toContain("p1999?: unknown");
  });
});
