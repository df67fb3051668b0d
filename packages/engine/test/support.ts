import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import {
  CodeModeError,
  type CodeModeResult,
  type HostTool,
  type JsonValue,
  markCodeModeControlTool,
} from "@codecell/contract";
import { createMcpConnector, type McpConnector } from "@codecell/mcp-connector";
import { createCodeModeNamespaceTool, registerCodeModeNamespaceForPlugin } from "@codecell/namespaces";
import type { NestedToolCall, ToolExecutor } from "../src/index.js";

const require = createRequire(import.meta.url);

/** The bin of an npm-installed MCP server, resolved inside node_modules (never downloaded). */
export function serverBin(packageName: string): string {
  const manifestPath = require.resolve(`${packageName}/package.json`);
  const manifest = JSON.parse(readFileSync(manifestPath, "utf8")) as { bin: string | Record<string, string> };
  const bin = typeof manifest.bin === "string" ? manifest.bin : Object.values(manifest.bin)[0]!;
  return join(dirname(manifestPath), bin);
}

const objectSchema = (properties: Record<string, unknown>, required: string[] = []) => ({
  type: "object",
  properties,
  required,
});

/** Test tools from all four sources, including a shell `exec`, control-named tools and a denied one. */
export const hostTools: HostTool[] = [
  {
    name: "read_file",
    description: "Read a UTF-8 text file from the workspace and return its content.",
    parameters: objectSchema({ path: { type: "string" } }, ["path"]),
    source: "core",
    owner: "host",
  },
  {
    name: "exec",
    description: "Run a shell command in the workspace.",
    parameters: objectSchema({ command: { type: "string" } }, ["command"]),
    source: "core",
    owner: "host",
  },
  {
    name: "slow_echo",
    description: "Echo the input back after a delay in milliseconds.",
    parameters: objectSchema({ ms: { type: "number" }, value: {} }, ["ms"]),
    source: "core",
    owner: "host",
  },
  {
    name: "fail_always",
    description: "A tool that always fails.",
    parameters: objectSchema({}),
    source: "core",
    owner: "host",
  },
  {
    name: "admin_delete_everything",
    description: "Delete every record. Denied by policy in tests.",
    parameters: objectSchema({}),
    source: "core",
    owner: "host",
  },
  // The host's own control tools (a tool-search surface): marked, so never catalogued whatever the name.
  markCodeModeControlTool({
    name: "wait",
    description: "A host control tool named wait: never catalogued.",
    parameters: objectSchema({}),
    source: "core",
    owner: "host",
  }),
  markCodeModeControlTool({
    name: "tool_search",
    description: "Control tool of tool search: never catalogued.",
    parameters: objectSchema({}),
    source: "core",
    owner: "host",
  }),
  {
    name: "message",
    description: "Send a message to the user (kept visible to the model).",
    parameters: objectSchema({ text: { type: "string" } }, ["text"]),
    source: "core",
    owner: "host",
    directOnly: true,
  },
  {
    name: "notes_list",
    description: "List notes, optionally only those with a tag.",
    parameters: objectSchema({ tag: { type: "string" } }),
    source: "plugin",
    owner: "notes",
  },
  {
    name: "notes_add",
    description: "Add a note with a tag.",
    parameters: objectSchema({ text: { type: "string" }, tag: { type: "string" } }, ["text"]),
    source: "plugin",
    owner: "notes",
  },
  {
    name: "select_file",
    description: "Ask the user to pick a file in the client app.",
    parameters: objectSchema({ prompt: { type: "string" } }),
    source: "client",
    owner: "app",
  },
];

export type RecordedCall = Pick<NestedToolCall, "toolId" | "input" | "via" | "parent"> & {
  agentId: string;
  sessionId: string;
};

/** The host's tool path for tests: real implementations of the test tools, recording every call. */
export class TestExecutor implements ToolExecutor {
  readonly calls: RecordedCall[] = [];
  readonly notes: Array<{ text: string; tag?: string }> = [{ text: "buy milk", tag: "home" }];
  /** Tool ids that need approval, and the decision the "user" gives. */
  approvals = new Map<string, boolean>();
  mcp?: {
    callTool(
      server: string,
      tool: string,
      input: unknown,
      options: { signal: AbortSignal },
    ): Promise<unknown>;
  };

