import { spawn } from "node:child_process";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { describe, expect, it } from "vitest";
import {
  APP_DIR,
  baseConfig,
  CLI,
  callCodeMode,
  connectHttp,
  exitedWithOutput,
  makeSetup,
  startHttpGateway,
  until,
} from "./harness.js";

// The spec's debug switches, mapped to codecell: "CODECELL_DEBUG_CODE_MODE=1 (activation,
// per-call lines), CODECELL_DEBUG_MODEL_PAYLOAD=tools|full-redacted (the tool list a client receives / a
// bounded, redacted snapshot of results sent back), CODECELL_DEBUG_MODEL_TRANSPORT=1 (MCP messages in and
// out, one line each), CODECELL_DEBUG_SSE=events|peek (HTTP stream events; peek: the first five,
// redacted). All to stderr, never to a stdio transport's stdout."

const SECRET = "sk-live-0123456789abcdef";
const SLOW_SERVER = join(APP_DIR, "test", "fixtures", "slow-server.mjs");
/** A cell that returns a secret under a secret-looking key and a long string. */
const SECRET_CELL = `return { apiKey: "sk-live-" + "0123456789abcdef", long: "y".repeat(5000) };`;

const OFF = {
  CODECELL_DEBUG_CODE_MODE: "",
  CODECELL_DEBUG_MODEL_PAYLOAD: "",
  CODECELL_DEBUG_MODEL_TRANSPORT: "",
  CODECELL_DEBUG_SSE: "",
};

async function stdioWith(env: Record<string, string>, extraArgs: string[] = []) {
  const setup = makeSetup(baseConfig({ mcpServers: {} }));
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [CLI, "serve", "--config", setup.configPath, ...extraArgs],
    env: { ...(process.env as Record<string, string>), ...OFF, ...env },
    stderr: "pipe",
  });
  let stderr = "";
  transport.stderr?.on("data", (chunk: Buffer) => {
    stderr += chunk.toString("utf8");
  });
  const client = new Client({ name: "debug-test", version: "1.0.0" });
  await client.connect(transport);
  return { client, stderr: () => stderr, close: () => client.close() };
}

const linesOf = (text: string, tag: string) =>
  text.split("\n").filter((line) => line.startsWith(`[codecell:${tag}]`));

