import { afterAll, describe, expect, it } from "vitest";
import { createSandboxPool } from "../src/index.js";
import { runToEnd, surface } from "./helpers.js";

/**
 * Hostile cells that try to reach the prelude's own functions (control, settle, request, makeError,
 * toJsonText, the host function) from guest code, or to make a run fail with a code the host never
 * gave it. Every path runs guest code inside prelude frames on purpose: getters, toJSON, proxies,
 * thenables, Symbol.toPrimitive, species constructors. Each cell collects every function it can get
 * hold of that is not one of its own, and returns the names: the answer must always be empty.
 */

describe("sandbox pool", () => {
  const pool = createSandboxPool({ size: 2 });
  afterAll(() => pool.close());

  /** Installed before each probe: records any function a probe finds that the cell did not write. */
  const harvest = `
  const found = [];
  const mine = new Set();
  const known = new Set([tools.call, tools.search, tools.describe, text, json, yield_control, API.read, API.list,
    Function, Object, Array, Error, Promise, Proxy, Reflect, Symbol, JSON.parse, JSON.stringify, Array.prototype.join]);
  function keep(value, where) {
    if (typeof value === "function" && !mine.has(value) && !known.has(value)) found.push(where + ":" + (value.name || "anonymous"));
  }
  function own(f) { mine.add(f); return f; }
  function report() { text(JSON.stringify(found)); }
  function trap(label) {
    return own(function () {
      try { keep(arguments.callee.caller, label + ".callee.caller"); } catch {}
      try { keep(trap.caller, label + ".caller"); } catch {}
      try { keep(own.caller, label + ".own.caller"); } catch {}
      const error = new Error("probe");
      try { Error.captureStackTrace?.(error); } catch {}
      void error.stack;
      return undefined;
    });
  }
  try { Error.prepareStackTrace = own((error, sites) => {
    for (const site of sites) {
      try { keep(site.getFunction?.(), "CallSite.getFunction"); } catch {}
      try { keep(site.getThis?.(), "CallSite.getThis"); } catch {}
    }
    return "trace";
  }); } catch {}
`;

  const probes: Array<{ name: string; code: string }> = [
    {
      name: "a getter in a tool input (JSON.stringify inside request)",
      code: "try { await tools.call('x', { get a() { return trap('getter')(); } }); } catch {}",
    },
    {
      name: "toJSON in a tool input",
      code: "try { await tools.call('x', { toJSON: own(function () { trap('toJSON')(); return 1; }) }); } catch {}",
    },
    {
      name: "a Proxy as a tool input",
      code: `const p = new Proxy({}, { ownKeys: own(() => { trap('ownKeys')(); return []; }), get: own((t, k) => { trap('get')(); return undefined; }) });
           try { await tools.call('x', p); } catch {}`,
    },
    {
      name: "a Proxy as the tool id",
      code: "const p = new Proxy({}, { get: own(() => trap('id')()) }); try { await tools.call(p, {}); } catch {}",
    },
    {
      name: "Symbol.toPrimitive in yield_control's reason",
      code: "const y = yield_control({ [Symbol.toPrimitive]: own(() => { trap('toPrimitive')(); return 'r'; }) }); void y;",
    },
    {
      name: "a thenable on Object.prototype while a result is settled",
      code: `Object.defineProperty(Object.prototype, 'then', { configurable: true, get: own(function () { trap('then')(); return undefined; }) });
           try { await tools.call('x', {}); } finally { delete Object.prototype.then; }`,
    },
    {
      name: "a species constructor on the cell's promise",
      code: `class Evil extends Promise { constructor(executor) { trap('species')(); super(executor); } }
           Object.defineProperty(Promise, Symbol.species, { configurable: true, get: own(() => Evil) });
           Object.defineProperty(Promise.prototype, 'constructor', { configurable: true, get: own(() => { trap('constructor')(); return Evil; }) });`,
    },
    {
      name: "getters on a thrown error (describeError)",
      code: `const error = new Error('boom');
           Object.defineProperty(error, 'name', { get: own(() => { trap('name')(); return 'E'; }) });
           Object.defineProperty(error, 'stack', { get: own(() => { trap('stack')(); report(); return ''; }) });
           throw error;`,
    },
    {
      name: "a Map subclass and Set in json()",
      code: `const m = new Map([[own(() => 1), 1]]); Object.defineProperty(m, 'forEach', { value: own(() => trap('forEach')()) });
           json([m, new Set([1])]);`,
    },
    {
      name: "an array index setter on Array.prototype while results are built",
      code: `Object.defineProperty(Array.prototype, '0', { configurable: true, set: own(function (v) { trap('setter')(); Object.defineProperty(this, '0', { value: v, writable: true, enumerable: true, configurable: true }); }) });
           try { await API.list(); json(new Map([[1, 2]])); } finally { delete Array.prototype[0]; }`,
    },
    {
      name: "String.prototype patched for API paths",
      code: `String.prototype.split = own(function () { trap('split')(); return ['mcp', 'index.d.ts']; });
           String.prototype.slice = own(function () { trap('slice')(); return 'x'; });
           try { await API.read('mcp/index.d.ts/'); } catch {}`,
    },
    {
      name: "Function.prototype.call, apply and bind patched",
      code: `for (const name of ['call', 'apply', 'bind']) Function.prototype[name] = own(function () { trap(name)(); });
           try { await tools.call('x', { a: 1 }); } catch {}`,
    },
    {
      name: "a getter on the returned value",
      code: "return { get value() { trap('result')(); report(); return 1; } };",
    },
  ];

  describe("prelude internals are out of guest reach", () => {
    it.each(probes)("finds no prelude function through $name", async ({ code }) => {
      // A probe reports what it found through text(): at its end, or from a getter the bridge runs
      // after the cell has returned or thrown.
      const cell = `${harvest}\n${code}\nreport();`;
      const { events } = await runToEnd(pool, cell, {
        surface,
        answer: (request) =>
          request.kind === "yield" ? { ok: true, value: null } : { ok: true, value: { fine: true } },
      });
      const reports = events
        .flatMap((event) => event.output)
        .map((item) => (item.type === "text" ? (JSON.parse(item.text) as string[]) : []));
      expect(reports.length).toBeGreaterThan(0);
      expect(reports.flat()).toEqual([]);
    });

    it("keeps Error.prepareStackTrace fixed at undefined", async () => {
      const { event } = await runToEnd(
        pool,
        `"use strict";
       const out = [];
       try { Error.prepareStackTrace = () => "x"; out.push("assigned"); } catch (e) { out.push(e.name); }
       try { Object.defineProperty(Error, "prepareStackTrace", { value: () => "x" }); out.push("redefined"); } catch (e) { out.push(e.name); }
       return [out, typeof new Error("e").stack, Error.prepareStackTrace];`,
      );
      expect(event).toMatchObject({ type: "completed", value: [["TypeError", "TypeError"], "string", null] });
    });
  });

  describe("only the host decides a result's code", () => {
    const forged = [
      { name: "an Error with a code", code: "throw Object.assign(new Error('x'), { code: 'timeout' })" },
      {
        name: "a plain object",
        code: "throw { name: 'CodeModeError', message: 'x', code: 'memory_limit_exceeded' }",
      },
      {
        name: "a copy of a bridge error's shape",
        code: "const e = new Error('x'); Object.defineProperty(e, 'code', { value: 'output_limit_exceeded' }); throw e",
      },
      {
        name: "a subclass of a caught bridge error's prototype",
        code: "try { await tools.call('fail', {}); } catch (e) { const f = Object.create(Object.getPrototypeOf(e)); f.message = 'x'; f.code = 'aborted'; throw f; }",
      },
      {
        name: "a Proxy around a bridge error with another code",
        code: "try { await tools.call('fail', {}); } catch (e) { throw new Proxy(e, { get: (t, k) => k === 'code' ? 'timeout' : t[k] }); }",
      },
      {
        name: "a rejected promise with a code",
        code: "await Promise.reject({ code: 'snapshot_limit_exceeded', message: 'x' })",
      },
    ];
    it.each(forged)("gives no code to $name", async ({ code }) => {
      const { event } = await runToEnd(pool, code, {
        surface,
        answer: () => ({
          ok: false,
          error: { name: "E", message: "nested went wrong", code: "nested_tool_failed" },
        }),
      });
      expect(event.type).toBe("failed");
      expect((event as { code?: string }).code).toBeUndefined();
      expect((event as { error?: { code?: string } }).error?.code).toBeUndefined();
    });

    // The attack the stack hook allowed: collect the prelude's functions, then settle a pending call
    // with a forged result and fail the run with a limit code the host never decided.
    const grab = `
    const grabbed = {};
    try { Error.prepareStackTrace = (error, sites) => {
      for (const site of sites) { const f = site.getFunction?.(); if (typeof f === "function" && f.name) grabbed[f.name] = f; }
      return "";
    }; } catch {}
    try { await tools.call("probe", { get a() { void new Error("x").stack; return 1; } }); } catch {}
    try { Error.prepareStackTrace = undefined; } catch {}
  `;
    it("lets no grabbed prelude function forge a limit code", async () => {
      const { event } = await runToEnd(
        pool,
        `${grab}
       if (grabbed.makeError) throw grabbed.makeError("CodeModeError", "forged", "memory_limit_exceeded");
       const pending = tools.call("real", {});
       const forged = '{"name":"CodeModeError","message":"forged","code":"memory_limit_exceeded"}';
       if (grabbed.control) grabbed.control("settle", "r2", "0", forged);
       await pending;
       throw new Error("nothing grabbed");`,
        { surface, answer: () => ({ ok: true, value: 1 }) },
      );
      expect(event.type).toBe("failed");
      expect((event as { code?: string }).code).toBeUndefined();
    });

    it("lets no grabbed control settle the cell's own pending call", async () => {
      const { event } = await runToEnd(
        pool,
        `${grab}
       const pending = tools.call("real", {});
       if (grabbed.control) grabbed.control("settle", "r2", "1", '{"forged":true}');
       if (grabbed.settle) grabbed.settle("r2", "1", '{"forged":true}');
       return await pending;`,
        { surface, answer: () => ({ ok: true, value: { fromHost: true } }) },
      );
      expect(event).toMatchObject({ type: "completed", value: { fromHost: true } });
    });

    it("keeps the code of a bridge error the guest was given and rethrows", async () => {
      const { event } = await runToEnd(pool, "await tools.call('fail', {})", {
        surface,
        answer: () => ({
          ok: false,
          error: { name: "E", message: "nested went wrong", code: "nested_tool_failed" },
        }),
      });
      expect(event).toMatchObject({ type: "failed", code: "nested_tool_failed" });
    });

    it("remembers the codes it handed out across suspend and restore", async () => {
      const first = await runToEnd(
        pool,
        "let kept; try { await tools.call('fail', {}); } catch (e) { kept = e; } await yield_control('later'); throw kept;",
        {
          surface,
          answer: (request) =>
            request.kind === "call"
              ? { ok: false, error: { name: "E", message: "nested went wrong", code: "nested_tool_failed" } }
              : undefined,
        },
      );
      expect(first.event.type).toBe("idle");
      const suspended = await first.run.suspend();
      const restored = pool.restore({
        snapshot: suspended.snapshot,
        limits: {
          memoryLimitBytes: 32 * 1024 * 1024,
          maxOutputBytes: 65536,
          maxPendingToolCalls: 16,
          maxSnapshotBytes: 10 * 1024 * 1024,
        },
        deadlineAt: Date.now() + 5_000,
        onRequest: () => {},
      });
      const idle = await restored.next();
      expect(idle.type).toBe("idle");
      restored.settle(suspended.pending[0]!.requestId, { ok: true, value: null });
      expect(await restored.next()).toMatchObject({ type: "failed", code: "nested_tool_failed" });
    });
  });
});
