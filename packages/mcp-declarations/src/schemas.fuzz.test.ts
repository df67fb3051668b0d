import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { renderMcpDeclarations } from "./render-declarations.js";
import { compileDeclarations } from "./testing/compile-declarations.js";
import type { McpServerDescription } from "./types.js";

/**
 * Property-based: any JSON Schema-like value an MCP server might send (valid, odd or malformed,
 * `$ref` to the root, to missing or remote targets) renders to declarations that type-check under
 * `tsc --strict`. Each case runs the compiler, so CI runs a few cases (FUZZ_RUNS unset: 8) and
 * `pnpm fuzz` many more.
 */

const runs = Number(process.env.FUZZ_RUNS ?? 8);
const name = fc.oneof(
  fc.string({ maxLength: 12 }),
  fc.constantFrom("class", "__proto__", "*/", "a-b", "1x", "constructor"),
);
const schema = fc.letrec((tie) => ({
  node: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    fc.record(
      {
        type: fc.constantFrom(
          "string",
          "number",
          "integer",
          "boolean",
          "null",
          "object",
          "array",
          "banana",
          7,
        ),
        description: fc.string({ maxLength: 20 }),
        enum: fc.array(fc.oneof(fc.string({ maxLength: 6 }), fc.integer(), fc.boolean(), fc.constant(null)), {
          maxLength: 3,
        }),
        properties: fc.dictionary(name, tie("node"), { maxKeys: 3 }),
        required: fc.array(name, { maxLength: 2 }),
        items: tie("node"),
        anyOf: fc.array(tie("node"), { maxLength: 2 }),
        $ref: fc.constantFrom("#/$defs/A", "#/definitions/missing", "http://x", "#"),
        additionalProperties: fc.oneof(fc.boolean(), tie("node")),
      },
      { requiredKeys: [] },
    ),
    fc.anything({ maxDepth: 2 }),
  ),
})).node;

const server = fc.record({
  name: name,
  tools: fc.array(
    fc.record(
      { name, description: fc.string({ maxLength: 20 }), inputSchema: schema, outputSchema: schema },
      { requiredKeys: ["name"] },
    ),
    { maxLength: 3 },
  ),
});

describe("declaration generator fuzz", () => {
  it("renders declarations that always type-check", () => {
    fc.assert(
      fc.property(fc.array(server, { minLength: 1, maxLength: 2 }), (servers) => {
        const declarations = renderMcpDeclarations(servers as unknown as McpServerDescription[]);
        expect(compileDeclarations(declarations.files)).toEqual([]);
      }),
      // Each case runs the compiler: report the first counterexample rather than shrink for minutes.
      { numRuns: runs, endOnFailure: true },
    );
  }, 600_000);
});
