import type { Worker } from "node:worker_threads";
import type { JsonValue } from "@codecell/contract";
import type {
  GuestSurface,
  HostRequest,
  RunOptions,
  SandboxEvent,
  SandboxLimits,
  SandboxPool,
  SandboxRun,
} from "../src/index.js";

export const limits: SandboxLimits = {
  memoryLimitBytes: 32 * 1024 * 1024,
  maxOutputBytes: 64 * 1024,
  maxPendingToolCalls: 16,
  maxSnapshotBytes: 10 * 1024 * 1024,
};

export const emptySurface: GuestSurface = {
  allTools: [],
  toolFunctions: [],
  mcpServers: [],
  apiFiles: [],
  namespaces: [],
};

/**
 * The text of `surface`'s API files, which the host keeps: `API.read` asks for it with an `api` request
 * (answer one with `answerApiRead`).
 */
export const apiFileTexts: Record<string, string> = {
  "mcp/index.d.ts": "declare const MCP: {};",
  "mcp/github.d.ts":
    "declare namespace MCP.github { function createIssue(input: {}): Promise<unknown>; } // é",
};

/** An `Answer` for `api` requests, from `apiFileTexts` (what the engine does with its declarations). */
export function answerApiRead(request: HostRequest): { ok: true; value: unknown } | undefined {
  if (request.kind !== "api") return undefined;
  const text = apiFileTexts[request.path];
  return text === undefined ? undefined : { ok: true, value: text };
}

export const surface: GuestSurface = {
  allTools: [
    { id: "core:host:read_file", name: "read_file", description: "Read a file", source: "core" },
    {
      id: "plugin:web:web_search",
      name: "web_search",
      description: "Search the web",
      source: "plugin",
      sourceName: "web",
    },
  ],
  toolFunctions: [
    { name: "read_file", toolId: "core:host:read_file" },
    { name: "web_search", toolId: "plugin:web:web_search" },
  ],
  mcpServers: [
    {
      identifier: "github",
      tools: [{ identifier: "createIssue", toolId: "mcp:github:create_issue" }],
      resources: true,
      prompts: true,
    },
  ],
  apiFiles: Object.entries(apiFileTexts).map(([path, text]) => ({
    path,
    description: path === "mcp/index.d.ts" ? "All servers" : "GitHub",
    bytes: Buffer.byteLength(text),
  })),
  namespaces: [
    {
      namespaceId: "github-issues",
      globalName: "Issues",
      scope: {
        repository: { owner: "o", name: "r" },
        list: { $codecellCall: "list" },
        nested: { update: { $codecellCall: "nested.update" } },
      },
    },
  ],
};

export type Answer = (
  request: HostRequest,
) =>
  | { ok: true; value: unknown }
  | { ok: false; error: { name: string; message: string; code?: "nested_tool_failed" } }
  | undefined;

/**
 * Run a cell to its terminal event, answering host requests with `answer` as soon as the run is idle.
 * An answer of `undefined` leaves the request pending (the caller then sees an idle event).
 */
export async function runToEnd(
  pool: SandboxPool,
  code: string,
  options: Partial<RunOptions> & { answer?: Answer; stopOnIdle?: boolean } = {},
): Promise<{ event: SandboxEvent; run: SandboxRun; requests: HostRequest[]; events: SandboxEvent[] }> {
  const requests: HostRequest[] = [];
  const run = pool.run({
    code,
    language: "javascript",
    surface: emptySurface,
    limits,
    // A backstop, not a limit under test (a test of the deadline sets its own): long enough that on a
    // loaded machine a memory or output limit is what a bomb meets first, within the test's 20 s.
    deadlineAt: Date.now() + 15_000,
    onRequest: (request) => requests.push(request),
    ...options,
  });
  const events: SandboxEvent[] = [];
  const answered = new Set<string>();
  for (let round = 0; round < 10_000; round++) {
    const event = await run.next();
    events.push(event);
    if (event.type !== "idle") return { event, run, requests, events };
    if (options.stopOnIdle) return { event, run, requests, events };
    let progressed = false;
    for (const request of event.pending) {
      if (answered.has(request.requestId)) continue;
      const outcome = options.answer?.(request);
      if (outcome === undefined) continue;
      answered.add(request.requestId);
      run.settle(request.requestId, outcome);
      progressed = true;
    }
    if (!progressed) return { event, run, requests, events };
  }
  throw new Error("runToEnd: too many rounds");
}

export function value(event: SandboxEvent): JsonValue | undefined {
  return event.type === "completed" ? event.value : undefined;
}

/**
 * What a bare sandbox worker (started without a pool) posts, batches unpacked: `next(type, runId)` waits for
 * and takes the first message of that type, or a "failed" one, of that run (of any run when none is named).
 */
export function workerMessages(worker: Worker): {
  next(type: string, runId?: string): Promise<Record<string, unknown>>;
} {
  const messages: Record<string, unknown>[] = [];
  let wake = () => {};
  worker.on("message", (message: Record<string, unknown>) => {
    const items = message.type === "batch" ? (message.messages as Record<string, unknown>[]) : [message];
    messages.push(...items);
    wake();
  });
  return {
    async next(type, runId) {
      for (;;) {
        const index = messages.findIndex(
          (message) =>
            (message.type === type || message.type === "failed") &&
            (runId === undefined || message.runId === runId),
        );
        if (index >= 0) return messages.splice(index, 1)[0] as Record<string, unknown>;
        await new Promise<void>((resolve) => {
          wake = resolve;
        });
      }
    },
  };
}

/**
 * Script text, for a fresh process that has `pool` (a sandbox pool), that runs one cell of `code` on it
 * and throws unless it completes with `expected`.
 */
export function runCellText(code: string, expected: number): string {
  return `{
    const run = pool.run({
      code: ${JSON.stringify(code)},
      language: "javascript",
      surface: ${JSON.stringify(emptySurface)},
      limits: ${JSON.stringify(limits)},
      timeoutMs: 30000,
      onRequest() {},
    });
    const event = await run.next();
    if (event.type !== "completed" || event.value !== ${expected}) throw new Error(JSON.stringify(event));
  }`;
}

/** runCellText of `return 1 + 1`. */
export const runTrivialCellText = runCellText("return 1 + 1", 2);