  async callTool(call: NestedToolCall): Promise<unknown> {
    this.calls.push({
      toolId: call.toolId,
      input: call.input,
      via: call.via,
      parent: call.parent,
      agentId: call.context.agentId,
      sessionId: call.context.sessionId,
    });
    const approval = this.approvals.get(call.toolId);
    if (approval === false) throw new Error(`The user declined ${call.tool.name}.`);
    const input = (call.input ?? {}) as Record<string, JsonValue>;
    switch (call.tool.name) {
      case "read_file":
        return { path: input.path, content: `content of ${String(input.path)}` };
      case "exec":
        return { stdout: `ran ${String(input.command)}`, exitCode: 0 };
      case "slow_echo":
        call.progress({ progress: 0, total: 1, message: "started" });
        await new Promise((resolve, reject) => {
          const timer = setTimeout(resolve, Number(input.ms));
          call.signal.addEventListener("abort", () => {
            clearTimeout(timer);
            reject(new CodeModeError("aborted", "slow_echo was cancelled."));
          });
        });
        return input.value ?? null;
      case "fail_always":
        throw new Error("disk on fire");
      case "notes_list":
        return this.notes.filter((note) => !input.tag || note.tag === input.tag);
      case "notes_add":
        this.notes.push({ text: String(input.text), tag: input.tag as string | undefined });
        return { count: this.notes.length };
      case "select_file":
        return { path: "picked.txt" };
      default:
        if (call.tool.source === "mcp" && this.mcp) {
          const [, server, ...rest] = call.toolId.split(":");
          return this.mcp.callTool(server!, rest.join(":"), call.input, { signal: call.signal });
        }
        throw new Error(`no implementation for ${call.toolId}`);
    }
  }
}

export const context = (
  overrides: Partial<{ agentId: string; sessionKey: string; sessionId: string; runId: string }> = {},
) => ({
  agentId: "agent-1",
  sessionKey: "key-1",
  sessionId: "session-1",
  runId: "run-1",
  ...overrides,
});

/** The test plugin's namespace: `Notes.list(tag?)`, `Notes.add(text, tag?)`, `Notes.nested.count()`. */
export function registerNotesNamespace(): void {
  registerCodeModeNamespaceForPlugin("notes", {
    id: "notes",
    globalName: "Notes",
    description: "Personal notes.",
    prompt: "Use Notes.list(tag?) and Notes.add(text, tag?).",
    requiredToolNames: ["notes_list", "notes_add"],
    createScope: () => ({
      list: createCodeModeNamespaceTool("notes_list", ([tag]) => (tag ? { tag } : {})),
      add: createCodeModeNamespaceTool("notes_add", ([text, tag]) => ({ text, tag })),
      nested: { count: createCodeModeNamespaceTool("notes_list") },
    }),
  });
}

/** The real `server-memory` over stdio, with its graph in a fresh temporary folder. */
export async function startMemoryServer(): Promise<{ mcp: McpConnector; close(): Promise<void> }> {
  const folder = mkdtempSync(join(tmpdir(), "codecell-engine-memory-"));
  const mcp = createMcpConnector({
    memory: {
      command: process.execPath,
      args: [serverBin("@modelcontextprotocol/server-memory")],
      env: { MEMORY_FILE_PATH: join(folder, "memory.jsonl") },
    },
  });
  await mcp.start();
  if (mcp.diagnostics.length > 0)
    throw new Error(`server-memory did not start: ${JSON.stringify(mcp.diagnostics)}`);
  return {
    mcp,
    async close() {
      await mcp.close();
      rmSync(folder, { recursive: true, force: true });
    },
  };
}

/**
 * Watches the host's event loop while something runs: a timer ticks every few milliseconds and the
 * longest gap between two ticks is how long the loop was blocked. Tests compare that gap with the
 * whole operation's duration, so a loaded machine (which stretches both) does not decide the result,
 * but work done synchronously on the host (one gap as long as the operation) does.
 */
export function watchEventLoop(): { stop(): { ticks: number; maxGapMs: number; elapsedMs: number } } {
  const startedAt = performance.now();
  let last = startedAt;
  let maxGapMs = 0;
  let ticks = 0;
  const timer = setInterval(() => {
    const now = performance.now();
    maxGapMs = Math.max(maxGapMs, now - last);
    last = now;
    ticks++;
  }, 2);
  return {
    stop() {
      clearInterval(timer);
      const now = performance.now();
      maxGapMs = Math.max(maxGapMs, now - last);
      return { ticks, maxGapMs, elapsedMs: now - startedAt };
    },
  };
}

function describeResult(result: CodeModeResult | undefined): string {
  return result === undefined ? "no result" : JSON.stringify({ ...result, telemetry: undefined });
}

/**
 * The value of a completed result, typed as the test reads it. Fails with the whole result when the
 * exec did not complete, so a test never reads `undefined` off a failure by mistake.
 */
export function completedValue<T = unknown>(result: CodeModeResult | undefined): T {
  if (result?.status !== "completed")
    throw new Error(`expected a completed result, got ${describeResult(result)}`);
  return result.value as T;
}

/** The error message of a failed result; fails with the whole result otherwise. */
export function failedError(result: CodeModeResult | undefined): string {
  if (result?.status !== "failed") throw new Error(`expected a failed result, got ${describeResult(result)}`);
  return result.error;
}

/** The run id of a waiting result, to pass to `wait`; fails with the whole result otherwise. */
export function waitingRunId(result: CodeModeResult | undefined): string {
  if (result?.status !== "waiting")
    throw new Error(`expected a waiting result, got ${describeResult(result)}`);
  return result.runId;
}
