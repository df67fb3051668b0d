import { readFileSync } from "node:fs";
import { type ScriptedUpstream, startScriptedUpstream } from "@codecell/agent/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { baseConfig, type HttpGateway, makeSetup, startHttpGateway } from "./harness.js";

// One principal floods the gateway with large conversations: every answer that ran a cell leaves a
// conversation record in the gateway's memory (the default store). The host-record quotas keep the
// flooder within its own budget, so the gateway's RSS stays far below what the records would take
// unbounded, and another principal's conversation is kept and goes on.

const MIB = 1024 * 1024;
const tokens = { mallory: "mallory-flood-token-0123456789", alice: "alice-flood-token-0123456789ab" };
const TOOLS = [
  { type: "function", function: { name: "pick", parameters: { type: "object", properties: {} } } },
];
const CONVERSATIONS = 40;
const MESSAGE_BYTES = 6 * MIB;

function rssOf(pid: number): number {
  const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return Number(match?.[1] ?? 0) * 1024;
}

describe("one principal flooding the conversation records of a real gateway", () => {
  let upstream: ScriptedUpstream;
  let gateway: HttpGateway;

  beforeAll(async () => {
    upstream = await startScriptedUpstream();
    gateway = await startHttpGateway(
      makeSetup(
        baseConfig({
          tools: { codeMode: { enabled: true, timeoutMs: 3000 } },
          mcpServers: {},
          snapshotStore: {
            kind: "memory",
            maxHostRecordBytesPerPrincipal: 16 * MIB,
            maxHostRecordBytes: 32 * MIB,
          },
          http: { tokens: Object.entries(tokens).map(([name, token]) => ({ name, token })) },
          agent: { upstream: { baseUrl: upstream.baseUrl, apiKey: "upstream-key", timeoutMs: 60_000 } },
        }),
      ).configPath,
      // A heap too small for the records unbounded (240 MiB): the gateway must keep within its quotas
      // to live through the flood, and its collector runs before RSS strays far above what it holds.
      { env: { NODE_OPTIONS: "--max-old-space-size=128" } },
    );
  }, 60_000);

  afterAll(async () => {
    await gateway?.stop();
    await upstream?.close();
  });

  /** One answer that ran a cell (so the gateway keeps its hidden turns): exec, then the text. */
  const converse = async (who: keyof typeof tokens, messages: unknown[], text: string) => {
    upstream.script(
      { toolCalls: [{ name: "exec", arguments: { code: `return "${text} seen"` } }] },
      { text },
    );
    const response = await fetch(`${gateway.url}v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${tokens[who]}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "m", messages, tools: TOOLS }),
    });
    expect(response.status).toBe(200);
    const body = (await response.json()) as { choices: Array<{ message: { content: string } }> };
    return body.choices[0]!.message.content;
  };

  it("keeps the gateway's RSS far below the unbounded records, and another principal's conversation goes on", async () => {
    const aliceFirst = [{ role: "user", content: "hello" }];
    expect(await converse("alice", aliceFirst, "alice answer")).toBe("alice answer");

    const pid = gateway.child.pid!;
    const before = rssOf(pid);
    let peak = before;
    // 40 conversations of 6 MiB each: 240 MiB of records if nothing bounded them.
    const big = "m".repeat(MESSAGE_BYTES);
    for (let index = 0; index < CONVERSATIONS; index++) {
      await converse("mallory", [{ role: "user", content: `${index} ${big}` }], `flood ${index}`);
      peak = Math.max(peak, rssOf(pid));
    }
    const unbounded = CONVERSATIONS * MESSAGE_BYTES;
    // The quotas hold 16 MiB of mallory's records (32 MiB in all); what the gateway grew by besides is
    // the requests in flight and garbage not yet collected, far from the 240 MiB.
    expect(peak - before).toBeLessThan(unbounded / 2);

    // Alice's record was kept: her next request continues from it (the model sees her cell's result).
    upstream.script((body) => {
      const messages = body.messages as Array<{ role: string; content?: unknown }>;
      const seen = messages.some(
        (message) => message.role === "tool" && String(message.content).includes("alice answer seen"),
      );
      return { text: seen ? "continued" : "started afresh" };
    });
    const response = await fetch(`${gateway.url}v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${tokens.alice}`, "content-type": "application/json" },
      body: JSON.stringify({
        model: "m",
        tools: TOOLS,
        messages: [
          ...aliceFirst,
          { role: "assistant", content: "alice answer" },
          { role: "user", content: "and?" },
        ],
      }),
    });
    expect(response.status).toBe(200);
    const body = (await response.json()) as { choices: Array<{ message: { content: string } }> };
    expect(body.choices[0]!.message.content).toBe("continued");
    expect((await fetch(`${gateway.url}healthz`)).status).toBe(200);
  }, 300_000);
});
