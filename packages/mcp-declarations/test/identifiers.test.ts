import { describe, expect, it } from "vitest";
import {
  IdentifierAllocator,
  isPlainIdentifier,
  RESERVED_TOOL_IDENTIFIERS,
  toCamelCase,
} from "../src/identifiers.js";

describe("toCamelCase", () => {
  const cases: Array<[string, string]> = [
    ["create_issue", "createIssue"],
    ["get-annotated-message", "getAnnotatedMessage"],
    ["Create Issue", "createIssue"],
    ["sequentialthinking", "sequentialthinking"],
    ["browser_take_screenshot", "browserTakeScreenshot"],
    ["getURL", "getURL"],
    ["URL", "url"],
    ["API_list", "apiList"],
    ["3d-render", "_3dRender"],
    ["", "unnamed"],
    ["---", "unnamed"],
    ["résumé.parse", "résuméParse"],
    ['we"ird\n*/name', "weIrdName"],
  ];
  it.each(cases)("%j -> %s", (input, expected) => {
    expect(toCamelCase(input)).toBe(expected);
    expect(isPlainIdentifier(toCamelCase(input))).toBe(true);
  });
});

describe("IdentifierAllocator", () => {
  it("keeps identifiers unique in first-come order", () => {
    const ids = new IdentifierAllocator();
    expect(["create_issue", "createIssue", "create-issue", "search"].map((n) => ids.allocate(n))).toEqual([
      "createIssue",
      "createIssue2",
      "createIssue3",
      "search",
    ]);
  });

  it("never hands out a reserved word", () => {
    const ids = new IdentifierAllocator(RESERVED_TOOL_IDENTIFIERS);
    const names = ["delete", "delete_", "resources", "prompts", "$api", "class", "string", "await", "api"];
    expect(names.map((n) => ids.allocate(n))).toEqual([
      "delete_",
      "delete_2",
      "resources_",
      "prompts_",
      "api",
      "class_",
      "string_",
      "await_",
      "api2",
    ]);
  });
});
