import { describe, expect, it } from "vitest";
import { parseWorkerToHostMessage } from "../src/protocol.js";
import {
  ProtocolError,
  parseHostRequestBody,
  parseHostToWorkerMessage,
  takesToolCallSlot,
} from "../src/worker-protocol.js";

const limits = {
  memoryLimitBytes: 1 << 20,
  maxOutputBytes: 1024,
  maxPendingToolCalls: 4,
  maxSnapshotBytes: 1 << 20,
};
const signal = new Int32Array(new SharedArrayBuffer(4));

describe("host request bodies", () => {
  const valid = [
    { kind: "search", query: "files" },
    { kind: "search", query: "files", options: { limit: 3 } },
    { kind: "search", query: "graph", scope: "mcp" },
    { kind: "describe", target: "core:host:read" },
    { kind: "call", target: "core:host:read", input: { path: "a" } },
    { kind: "mcp", server: "github", op: "call", toolId: "mcp:github:x", args: [{}] },
    { kind: "mcp", server: "docs", op: "resources.read", args: [{ uri: "memo://1" }] },
    { kind: "namespace", namespaceId: "issues", path: "list", args: [] },
    { kind: "api", path: "mcp/memory.d.ts" },
    { kind: "yield" },
    { kind: "yield", reason: "later" },
  ];
  it.each(valid)("accepts $kind", (body) => {
    expect(parseHostRequestBody(body)).toBe(body);
  });

  const invalid = [
    { kind: "exec", code: "1" },
    { kind: "search" },
    { kind: "search", query: "graph", scope: "everything" },
    { kind: "call", target: 1, input: {} },
    { kind: "mcp", server: "s", op: "delete", args: [] },
    { kind: "namespace", namespaceId: "n", path: "p", args: "x" },
    { kind: "api" },
    { kind: "api", path: 7 },
    null,
  ];
  it.each(invalid)("refuses %j", (body) => {
    expect(() => parseHostRequestBody(body)).toThrow(ProtocolError);
  });
});

describe("maxPendingToolCalls slots", () => {
  // The promise tested here: searches, describes and yields take no slot; tool, namespace and MCP server work do.
  it.each([
    [{ kind: "call", target: "read_file", input: {} }, true],
    [{ kind: "namespace", namespaceId: "notes", path: "list", args: [] }, true],
    [{ kind: "mcp", server: "memory", op: "call", toolId: "mcp:memory:read_graph", args: [] }, true],
    [{ kind: "mcp", server: "memory", op: "resources.read", args: ["file:///a"] }, true],
    [{ kind: "mcp", server: "memory", op: "$api", args: [] }, false],
    [{ kind: "search", query: "file" }, false],
    [{ kind: "describe", target: "read_file" }, false],
    [{ kind: "api", path: "mcp/index.d.ts" }, false],
    [{ kind: "yield", reason: "later" }, false],
  ] as const)("%o takes a slot: %s", (body, expected) => {
    expect(takesToolCallSlot(parseHostRequestBody(body))).toBe(expected);
  });
});

