import { CODE_MODE_LANGUAGES } from "@codecell/contract";
import { prepareCell } from "@codecell/transpile";
import { describe, expect, it } from "vitest";
import { EXAMPLES, exampleById } from "../src/examples.js";

// Each example must also run as it stands against a real gateway: test/*.e2e.test.ts do that.
describe("EXAMPLES", () => {
  it("have unique ids, titles and a language the contract knows", () => {
    expect(new Set(EXAMPLES.map((example) => example.id)).size).toBe(EXAMPLES.length);
    expect(new Set(EXAMPLES.map((example) => example.title)).size).toBe(EXAMPLES.length);
    for (const example of EXAMPLES) expect(CODE_MODE_LANGUAGES).toContain(example.language);
  });

  it("cover what the issue lists: search, MCP after its declaration, Promise.all, a namespace, yield, TypeScript, a failure", () => {
    const code = (id: string) => exampleById(id)?.code ?? "";
    expect(code("search-then-call")).toMatch(/tools\.search\([\s\S]*tools\.call\(/);
    expect(code("mcp-declaration")).toMatch(/API\.read\("mcp\/memory\.d\.ts"\)[\s\S]*MCP\.memory\./);
    expect(code("parallel")).toContain("Promise.all(");
    expect(code("namespace")).toMatch(/Notes\.\w+\(/);
    expect(code("yield-then-wait")).toContain("yield_control(");
    expect(exampleById("typescript")?.language).toBe("typescript");
    expect(code("fails-with-code")).toContain("import(");
  });

  for (const example of EXAMPLES.filter((candidate) => candidate.id !== "fails-with-code")) {
    it(`"${example.title}" passes the gateway's own cell preparation`, async () => {
      await expect(prepareCell(example.code, example.language)).resolves.toMatchObject({
        code: expect.any(String),
      });
    });
  }

  it("the failing example fails before it runs, with module_access_denied on line 4", async () => {
    const failing = exampleById("fails-with-code")!;
    await expect(prepareCell(failing.code, failing.language)).rejects.toMatchObject({
      code: "module_access_denied",
      details: expect.objectContaining({ line: 4 }),
    });
  });
});
