import type { HostRequest, HostToWorkerMessage, WorkerToHostMessage } from "@codecell/bridge";
import { describe, expect, it } from "vitest";
import { RunHandle, type RunHost } from "../src/sandbox-run.js";
import { limits } from "./helpers.js";

// The host side of a run fed the worker's messages directly: whether a drain's requests travel in their
// own messages or inside the idle that ends the drain depends on timing in a real worker, so this
// checks the idle-carried form on its own.

function handleWith(onRequest: (request: HostRequest, run: RunHandle) => void) {
  const posted: HostToWorkerMessage[] = [];
  const host: RunHost = { post: (message) => posted.push(message), unresponsive: () => {}, detach: () => {} };
  const run: RunHandle = new RunHandle({
    runId: "run-1",
    owner: null,
    limits,
    deadlineAt: Date.now() + 30_000,
    timeoutMs: undefined,
    startupTimeoutMs: 30_000,
    signal: undefined,
    onRequest: (request) => onRequest(request, run),
    maxBridgeValueBytes: 1024 * 1024,
    watchdogGraceMs: 100,
    restored: false,
  });
  run.attach(host, { type: "dispose", runId: "run-1" });
  return { run, posted };
}

const call = (requestId: string, target: string): HostRequest => ({
  requestId,
  kind: "call",
  target,
  input: {},
});
const idleWith = (requests: HostRequest[]): WorkerToHostMessage => ({
  type: "idle",
  runId: "run-1",
  requests,
  pending: [],
  output: [],
});

describe("an idle that carries its drain's requests", () => {
  it("hands each request to onRequest in order before the idle event, which lists them as pending", async () => {
    const seen: string[] = [];
    const { run } = handleWith((request) => seen.push(request.requestId));
    run.receive(idleWith([call("r1", "a"), call("r2", "b"), call("r3", "c")]));
    expect(seen).toEqual(["r1", "r2", "r3"]);
    const event = await run.next();
    expect(event.type === "idle" ? event.pending.map((request) => request.requestId) : event).toEqual([
      "r1",
      "r2",
      "r3",
    ]);
  });

  it("stops handing over requests once the caller ends the run in onRequest", async () => {
    const seen: string[] = [];
    const { run, posted } = handleWith((request, handle) => {
      seen.push(request.requestId);
      if (request.requestId === "r2") handle.dispose();
    });
    run.receive(idleWith([call("r1", "a"), call("r2", "b"), call("r3", "c")]));
    expect(seen).toEqual(["r1", "r2"]);
    expect(await run.next()).toMatchObject({ type: "failed", code: "aborted" });
    expect(posted.map((message) => message.type)).toEqual(["dispose", "dispose"]);
  });

  it("settles a request whose onRequest throws as failed, and still reports the idle", async () => {
    const { run, posted } = handleWith((request) => {
      if (request.requestId === "r1") throw new Error("no such tool");
    });
    run.receive(idleWith([call("r1", "a"), call("r2", "b")]));
    const event = await run.next();
    expect(event.type === "idle" ? event.pending.map((request) => request.requestId) : event).toEqual(["r2"]);
    await Promise.resolve();
    const settle = posted.find((message) => message.type === "settle");
    expect(settle).toMatchObject({ type: "settle", items: [{ requestId: "r1", ok: false }] });
  });
});
