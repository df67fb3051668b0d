import { spawn } from "node:child_process";
import { PassThrough } from "node:stream";
import { describe, expect, it } from "vitest";
import { GatewayStdioTransport } from "../src/mcp/stdio-transport.js";
import { baseConfig, CLI, makeSetup } from "./harness.js";

type Reply = { id?: unknown; result?: unknown; error?: { code: number; message: string } };

describe("the stdio transport under oversized and malformed messages", () => {
  it("answers an 11 MiB request and a non-JSON line with JSON-RPC errors and keeps serving", async () => {
    const setup = makeSetup(baseConfig({ mcpServers: {}, plugins: [] }));
    const child = spawn(process.execPath, [CLI, "serve", "--config", setup.configPath], {
      stdio: ["pipe", "pipe", "pipe"],
    });
    let stderr = "";
    child.stderr.on("data", (chunk: Buffer) => {
      stderr += chunk.toString("utf8");
    });
    const replies: Reply[] = [];
    let pending = "";
    const waiters: Array<() => void> = [];
    child.stdout.on("data", (chunk: Buffer) => {
      pending += chunk.toString("utf8");
      let newline = pending.indexOf("\n");
      while (newline !== -1) {
        replies.push(JSON.parse(pending.slice(0, newline)) as Reply);
        pending = pending.slice(newline + 1);
        newline = pending.indexOf("\n");
      }
      for (const wake of waiters.splice(0)) wake();
    });
    const exited = new Promise<number | null>((resolveExit) =>
      child.once("exit", (code) => resolveExit(code)),
    );
    const reply = async (match: (candidate: Reply) => boolean): Promise<Reply> => {
      for (;;) {
        const found = replies.find(match);
        if (found) return found;
        await new Promise<void>((wake) => waiters.push(wake));
      }
    };
    const send = (message: unknown) => child.stdin.write(`${JSON.stringify(message)}\n`);
    try {
      send({
        jsonrpc: "2.0",
        id: 1,
        method: "initialize",
        params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "t", version: "1" } },
      });
      await reply((candidate) => candidate.id === 1);
      send({ jsonrpc: "2.0", method: "notifications/initialized" });
      // Written the way the SDK's client writes requests: the id last, after 11 MiB of params.
      send({
        method: "tools/call",
        params: { name: "exec", arguments: { code: `return "${"x".repeat(11 * 1024 * 1024)}".length;` } },
        jsonrpc: "2.0",
        id: 7,
      });
      const refused = await reply((candidate) => candidate.id === 7);
      expect(refused.error?.code).toBe(-32600);
      expect(refused.error?.message).toMatch(/larger than the gateway's limit of 10485760 bytes/);

      child.stdin.write("this is not json\n");
      const parseError = await reply((candidate) => candidate.error?.code === -32700);
      expect(parseError.id).toBeNull();

      send({
        jsonrpc: "2.0",
        id: 8,
        method: "tools/list",
      });
      const answered = await reply((candidate) => candidate.id === 8);
      expect(JSON.stringify(answered.result)).toContain('"name":"exec"');
      expect(stderr).toMatch(/refused a \d+-byte message from the client/);
    } finally {
      child.stdin.end();
    }
    // The client closing stdin is the normal end.
    expect(await exited).toBe(0);
  }, 60_000);

  it("reports a failing stream as an unexpected end (the command exits non-zero for it)", async () => {
    const stdin = new PassThrough();
    const stdout = new PassThrough();
    const transport = new GatewayStdioTransport({ stdin, stdout, log: () => {} });
    const closed = new Promise<void>((resolveClose) => {
      transport.onclose = () => resolveClose();
    });
    await transport.start();
    stdout.emit("error", new Error("write EPIPE"));
    await closed;
    expect(transport.end).toEqual({ expected: false, reason: "write EPIPE" });

    const input = new PassThrough();
    const normal = new GatewayStdioTransport({ stdin: input, stdout: new PassThrough(), log: () => {} });
    const ended = new Promise<void>((resolveClose) => {
      normal.onclose = () => resolveClose();
    });
    await normal.start();
    expect(normal.end).toBeNull();
    input.end();
    await ended;
    expect(normal.end).toEqual({ expected: true });
  });
});