describe("debug switches over codecell serve (stdio)", () => {
  it("CODECELL_DEBUG_CODE_MODE=1: activation, one line per exec and per nested call, on stderr", async () => {
    const gateway = await stdioWith({ CODECELL_DEBUG_CODE_MODE: "1" });
    try {
      await gateway.client.listTools();
      const result = await callCodeMode(gateway.client, "exec", {
        code: 'await tools.call("plugin:notes:notes_list", {}); return 1;',
      });
      expect(result.status).toBe("completed");
      await until(() => /^\[codecell\] exec /m.test(gateway.stderr()), "the exec debug line");
      expect(gateway.stderr()).toMatch(/^\[codecell\] activation: active; model sees exec, wait/m);
      expect(gateway.stderr()).toMatch(/^\[codecell\] exec stdio\/call-1: completed; nested calls 1/m);
      expect(linesOf(gateway.stderr(), "code-mode")).toEqual([
        expect.stringMatching(
          /^\[codecell:code-mode\] nested call plugin:notes:notes_list \(run \S+\): ok in \d+ ms$/,
        ),
      ]);
    } finally {
      await gateway.close();
    }
  });

  // docs/operating.md: with --log-format json each line carries "runId, session, traceId where there is
  // one; debug-switch lines keep their switch as tag". Read from the real stderr of a gateway process.
  it("--log-format json: every exec and wait line, the switches' per-call lines included, has its runId, session and tag", async () => {
    const gateway = await stdioWith(
      { CODECELL_DEBUG_CODE_MODE: "1", CODECELL_DEBUG_MODEL_PAYLOAD: "full-redacted" },
      ["--log-format", "json"],
    );
    try {
      await gateway.client.listTools();
      const first = await callCodeMode(gateway.client, "exec", {
        code: 'await tools.call("plugin:notes:notes_list", {}); await yield_control("pause"); await tools.notes_list({}); return 1;',
      });
      expect(first.status).toBe("waiting");
      const runId = (first as { runId: string }).runId;
      const done = await callCodeMode(gateway.client, "wait", { runId });
      expect(done).toMatchObject({ status: "completed", value: 1 });
      await until(() => /"message":"wait completed"/.test(gateway.stderr()), "the wait record");
      await until(() => /"message":"wait [^"]*: completed/.test(gateway.stderr()), "the wait debug line");
      const records = gateway
        .stderr()
        .split("\n")
        .filter((line) => line.trim() !== "")
        .map((line) => JSON.parse(line) as Record<string, unknown>);
      const about = (record: Record<string, unknown>) => String(record.message);
      const perCall = records.filter((record) =>
        /^(exec|wait)\b|^nested call |^session \S+ (exec|wait) result/.test(about(record)),
      );
      // The engine's exec and wait lines, the two nested calls, the payload lines, the per-call records.
      expect(perCall.filter((record) => record.tag === "code-mode").length).toBeGreaterThanOrEqual(4);
      expect(perCall.filter((record) => record.tag === "payload")).toHaveLength(2);
      expect(perCall.filter((record) => record.tag === undefined).map(about)).toEqual([
        "exec waiting",
        "wait completed",
      ]);
      for (const record of perCall) {
        expect(record, JSON.stringify(record)).toMatchObject({ runId, session: expect.any(String) });
      }
      // Every switch line keeps its switch.
      for (const record of records.filter((record) => record.level === "debug")) {
        expect(record.tag, JSON.stringify(record)).toEqual(expect.any(String));
      }
    } finally {
      await gateway.close();
    }
  });

  it("CODECELL_DEBUG_MODEL_PAYLOAD=tools: the tool list the client receives, and no results", async () => {
    const gateway = await stdioWith({ CODECELL_DEBUG_MODEL_PAYLOAD: "tools" });
    try {
      const listed = await gateway.client.listTools();
      await callCodeMode(gateway.client, "exec", { code: "return 1" });
      await until(() => linesOf(gateway.stderr(), "payload").length > 0, "a payload line");
      const lines = linesOf(gateway.stderr(), "payload");
      expect(lines).toHaveLength(1);
      const json = lines[0]!.replace(/^\[codecell:payload\] session stdio tools\/list /, "");
      expect(JSON.parse(json)).toEqual(JSON.parse(JSON.stringify(listed)));
    } finally {
      await gateway.close();
    }
  });

  it("CODECELL_DEBUG_MODEL_PAYLOAD=full-redacted: results sent back, bounded and redacted", async () => {
    const gateway = await stdioWith({ CODECELL_DEBUG_MODEL_PAYLOAD: "full-redacted" });
    try {
      const result = await callCodeMode(gateway.client, "exec", { code: SECRET_CELL });
      expect(result.value).toMatchObject({ apiKey: SECRET });
      // stderr and stdout are separate pipes: the line may land just after the answer.
      const results = () =>
        linesOf(gateway.stderr(), "payload").filter((line) => line.includes("exec result"));
      await until(() => results().length > 0, "the exec result's payload line");
      const lines = results();
      expect(lines).toHaveLength(1);
      expect(lines[0]).toContain('"apiKey":"[redacted]"');
      expect(lines[0]).toContain('{"json":{"status":"completed","value":{"apiKey":"[redacted]"');
      expect(lines[0]).toContain("(5000 chars)");
      expect(gateway.stderr()).not.toContain(SECRET);
      expect(lines[0]!.length).toBeLessThan(2200);
    } finally {
      await gateway.close();
    }
  });

  it("CODECELL_DEBUG_MODEL_TRANSPORT=1: every message in and out, one line each", async () => {
    const gateway = await stdioWith({ CODECELL_DEBUG_MODEL_TRANSPORT: "1" });
    try {
      await gateway.client.listTools();
      await callCodeMode(gateway.client, "exec", {
        code: 'return { token: "sk-live-" + "0123456789abcdef" }',
      });
      await until(
        () => linesOf(gateway.stderr(), "transport").filter((l) => l.includes('"result"')).length >= 3,
        "three answers in the transport lines",
      );
      const lines = linesOf(gateway.stderr(), "transport");
      const methods = lines.map((line) => /^\[codecell:transport\] stdio stdio (in |out) /.exec(line)?.[1]);
      expect(methods.every((direction) => direction !== undefined)).toBe(true);
      expect(lines.filter((line) => line.includes('"method":"initialize"'))).toHaveLength(1);
      expect(lines.filter((line) => line.includes('"method":"tools/list"'))).toHaveLength(1);
      expect(lines.filter((line) => line.includes('"method":"tools/call"'))).toHaveLength(1);
      // initialize, tools/list and tools/call are answered: three responses out.
      expect(lines.filter((line) => line.includes(" out ") && line.includes('"result"'))).toHaveLength(3);
      expect(gateway.stderr()).not.toContain(SECRET);
    } finally {
      await gateway.close();
    }
  });

  it("keeps stdout pure JSON-RPC with every switch on", async () => {
    const setup = makeSetup(baseConfig({ mcpServers: {} }));
    const child = spawn(process.execPath, [CLI, "serve", "--config", setup.configPath], {
      stdio: ["pipe", "pipe", "pipe"],
      env: {
        ...process.env,
        CODECELL_DEBUG_CODE_MODE: "1",
        CODECELL_DEBUG_MODEL_PAYLOAD: "full-redacted",
        CODECELL_DEBUG_MODEL_TRANSPORT: "1",
        CODECELL_DEBUG_SSE: "peek",
      },
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk: Buffer) => {
      stdout += chunk.toString("utf8");
    });
    child.stderr.on("data", (chunk: Buffer) => {
      stderr += chunk.toString("utf8");
    });
    const send = (message: object) => child.stdin.write(`${JSON.stringify(message)}\n`);
    send({
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "raw", version: "1" } },
    });
    send({ jsonrpc: "2.0", method: "notifications/initialized" });
    send({ jsonrpc: "2.0", id: 2, method: "tools/list" });
    send({
      jsonrpc: "2.0",
      id: 3,
      method: "tools/call",
      params: { name: "exec", arguments: { code: "return 2" } },
    });
    await until(() => stdout.includes('"id":3'), "the exec answer", 30_000);
    child.stdin.end();
    await exitedWithOutput(child);
    const lines = stdout.split("\n").filter((line) => line !== "");
    expect(lines.length).toBeGreaterThanOrEqual(3);
    for (const line of lines) expect(JSON.parse(line)).toMatchObject({ jsonrpc: "2.0" });
    expect(stderr).toContain("[codecell:transport]");
    expect(stderr).toContain("[codecell:payload]");
    expect(stderr).toContain("[codecell] activation: active");
  });
});

