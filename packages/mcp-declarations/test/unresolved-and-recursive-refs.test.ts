import { describe, expect, it } from "vitest";
import { renderApiHeader } from "../src/api-header.js";
import { renderMcpDeclarations } from "../src/render-declarations.js";
import type { McpToolDefinition } from "../src/types.js";
import { compileDeclarations } from "./support/compile-declarations.js";

// A fuzz finding: a tool whose schema refers to itself with `"$ref": "#"` (or whose `$defs` refer to each
// other) with no object or array in between rendered `type TInput = TInput;`, which TypeScript rejects.
// Every schema must render declarations that type-check.

const cases: Record<string, Pick<McpToolDefinition, "inputSchema" | "outputSchema">> = {
  "input is only a reference to itself": { inputSchema: { $ref: "#" } },
  "output is only a reference to itself": { inputSchema: { type: "object" }, outputSchema: { $ref: "#" } },
  "a union with itself": { inputSchema: { anyOf: [{ type: "string" }, { $ref: "#" }] } },
  "allOf itself": { inputSchema: { allOf: [{ $ref: "#" }] } },
  "output allOf itself plus properties": {
    inputSchema: { type: "object" },
    outputSchema: { allOf: [{ $ref: "#" }], type: "object", properties: { x: { type: "string" } } },
  },
  "output nullable itself": {
    inputSchema: { type: "object" },
    outputSchema: { anyOf: [{ $ref: "#" }, { type: "null" }] },
  },
  "$defs that refer to each other": {
    inputSchema: {
      type: "object",
      properties: { a: { $ref: "#/$defs/A" } },
      $defs: { A: { $ref: "#/$defs/B" }, B: { anyOf: [{ $ref: "#/$defs/A" }, { type: "number" }] } },
    },
  },
  "a definition that is itself": {
    inputSchema: {
      type: "object",
      properties: { a: { $ref: "#/$defs/A" } },
      $defs: { A: { $ref: "#/$defs/A" } },
    },
  },
  "a property pointing at itself": {
    inputSchema: { type: "object", properties: { a: { $ref: "#/properties/a" } } },
  },
  "two properties pointing at each other": {
    inputSchema: {
      type: "object",
      properties: { a: { $ref: "#/properties/b" }, b: { $ref: "#/properties/a" } },
    },
  },
  "a tuple whose rest refers to itself": {
    inputSchema: { prefixItems: [{ type: "string" }], items: { type: "array", items: { $ref: "#" } } },
  },
  "an array index in the pointer": {
    inputSchema: { anyOf: [{ type: "object", properties: { a: { $ref: "#/anyOf/0" } } }] },
  },
  "a record of itself": { inputSchema: { type: "object", additionalProperties: { $ref: "#" } } },
  "a record of a definition of records": {
    inputSchema: {
      type: "object",
      properties: { tree: { $ref: "#/$defs/Tree" } },
      $defs: { Tree: { type: "object", additionalProperties: { $ref: "#/$defs/Tree" } } },
    },
  },
};

function render(tools: McpToolDefinition[]) {
  return renderMcpDeclarations([{ name: "srv", tools, resources: false, prompts: false }]);
}

