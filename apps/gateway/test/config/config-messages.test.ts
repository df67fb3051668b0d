import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { issueMessage, knownKeysAt } from "../../src/config/config-messages.js";
import { resolveGatewayConfig } from "../../src/config/load-config.js";

const dir = mkdtempSync(join(tmpdir(), "codecell-messages-"));
const resolve = (input: unknown) => resolveGatewayConfig(input, "c.json5", dir, {});
const messageAt = (input: unknown, path: string) => {
  const { problems } = resolve(input);
  const found = problems.filter((problem) => problem.path === path);
  expect(found, JSON.stringify(problems)).toHaveLength(1);
  return found[0]!.message;
};

// Wording the validator library uses; none of it may reach a user.
const VALIDATOR_WORDING =
  /Invalid (input|discriminator|URL|string|key)|Too (small|big)|expected \w+, received|>=|<=/;

describe("config messages, one line each, in our words", () => {
  it("names the allowed snapshot store kinds without validator text", () => {
    expect(messageAt({ snapshotStore: { kind: "postgres" } }, "snapshotStore.kind")).toBe(
      'got "postgres": that value is not one of the allowed ones. Expected "memory", "sqlite" or "redis".',
    );
  });

  it('gives a "did you mean" for a misspelt key at the top level and under tools', () => {
    expect(messageAt({ workspce: "." }, "workspce")).toMatch(
      /^unknown key\. Did you mean "workspace"\? Known keys: \$schema, tools, mcpServers, .*workspace.*\.$/,
    );
    expect(messageAt({ tools: { aprovals: [] } }, "tools.aprovals")).toMatch(
      /^unknown key\. Did you mean "approval"\?/,
    );
  });

  it('gives a "did you mean" for a misspelt key inside mcpServers.<name>', () => {
    expect(
      messageAt(
        { mcpServers: { memory: { pakage: "@modelcontextprotocol/server-memory" } } },
        "mcpServers.memory.pakage",
      ),
    ).toBe(
      'unknown key. Did you mean "package"? An entry needs "command" (a program started over stdio), "package" (an installed npm package with a bin) or "url" (Streamable HTTP).',
    );
    expect(
      messageAt(
        { mcpServers: { memory: { package: "@modelcontextprotocol/server-memory", arg: [] } } },
        "mcpServers.memory.arg",
      ),
    ).toBe('unknown key. Did you mean "args"? Known keys: package, bin, args, env, cwd, connectTimeoutMs.');
    expect(
      messageAt(
        { mcpServers: { remote: { url: "http://127.0.0.1:9/mcp", header: {} } } },
        "mcpServers.remote.header",
      ),
    ).toBe('unknown key. Did you mean "headers"? Known keys: url, headers, transport, connectTimeoutMs.');
    expect(messageAt({ mcpServers: { local: { command: "node", agrs: [] } } }, "mcpServers.local.agrs")).toBe(
      'unknown key. Did you mean "args"? Known keys: command, args, env, cwd, connectTimeoutMs.',
    );
  });

  it("explains wrong types, empty strings, bad URLs and bad server names", () => {
    expect(messageAt({ tools: { deny: "write_file" } }, "tools.deny")).toBe(
      'got "write_file": that is a string, not an array. Expected an array of tool ids or names, "*" globs allowed, e.g. ["mcp:memory:delete_*"].',
    );
    expect(messageAt({ workspace: 3 }, "workspace")).toBe(
      'got 3: that is a whole number, which is none of the accepted forms. Expected a folder path, relative to the config file, that the core file tools may touch, or { "path": "...", "maxBytes": 1073741824, "maxWriteBytesPerRun": 67108864 }.',
    );
    expect(messageAt({ mcpServers: { c: { command: "" } } }, "mcpServers.c.command")).toBe(
      'got "": it must not be empty. Expected the program to start, e.g. "node".',
    );
    expect(messageAt({ mcpServers: { u: { url: "ftp://x" } } }, "mcpServers.u.url")).toBe(
      'got "ftp://x": that is not a valid URL. Expected an http(s) URL such as "http://127.0.0.1:3001/mcp".',
    );
    expect(messageAt({ mcpServers: { "my server": { command: "node" } } }, "mcpServers.my server")).toBe(
      '"my server" is not an accepted name. Expected a server id made of letters, digits, "_" and "-", such as "memory" or "my-server".',
    );
    expect(messageAt({ snapshotStore: { kind: "sqlite" } }, "snapshotStore.path")).toBe(
      "got nothing: this field is required. Expected a file path for the SQLite database, relative to the config file.",
    );
  });

  it("never shows validator wording, in any message of a config with every kind of mistake", () => {
    const { problems } = resolve({
      tools: { codeMode: { enabled: true, timeoutMs: "fast" }, allow: [""], deny: "x", approval: [1] },
      snapshotStore: { kind: "redis" },
      plugins: [42, { modul: "x" }],
      mcpServers: {
        "bad name": { command: "node" },
        a: { package: "" },
        b: { url: "ftp://x", transport: "websocket" },
        c: { command: "node", args: "x", env: { A: 1 } },
      },
      workspace: 3,
      extra: true,
    });
    expect(problems.length).toBeGreaterThanOrEqual(12);
    for (const problem of problems) {
      expect(problem.message).not.toMatch(VALIDATOR_WORDING);
      expect(problem.message).not.toContain("\n");
    }
  });

  it("shows clamping warnings alongside errors", () => {
    const result = resolve({
      tools: { codeMode: { enabled: true, timeoutMs: 5, langauges: [] } },
      workspace: 3,
    });
    expect(result.config).toBeNull();
    expect(result.problems.map((problem) => problem.path)).toEqual(
      expect.arrayContaining(["workspace", "tools.codeMode.langauges"]),
    );
    expect(result.config === null && result.warnings).toEqual([
      "c.json5: tools.codeMode.timeoutMs: 5 is outside its range; using 100.",
    ]);
  });
});

describe("the message machinery on fields it has never seen", () => {
  // The shape other parts of the config grow (an http section with tokens), checked the same way.
  const schema = z.strictObject({
    http: z
      .strictObject({
        tokens: z.array(z.strictObject({ name: z.string().min(1), token: z.string().min(16) })),
        mode: z.enum(["open", "closed"]).optional(),
      })
      .optional(),
  });

  it("finds the known keys of any nested object, through optional, arrays and unions", () => {
    expect(knownKeysAt(schema, [])).toEqual(["http"]);
    expect(knownKeysAt(schema, ["http"])).toEqual(["tokens", "mode"]);
    expect(knownKeysAt(schema, ["http", "tokens", 0])).toEqual(["name", "token"]);
    const either = z.union([z.strictObject({ a: z.string() }), z.strictObject({ b: z.string() })]);
    expect(knownKeysAt(either, [])).toEqual(["a", "b"]);
  });

  it("words any issue itself, listing allowed values from the schema", () => {
    const input = { http: { tokens: [{ name: "me", token: "short" }], mode: "ajar" } };
    const result = schema.safeParse(input);
    expect(result.success).toBe(false);
    const messages = result.error!.issues.map((issue) => {
      let value: unknown = input;
      for (const key of issue.path) value = (value as Record<PropertyKey, unknown>)[key];
      return issueMessage(issue, value, { schema, path: issue.path });
    });
    expect(messages).toEqual([
      'got "short": it must be at least 16 characters long.',
      'got "ajar": that value is not one of the allowed ones. Allowed: "open", "closed".',
    ]);
  });
});
