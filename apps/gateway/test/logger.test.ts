import { afterEach, describe, expect, it } from "vitest";
import { log, operatorLine, setLogFormat, setLogSink } from "../src/logger.js";

describe("the gateway's stderr logger", () => {
  const lines: string[] = [];
  setLogSink((line) => lines.push(line));
  afterEach(() => {
    lines.length = 0;
    setLogFormat("human");
  });

  it("writes the human lines exactly as they always read", () => {
    operatorLine('serving MCP over stdio (config: a.json5, session "stdio")');
    operatorLine('warning: MCP server "x": disconnected');
    log(
      "debug",
      "nested call t (run r): ok in 1 ms",
      { tag: "code-mode" },
      "[codecell:code-mode] nested call t (run r): ok in 1 ms",
    );
    expect(lines).toEqual([
      'codecell: serving MCP over stdio (config: a.json5, session "stdio")\n',
      'codecell: warning: MCP server "x": disconnected\n',
      "[codecell:code-mode] nested call t (run r): ok in 1 ms\n",
    ]);
  });

  it("writes one JSON object per line with level, time, message and the run's fields", () => {
    setLogFormat("json");
    operatorLine('warning: MCP server "x": disconnected');
    log("info", "exec completed", { runId: "run-1", session: "s-1", traceId: "abc", code: undefined });
    const records = lines.map((line) => {
      expect(line.endsWith("\n")).toBe(true);
      expect(line.trimEnd().includes("\n")).toBe(false);
      return JSON.parse(line) as Record<string, unknown>;
    });
    expect(records[0]).toMatchObject({ level: "warn", message: 'MCP server "x": disconnected' });
    expect(records[1]).toEqual({
      level: "info",
      time: expect.any(String),
      message: "exec completed",
      runId: "run-1",
      session: "s-1",
      traceId: "abc",
    });
    expect(Number.isNaN(Date.parse(String(records[1]!.time)))).toBe(false);
  });
});
