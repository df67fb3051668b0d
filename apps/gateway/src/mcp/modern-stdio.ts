import type { Transport } from "@modelcontextprotocol/server";
import { serveStdio } from "@modelcontextprotocol/server/stdio";
import type { Gateway } from "../gateway.js";
import { operatorLine } from "../logger.js";
import type { RunOwner } from "../sessions/run-owner.js";
import { createModernServer } from "./modern-front.js";

/**
 * MCP 2026-07-28 over stdio, on SDK v2's `serveStdio`: it answers `server/discover`, checks each
 * request's envelope and serves the connection with one server object (modern-front.ts). Loaded only
 * when a client opens with that protocol, so a session-era client's start loads none of SDK v2.
 */
export function serveModernStdio(
  gateway: Gateway,
  owner: RunOwner,
  transport: Transport,
): { close(): Promise<void> } {
  return serveStdio(() => createModernServer(gateway, { owner, transport: "stdio" }), {
    transport,
    // The era switch in stdio-transport.ts hands session-era clients to the SDK 1.x server instead.
    legacy: "reject",
    onerror: (error) => operatorLine(`MCP (2026-07-28) over stdio: ${error.message}`),
  });
}
