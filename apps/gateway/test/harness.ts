// biome-ignore-all lint/suspicious/noTemplateCurlyInString: config files use ${ENV} references
import { type ChildProcess, spawn } from "node:child_process";
import { cpSync, mkdtempSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { ClientCapabilities } from "@modelcontextprotocol/sdk/types.js";

export const APP_DIR = fileURLToPath(new URL("..", import.meta.url));
export const CLI = join(APP_DIR, "dist", "cli.js");
const require = createRequire(import.meta.url);

export function everythingBin(): string {
  const manifest = require.resolve("@modelcontextprotocol/server-everything/package.json");
  return join(manifest, "..", "dist", "index.js");
}

/** Waits for `check` to hold, polling every 50 ms; fails naming `what` after `timeoutMs`. */
export async function until(
  check: () => boolean | Promise<boolean>,
  what: string,
  timeoutMs = 20_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/**
 * The child's exit code once it has exited and its piped stdout and stderr have ended. Node emits
 * "exit" before it has read the last of the pipes, so output read at "exit" can miss the final lines.
 * A pipe that a grandchild still holds open is waited on for at most `drainMs`.
 */
export async function exitedWithOutput(child: ChildProcess, drainMs = 5000): Promise<number | null> {
  const code =
    child.exitCode !== null || child.signalCode !== null
      ? child.exitCode
      : await new Promise<number | null>((resolve) => child.once("exit", (exitCode) => resolve(exitCode)));
  const closed = (stream: NodeJS.ReadableStream | null) =>
    stream === null || (stream as { closed?: boolean }).closed
      ? Promise.resolve()
      : new Promise<void>((resolve) => stream.once("close", () => resolve()));
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    Promise.all([closed(child.stdout), closed(child.stderr)]),
    new Promise<void>((resolve) => {
      timer = setTimeout(resolve, drainMs);
    }),
  ]);
  clearTimeout(timer);
  return code;
}

/** A fresh folder holding a copy of the demo workspace and a config written from `config`. */
export function makeSetup(config: Record<string, unknown>): {
  dir: string;
  configPath: string;
  workspace: string;
} {
  const dir = mkdtempSync(join(tmpdir(), "codecell-gateway-"));
  const workspace = join(dir, "workspace");
  cpSync(join(APP_DIR, "demo-workspace"), workspace, { recursive: true });
  const configPath = join(dir, "codecell.json5");
  writeFileSync(configPath, JSON.stringify(config, null, 2));
  return { dir, configPath, workspace };
}

/** The embedded default's shape, with the memory server's file kept inside the test folder. */
export function baseConfig(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    tools: { codeMode: { enabled: true, timeoutMs: 1500 } },
    workspace: "./workspace",
    plugins: ["@codecell/plugin-example-notes"],
    mcpServers: {
      memory: {
        package: "@modelcontextprotocol/server-memory",
        env: { MEMORY_FILE_PATH: "${CODECELL_CONFIG_DIR}/memory.jsonl" },
      },
    },
    ...overrides,
  };
}

export type Connected = { client: Client; close(): Promise<void>; stderr: () => string };

function newClient(capabilities: ClientCapabilities = {}): Client {
  return new Client({ name: "codecell-test", version: "1.0.0" }, { capabilities });
}

export async function connectStdio(
  configPath: string,
  options: { args?: string[]; capabilities?: ClientCapabilities; env?: Record<string, string> } = {},
): Promise<Connected> {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [CLI, "serve", "--config", configPath, ...(options.args ?? [])],
    stderr: "pipe",
    ...(options.env ? { env: { ...(process.env as Record<string, string>), ...options.env } } : {}),
  });
  let stderr = "";
  transport.stderr?.on("data", (chunk: Buffer) => {
    stderr += chunk.toString("utf8");
  });
  const client = newClient(options.capabilities);
  await client.connect(transport);
  return { client, close: () => client.close(), stderr: () => stderr };
}

export type HttpGateway = {
  url: string;
  mcpUrl: string;
  child: ChildProcess;
  stop(): Promise<number | null>;
  output(): string;
};

