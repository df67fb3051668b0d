// biome-ignore-all lint/suspicious/noTemplateCurlyInString: config files use ${ENV} references
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { loadGatewayConfig, resolveGatewayConfig } from "../../src/config/load-config.js";

const dir = mkdtempSync(join(tmpdir(), "codecell-config-"));
const resolve = (input: unknown, env: NodeJS.ProcessEnv = {}) =>
  resolveGatewayConfig(input, "c.json5", dir, env);

describe("resolveGatewayConfig", () => {
  it("resolves a full config", () => {
    const { config, problems } = resolve(
      {
        tools: { codeMode: { enabled: true, timeoutMs: 50 }, allow: ["*"], approval: ["write_file"] },
        workspace: ".",
        mcpServers: {
          memory: { package: "@modelcontextprotocol/server-memory" },
          remote: { url: "http://127.0.0.1:9/mcp", headers: { authorization: "Bearer ${TOKEN}" } },
          local: { command: "node", args: ["server.js"], env: { A: "${HOME:-/root}" } },
        },
        plugins: ["@codecell/plugin-example-notes"],
        snapshotStore: { kind: "sqlite", path: "runs.db" },
      },
      { TOKEN: "t0k" },
    );
    expect(problems).toEqual([]);
    expect(config?.codeMode).toMatchObject({ enabled: true, timeoutMs: 100 });
    expect(config?.warnings[0]).toMatch(/timeoutMs: 50 is outside its range; using 100/);
    expect(config?.mcpServers.memory).toMatchObject({ command: process.execPath });
    expect((config!.mcpServers.memory as { args: string[] }).args[0]).toMatch(/server-memory.*index\.js$/);
    expect(config?.mcpServers.remote).toEqual({
      url: "http://127.0.0.1:9/mcp",
      headers: { authorization: "Bearer t0k" },
    });
    expect(config?.mcpServers.local).toEqual({ command: "node", args: ["server.js"], env: { A: "/root" } });
    expect(config?.plugins[0]?.module).toMatch(/plugin-example-notes/);
    expect(config?.snapshotStore).toEqual({ kind: "sqlite", path: join(dir, "runs.db") });
  });

  it("defaults to code mode off, memory store, no workspace", () => {
    const { config } = resolve({});
    expect(config).toMatchObject({
      codeMode: { enabled: false },
      snapshotStore: { kind: "memory" },
      workspace: null,
    });
  });

  const cases: Array<[string, unknown, string, RegExp]> = [
    ["a misspelt top-level key", { workspce: "." }, "workspce", /Did you mean "workspace"/],
    ["a null workspace", { workspace: null }, "workspace", /got null: .* Expected a folder path/],
    ["a misspelt tools key", { tools: { deni: [] } }, "tools.deni", /Did you mean "deny"/],
    [
      "a bad codeMode type",
      { tools: { codeMode: "yes" } },
      "tools.codeMode",
      /expected true, false, or an object/,
    ],
    ["an allow that is no array", { tools: { allow: "x" } }, "tools.allow", /Expected an array/],
    ["an empty pattern", { tools: { deny: [" "] } }, "tools.deny.0", /got " "/],
    [
      "a server id with spaces",
      { mcpServers: { "my server": { command: "x" } } },
      "mcpServers.my server",
      /"my server" is not an accepted name/,
    ],
    ["a server with no kind", { mcpServers: { s: {} } }, "mcpServers.s", /needs "command"/],
    [
      "a server args not strings",
      { mcpServers: { s: { command: "x", args: [1] } } },
      "mcpServers.s.args.0",
      /got 1/,
    ],
    [
      "an unknown server key",
      { mcpServers: { s: { command: "x", cmd: "y" } } },
      "mcpServers.s.cmd",
      /unknown key/,
    ],
    [
      "a missing cwd",
      { mcpServers: { s: { command: "x", cwd: "nope" } } },
      "mcpServers.s.cwd",
      /does not exist/,
    ],
    [
      "a package without bin",
      { mcpServers: { s: { package: "zod" } } },
      "mcpServers.s.package",
      /has no bin/,
    ],
    [
      "a plugin object without module",
      { plugins: [{ options: {} }] },
      "plugins.0",
      /or \{ "module": "\.\.\."/,
    ],
    [
      "a sqlite store without path",
      { snapshotStore: { kind: "sqlite" } },
      "snapshotStore.path",
      /got nothing/,
    ],
    [
      "a sqlite store in a missing folder",
      { snapshotStore: { kind: "sqlite", path: "no/such/dir/x.db" } },
      "snapshotStore.path",
      /does not exist/,
    ],
    [
      "a redis store with a short secret, without echoing it",
      { snapshotStore: { kind: "redis", url: "redis://127.0.0.1:6379", secret: "too-short-secret" } },
      "snapshotStore.secret",
      /^got a secret of 16 characters: it must be at least 32 characters long\./,
    ],
    [
      "a redis store without a redis:// url",
      { snapshotStore: { kind: "redis", url: "http://user:hunter2@redis", secret: "s".repeat(40) } },
      "snapshotStore.url",
      /^got a secret of 25 characters: that is not a valid URL\. Expected a Redis URL.*rediss:\/\//,
    ],
    [
      "a redis store with neither url nor sentinels",
      { snapshotStore: { kind: "redis", secret: "s".repeat(40) } },
      "snapshotStore",
      /^a redis store needs "url" .* or "sentinels" with "name"/,
    ],
    [
      "a redis store with both url and sentinels",
      {
        snapshotStore: {
          kind: "redis",
          url: "redis://127.0.0.1:6379",
          sentinels: [{ host: "127.0.0.1", port: 26379 }],
          name: "mymaster",
          secret: "s".repeat(40),
        },
      },
      "snapshotStore",
      /^has both "url" and "sentinels": keep "url" for a standalone server, or drop it/,
    ],
    [
      "sentinels without a master name",
      {
        snapshotStore: {
          kind: "redis",
          sentinels: [{ host: "10.0.0.5", port: 26379 }],
          secret: "s".repeat(40),
        },
      },
      "snapshotStore.name",
      /^is missing: with "sentinels", give the master group name/,
    ],
    [
      "a sentinel without a port",
      {
        snapshotStore: {
          kind: "redis",
          sentinels: [{ host: "10.0.0.5" }],
          name: "m",
          secret: "s".repeat(40),
        },
      },
      "snapshotStore.sentinels.0.port",
      /Expected a Sentinel's port, 1 to 65535/,
    ],
    [
      "a Sentinel-only field beside url",
      { snapshotStore: { kind: "redis", url: "redis://127.0.0.1:6379", db: 2, secret: "s".repeat(40) } },
      "snapshotStore.db",
      /^applies only with "sentinels"; with "url" put it in the URL/,
    ],
    [
      "an unset env reference",
      { workspace: "${CODECELL_NOPE}" },
      "workspace",
      /CODECELL_NOPE, which is not set/,
    ],
  ];
  it.each(cases)("reports %s", (_label, input, path, message) => {
    const { config, problems } = resolve(input);
    expect(config).toBeNull();
    const problem = problems.find((candidate) => candidate.path === path);
    expect(problem, JSON.stringify(problems)).toBeDefined();
    expect(problem!.message).toMatch(message);
    expect(problem!.file).toBe("c.json5");
  });

  it("resolves a redis store from the environment, with its live-run cap", () => {
    const { config, problems } = resolve(
      {
        snapshotStore: {
          kind: "redis",
          url: "${REDIS_URL}",
          secret: "${CODECELL_SNAPSHOT_SECRET}",
          keyPrefix: "prod:",
          replicaLeaseMs: 10_000,
          maxLiveRuns: 5_000,
        },
      },
      { REDIS_URL: "rediss://codecell:pw@redis.internal:6380/1", CODECELL_SNAPSHOT_SECRET: "x".repeat(48) },
    );
    expect(problems).toEqual([]);
    expect(config?.snapshotStore).toEqual({
      kind: "redis",
      url: "rediss://codecell:pw@redis.internal:6380/1",
      secret: "x".repeat(48),
      keyPrefix: "prod:",
      replicaLeaseMs: 10_000,
      maxLiveRuns: 5_000,
    });
  });

  it("takes a principal's share of the live-run cap, and refuses one above the cap", () => {
    const ok = resolve({ snapshotStore: { kind: "memory", maxLiveRuns: 100, maxLiveRunsPerPrincipal: 10 } });
    expect(ok.problems).toEqual([]);
    expect(ok.config?.snapshotStore).toEqual({
      kind: "memory",
      maxLiveRuns: 100,
      maxLiveRunsPerPrincipal: 10,
    });
    const above = resolve({ snapshotStore: { kind: "memory", maxLiveRunsPerPrincipal: 65 } });
    const problem = above.problems.find(
      (candidate) => candidate.path === "snapshotStore.maxLiveRunsPerPrincipal",
    );
    expect(problem?.message).toMatch(/65 is above maxLiveRuns \(64\)/);
  });

  it("takes the host-record quotas on every store kind, and refuses bad ones naming the field and the fix", () => {
    const quotas = {
      maxHostRecordsPerPrincipal: 32,
      maxHostRecordBytesPerPrincipal: 8 * 1024 * 1024,
      maxHostRecordBytes: 32 * 1024 * 1024,
    };
    const memory = resolve({ snapshotStore: { kind: "memory", ...quotas } });
    expect(memory.problems).toEqual([]);
    expect(memory.config?.snapshotStore).toEqual({ kind: "memory", ...quotas });
    const sqlite = resolve({ snapshotStore: { kind: "sqlite", path: "runs.db", ...quotas } });
    expect(sqlite.problems).toEqual([]);
    expect(sqlite.config?.snapshotStore).toEqual({ kind: "sqlite", path: join(dir, "runs.db"), ...quotas });
    const redis = resolve(
      { snapshotStore: { kind: "redis", url: "redis://127.0.0.1:6379", secret: "${SECRET}", ...quotas } },
      { SECRET: "s".repeat(48) },
    );
    expect(redis.problems).toEqual([]);
    expect(redis.config?.snapshotStore).toMatchObject(quotas);
    // A per-principal byte quota equal to the budget is allowed; the budget alone, below the default
    // per-principal quota, is too (the principal's quota is then the budget).
    expect(
      resolve({
        snapshotStore: { kind: "memory", maxHostRecordBytesPerPrincipal: 4096, maxHostRecordBytes: 4096 },
      }).problems,
    ).toEqual([]);
    expect(resolve({ snapshotStore: { kind: "memory", maxHostRecordBytes: 1024 * 1024 } }).problems).toEqual(
      [],
    );

    const refused = (field: string, value: unknown, extra: Record<string, unknown> = {}) => {
      const { config, problems } = resolve({ snapshotStore: { kind: "memory", [field]: value, ...extra } });
      expect(config).toBeNull();
      const found = problems.filter((problem) => problem.path === `snapshotStore.${field}`);
      expect(found, JSON.stringify(problems)).toHaveLength(1);
      return found[0]!.message;
    };
    const least = {
      maxHostRecordsPerPrincipal: 1,
      maxHostRecordBytesPerPrincipal: 1024,
      maxHostRecordBytes: 1024,
    };
    for (const [field, min] of Object.entries(least)) {
      // Each says what was wrong, and the field's hint gives its unit, range and default.
      const hint = field === "maxHostRecordsPerPrincipal" ? /1 to 1000000, default 256/ : /at least 1024/;
      for (const [value, wrong] of [
        [-1, `must be at least ${min}`],
        [0, `must be at least ${min}`],
        [1.5, "not a whole number"],
        ["64MiB", "a string, not a number"],
      ] as const) {
        const message = refused(field, value);
        expect(message, `${field}: ${value}`).toContain(wrong);
        expect(message, `${field}: ${value}`).toMatch(hint);
      }
    }
    expect(refused("maxHostRecordsPerPrincipal", 2_000_000)).toContain("must be at most 1000000");
    expect(refused("maxHostRecordBytes", 512)).toMatch(/1024/);
    expect(refused("maxHostRecordBytesPerPrincipal", 100)).toMatch(/1024/);
    // Above the budget (given, or the 256 MiB default): named, with both ways out.
    expect(
      refused("maxHostRecordBytesPerPrincipal", 64 * 1024 * 1024, { maxHostRecordBytes: 1024 * 1024 }),
    ).toBe(
      "67108864 is above maxHostRecordBytes (1048576). Lower it, or raise snapshotStore.maxHostRecordBytes.",
    );
    expect(refused("maxHostRecordBytesPerPrincipal", 512 * 1024 * 1024)).toMatch(
      /^536870912 is above maxHostRecordBytes \(268435456\)\. Lower it, or raise snapshotStore\.maxHostRecordBytes\.$/,
    );
  });

  it("resolves a redis store on Sentinel, with the master's password from the environment", () => {
    const { config, problems } = resolve(
      {
        snapshotStore: {
          kind: "redis",
          sentinels: [
            { host: "10.0.0.5", port: 26379 },
            { host: "10.0.0.6", port: 26379 },
          ],
          name: "codecell",
          password: "${REDIS_PASSWORD}",
          db: 1,
          tls: true,
          secret: "${CODECELL_SNAPSHOT_SECRET}",
        },
      },
      { REDIS_PASSWORD: "pw", CODECELL_SNAPSHOT_SECRET: "x".repeat(48) },
    );
    expect(problems).toEqual([]);
    expect(config?.snapshotStore).toEqual({
      kind: "redis",
      sentinels: [
        { host: "10.0.0.5", port: 26379 },
        { host: "10.0.0.6", port: 26379 },
      ],
      name: "codecell",
      password: "pw",
      db: 1,
      tls: true,
      secret: "x".repeat(48),
    });
  });

  it("resolves http tokens from the environment and the session limits", () => {
    const { config, problems } = resolve(
      {
        http: {
          tokens: [{ name: "alice", token: "${ALICE_TOKEN}" }],
          allowedHosts: ["Codecell.Example.com"],
          maxSessionsPerPrincipal: 8,
          sessionIdleSeconds: 60,
          drainSeconds: 3,
        },
      },
      { ALICE_TOKEN: "0123456789abcdef0123" },
    );
    expect(problems).toEqual([]);
    expect(config?.http).toEqual({
      tokens: [{ name: "alice", token: "0123456789abcdef0123" }],
      allowedHosts: ["codecell.example.com"],
      maxSessionsPerPrincipal: 8,
      sessionIdleMs: 60_000,
      streamResumeMs: 5_000,
      drainMs: 3_000,
    });
    expect(resolve({}).config?.http).toMatchObject({
      tokens: [],
      maxSessionsPerPrincipal: 64,
      drainMs: 10_000,
    });
  });

  it("refuses a token name or secret used twice, and a misspelt http key", () => {
    const { problems } = resolve({
      http: {
        tokens: [
          { name: "a", token: "0123456789abcdef" },
          { name: "a", token: "0123456789abcdef" },
        ],
        allowedHost: [],
      },
    });
    expect(problems.map((problem) => problem.path).sort()).toEqual(["http.allowedHost"]);
    const twice = resolve({
      http: {
        tokens: [
          { name: "a", token: "0123456789abcdef" },
          { name: "a", token: "0123456789abcdef" },
        ],
      },
    }).problems;
    expect(twice.map((problem) => problem.path)).toEqual(["http.tokens.1.name", "http.tokens.1.token"]);
    expect(twice.map((problem) => problem.message).join("\n")).not.toContain("0123456789abcdef");
    expect(resolve({ http: { allowedHost: [] } }).problems[0]?.message).toMatch(
      /Did you mean "allowedHosts"/,
    );
  });

  it("reports several problems at once", () => {
    const { problems } = resolve({ extra: 1, workspace: "missing", tools: { codeMode: { enabled: "yes" } } });
    expect(problems.map((problem) => problem.path).sort()).toEqual([
      "extra",
      "tools.codeMode.enabled",
      "workspace",
    ]);
  });
});

describe("loadGatewayConfig", () => {
  it("reads JSON5 with comments and trailing commas", () => {
    const file = join(dir, "ok.json5");
    writeFileSync(file, "// comment\n{ tools: { codeMode: true, }, }\n");
    expect(loadGatewayConfig(file).config?.codeMode.enabled).toBe(true);
  });

  it("names a missing file", () => {
    const { problems } = loadGatewayConfig(join(dir, "missing.json5"));
    expect(problems[0]?.message).toMatch(/the file does not exist/);
  });
});
