import { describe, expect, it } from "vitest";
import { findBindingOrigin } from "../src/runtime-error-site.js";

describe("findBindingOrigin", () => {
  it("names the call a single const was given, awaited or not", () => {
    expect(findBindingOrigin('const t = await tools.read_file({ path: "a" }); t.split("\\n")', "t")).toEqual({
      calleePath: ["tools", "read_file"],
      firstArgument: null,
      awaited: true,
    });
    expect(findBindingOrigin('const r = tools.call("core:host:x", {}); r.value', "r")).toEqual({
      calleePath: ["tools", "call"],
      firstArgument: "core:host:x",
      awaited: false,
    });
  });

  it.each([
    ["declared twice in two scopes", "const t = await f(); { const t = 1; } t.x()"],
    ["assigned again", "let t = await f(); t = 2; t.x()"],
    ["incremented", "let t = await f(); t++; t.x()"],
    ["a parameter elsewhere", "const t = await f(); [1].map((t) => t.x())"],
    ["a destructured parameter elsewhere", "const t = await f(); [{}].map(({ t }) => t.x())"],
    ["an array-destructured declaration elsewhere", "const t = await f(); { const [a, t] = [1, 2]; }"],
    ["a destructuring assignment", "let t = await f(); ({ t } = { t: 1 }); t.x()"],
    ["a catch parameter", "const t = await f(); try {} catch (t) {}"],
    ["a for-of variable", "const t = await f(); for (const t of [1]) t.x()"],
    ["not from a call", "const t = { a: 1 }; t.x()"],
    ["a computed callee", "const t = await f()[0](); t.x()"],
  ])("gives no answer when the name is %s", (_, code) => {
    expect(findBindingOrigin(code, "t")).toBeNull();
  });
});
