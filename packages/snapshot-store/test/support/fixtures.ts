import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { emptyTelemetry } from "@codecell/contract";
import { type RunningRedis, startRedisServer } from "../../../../scripts/redis-server.mjs";
import type { SnapshotBackend } from "../../src/backend.js";
import { MemorySnapshotBackend } from "../../src/memory-backend.js";
import { RedisSnapshotBackend } from "../../src/redis-backend.js";
import { SqliteSnapshotBackend } from "../../src/sqlite-backend.js";
import type { RunScope, SuspendInput } from "../../src/types.js";

/** A backend under test and how to clean up after it. */
export type BackendFactory = {
  name: string;
  create(): SnapshotBackend;
  cleanup(): void;
  /** Starts what the backend needs (a server), once per suite. */
  setup?(): Promise<void>;
  teardown?(): Promise<void>;
};

/** The integrity secret every Redis backend of the tests shares. */
export const TEST_SECRET = "codecell-test-secret-of-at-least-32-bytes";

/** Redis backends on one real redis-server; every `create` gets a key prefix of its own. */
export function redisFactory(): BackendFactory & { server(): RunningRedis } {
  let server: RunningRedis | undefined;
  let next = 0;
  return {
    name: "redis",
    server() {
      if (server === undefined) throw new Error("redisFactory: setup() has not run");
      return server;
    },
    async setup() {
      server = await startRedisServer();
    },
    async teardown() {
      await server?.stop();
    },
    create() {
      next += 1;
      return new RedisSnapshotBackend({
        url: this.server().url,
        secret: TEST_SECRET,
        keyPrefix: `t${process.pid}-${next}:`,
      });
    },
    cleanup() {},
  };
}

export function memoryFactory(): BackendFactory {
  return { name: "memory", create: () => new MemorySnapshotBackend(), cleanup: () => {} };
}

/** `signed`: rows carry HMACs, as the gateway opens its SQLite store. */
export function sqliteFactory(signed = false): BackendFactory {
  const directories: string[] = [];
  return {
    name: signed ? "sqlite (signed)" : "sqlite",
    create() {
      const directory = mkdtempSync(join(tmpdir(), "codecell-snapshots-"));
      directories.push(directory);
      return new SqliteSnapshotBackend({
        path: join(directory, "snapshots.db"),
        ...(signed ? { secret: TEST_SECRET } : {}),
      });
    },
    cleanup() {
      for (const directory of directories.splice(0)) rmSync(directory, { recursive: true, force: true });
    },
  };
}

export function scopeFor(overrides: Partial<RunScope> = {}): RunScope {
  return {
    agentId: "agent-main",
    sessionKey: "agent:main:chat-1",
    sessionId: "session-1",
    parentRunId: "agent-run-1",
    toolCallId: "toolu_exec_1",
    ...overrides,
  };
}

/** Bytes whose content depends on the seed, so a mixed-up or torn record is visible. */
export function patternBytes(length: number, seed: number): Uint8Array {
  const bytes = new Uint8Array(length);
  let state = (seed * 2654435761) >>> 0 || 1;
  for (let index = 0; index < length; index += 1) {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    bytes[index] = state & 0xff;
  }
  return bytes;
}

export function suspendInput(overrides: Partial<SuspendInput> = {}): SuspendInput {
  return {
    scope: scopeFor(),
    snapshot: patternBytes(2048, 7),
    pendingCalls: [
      { callId: "call-1", toolId: "core__read_file", startedAt: "2026-01-01T00:00:00.000Z" },
      { callId: "call-2", toolId: "mcp__github__create_issue", startedAt: "2026-01-01T00:00:00.010Z" },
    ],
    output: [{ type: "text", text: "started" }],
    telemetry: { ...emptyTelemetry(), execCount: 1 },
    ...overrides,
  };
}

/** A clock the test moves by hand. */
export function manualClock(start = Date.UTC(2026, 0, 1)) {
  let now = start;
  return {
    now: () => now,
    advance(ms: number) {
      now += ms;
    },
  };
}
