// biome-ignore-all lint/suspicious/noTemplateCurlyInString: config files use ${ENV} references
import { request } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  baseConfig,
  callCodeMode,
  connectHttp,
  type HttpGateway,
  makeSetup,
  runCli,
  startHttpGateway,
} from "./harness.js";

const ALICE = "alice-token-0123456789abcdef";
const BOB = "bob-token-0123456789abcdef0";
const auth = (token: string) => ({ authorization: `Bearer ${token}` });

/** A raw request, so the Host header can be anything (fetch does not let a caller set it). */
function rawGet(
  url: string,
  headers: Record<string, string>,
): Promise<{ status: number; headers: Record<string, unknown>; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { headers }, (res) => {
      let body = "";
      res.on("data", (chunk: Buffer) => {
        body += chunk.toString("utf8");
      });
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    req.once("error", reject);
    req.end();
  });
}

/** A cell that waits on a slow shell command, so its exec returns `waiting`. */
const SLOW_CELL = `const r = await tools.call("core:codecell:exec", { command: "sleep 4; echo slow done" }); return r.stdout.trim();`;

describe("codecell serve --http with bearer tokens", () => {
  let gateway: HttpGateway;

  beforeAll(async () => {
    const setup = makeSetup(
      baseConfig({
        tools: { codeMode: { enabled: true, timeoutMs: 2500 }, allow: ["*", "core:codecell:exec"] },
        http: {
          tokens: [
            { name: "alice", token: "${ALICE_TOKEN}" },
            { name: "bob", token: BOB },
          ],
        },
        // Never called here: it only puts the agent routes on the start-up banner.
        agent: { upstream: { baseUrl: "http://127.0.0.1:9/v1", apiKey: "sk-never-called-0123456789" } },
      }),
    );
    gateway = await startHttpGateway(setup.configPath, { env: { ALICE_TOKEN: ALICE } });
  });
  afterAll(async () => {
    expect(await gateway?.stop()).toBe(0);
  });

  it("prints client setups that send the bearer header, the agent routes, and never a token", () => {
    const output = gateway.output();
    expect(output).toContain(
      `claude mcp add --transport http codecell ${gateway.mcpUrl} --header "Authorization: Bearer <your token>"`,
    );
    expect(output).toContain(`"headers":{"Authorization":"Bearer <your token>"}`);
    expect(output).toMatch(new RegExp(`OpenAI Chat Completions +POST ${gateway.url}v1/chat/completions`));
    expect(output).toMatch(new RegExp(`Anthropic Messages +POST ${gateway.url}v1/messages`));
    expect(output).not.toContain(ALICE);
    expect(output).not.toContain(BOB);
  });

  it("answers 401 with WWW-Authenticate without a token or with a wrong one", async () => {
    const init = { jsonrpc: "2.0", id: 1, method: "initialize", params: {} };
    const post = (headers: Record<string, string>) =>
      fetch(gateway.mcpUrl, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          accept: "application/json, text/event-stream",
          ...headers,
        },
        body: JSON.stringify(init),
      });
    const missing = await post({});
    expect(missing.status).toBe(401);
    expect(missing.headers.get("www-authenticate")).toBe('Bearer realm="codecell"');
    const wrong = await post(auth(`${ALICE}x`));
    expect(wrong.status).toBe(401);
    expect(wrong.headers.get("www-authenticate")).toMatch(/error="invalid_token"/);
    expect(await wrong.text()).not.toContain(ALICE);
    // The SDK client with the token from the environment (`${ALICE_TOKEN}` in the config) gets in.
    const session = await connectHttp(gateway.mcpUrl, {}, { headers: auth(ALICE) });
    try {
      const { tools } = await session.client.listTools();
      expect(tools.map((tool) => tool.name)).toEqual(["exec", "wait"]);
    } finally {
      await session.close();
    }
  });

  it("says only ok on /healthz without a token, and the details with one", async () => {
    const bare = (await (await fetch(`${gateway.url}healthz`)).json()) as Record<string, unknown>;
    expect(bare).toEqual({ status: "ok" });
    const full = (await (await fetch(`${gateway.url}healthz`, { headers: auth(BOB) })).json()) as Record<
      string,
      unknown
    >;
    expect(full).toMatchObject({ status: "ok", mcpServers: [{ server: "memory", state: "ready" }] });
  });

  it("lets any session of the same principal and conversation wait on a run, and nobody else", async () => {
    const conversation = { "codecell-session": "chat-42" };
    const first = await connectHttp(gateway.mcpUrl, {}, { headers: { ...auth(ALICE), ...conversation } });
    const sameOwner = await connectHttp(gateway.mcpUrl, {}, { headers: { ...auth(ALICE), ...conversation } });
    const otherChat = await connectHttp(
      gateway.mcpUrl,
      {},
      { headers: { ...auth(ALICE), "codecell-session": "chat-43" } },
    );
    const otherPrincipal = await connectHttp(
      gateway.mcpUrl,
      {},
      { headers: { ...auth(BOB), ...conversation } },
    );
    const noHeader = await connectHttp(gateway.mcpUrl, {}, { headers: auth(ALICE) });
    try {
      const waiting = await callCodeMode(first.client, "exec", { code: SLOW_CELL });
      expect(waiting.status, `${waiting.code}: ${waiting.error}`).toBe("waiting");
      const runId = waiting.runId!;

      // Outsiders get exactly what a runId that never existed gets.
      const neverExisted = await callCodeMode(otherChat.client, "wait", {
        runId: `${runId.slice(0, -4)}zzzz`,
      });
      for (const outsider of [otherChat, otherPrincipal, noHeader]) {
        const refused = await callCodeMode(outsider.client, "wait", { runId });
        expect(refused).toMatchObject({ status: "failed", code: neverExisted.code });
        expect(refused.error?.replace(runId, "<id>")).toBe(
          neverExisted.error!.replace(`${runId.slice(0, -4)}zzzz`, "<id>"),
        );
      }

      // The session that started the run goes away; the run does not go with it.
      await first.close();
      let result = await callCodeMode(sameOwner.client, "wait", { runId });
      for (let i = 0; i < 10 && result.status === "waiting"; i++) {
        result = await callCodeMode(sameOwner.client, "wait", { runId: result.runId });
      }
      expect(result).toMatchObject({ status: "completed", value: "slow done" });
    } finally {
      for (const session of [sameOwner, otherChat, otherPrincipal, noHeader]) await session.close();
    }
  });

  it("answers another principal's MCP session id like an unknown one", async () => {
    const alice = await connectHttp(gateway.mcpUrl, {}, { headers: auth(ALICE) });
    try {
      const sessionId = (alice.client.transport as { sessionId?: string }).sessionId!;
      const hijack = await fetch(gateway.mcpUrl, {
        method: "POST",
        headers: {
          ...auth(BOB),
          "mcp-session-id": sessionId,
          "content-type": "application/json",
          accept: "application/json, text/event-stream",
        },
        body: JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/list", params: {} }),
      });
      expect(hijack.status).toBe(404);
    } finally {
      await alice.close();
    }
  });

  it("checks the Host header on every route (DNS rebinding)", async () => {
    for (const path of ["healthz", "mcp", ""]) {
      const rebound = await rawGet(`${gateway.url}${path}`, { host: "rebind.evil.example", ...auth(BOB) });
      expect(rebound.status, path).toBe(403);
      expect(rebound.body).not.toMatch(/memory|pid/);
    }
    const local = await rawGet(`${gateway.url}healthz`, { host: `localhost:${new URL(gateway.url).port}` });
    expect(local.status).toBe(200);
  });
});

describe("codecell serve --http exposure", () => {
  it("refuses a non-loopback --host without tokens, before starting anything", async () => {
    const setup = makeSetup(baseConfig());
    const result = await runCli(["serve", "--config", setup.configPath, "--http", "0", "--host", "0.0.0.0"]);
    expect(result.code).toBe(3);
    expect(result.stderr).toMatch(/--host 0\.0\.0\.0 lets other machines reach the gateway.*http\.tokens/);
  });

  it("reports a short token without echoing it", async () => {
    const setup = makeSetup(baseConfig({ http: { tokens: [{ name: "a", token: "short-secret" }] } }));
    const result = await runCli(["check", "--config", setup.configPath]);
    expect(result.code).toBe(3);
    expect(result.stderr).toMatch(/http\.tokens\.0\.token: got a secret of 12 characters/);
    expect(result.stderr).not.toContain("short-secret");
  });
});
