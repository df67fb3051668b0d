import type { CodeModeError } from "@codecell/contract";
import { checkModuleAccess } from "@codecell/transpile";
import { afterAll, describe, expect, it } from "vitest";
import { createSandboxPool } from "../src/index.js";
import { answerApiRead, apiFileTexts, limits, runToEnd, surface } from "./helpers.js";

describe("sandbox pool", () => {
  const pool = createSandboxPool({ size: 2 });
  afterAll(() => pool.close());

  describe("evaluation", () => {
    it("returns the value of a cell", async () => {
      const { event } = await runToEnd(pool, "return 1 + 1");
      expect(event).toEqual({ type: "completed", value: 2, output: [] });
    });

    it("supports top-level await and text/json output in order", async () => {
      const { event } = await runToEnd(
        pool,
        `text("a"); await null; json({ b: 1n, m: new Map([["k", 1]]) }); text({ x: 1 }); return undefined;`,
      );
      expect(event).toEqual({
        type: "completed",
        value: null,
        output: [
          { type: "text", text: "a" },
          { type: "json", value: { b: "1", m: [["k", 1]] } },
          { type: "text", text: '{"x":1}' },
        ],
      });
    });

    it("carries output text and the cell's value exactly: non-ASCII, lone surrogates, NUL, U+FFFD, long text", async () => {
      // The worker reads the prelude's `output` and `done` strings in the VM's memory; text UTF-8 cannot
      // carry (a lone surrogate) must still arrive as the guest wrote it.
      const samples = ["plain", "é and 😀", "\ud800 alone", "tail \udfff", "nul \u0000 inside", "\uFFFD"];
      samples.push("x".repeat(5000), `${"z".repeat(1500)}\ud800`);
      const { event } = await runToEnd(
        pool,
        `const samples = ${JSON.stringify(samples)}; for (const s of samples) text(s); return samples;`,
      );
      expect(event).toEqual({
        type: "completed",
        value: samples,
        output: samples.map((text) => ({ type: "text", text })),
      });
    });

    it("runs TypeScript cells", async () => {
      const { event } = await runToEnd(
        pool,
        "const n: number = 20;\ninterface X { a: string }\nreturn n + 1;",
        { language: "typescript" },
      );
      expect(event).toMatchObject({ type: "completed", value: 21 });
    });

    it("keeps the user's line numbers in errors", async () => {
      const { event } = await runToEnd(pool, "const a = 1;\n\n\n\n\n\nnull.boom;\n");
      expect(event.type).toBe("failed");
      if (event.type !== "failed") return;
      expect(event.code).toBeUndefined();
      expect(event.message).toMatch(/TypeError/);
      expect(event.message).toMatch(/line 7/);
    });

    // A promise would cross the bridge as `{}` and a function as null: each is a call the cell forgot to
    // await or make, so the run fails and says so instead of completing with a value nobody meant.
    it.each([
      [
        "a promise in the returned value",
        "return { r: Promise.resolve(1), n: 2 }",
        'the returned value holds a promise (at "r")',
      ],
      [
        "a promise in an array",
        "return [1, Promise.resolve(2)]",
        'the returned value holds a promise (at "1")',
      ],
      ["a function as the returned value", "return () => 1", "the returned value is a function"],
      [
        "a promise in json()",
        "json({ p: Promise.resolve(1) }); return 1",
        'the json() value holds a promise (at "p")',
      ],
    ])("fails on %s", async (_name, code, message) => {
      const { event } = await runToEnd(pool, code);
      expect(event).toMatchObject({
        type: "failed",
        message: expect.stringContaining(`TypeError: ${message}`),
      });
      expect((event as { code?: string }).code).toBeUndefined();
    });

    it("refuses a tool input that holds a promise before it reaches the host", async () => {
      const { event, requests } = await runToEnd(
        pool,
        "try { await tools.call('core:host:read_file', { path: Promise.resolve('a') }); } catch (e) { return e.message }",
        { surface },
      );
      expect(event).toMatchObject({
        type: "completed",
        value: expect.stringContaining('the tool input holds a promise (at "path")'),
      });
      expect(requests).toEqual([]);
    });

    it("shows a promise in text output and goes on", async () => {
      const { event } = await runToEnd(
        pool,
        "const p = Promise.resolve(1); console.log(p); text({ p, n: 2 }); return 3",
      );
      expect(event).toEqual({
        type: "completed",
        value: 3,
        output: [
          { type: "text", text: "[Promise: await it for its value]", level: "log" },
          { type: "text", text: '{"p":"[Promise: await it for its value]","n":2}' },
        ],
      });
    });

    it("takes the search shapes of other APIs: search({ query, limit }) and search(query, limit)", async () => {
      const { requests } = await runToEnd(
        pool,
        'await tools.search({ query: "read", limit: 2 }); await tools.search("write", 3); await API.search({ query: "issue" }); return 1',
        { surface, answer: () => ({ ok: true, value: [] }) },
      );
      expect(requests.map(({ requestId: _, ...rest }) => rest)).toEqual([
        { kind: "search", query: "read", options: { limit: 2 } },
        { kind: "search", query: "write", options: { limit: 3 } },
        { kind: "search", query: "issue", scope: "mcp" },
      ]);
      const { event } = await runToEnd(pool, 'return await tools.search("read", "two")', { surface });
      expect(event).toMatchObject({
        type: "failed",
        message: expect.stringContaining("options must be an object such as { limit: 5 }"),
      });
    });

    it("uses UTC", async () => {
      const { event } = await runToEnd(
        pool,
        "return [new Date(0).getHours(), new Date().getTimezoneOffset()]",
      );
      expect(event).toMatchObject({ type: "completed", value: [0, 0] });
    });

    it("refuses module access before evaluation", async () => {
      for (const code of [
        'import x from "fs"; return x',
        'return await import("fs")',
        "return require('fs')",
        "return import.meta.url",
      ]) {
        const { event } = await runToEnd(pool, code);
        expect(event, code).toMatchObject({ type: "failed", code: "module_access_denied" });
      }
    });

    it("accepts the same words in strings, comments and identifiers", async () => {
      const code =
        "const important = 'import x from y'; // require('fs')\nconst requireAuth = /import\\(/; return [important, `import.meta`, requireAuth.source]";
      const { event } = await runToEnd(pool, code);
      expect(event).toMatchObject({
        type: "completed",
        value: ["import x from y", "import.meta", "import\\("],
      });
    });

    it("fails closed with invalid_input when the cell does not parse", async () => {
      const { event } = await runToEnd(pool, "return (1 + ;");
      expect(event).toMatchObject({ type: "failed", code: "invalid_input" });
    });

    // Plain cells (isPlainJavaScriptCell) skip the parser until QuickJS fails to compile them; the model
    // must still get the parser's message, and a cell that closes its own function must still be refused.
    it.each([
      ["a plain cell", "const a = 1;\nreturn (a + );"],
      ["a plain cell with a misplaced keyword", "const a = { b: 1 };\nreturn a.b const;"],
      ["a cell the parser checks first", "const a = 1 / 2;\nreturn (a + ;"],
      // biome-ignore lint/suspicious/noTemplateCurlyInString: the cell is source with a template literal
      ["an unclosed template", "return `a${1}"],
      ["a cell that closes its function", "}); globalThis.escaped = 1; (function () {"],
      ["a cell that closes its function at the end", "return 1 }, function () {"],
    ])("gives %s that does not parse the parser's invalid_input message", async (_name, code) => {
      const expected = (() => {
        try {
          checkModuleAccess(code);
        } catch (error) {
          return error as CodeModeError;
        }
        throw new Error("expected the parser to refuse the cell");
      })();
      const { event } = await runToEnd(pool, code);
      expect(event).toMatchObject({ type: "failed", code: "invalid_input", message: expected.message });
      expect(expected.message).toMatch(/^The cell does not parse as JavaScript at line \d+:\d+: /);
    });

    it("fails at once when the cell awaits a promise nothing can settle", async () => {
      // The deadline lies past the test's own timeout (20 s): a run that waited for it would fail the
      // test, so only the detection of the stuck promise can end it in time, and it is named as such.
      const { event } = await runToEnd(pool, "await new Promise(() => {}); return 1", {
        deadlineAt: Date.now() + 60_000,
      });
      expect(event.type).toBe("failed");
      if (event.type === "failed") {
        expect(event.code).not.toBe("timeout");
        expect(event.message).toMatch(/nothing can settle/);
      }
    });
  });

  describe("host requests", () => {
    it("issues every kind of request and settles results in any order", async () => {
      const code = `
      const [hits, described, content, web, issue, api, res, prompt, issues, updated, yielded] = await Promise.all([
        tools.search("read", { limit: 2 }),
        tools.describe("read_file"),
        tools.call("core:host:read_file", { path: "a" }),
        tools.web_search({ q: "x" }),
        MCP.github.createIssue({ title: "t" }),
        MCP.github.$api("createIssue"),
        MCP.github.resources.read({ uri: "memo://1" }),
        MCP.github.prompts.get({ name: "brief" }),
        Issues.list({ state: "open" }),
        namespaces.Issues.nested.update(1, { state: "closed" }),
        yield_control("checkpoint"),
      ]);
      return { hits, described, content, web, issue, api, res, prompt, issues, updated, yielded: yielded === undefined };
    `;
      const { event, requests } = await runToEnd(pool, code, {
        surface,
        answer: (request) => ({ ok: true, value: { echo: request.kind, id: request.requestId } }),
      });
      expect(requests.map(({ requestId: _, ...rest }) => rest)).toEqual([
        { kind: "search", query: "read", options: { limit: 2 } },
        { kind: "describe", target: "read_file" },
        { kind: "call", target: "core:host:read_file", input: { path: "a" } },
        { kind: "call", target: "plugin:web:web_search", input: { q: "x" } },
        {
          kind: "mcp",
          server: "github",
          op: "call",
          toolId: "mcp:github:create_issue",
          args: [{ title: "t" }],
        },
        { kind: "mcp", server: "github", op: "$api", args: ["createIssue"] },
        { kind: "mcp", server: "github", op: "resources.read", args: [{ uri: "memo://1" }] },
        { kind: "mcp", server: "github", op: "prompts.get", args: [{ name: "brief" }] },
        { kind: "namespace", namespaceId: "github-issues", path: "list", args: [{ state: "open" }] },
        {
          kind: "namespace",
          namespaceId: "github-issues",
          path: "nested.update",
          args: [1, { state: "closed" }],
        },
        { kind: "yield", reason: "checkpoint" },
      ]);
      expect(event.type).toBe("completed");
      if (event.type === "completed") expect((event.value as Record<string, unknown>).yielded).toBe(true);
    });

    it("carries every string exactly both ways: ASCII, non-ASCII, lone surrogates, NUL, long text", async () => {
      // A result crosses as JSON text, in which JSON.stringify writes a lone surrogate as an escape: short
      // ASCII takes the worker's short way into the VM, long text its long way (Node's UTF-8 encoder, into
      // the VM's allocator), short non-ASCII the library's.
      const samples = ["", "a", "é and 😀", "\ud800 alone", "tail \udfff", "nul \u0000 inside", "\uFFFD"];
      samples.push("x".repeat(5000), `${"y".repeat(1500)}é`, `${"z".repeat(1500)}\ud800`);
      samples.push(`${"w".repeat(1500)}\u0000😀\u0000`);
      const { event, requests } = await runToEnd(
        pool,
        `const samples = ${JSON.stringify(samples)};
       const back = [];
       for (const text of samples) back.push(await tools.call("core:host:read_file", { text }));
       return back.map((value, index) => value.echo === samples[index] && value.length === samples[index].length);`,
        {
          surface,
          answer: (request) => {
            const text = String((request as unknown as { input: { text: string } }).input.text);
            return { ok: true, value: { echo: text, length: text.length } };
          },
        },
      );
      expect(
        requests.map((request) => (request as unknown as { input: { text: string } }).input.text),
      ).toEqual(samples);
      expect(event).toMatchObject({ type: "completed", value: samples.map(() => true) });
    });

    it("reports idle with the pending list and continues when results arrive out of order", async () => {
      const requests: string[] = [];
      const run = pool.run({
        code: "const a = tools.call('x', 1); const b = tools.call('y', 2); return [await a, await b];",
        language: "javascript",
        surface,
        limits,
        deadlineAt: Date.now() + 5_000,
        onRequest: (request) => requests.push(request.requestId),
      });
      const idle = await run.next();
      expect(idle).toMatchObject({ type: "idle" });
      if (idle.type !== "idle") return;
      expect(idle.pending.map((request) => request.requestId)).toEqual(requests);
      run.settle(requests[1] as string, { ok: true, value: "second" });
      expect(await run.next()).toMatchObject({ type: "idle", pending: [{ requestId: requests[0] }] });
      run.settle(requests[0] as string, { ok: true, value: "first" });
      expect(await run.next()).toMatchObject({ type: "completed", value: ["first", "second"] });
    });

    it("delivers host errors as plain guest errors with name, message and code", async () => {
      const code = `try { await tools.call("x", {}); } catch (e) {
      return { own: Object.getOwnPropertyNames(e).sort(), name: e.name, message: e.message, code: e.code, isError: e instanceof Error, stack: typeof e.stack };
    }`;
      const { event } = await runToEnd(pool, code, {
        surface,
        answer: () => ({
          ok: false,
          error: { name: "ToolError", message: "disk full", code: "nested_tool_failed" },
        }),
      });
      expect(event).toMatchObject({
        type: "completed",
        value: { name: "ToolError", message: "disk full", code: "nested_tool_failed", isError: true },
      });
      if (event.type === "completed")
        expect((event.value as { own: string[] }).own).toEqual(
          expect.arrayContaining(["code", "message", "name"]),
        );
    });

    it("fails the run with the bridge error's code when a nested failure is not caught", async () => {
      const { event } = await runToEnd(pool, `await tools.call("x", {}); return 1`, {
        surface,
        answer: () => ({
          ok: false,
          error: { name: "ToolError", message: "nope", code: "nested_tool_failed" },
        }),
      });
      expect(event).toMatchObject({ type: "failed", code: "nested_tool_failed" });
    });

    it("refuses settling ids that were never issued or are already settled", async () => {
      const { run, requests } = await runToEnd(pool, "return await tools.call('x', {})", {
        surface,
        stopOnIdle: true,
      });
      expect(() => run.settle("r999", { ok: true, value: 1 })).toThrow(/never issued or is already settled/);
      run.settle(requests[0]!.requestId, { ok: true, value: 5 });
      expect(() => run.settle(requests[0]!.requestId, { ok: true, value: 6 })).toThrow(
        expect.objectContaining({ code: "invalid_input" }),
      );
      expect(await run.next()).toMatchObject({ type: "completed", value: 5 });
    });

    it("rejects calls over maxPendingToolCalls in the guest, catchably", async () => {
      const code = `
      const calls = []; let refused = null;
      for (let i = 0; i < 5; i++) calls.push(tools.call("x", i).catch((e) => { refused = refused ?? e.code; return "refused"; }));
      const results = await Promise.all(calls);
      return { refused, results };
    `;
      const { event } = await runToEnd(pool, code, {
        surface,
        limits: { ...limits, maxPendingToolCalls: 3 },
        answer: () => ({ ok: true, value: "ok" }),
      });
      expect(event).toMatchObject({
        type: "completed",
        value: { refused: "too_many_pending_tool_calls", results: ["ok", "ok", "ok", "refused", "refused"] },
      });
    });

    it("fails with too_many_pending_tool_calls when the rejection is not caught", async () => {
      const code =
        "const all = []; for (let i = 0; i < 4; i++) all.push(tools.call('x', i)); return await Promise.all(all);";
      const { event } = await runToEnd(pool, code, {
        surface,
        limits: { ...limits, maxPendingToolCalls: 2 },
      });
      expect(event).toMatchObject({ type: "failed", code: "too_many_pending_tool_calls" });
    });

    it("turns host results that cannot cross into catchable nested_tool_failed errors", async () => {
      const cyclic: Record<string, unknown> = { name: "loop" };
      cyclic.self = cyclic;
      const answers: unknown[] = [cyclic, { data: new Uint8Array(4) }, "x".repeat(5_000), { fine: [1, 2] }];
      const capped = createSandboxPool({ size: 1, maxBridgeValueBytes: 4_096 });
      try {
        const code = `
        const out = [];
        for (let i = 0; i < 4; i++) {
          try { out.push(await tools.call("x", { i })); } catch (e) { out.push(e.code + ": " + e.message); }
        }
        return out;
      `;
        const { event } = await runToEnd(capped, code, {
          surface,
          answer: (request) =>
            request.kind === "call"
              ? { ok: true, value: answers[(request.input as { i: number }).i] }
              : undefined,
        });
        expect(event.type).toBe("completed");
        if (event.type !== "completed") return;
        const [cycle, binary, large, fine] = event.value as [string, string, string, unknown];
        expect(cycle).toMatch(/^nested_tool_failed: .*cycle at \$\.self/);
        expect(binary).toMatch(/^nested_tool_failed: .*binary value at \$\.data/);
        expect(large).toMatch(/^nested_tool_failed: .*over the bridge limit of 4096 bytes/);
        expect(fine).toEqual({ fine: [1, 2] });
      } finally {
        await capped.close();
      }
    });

    it("answers API.list and API.read inside the guest", async () => {
      const code = `
      const all = await API.list(); const mcp = await API.list("mcp"); const slash = await API.list("mcp/");
      const body = await API.read("mcp/github.d.ts");
      const errors = [];
      for (const bad of ["mcp/../secret", "./mcp/index.d.ts", "mcp/nope.d.ts", "mcp//github.d.ts"]) {
        try { await API.read(bad); errors.push("accepted " + bad); } catch (e) { errors.push(e.code); }
      }
      return { all: all.length, mcp: mcp.map((f) => f.path), same: JSON.stringify(mcp) === JSON.stringify(slash), bytes: all[1].bytes, body, errors };
    `;
      const { event, requests } = await runToEnd(pool, code, { surface, answer: answerApiRead });
      // Lists and refusals are answered in the guest; the one file read is a request for its text.
      expect(
        requests.map((request) => ({ kind: request.kind, path: (request as { path?: string }).path })),
      ).toEqual([{ kind: "api", path: "mcp/github.d.ts" }]);
      expect(event).toMatchObject({
        type: "completed",
        value: {
          all: 2,
          mcp: ["mcp/index.d.ts", "mcp/github.d.ts"],
          same: true,
          bytes: Buffer.byteLength(apiFileTexts["mcp/github.d.ts"]!),
          body: apiFileTexts["mcp/github.d.ts"],
          errors: ["invalid_input", "invalid_input", "invalid_input", "invalid_input"],
        },
      });
    });
  });
});