/** Spawns `codecell serve --http 0` and reads the URL it prints. */
export async function startHttpGateway(
  configPath: string | null,
  /** detached: the gateway leads its own process group (with its downstream servers), to kill as one. */
  options: { env?: NodeJS.ProcessEnv; args?: string[]; detached?: boolean } = {},
): Promise<HttpGateway> {
  const config = configPath === null ? [] : ["--config", configPath];
  const child = spawn(process.execPath, [CLI, "serve", ...config, "--http", "0", ...(options.args ?? [])], {
    stdio: ["ignore", "pipe", "pipe"],
    detached: options.detached ?? false,
    env: { ...process.env, ...options.env },
  });
  let output = "";
  const exited = exitedWithOutput(child);
  const mcpUrl = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`gateway did not start:\n${output}`)), 30_000);
    const onData = (chunk: Buffer) => {
      output += chunk.toString("utf8");
      const match = /MCP endpoint\s+(http:\/\/\S+\/mcp)/.exec(output);
      if (match) {
        clearTimeout(timer);
        resolve(match[1]!);
      }
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", onData);
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`gateway exited with ${code}:\n${output}`));
    });
  });
  return {
    url: mcpUrl.replace(/mcp$/, ""),
    mcpUrl,
    child,
    output: () => output,
    async stop() {
      if (child.exitCode === null) child.kill("SIGTERM");
      return exited;
    },
  };
}

export async function connectHttp(
  mcpUrl: string,
  capabilities: ClientCapabilities = {},
  options: { headers?: Record<string, string> } = {},
): Promise<Connected> {
  const client = newClient(capabilities);
  const transport = new StreamableHTTPClientTransport(new URL(mcpUrl), {
    ...(options.headers ? { requestInit: { headers: options.headers } } : {}),
  });
  await client.connect(transport);
  return {
    client,
    close: async () => {
      await transport.terminateSession().catch(() => {});
      await client.close();
    },
    stderr: () => "",
  };
}

/** The fields the text item of an exec/wait result may hold. */
const MODEL_TEXT_FIELDS = [
  "status",
  "value",
  "error",
  "code",
  "output",
  "runId",
  "reason",
  "yieldReason",
  "pendingToolCalls",
  "diagnostics",
  "typecheckNote",
];

/**
 * The text item is the model's compact view of the structured result: the same status, value or error
 * and code, output, runId, reason and pending calls (without start times), and no telemetry.
 */
export function assertModelText(parsed: Record<string, unknown>, structured: Record<string, unknown>): void {
  const extra = Object.keys(parsed).filter((key) => !MODEL_TEXT_FIELDS.includes(key));
  if (extra.length > 0) throw new Error(`the text item holds ${extra.join(", ")} beyond the model's fields`);
  if (!("telemetry" in structured)) throw new Error("structuredContent lost its telemetry");
  for (const key of MODEL_TEXT_FIELDS) {
    const expected =
      key === "pendingToolCalls" && Array.isArray(structured[key])
        ? (structured[key] as Array<{ startedAt?: string }>).map(({ startedAt: _at, ...call }) => call)
        : structured[key];
    if (JSON.stringify(parsed[key]) !== JSON.stringify(expected)) {
      throw new Error(`text content and structuredContent differ in ${key}`);
    }
  }
}

/** Calls exec or wait and returns the structured result, checking the text item says the same. */
export async function callCodeMode(client: Client, tool: "exec" | "wait", args: Record<string, unknown>) {
  const result = await client.callTool({ name: tool, arguments: args });
  const text = (result.content as Array<{ type: string; text: string }>)[0]!.text;
  const structured = result.structuredContent as Record<string, unknown> & {
    status: string;
    value?: unknown;
    runId?: string;
    error?: string;
    code?: string;
    output?: Array<{ type: string; text?: string; value?: unknown }>;
  };
  assertModelText(JSON.parse(text), structured);
  return structured;
}

export function runCli(
  args: string[],
  /** nodeArgs: options for node itself, before the CLI's file. */
  /** cwd: the folder the command runs in (default: the test's). */
  options: { input?: string; env?: NodeJS.ProcessEnv; nodeArgs?: string[]; cwd?: string } = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [...(options.nodeArgs ?? []), CLI, ...args], {
      stdio: ["pipe", "pipe", "pipe"],
      env: { ...process.env, ...options.env },
      ...(options.cwd ? { cwd: options.cwd } : {}),
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk: Buffer) => {
      stdout += chunk.toString("utf8");
    });
    child.stderr.on("data", (chunk: Buffer) => {
      stderr += chunk.toString("utf8");
    });
    child.stdin.end(options.input ?? "");
    void exitedWithOutput(child).then((code) => resolve({ code, stdout, stderr }));
  });
}