describe("messages", () => {
  it("validates host-to-worker messages", () => {
    const start = {
      type: "start",
      runId: "r",
      code: "1",
      language: "javascript",
      surface: "{}",
      limits,
      deadlineAt: 1,
      signal,
    };
    expect(parseHostToWorkerMessage(start)).toBe(start);
    expect(() => parseHostToWorkerMessage({ ...start, limits: { ...limits, maxOutputBytes: -1 } })).toThrow(
      /limits/,
    );
    expect(() => parseHostToWorkerMessage({ ...start, signal: [0] })).toThrow(/signal/);
    expect(() =>
      parseHostToWorkerMessage({
        type: "settle",
        runId: "r",
        deadlineAt: 1,
        items: [{ requestId: "a", ok: "yes", json: "1" }],
      }),
    ).toThrow(ProtocolError);
    // `shallow` is optional, and a boolean when present.
    const settle = (item: Record<string, unknown>) => ({
      type: "settle",
      runId: "r",
      deadlineAt: 1,
      items: [item],
    });
    const plain = settle({ requestId: "a", ok: true, json: "1" });
    expect(parseHostToWorkerMessage(plain)).toBe(plain);
    const marked = settle({ requestId: "a", ok: true, json: "1", shallow: true });
    expect(parseHostToWorkerMessage(marked)).toBe(marked);
    expect(() =>
      parseHostToWorkerMessage(settle({ requestId: "a", ok: true, json: "1", shallow: "yes" })),
    ).toThrow(ProtocolError);
    expect(() => parseHostToWorkerMessage({ type: "shutdown" })).toThrow(/unknown type/);
  });

  it("validates every message inside a batch and refuses nested batches", () => {
    const request = { requestId: "r1", kind: "yield" };
    const idle = { type: "idle", runId: "r", pending: [request], output: [] };
    expect(
      parseWorkerToHostMessage({ type: "batch", messages: [{ type: "request", runId: "r", request }, idle] })
        .type,
    ).toBe("batch");
    expect(() =>
      parseWorkerToHostMessage({ type: "batch", messages: [{ type: "idle", runId: "r" }] }),
    ).toThrow(/pending/);
    expect(() =>
      parseWorkerToHostMessage({ type: "batch", messages: [{ type: "batch", messages: [] }] }),
    ).toThrow(ProtocolError);
  });

  it("validates worker-to-host messages", () => {
    const request = { requestId: "r1", kind: "call", target: "t", input: {} };
    expect(parseWorkerToHostMessage({ type: "request", runId: "r", request }).type).toBe("request");
    expect(
      parseWorkerToHostMessage({
        type: "idle",
        runId: "r",
        pending: [request],
        output: [{ type: "text", text: "hi" }],
      }).type,
    ).toBe("idle");
    expect(() =>
      parseWorkerToHostMessage({ type: "idle", runId: "r", pending: [{ kind: "call" }], output: [] }),
    ).toThrow(/pending/);
    // An idle may carry the requests its drain issued; each is checked like a request message's.
    expect(
      parseWorkerToHostMessage({ type: "idle", runId: "r", requests: [request], pending: [], output: [] })
        .type,
    ).toBe("idle");
    expect(() =>
      parseWorkerToHostMessage({
        type: "idle",
        runId: "r",
        requests: [{ requestId: "r2", kind: "call" }],
        pending: [],
        output: [],
      }),
    ).toThrow(/requests/);
    expect(() =>
      parseWorkerToHostMessage({ type: "idle", runId: "r", requests: request, pending: [], output: [] }),
    ).toThrow(/requests/);
    // A quick call's idle (only call requests, nothing pending, no output) is checked field by field;
    // each malformed variant still fails with the field the table names.
    const callIdle = (fields: Record<string, unknown>, requestFields: Record<string, unknown> = {}) => ({
      type: "idle",
      runId: "r",
      requests: [request, { ...request, requestId: "r2", ...requestFields }],
      pending: [],
      output: [],
      ...fields,
    });
    expect(parseWorkerToHostMessage(callIdle({})).type).toBe("idle");
    expect(() => parseWorkerToHostMessage(callIdle({ runId: 7 }))).toThrow(/runId/);
    expect(() => parseWorkerToHostMessage(callIdle({}, { requestId: 2 }))).toThrow(/requests/);
    expect(() => parseWorkerToHostMessage(callIdle({}, { target: 1 }))).toThrow(/requests/);
    expect(() => parseWorkerToHostMessage(callIdle({}, { input: undefined }))).toThrow(/requests/);
    expect(() => parseWorkerToHostMessage(callIdle({}, { kind: "bogus" }))).toThrow(/requests/);
    expect(() => parseWorkerToHostMessage(callIdle({ pending: {} }))).toThrow(/pending/);
    expect(() => parseWorkerToHostMessage(callIdle({ output: [{ type: "text" }] }))).toThrow(/output/);
    expect(() => parseWorkerToHostMessage(callIdle({ requests: [[]] }))).toThrow(/requests/);
    // What the field-by-field check leaves to the table is still accepted there.
    expect(
      parseWorkerToHostMessage(
        callIdle({ output: [{ type: "text", text: "hi" }] }, { kind: "describe", target: "t" }),
      ).type,
    ).toBe("idle");
    expect(() =>
      parseWorkerToHostMessage({
        type: "failed",
        runId: "r",
        code: "bogus",
        message: "m",
        error: null,
        output: [],
      }),
    ).toThrow(/code/);
    expect(
      parseWorkerToHostMessage({
        type: "failed",
        runId: "r",
        code: null,
        message: "m",
        error: { name: "E", message: "m" },
        output: [],
      }).type,
    ).toBe("failed");
  });
});

describe("init", () => {
  it("accepts only a compiled WebAssembly module", async () => {
    // The smallest valid module: magic and version.
    const wasm = (globalThis as unknown as { WebAssembly: { compile(bytes: Uint8Array): Promise<object> } })
      .WebAssembly;
    const module = await wasm.compile(new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0]));
    expect(parseHostToWorkerMessage({ type: "init", module, snapshotSecret: null }).type).toBe("init");
    expect(() => parseHostToWorkerMessage({ type: "init", module: {}, snapshotSecret: null })).toThrow(
      /module/,
    );
  });

  it("takes the host's random bytes for the worker's VMs as a Uint8Array, or none", async () => {
    const wasm = (globalThis as unknown as { WebAssembly: { compile(bytes: Uint8Array): Promise<object> } })
      .WebAssembly;
    const module = await wasm.compile(new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0]));
    const init = { type: "init", module, snapshotSecret: null, entropy: new Uint8Array(16) };
    expect(parseHostToWorkerMessage(init)).toBe(init);
    expect(() => parseHostToWorkerMessage({ ...init, entropy: [1, 2, 3, 4] })).toThrow(/entropy/);
  });
});
