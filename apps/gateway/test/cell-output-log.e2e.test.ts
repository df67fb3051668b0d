import { LoggingMessageNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { describe, expect, it } from "vitest";
import {
  baseConfig,
  type Connected,
  callCodeMode,
  connectHttp,
  connectStdio,
  makeSetup,
  startHttpGateway,
} from "./harness.js";

// The promise tested here: "Logging: the logging capability; logging/setLevel; run events, cell output (optional)
// and downstream servers' log messages as notifications/message with a logger name per source."

const CELL = `console.log("plain"); console.warn("careful"); console.debug("detail"); text("said"); json({ n: 1 }); return 7;`;

async function cellMessages(session: Connected, level: "debug" | "info") {
  const messages: Array<{ level: string; logger?: string; data: unknown }> = [];
  session.client.setNotificationHandler(LoggingMessageNotificationSchema, (notification) => {
    messages.push(notification.params);
  });
  await session.client.setLoggingLevel(level);
  const result = await callCodeMode(session.client, "exec", { code: CELL });
  expect(result).toMatchObject({ status: "completed", value: 7 });
  return messages.filter((message) => message.logger?.startsWith("codecell.cell."));
}

const ALL = [
  { level: "info", logger: "codecell.cell.console", data: "plain" },
  { level: "warning", logger: "codecell.cell.console", data: "careful" },
  { level: "debug", logger: "codecell.cell.console", data: "detail" },
  { level: "info", logger: "codecell.cell.text", data: "said" },
  { level: "info", logger: "codecell.cell.json", data: { n: 1 } },
];

describe("cell output as log messages (logging.cellOutput)", () => {
  it("over stdio: one message per output item, in order, logger per source, before the result", async () => {
    const setup = makeSetup(baseConfig({ mcpServers: {}, logging: { cellOutput: true } }));
    const session = await connectStdio(setup.configPath);
    try {
      expect(await cellMessages(session, "debug")).toEqual(ALL);
      // The threshold applies: at info, console.debug is not sent.
      expect(await cellMessages(session, "info")).toEqual(ALL.filter((message) => message.level !== "debug"));
    } finally {
      await session.close();
    }
  });

  it("over HTTP, the same on the call's own stream", async () => {
    const setup = makeSetup(baseConfig({ mcpServers: {}, logging: { cellOutput: true } }));
    const gateway = await startHttpGateway(setup.configPath);
    try {
      const session = await connectHttp(gateway.mcpUrl);
      expect(await cellMessages(session, "debug")).toEqual(ALL);
      await session.close();
    } finally {
      expect(await gateway.stop()).toBe(0);
    }
  });

  it("is off unless the config asks", async () => {
    const setup = makeSetup(baseConfig({ mcpServers: {} }));
    const session = await connectStdio(setup.configPath);
    try {
      expect(await cellMessages(session, "debug")).toEqual([]);
    } finally {
      await session.close();
    }
  });
});
