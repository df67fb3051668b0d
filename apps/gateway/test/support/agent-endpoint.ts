import type { ScriptedReply, ScriptedUpstream } from "@codecell/agent/testing";
import { baseConfig, type HttpGateway, makeSetup, startHttpGateway } from "../harness.js";

/** A request body the scripted upstream received (Chat Completions shape, whatever the client spoke). */
export type UpstreamBody = Record<string, unknown>;

/** The tool names a request offered the model. */
export const upstreamToolNames = (body: UpstreamBody | undefined): string[] =>
  ((body?.tools ?? []) as Array<{ function: { name: string } }>).map((tool) => tool.function.name);

/** The messages of a request, as the model read them. */
export const upstreamMessages = (body: UpstreamBody | undefined): Array<Record<string, unknown>> =>
  (body?.messages ?? []) as Array<Record<string, unknown>>;

/** The last tool message of a request (the exec or wait result the model reads), parsed. */
export function lastToolResult(body: UpstreamBody): Record<string, unknown> {
  const tool = upstreamMessages(body)
    .filter((message) => message.role === "tool")
    .at(-1);
  return JSON.parse(String(tool?.content)) as Record<string, unknown>;
}

/** The rejection of `promise` as an instance of `errorClass` (a client library's API error). */
export async function rejectionOf<E>(
  promise: Promise<unknown>,
  errorClass: abstract new (...args: never[]) => E,
): Promise<E> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof errorClass) return error;
    throw error;
  }
  throw new Error("expected the request to fail");
}

export type AgentGateways = {
  /** Code mode on: the client's tools are hidden behind exec and wait. */
  codeMode: HttpGateway;
  /** Code mode off: the endpoint passes requests through. */
  passThrough: HttpGateway;
  stop(): Promise<void>;
};

/**
 * Two gateways on one scripted upstream, started side by side: one with code mode on (its
 * `tools.codeMode` and other settings from `codeModeConfig`), one with it off. Both take the same
 * bearer tokens and the same agent settings (2.5 s upstream timeout, four model turns).
 */
export async function startAgentGateways(
  upstream: ScriptedUpstream,
  options: { tokens: Array<{ name: string; token: string }>; codeModeConfig: Record<string, unknown> },
): Promise<AgentGateways> {
  const agent = {
    upstream: { baseUrl: upstream.baseUrl, apiKey: "upstream-key-123", timeoutMs: 2500 },
    maxModelTurns: 4,
  };
  const http = { tokens: options.tokens };
  const [codeMode, passThrough] = await Promise.all([
    startHttpGateway(makeSetup(baseConfig({ ...options.codeModeConfig, http, agent })).configPath),
    startHttpGateway(
      makeSetup(baseConfig({ tools: { codeMode: false }, mcpServers: {}, http, agent })).configPath,
    ),
  ]);
  return {
    codeMode,
    passThrough,
    async stop() {
      await Promise.all([codeMode.stop(), passThrough.stop()]);
    },
  };
}

/**
 * A scripted step that holds its request until `release()`, then answers `reply`: `reached` settles
 * when the request is in, so a test acts while the endpoint is answering.
 */
export function heldReply(reply: ScriptedReply): {
  step: () => Promise<ScriptedReply>;
  reached: Promise<void>;
  release(): void;
} {
  let reach!: () => void;
  let release!: () => void;
  const reached = new Promise<void>((resolve) => {
    reach = resolve;
  });
  const released = new Promise<void>((resolve) => {
    release = resolve;
  });
  return {
    step: async () => {
      reach();
      await released;
      return reply;
    },
    reached,
    release,
  };
}