describe("CODECELL_DEBUG_SSE over codecell serve --http", () => {
  /** A 6 s cell asked for progress: its stream carries a progress event a second, then the result. */
  async function sseLines(mode: "events" | "peek") {
    const setup = makeSetup(
      baseConfig({
        tools: { codeMode: { enabled: true, timeoutMs: 30_000 } },
        mcpServers: {
          slow: {
            command: process.execPath,
            args: [SLOW_SERVER],
            env: { CALL_LOG: join(tmpdir(), "codecell-sse-calls.log") },
          },
        },
      }),
    );
    const gateway = await startHttpGateway(setup.configPath, { env: { ...OFF, CODECELL_DEBUG_SSE: mode } });
    try {
      const session = await connectHttp(gateway.mcpUrl);
      await session.client.listTools();
      const result = await session.client.callTool(
        {
          name: "exec",
          arguments: {
            code: 'await MCP.slow.waitLong({ seconds: 6 }); return { password: "sk-live-" + "0123456789abcdef" };',
          },
        },
        undefined,
        { onprogress: () => {} },
      );
      expect(result.isError).toBeFalsy();
      await session.close();
    } finally {
      await gateway.stop();
    }
    const lines = linesOf(gateway.output(), "sse");
    const streams = new Map<string, string[]>();
    for (const line of lines) {
      const stream = /^\[codecell:sse\] (.*? stream \d+) event \d+/.exec(line)![1]!;
      streams.set(stream, [...(streams.get(stream) ?? []), line]);
    }
    const execStream = [...streams.values()].find((events) =>
      events.some((line) => line.includes("notifications/progress")),
    )!;
    return { lines, execStream };
  }

  it("events: one line per SSE event, without its data", async () => {
    const { lines, execStream } = await sseLines("events");
    for (const line of lines) {
      expect(line).toMatch(
        /^\[codecell:sse\] http .* stream \d+ event \d+( id=\S+)? \d+ bytes: (priming event \(no data\)|response to \d+|notifications\/\w+)$/,
      );
    }
    expect(execStream.length).toBeGreaterThan(5);
    expect(execStream.at(-1)).toMatch(/: response to \d+$/);
    expect(lines.join("\n")).not.toContain('"jsonrpc"');
  });

  it("peek: the first five events of each stream with their data, redacted, then nothing more", async () => {
    const { lines, execStream } = await sseLines("peek");
    // Each line shows the event's data (cut at 2000 characters), or says it is the empty priming event.
    for (const line of lines) {
      expect(line).toMatch(/ bytes: [^{]+ \{"(result|method|error|jsonrpc)"|: priming event \(no data\)$/);
    }
    expect(lines.filter((line) => line.includes('"jsonrpc":"2.0"'))).not.toHaveLength(0);
    expect(execStream).toHaveLength(5);
    expect(execStream.map((line) => /event (\d+)/.exec(line)![1])).toEqual(["1", "2", "3", "4", "5"]);
    expect(lines.join("\n")).not.toContain(SECRET);
  });
});