describe("schemas with references the generator cannot turn into a plain type", () => {
  it("render a server file and $api(tool) texts that type-check, each alone", () => {
    const names = Object.keys(cases);
    const declarations = render(names.map((name) => ({ name, ...cases[name]! })));
    const server = declarations.servers[0]!;
    const toolTexts = names.map((name, index) => ({
      path: `tool${index}.d.ts`,
      content: `${renderApiHeader(server, name)}\nexport {};\n`,
    }));
    expect(compileDeclarations([...declarations.files, ...toolTexts])).toEqual([]);
  });

  it("declares a self-only alias unknown and says why", () => {
    const header = render([{ name: "t", inputSchema: { $ref: "#" } }]).servers[0]!.header;
    expect(header).toContain("function t(input: TInput): Promise<McpToolResult>;");
    expect(header).toContain(
      "  /** Defined only through itself (a $ref cycle with no object or array in between), so its shape is unknown. */\n  type TInput = unknown;",
    );
  });

  it("keeps recursion through objects and arrays as a recursive type", () => {
    const header = render([
      {
        name: "tree",
        inputSchema: { type: "object", properties: { children: { type: "array", items: { $ref: "#" } } } },
        outputSchema: { anyOf: [{ type: "string" }, { type: "array", items: { $ref: "#" } }] },
      },
    ]).servers[0]!.header;
    expect(header).toContain("type TreeInput = { children?: TreeInput[] };");
    expect(header).toContain("type TreeOutput = string | TreeOutput[];");
  });

  it("types a reference it cannot resolve as unknown, with a comment naming it", () => {
    const declarations = render([
      {
        name: "remote",
        inputSchema: {
          type: "object",
          properties: { a: { $ref: "https://example.com/schema.json" }, b: { $ref: "#/$defs/Missing" } },
        },
      },
    ]);
    const header = declarations.servers[0]!.header;
    expect(header).toContain(
      "function remote(input?: { a?: unknown; b?: unknown }): Promise<McpToolResult>;",
    );
    expect(header.replace(/\n\s+\* /g, " ")).toContain(
      '$ref "https://example.com/schema.json", "#/$defs/Missing" cannot be resolved from this schema, so it is typed unknown.',
    );
    expect(compileDeclarations(declarations.files)).toEqual([]);
  });
});

/** A small deterministic generator (mulberry32): the same seed gives the same schemas on every run. */
function random(seed: number) {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function randomSchema(next: () => number, depth: number, defs: string[]): unknown {
  const pick = <T>(items: T[]): T => items[Math.floor(next() * items.length)]!;
  const pointers = [
    "#",
    "#/properties/a",
    "#/properties/b",
    "#/items",
    "#/anyOf/0",
    "#/nope",
    "other.json#/x",
    ...defs.map((d) => `#/$defs/${d}`),
  ];
  if (depth > 3) return pick([{ type: "string" }, { $ref: pick(pointers) }, true, {}]);
  const child = () => randomSchema(next, depth + 1, defs);
  return pick<() => unknown>([
    () => ({ $ref: pick(pointers) }),
    () => ({ type: "object", properties: { a: child(), b: child() }, required: next() < 0.5 ? ["a"] : [] }),
    () => ({ type: "array", items: child() }),
    () => ({ anyOf: [child(), child()] }),
    () => ({ allOf: [child(), child()] }),
    () => ({ type: "object", additionalProperties: child() }),
    () => ({ type: ["string", "null"] }),
    () => ({ prefixItems: [child()], items: child() }),
    () => ({ ...(child() as object), nullable: true }),
  ])();
}

describe("random schemas full of references", () => {
  // FUZZ_SEED=<n> runs another seed by hand; the suite keeps one fixed seed.
  it("always render a server file that type-checks (400 tools, fixed seed)", () => {
    const next = random(Number(process.env.FUZZ_SEED ?? 20261130));
    const servers = Array.from({ length: 4 }, (_, server) => ({
      name: `fuzz${server}`,
      resources: false,
      prompts: false,
      tools: Array.from({ length: 100 }, (_, index) => {
        const defs = ["A", "B", "Node"];
        const withDefs = (schema: unknown) => ({
          ...(typeof schema === "object" && schema !== null ? schema : {}),
          $defs: Object.fromEntries(defs.map((name) => [name, randomSchema(next, 2, defs)])),
        });
        return {
          name: `tool_${index}`,
          inputSchema: withDefs(randomSchema(next, 0, defs)),
          ...(next() < 0.5 ? { outputSchema: withDefs(randomSchema(next, 0, defs)) } : {}),
        };
      }),
    }));
    const declarations = renderMcpDeclarations(servers);
    const errors = compileDeclarations(declarations.files);
    if (process.env.DUMP_FUZZ) {
      for (const error of errors.slice(0, 6)) {
        const [path, line] = error.split(":");
        const file = declarations.files.find((candidate) => candidate.path === path)!;
        console.log(
          error,
          "\n",
          file.content
            .split("\n")
            .slice(Number(line) - 3, Number(line) + 1)
            .join("\n"),
        );
      }
    }
    expect(errors).toEqual([]);
  });
});
