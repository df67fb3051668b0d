import { GUEST_GLOBAL_NAMES } from "@codecell/contract";
import { createSandboxPool } from "@codecell/sandbox";
import { afterAll, describe, expect, it } from "vitest";
import { createCodeModeEngine, type NestedToolCall } from "../src/index.js";
import { completedValue, context, failedError, hostTools, TestExecutor, watchEventLoop } from "./support.js";

describe("the engine", () => {
  const engine = createCodeModeEngine({
    config: {
      enabled: true,
      timeoutMs: 2000,
      memoryLimitBytes: 16 * 1024 * 1024,
      maxOutputBytes: 4096,
      maxPendingToolCalls: 4,
    },
  });
  afterAll(() => engine.close());

  function setup(overrides: Partial<Parameters<typeof engine.prepareRun>[0]> = {}) {
    const executor = new TestExecutor();
    const run = engine.prepareRun({
      tools: hostTools,
      deny: ["admin_*"],
      context: context(),
      executor,
      ...overrides,
    });
    let n = 0;
    const exec = (code: string, language?: "javascript" | "typescript") =>
      run.exec({ code, ...(language ? { language } : {}) }, { toolCallId: `call-${++n}` });
    return { run, executor, exec };
  }

  describe("the guest catalog", () => {
    it("lists every effective non-MCP tool in ALL_TOOLS, compact and without schemas", async () => {
      const { exec } = setup();
      const result = await exec("return ALL_TOOLS");
      expect(result.status).toBe("completed");
      const entries = completedValue<Array<Record<string, unknown>>>(result);
      expect(entries.map((entry) => entry.id)).toEqual([
        "core:host:exec",
        "core:host:fail_always",
        "core:host:read_file",
        "core:host:slow_echo",
        "plugin:notes:notes_add",
        "plugin:notes:notes_list",
        "client:app:select_file",
      ]);
      expect(entries[0]).toEqual({
        id: "core:host:exec",
        name: "exec",
        description: "Run a shell command in the workspace.",
        source: "core",
        sourceName: "host",
      });
    });

    it("searches, describes and calls core, plugin and client tools", async () => {
      const { exec, executor } = setup();
      const result = await exec(`
      const hits = await tools.search("read local file");
      const described = await tools.describe(hits[0].id);
      const content = await tools.call(described.id, { path: "README.md" });
      const notes = await tools.notes_list({ tag: "home" });
      const picked = await tools.call("client:app:select_file", {});
      return { first: hits[0].id, schema: described.parameters, content, notes, picked };
    `);
      expect(result).toMatchObject({
        status: "completed",
        value: {
          first: "core:host:read_file",
          schema: { type: "object", required: ["path"] },
          content: { content: "content of README.md" },
          notes: [{ text: "buy milk", tag: "home" }],
          picked: { path: "picked.txt" },
        },
      });
      expect(executor.calls.map((call) => [call.toolId, call.via])).toEqual([
        ["core:host:read_file", "tools.call"],
        ["plugin:notes:notes_list", "tools.call"],
        ["client:app:select_file", "tools.call"],
      ]);
      expect(result.telemetry.nested).toMatchObject({ searches: 1, describes: 1, calls: 3 });
    });

    it("hands the run's context and the parent exec call to the executor", async () => {
      const { exec, executor } = setup();
      await exec("return tools.read_file({ path: 'a' })");
      expect(executor.calls[0]).toMatchObject({
        agentId: "agent-1",
        sessionId: "session-1",
        parent: { toolCallId: "call-1", tool: "exec" },
      });
    });

    it("hides denied tools and refuses them by a guessed id", async () => {
      const { exec, executor } = setup();
      const result = await exec(`
      const listed = ALL_TOOLS.some((tool) => tool.name.startsWith("admin"));
      const found = (await tools.search("delete every record")).map((tool) => tool.id);
      let error;
      try { await tools.call("core:host:admin_delete_everything", {}); } catch (e) { error = { code: e.code, message: e.message }; }
      return { listed, found, error, shortcut: typeof tools.admin_delete_everything };
    `);
      expect(result.status).toBe("completed");
      const value = completedValue<{
        listed: boolean;
        found: string[];
        error: { code: string };
        shortcut: string;
      }>(result);
      expect(value.listed).toBe(false);
      expect(value.found).not.toContain("core:host:admin_delete_everything");
      expect(value.error.code).toBe("invalid_input");
      expect(value.shortcut).toBe("undefined");
      expect(executor.calls).toHaveLength(0);
    });

    it("calls the shell exec by its catalog id but never the code-mode exec or wait", async () => {
      const { exec } = setup();
      const result = await exec(`
      const shell = await tools.call("core:host:exec", { command: "ls" });
      const attempts = [];
      for (const id of ["wait", "core:host:wait", "tool_search", "code_mode:exec"]) {
        try { await tools.call(id, {}); attempts.push("called " + id); } catch (e) { attempts.push(e.code); }
      }
      return { shell, attempts, waitShortcut: typeof tools.wait };
    `);
      expect(result).toMatchObject({
        status: "completed",
        value: {
          shell: { stdout: "ran ls" },
          attempts: ["invalid_input", "invalid_input", "invalid_input", "invalid_input"],
          waitShortcut: "undefined",
        },
      });
    });

    it("gives describe and call errors with did-you-mean suggestions", async () => {
      const { exec } = setup();
      const result = await exec(`try { await tools.describe("raed_file"); } catch (e) { return e.message; }`);
      expect(result.status).toBe("completed");
      expect(completedValue<string>(result)).toContain("read_file");
    });
  });

  describe("guest globals", () => {
    it("installs every code-mode global the contract names, frozen and not writable", async () => {
      const { exec } = setup();
      const names = JSON.stringify(GUEST_GLOBAL_NAMES);
      const result = await exec(`
      return ${names}.map((name) => {
        const descriptor = Object.getOwnPropertyDescriptor(globalThis, name);
        const value = globalThis[name];
        globalThis[name] = "overwritten";
        return [name, typeof value, descriptor.writable, descriptor.configurable, Object.isFrozen(value) || typeof value === "function", globalThis[name] === value];
      });
    `);
      expect(result.status).toBe("completed");
      for (const [name, type, writable, configurable, frozen, unchanged] of completedValue<unknown[][]>(
        result,
      )) {
        expect([name, type === "undefined", writable, configurable, frozen, unchanged]).toEqual([
          name,
          false,
          false,
          false,
          true,
          true,
        ]);
      }
    });
  });

  describe("nested calls", () => {
    it("drains ten sequential awaits inside one exec", async () => {
      const { exec } = setup();
      const result = await exec(`
      let total = 0;
      for (let i = 0; i < 10; i++) total += (await tools.slow_echo({ ms: 5, value: i }));
      return total;
    `);
      expect(result).toMatchObject({ status: "completed", value: 45 });
      expect(result.telemetry.nested.calls).toBe(10);
    });

    it("runs calls in parallel with Promise.all", async () => {
      const { exec, executor } = setup();
      let inFlight = 0;
      let most = 0;
      const original = executor.callTool.bind(executor);
      executor.callTool = async (call) => {
        most = Math.max(most, ++inFlight);
        try {
          return await original(call);
        } finally {
          inFlight--;
        }
      };
      const result = await exec(`
      return await Promise.all([1, 2, 3, 4].map((i) => tools.slow_echo({ ms: 150, value: i })));
    `);
      expect(result).toMatchObject({ status: "completed", value: [1, 2, 3, 4] });
      expect(most).toBe(4);
    });

    it("delivers a tool failure as a catchable error, and fails the run with nested_tool_failed when uncaught", async () => {
      const { exec } = setup();
      const caught = await exec(
        `try { await tools.fail_always({}); } catch (e) { return [e.code, e.message, e instanceof Error]; }`,
      );
      expect(caught).toMatchObject({
        status: "completed",
        value: ["nested_tool_failed", "Tool core:host:fail_always failed: disk on fire", true],
      });
      const uncaught = await exec("await tools.fail_always({}); return 1;");
      expect(uncaught).toMatchObject({ status: "failed", code: "nested_tool_failed" });
      expect(failedError(uncaught)).toContain("disk on fire");
      expect(uncaught.telemetry.nested.failedCalls).toBe(1);
    });

    it("keeps the host's approval decisions: a declined call is a catchable error", async () => {
      const { exec, executor } = setup();
      executor.approvals.set("core:host:exec", false);
      const result = await exec(
        `try { await tools.exec({ command: "rm -rf /" }); } catch (e) { return e.message; }`,
      );
      expect(result).toMatchObject({ status: "completed" });
      expect(completedValue<string>(result)).toContain("The user declined exec");
    });

    it("settles calls of an executor that answers synchronously, throws synchronously or hands back a thenable", async () => {
      const answering = createCodeModeEngine({
        config: { enabled: true, timeoutMs: 20_000 },
        pool: engine.pool,
      });
      const executor = {
        callTool(call: NestedToolCall): unknown {
          const input = call.input as { mode: string; value?: number };
          if (input.mode === "throw") {
            // note and progress are the call's own functions: they work passed on detached.
            const { note, progress } = call;
            note("refused without a promise");
            progress({ progress: 1 });
            throw new Error("refused at once");
          }
          if (input.mode === "thenable") {
            // Not a promise: a thenable that answers, then answers again and throws; only its first answer counts.
            return {
              // biome-ignore lint/suspicious/noThenProperty: the point is a thenable that is not a promise
              then(resolve: (value: unknown) => void) {
                resolve(input.value);
                resolve("again");
                throw new Error("after answering");
              },
            };
          }
          if (input.mode === "undefined") return undefined;
          return { doubled: (input.value ?? 0) * 2 };
        },
      };
      const run = answering.prepareRun({ tools: hostTools, context: context(), executor });
      const result = await run.exec(
        {
          code: `
          const out = [];
          for (let i = 0; i < 200; i++) out.push((await tools.read_file({ mode: "sync", value: i })).doubled);
          let caught;
          try { await tools.read_file({ mode: "throw" }); } catch (e) { caught = [e.code, e.message]; }
          const fromThenable = await tools.read_file({ mode: "thenable", value: 7 });
          const nothing = await tools.read_file({ mode: "undefined" });
          return { sum: out.reduce((a, b) => a + b, 0), caught, fromThenable, nothing };
        `,
        },
        { toolCallId: "sync-exec" },
      );
      expect(result).toMatchObject({
        status: "completed",
        value: {
          sum: 2 * ((199 * 200) / 2),
          caught: ["nested_tool_failed", "Tool core:host:read_file failed: refused at once"],
          fromThenable: 7,
          // A top-level undefined crosses as null, as it does from an async executor.
          nothing: null,
        },
      });
      expect(result.telemetry.nested).toMatchObject({ calls: 203, failedCalls: 1 });
      const nested = answering.exportTrajectory({ parentToolCallId: "sync-exec" }).entries.slice(1);
      expect(nested).toHaveLength(203);
      expect(nested.every((entry) => entry.endedAt !== undefined)).toBe(true);
      expect(nested.filter((entry) => entry.status === "completed")).toHaveLength(202);
      expect(nested[200]).toMatchObject({
        status: "failed",
        code: "nested_tool_failed",
        error: "Tool core:host:read_file failed: refused at once",
        input: { mode: "throw" },
        notes: ["refused without a promise"],
      });
      await answering.close();
    });

    it("runs queued calls of an executor that answers at once, in order, as slots free up", async () => {
      const queueing = createCodeModeEngine({
        config: { enabled: true, timeoutMs: 20_000, maxPendingToolCalls: 4 },
        pool: engine.pool,
      });
      let running = 0;
      let most = 0;
      const executor = {
        callTool(call: NestedToolCall): unknown {
          const input = call.input as { mode: string; value: number };
          if (input.mode === "sync") return input.value * 2;
          most = Math.max(most, ++running);
          return new Promise((resolve) =>
            setTimeout(() => {
              running--;
              resolve(input.value);
            }, 50),
          );
        },
      };
      const run = queueing.prepareRun({ tools: hostTools, context: context(), executor });
      // Four slow calls hold every slot; forty quick ones queue behind them and run as the slots free.
      const result = await run.exec(
        {
          code: `
          const order = [];
          const slow = [1, 2, 3, 4].map((value) => tools.read_file({ mode: "slow", value }));
          const quick = Array.from({ length: 40 }, (_, value) =>
            tools.read_file({ mode: "sync", value }).then((doubled) => { order.push(value); return doubled; }));
          const [s, q] = await Promise.all([Promise.all(slow), Promise.all(quick)]);
          return { s, sum: q.reduce((a, b) => a + b, 0), inOrder: order.every((v, i) => v === i) };
        `,
        },
        { toolCallId: "queued-sync" },
      );
      expect(result).toMatchObject({
        status: "completed",
        value: { s: [1, 2, 3, 4], sum: 2 * ((39 * 40) / 2), inOrder: true },
      });
      expect(most).toBe(4);
      expect(result.telemetry.nested.calls).toBe(44);
      await queueing.close();
    });

    it("makes a nested call's signal when the executor reads it, aborted already if the run was aborted before", async () => {
      const calls: NestedToolCall[] = [];
      let release: (value: unknown) => void = () => {};
      const executor = {
        callTool(call: NestedToolCall): Promise<unknown> {
          calls.push(call);
          return new Promise((resolve) => {
            release = resolve;
          });
        },
      };
      const { run } = setup({ executor });
      const control = new AbortController();
      const pending = run.exec(
        { code: "await tools.read_file({ path: 'a' }); return 1" },
        { toolCallId: "abort-before-read", signal: control.signal },
      );
      while (calls.length === 0) await new Promise((resolve) => setTimeout(resolve, 5));
      control.abort();
      expect(await pending).toMatchObject({ status: "failed", code: "aborted" });
      // Read only now, after the abort: the call says it was cancelled, and its signal says why.
      expect(calls[0]!.aborted).toBe(true);
      const { signal } = calls[0]!;
      expect(signal.aborted).toBe(true);
      expect(String((signal.reason as Error).message)).toMatch(/aborted|ended/);
      release("too late");
    });

    it("fails a nested call whose input the host's redaction hook cannot handle, and the host keeps running", async () => {
      const strict = createCodeModeEngine({
        config: { enabled: true, timeoutMs: 20_000 },
        pool: engine.pool,
        redactInput: (toolId, input) => {
          if (toolId === "exec") return input;
          // A hook written for one input shape: the guest chooses the shape.
          return { path: (input as { path: { length: number } }).path.length };
        },
      });
      const run = strict.prepareRun({ tools: hostTools, context: context(), executor: new TestExecutor() });
      const result = await run.exec(
        {
          code: `
          const ok = await tools.read_file({ path: "a.txt" });
          try { await tools.read_file({}); } catch (e) { return [ok.path, e.code, e.message]; }
        `,
        },
        { toolCallId: "redaction-fails" },
      );
      expect(result).toMatchObject({ status: "completed" });
      const [path, code, message] = completedValue<[string, string, string]>(result);
      expect([path, code]).toEqual(["a.txt", "nested_tool_failed"]);
      expect(message).toContain("could not be started");
      await strict.close();
    });
  });

  describe("cells", () => {
    it("returns output in order and the final value", async () => {
      const { exec } = setup();
      const result = await exec(`text("one"); json({ two: 2 }); text(3); return { done: true };`);
      expect(result).toMatchObject({
        status: "completed",
        value: { done: true },
        output: [
          { type: "text", text: "one" },
          { type: "json", value: { two: 2 } },
          { type: "text", text: "3" },
        ],
      });
    });

    it("transforms and runs TypeScript", async () => {
      const { exec } = setup();
      const result = await exec(
        `type Row = { id: number }; const rows: Row[] = [{ id: 1 }, { id: 2 }] as const as Row[];\nreturn rows.map((row): number => row.id * 2);`,
        "typescript",
      );
      expect(result).toMatchObject({ status: "completed", value: [2, 4] });
    });

    it.each([
      ["bad TypeScript", "const x: = 1;", "typescript", "typescript_transform_failed"],
      ["a static import", "import fs from 'node:fs'; return 1", "javascript", "module_access_denied"],
      ["require", "return require('fs')", "javascript", "module_access_denied"],
      ["dynamic import", "return await import('fs')", "javascript", "module_access_denied"],
      ["a syntax error", "return (1 +", "javascript", "invalid_input"],
    ] as const)("refuses %s with %s", async (_name, code, language, expected) => {
      const { exec } = setup();
      const result = await exec(code, language);
      expect(result).toMatchObject({ status: "failed", code: expected });
    });

    it.each([
      ["empty code", { code: "" }, "invalid_input"],
      ["code and command that differ", { code: "return 1", command: "return 2" }, "invalid_input"],
      ["an unknown language", { code: "x", language: "python" }, "unsupported_language"],
    ])("validates exec input: %s", async (_name, input, code) => {
      const { run } = setup();
      const result = await run.exec(input, { toolCallId: "x" });
      expect(result).toMatchObject({ status: "failed", code });
    });

    // A 3.7 MB TypeScript cell (a model pasting data into its program): refused at once by default,
    // and, when a host raises maxCodeBytes that far, checked and transpiled on a worker thread while
    // the host's event loop keeps serving.
    const bigTypeScriptCell = () => {
      const rows = Array.from(
        { length: 60_000 },
        (_, index) => `  { id: ${index}, name: "row ${index}" } as Row,`,
      );
      return `type Row = { id: number; name: string };\nconst rows: Row[] = [\n${rows.join("\n")}\n];\nreturn rows.length;`;
    };

    it("refuses a cell over maxCodeBytes with invalid_input before any work", async () => {
      const { exec } = setup();
      const result = await exec(bigTypeScriptCell(), "typescript");
      expect(result).toMatchObject({ status: "failed", code: "invalid_input" });
      expect(failedError(result)).toMatch(/over tools\.codeMode\.maxCodeBytes \(262144\)/);
    });

    it("transpiles a multi-megabyte TypeScript cell off the host's event loop", async () => {
      const roomy = createCodeModeEngine({
        config: { enabled: true, timeoutMs: 60_000, maxCodeBytes: 16 * 1024 * 1024 },
        pool: engine.pool,
      });
      const run = roomy.prepareRun({ tools: hostTools, context: context(), executor: new TestExecutor() });
      const code = bigTypeScriptCell();
      expect(code.length).toBeGreaterThan(2_500_000);
      const loop = watchEventLoop();
      const result = await run.exec({ code, language: "typescript" }, { toolCallId: "big" });
      const { ticks, maxGapMs, elapsedMs } = loop.stop();
      expect(result).toMatchObject({ status: "completed", value: 60_000 });
      // The loop kept turning while the worker checked and transpiled the cell: transpiling it on the
      // host blocks the loop for nearly the whole exec in one gap. Relative to the exec's own duration,
      // so a loaded machine that slows everything down does not fail it.
      expect(ticks).toBeGreaterThanOrEqual(5);
      expect(maxGapMs).toBeLessThan(elapsedMs / 3);
      // The exec's own deadline is 60 s; checking and transpiling 3.7 MB takes seconds on a loaded machine.
    }, 120_000);

    it("refuses a language the config disables", async () => {
      const jsOnly = createCodeModeEngine({
        config: { enabled: true, languages: ["javascript"] },
        pool: engine.pool,
      });
      const run = jsOnly.prepareRun({ tools: hostTools, context: context(), executor: new TestExecutor() });
      const result = await run.exec({ code: "return 1", language: "typescript" }, { toolCallId: "x" });
      expect(result).toMatchObject({ status: "failed", code: "unsupported_language" });
      expect(run.modelTools[0]!.description).not.toContain("TypeScript");
    });

    it.each([
      [
        "the file system",
        "return typeof require === 'undefined' && typeof process === 'undefined' && typeof fetch === 'undefined'",
      ],
      [
        "the environment",
        "return typeof process === 'undefined' && typeof Deno === 'undefined' && typeof Bun === 'undefined'",
      ],
      [
        "the network and timers",
        "return typeof fetch === 'undefined' && typeof XMLHttpRequest === 'undefined' && typeof setTimeout === 'undefined' && typeof WebSocket === 'undefined'",
      ],
      [
        "modules through eval",
        "try { await eval('import(\"fs\")'); return false; } catch (e) { return true; }",
      ],
    ])("cannot reach %s", async (_name, code) => {
      const { exec } = setup();
      expect(await exec(code)).toMatchObject({ status: "completed", value: true });
    });

    it("times out an infinite loop without blocking the host", async () => {
      // The interrupt ends a plain spin; the watchdog behind it (which replaces a worker stuck where the
      // interrupt cannot reach) gets seconds of grace here, so a loaded machine that is slow to schedule
      // the worker cannot make it the one that ends this spin.
      const pool = createSandboxPool({ size: 1, watchdogGraceMs: 10_000 });
      const spinning = createCodeModeEngine({ config: { enabled: true, timeoutMs: 2000 }, pool });
      const run = spinning.prepareRun({
        tools: hostTools,
        context: context(),
        executor: new TestExecutor(),
      });
      const loop = watchEventLoop();
      const result = await run.exec({ code: "while (true) {}" }, { toolCallId: "spin" }).finally(async () => {
        await spinning.close();
        await pool.close();
      });
      const { ticks } = loop.stop();
      expect(result).toMatchObject({ status: "failed", code: "timeout" });
      // The message says which budget ran out and what to do instead.
      expect(result.status === "failed" && result.error).toMatch(
        /^The cell ran past its \d+ ms deadline \(timeoutMs\) and was stopped\. Do less in one exec/,
      );
      expect(result.telemetry.limitFailures.timeout).toBe(1);
      // The host kept serving while the cell spun: its timer ran again and again through the 2 s spin.
      // A spin on the host's own thread would hold the loop until the deadline, leaving it one tick.
      expect(ticks).toBeGreaterThanOrEqual(10);
    }, 60_000);

    it("stops a memory bomb with memory_limit_exceeded, and the next cell runs", async () => {
      // The longest deadline there is, so on a loaded machine memory is the only limit the bomb can hit.
      const patient = createCodeModeEngine({
        config: { enabled: true, timeoutMs: 60_000, memoryLimitBytes: 16 * 1024 * 1024 },
        pool: engine.pool,
      });
      const run = patient.prepareRun({ tools: hostTools, context: context(), executor: new TestExecutor() });
      let n = 0;
      const exec = (code: string) => run.exec({ code }, { toolCallId: `bomb-${++n}` });
      const result = await exec("const parts = []; while (true) parts.push('x'.repeat(100000));");
      expect(result).toMatchObject({ status: "failed", code: "memory_limit_exceeded" });
      expect(result.telemetry.limitFailures.memory).toBe(1);
      expect(await exec("return 2")).toMatchObject({ status: "completed", value: 2 });
    });

    it.each([
      ["huge output", "for (let i = 0; i < 1000; i++) text('line ' + i); return 1"],
      ["a huge value", "return 'x'.repeat(10000)"],
    ])("enforces maxOutputBytes on %s", async (_name, code) => {
      const { exec } = setup();
      const result = await exec(code);
      expect(result).toMatchObject({ status: "failed", code: "output_limit_exceeded" });
      expect(result.telemetry.limitFailures.output).toBe(1);
    });

    it("aborts a running cell when the agent run is aborted", async () => {
      const controller = new AbortController();
      const { exec } = setup({ context: { ...context(), signal: controller.signal } });
      setTimeout(() => controller.abort(), 100);
      const result = await exec("while (true) {}");
      expect(result).toMatchObject({ status: "failed", code: "aborted" });
    });

    it("fails at once when the cell waits on a promise nothing can settle", async () => {
      // The exec deadline (60 s) lies past the test's own timeout (20 s): a run that waited for its
      // deadline would fail the test, so only the detection of the stuck promise can end it in time.
      const patient = createCodeModeEngine({
        config: { enabled: true, timeoutMs: 60_000 },
        pool: engine.pool,
      });
      const run = patient.prepareRun({ tools: hostTools, context: context(), executor: new TestExecutor() });
      const result = await run.exec(
        { code: "await new Promise(() => {}); return 1" },
        { toolCallId: "stuck" },
      );
      expect(failedError(result)).toMatch(/waiting on a promise that nothing can settle/);
      expect(result.telemetry.limitFailures.timeout).toBe(0);
    });
  });

  describe("trajectory and debugging", () => {
    it("lets the executor annotate a nested call, and records it under its parent exec call", async () => {
      const annotating = createCodeModeEngine({ config: { enabled: true }, pool: engine.pool });
      const executor = new TestExecutor();
      const original = executor.callTool.bind(executor);
      executor.callTool = async (call) => {
        call.note("approved by the user");
        return original(call);
      };
      const run = annotating.prepareRun({ tools: hostTools, context: context(), executor });
      await run.exec({ code: "return tools.read_file({ path: 'a' })" }, { toolCallId: "exec-annotated" });
      const { entries } = annotating.exportTrajectory({ parentToolCallId: "exec-annotated" });
      expect(entries.map((entry) => [entry.kind, entry.tool, entry.status])).toEqual([
        ["control", "exec", "completed"],
        ["nested", "core:host:read_file", "completed"],
      ]);
      expect(entries[1]).toMatchObject({
        parentToolCallId: "exec-annotated",
        notes: ["approved by the user"],
        via: "tools.call",
      });
      await annotating.close();
    });

    it("redacts nested inputs and the exec cell in the trajectory with the host's hook", async () => {
      const redacting = createCodeModeEngine({
        config: { enabled: true },
        pool: engine.pool,
        redactInput: (toolId, input) =>
          toolId === "exec"
            ? { ...(input as object), code: "[redacted cell]" }
            : toolId.endsWith(":exec")
              ? { command: "[redacted]" }
              : input,
      });
      const run = redacting.prepareRun({
        tools: hostTools,
        context: context(),
        executor: new TestExecutor(),
      });
      await run.exec(
        { code: "return tools.call('core:host:exec', { command: 'echo $SECRET' })" },
        { toolCallId: "e" },
      );
      const nested = redacting.exportTrajectory().entries.find((entry) => entry.kind === "nested");
      expect(nested?.input).toEqual({ command: "[redacted]" });
      const control = redacting.exportTrajectory().entries.find((entry) => entry.kind === "control");
      expect(control?.input).toEqual({ language: "javascript", code: "[redacted cell]" });
      expect(JSON.stringify(redacting.exportTrajectory())).not.toContain("SECRET");
      await redacting.close();
    });

    it("logs activation and per-call counts when debugging is on", async () => {
      const lines: string[] = [];
      const debugging = createCodeModeEngine({
        config: { enabled: true },
        pool: engine.pool,
        debug: (line) => lines.push(line),
      });
      const run = debugging.prepareRun({
        tools: hostTools,
        context: context(),
        executor: new TestExecutor(),
      });
      await run.exec(
        { code: "await tools.read_file({ path: 'secret-path' }); return 1" },
        { toolCallId: "e" },
      );
      expect(lines[0]).toMatch(/^activation: active; model sees exec, wait, message; catalog 8 tools/);
      expect(lines[1]).toMatch(/^exec e: completed; nested calls 1/);
      expect(lines.join("\n")).not.toContain("secret-path");
      debugging.prepareRun({ tools: [], context: context(), executor: new TestExecutor() });
      expect(lines.at(-1)).toMatch(/^activation: no_tools/);
      await debugging.close();
    });
  });
});

describe("the removed sandbox option", () => {
  it.each([{ thread: "in-thread" }, { thread: "fiber" }, {}])(
    "refuses sandbox: %j with invalid_input that says cells run on worker threads",
    (sandbox) => {
      const options = { config: { enabled: true }, sandbox } as Parameters<typeof createCodeModeEngine>[0];
      expect(() => createCodeModeEngine(options)).toThrow(
        expect.objectContaining({
          code: "invalid_input",
          message: expect.stringMatching(/sandbox was removed: cells always run on worker threads/),
        }),
      );
    },
  );

  it('still takes sandbox: { thread: "worker" }, the only mode there is', async () => {
    const options = {
      config: { enabled: true },
      sandbox: { thread: "worker" },
    } as Parameters<typeof createCodeModeEngine>[0];
    const engine = createCodeModeEngine(options);
    try {
      const run = engine.prepareRun({ tools: hostTools, context: context(), executor: new TestExecutor() });
      expect(completedValue(await run.exec({ code: "return 1 + 1" }, { toolCallId: "w1" }))).toBe(2);
    } finally {
      await engine.close();
    }
  });
});
