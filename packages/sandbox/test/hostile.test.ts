import { afterAll, describe, expect, it } from "vitest";
import { createSandboxPool } from "../src/index.js";
import { type Answer, runToEnd, surface } from "./helpers.js";

describe("sandbox pool", () => {
  const pool = createSandboxPool({ size: 2 });
  afterAll(() => pool.close());

  async function completedValue(code: string, answer?: Answer) {
    const { event } = await runToEnd(pool, code, { surface, answer });
    if (event.type !== "completed") throw new Error(`expected completed, got ${JSON.stringify(event)}`);
    return event.value;
  }

  describe("reaching the host", () => {
    it("finds no host objects on the global object", async () => {
      const names = (await completedValue("return Object.getOwnPropertyNames(globalThis)")) as string[];
      for (const forbidden of [
        "process",
        "require",
        "module",
        "WebAssembly",
        "fetch",
        "setTimeout",
        "Buffer",
        "codecellHost",
        "global",
      ]) {
        expect(names, forbidden).not.toContain(forbidden);
      }
      expect(names).toEqual(
        expect.arrayContaining([
          "ALL_TOOLS",
          "tools",
          "MCP",
          "API",
          "namespaces",
          "text",
          "json",
          "yield_control",
          "console",
          "Issues",
        ]),
      );
    });

    const escapes = [
      {
        name: "Function('return this')()",
        code: "const g = Function('return this')(); return [g === globalThis, typeof g.process, typeof g.require]",
      },
      {
        name: "constructor chains from bridge functions",
        code: "const F = tools.call.constructor; const g = F('return this')(); return [F === Function, g === globalThis, typeof g.process]",
      },
      {
        name: "constructor chains from results",
        code: "const r = await tools.call('x', {}); const F = r.constructor.constructor; return [F === Function, typeof F('return typeof process')()]",
      },
      {
        name: "Error.prepareStackTrace",
        code: "let seen = false; Error.prepareStackTrace = () => { seen = true; return 'x'; }; const s = new Error('e').stack; return [seen, typeof s]",
      },
      {
        name: "caller and arguments of bridge functions",
        code: "const out = []; for (const f of [tools.call, text, yield_control, API.read]) { try { out.push(typeof f.caller); } catch (e) { out.push(e.name); } } return out",
      },
      {
        name: "the bridge error prototype",
        code: "try { await tools.call('fail', {}); } catch (e) { return [Object.getPrototypeOf(e) === Error.prototype, e.constructor.constructor('return typeof process')()] }",
      },
    ];
    it.each(escapes)("gets nothing through $name", async ({ code }) => {
      const result = await completedValue(code, (request) =>
        request.kind === "call" && request.target === "fail"
          ? { ok: false, error: { name: "E", message: "m" } }
          : { ok: true, value: { a: 1 } },
      );
      const flat = JSON.stringify(result);
      expect(flat).not.toMatch(/"object"|"function"/);
    });

    it("refuses module loading built at runtime with eval and Function", async () => {
      const code = `
      const out = [];
      for (const attempt of [() => eval("import('fs')"), () => Function("return import('fs')")(), () => eval("require('fs')")]) {
        try { await attempt(); out.push("loaded"); } catch (e) { out.push(e.name); }
      }
      try { eval("import fs from 'fs'"); out.push("loaded"); } catch (e) { out.push(e.name); }
      try { eval("import.meta"); out.push("loaded"); } catch (e) { out.push(e.name); }
      return out;
    `;
      const result = (await completedValue(code)) as string[];
      expect(result).not.toContain("loaded");
      expect(result).toHaveLength(5);
    });
  });

  describe("tampering with the guest API", () => {
    it("cannot overwrite, delete or redefine the globals", async () => {
      const code = `
      "use strict";
      const out = [];
      for (const name of ["tools", "text", "json", "yield_control", "MCP", "API", "namespaces", "ALL_TOOLS", "Issues"]) {
        try { globalThis[name] = 1; out.push("assigned " + name); } catch { }
        try { delete globalThis[name]; } catch { }
        try { Object.defineProperty(globalThis, name, { value: 2 }); out.push("redefined " + name); } catch { }
      }
      try { tools.call = () => "hijacked"; out.push("tools.call assigned"); } catch { }
      try { tools.extra = 1; out.push("tools extended"); } catch { }
      try { ALL_TOOLS[0].name = "x"; out.push("ALL_TOOLS changed"); } catch { }
      try { Issues.list = () => 1; out.push("namespace changed"); } catch { }
      try { MCP.github.createIssue = () => 1; out.push("mcp changed"); } catch { }
      return { out, types: [typeof tools.call, typeof text, ALL_TOOLS[0].name] };
    `;
      expect(await completedValue(code)).toEqual({ out: [], types: ["function", "function", "read_file"] });
    });

    it("keeps the bridge working after the guest patches JSON, Promise, Map and Object.prototype", async () => {
      const code = `
      JSON.stringify = () => '"hacked"';
      JSON.parse = () => "hacked";
      Promise.prototype.then = function () { throw new Error("patched then"); };
      Map.prototype.get = () => undefined;
      Object.defineProperty(Object.prototype, "resolve", { set() { throw new Error("setter hit"); }, get() { return undefined; } });
      text("still here");
      const result = await tools.call("x", { a: 1 });
      return { result, seen: typeof result };
    `;
      const { event, events } = await runToEnd(pool, code, {
        surface,
        answer: () => ({ ok: true, value: { fine: true } }),
      });
      expect(event).toMatchObject({ type: "completed", value: { result: { fine: true }, seen: "object" } });
      expect(events.flatMap((item) => item.output)).toEqual([{ type: "text", text: "still here" }]);
    });

    it("keeps __proto__ keys in returned values as plain data", async () => {
      const value = await completedValue(
        `return JSON.parse('{"__proto__": {"polluted": true}, "constructor": {"prototype": {"bad": 1}}, "ok": 1}')`,
      );
      expect(Object.hasOwn(value as object, "__proto__")).toBe(true);
      expect(({} as Record<string, unknown>).polluted).toBeUndefined();
      expect(({} as Record<string, unknown>).bad).toBeUndefined();
      expect(Object.getPrototypeOf(value)).toBe(Object.prototype);
    });

    it("refuses binary values and cycles leaving the guest with clear guest errors", async () => {
      const code = `
      const out = [];
      for (const v of [new Uint8Array(2), new ArrayBuffer(1), new DataView(new ArrayBuffer(1))]) {
        try { json(v); out.push("sent"); } catch (e) { out.push(/binary/.test(e.message)); }
      }
      const a = {}; a.self = a;
      try { await tools.call("x", a); out.push("sent"); } catch (e) { out.push(/cycle/.test(e.message)); }
      return out;
    `;
      expect(await completedValue(code)).toEqual([true, true, true, true]);
    });

    it("cannot settle its own calls or see pending ones", async () => {
      const code = `
      const p = tools.call("x", {});
      const keys = Object.getOwnPropertyNames(p).concat(Object.getOwnPropertyNames(Object.getPrototypeOf(p)));
      return { keys: keys.sort(), result: await p };
    `;
      const value = (await completedValue(code, () => ({ ok: true, value: "host" }))) as {
        keys: string[];
        result: string;
      };
      expect(value.result).toBe("host");
      expect(value.keys).toEqual(["catch", "constructor", "finally", "then"]);
    });
  });
});
