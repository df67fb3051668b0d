// biome-ignore-all lint/suspicious/noTemplateCurlyInString: hints show ${ENV} references as users write them
import { z } from "zod";
import { AGENT_FIELD_HINTS, agentConfigSchema } from "./agent-config.js";
import { TELEMETRY_FIELD_HINTS, telemetrySchema } from "./telemetry-config.js";

/** A schema built the first time it is asked for (see gatewayConfigFields), then the same one. */
function once<Schema>(build: () => Schema): () => Schema {
  let schema: Schema | undefined;
  return () => {
    schema ??= build();
    return schema;
  };
}

/**
 * The gateway's config file, apart from `tools.codeMode` (validated by `@codecell/contract`) and the
 * shape of each `mcpServers` entry (checked one by one so every entry gets its own message).
 */
export const stdioServerSchema = once(() =>
  z.strictObject({
    command: z.string().min(1),
    args: z.array(z.string()).optional(),
    env: z.record(z.string(), z.string()).optional(),
    cwd: z.string().min(1).optional(),
    connectTimeoutMs: z.number().int().min(100).max(600_000).optional(),
  }),
);

export const packageServerSchema = once(() =>
  z.strictObject({
    package: z.string().min(1),
    bin: z.string().min(1).optional(),
    args: z.array(z.string()).optional(),
    env: z.record(z.string(), z.string()).optional(),
    cwd: z.string().min(1).optional(),
    connectTimeoutMs: z.number().int().min(100).max(600_000).optional(),
  }),
);

export const httpServerSchema = once(() =>
  z.strictObject({
    url: z.url({ protocol: /^https?$/ }),
    headers: z.record(z.string(), z.string()).optional(),
    transport: z.enum(["streamable-http", "sse"]).optional(),
    connectTimeoutMs: z.number().int().min(100).max(600_000).optional(),
  }),
);

/**
 * `tools.allow`, `tools.deny` and `tools.approval`: one schema for the three (a zod schema holds no state
 * of a parse, and a message's path comes from where the value is), built once instead of three times on
 * every start whose config has `tools`.
 */
const patternList = once(() => z.array(z.string().trim().min(1)).optional());

export const pluginEntrySchema = once(() =>
  z.union([
    z.string().min(1),
    z.strictObject({ module: z.string().min(1), options: z.unknown().optional() }),
  ]),
);

/** Live (waiting or running) runs the store holds at once; shared by every replica on Redis. */
const maxLiveRuns = () => z.number().int().min(1).max(1_000_000).optional();

/** The host-record quotas (transcripts, stored responses): per principal, and the store's budget. */
const hostRecordLimits = () => ({
  maxHostRecordsPerPrincipal: z.number().int().min(1).max(1_000_000).optional(),
  maxHostRecordBytesPerPrincipal: z.number().int().min(1_024).max(Number.MAX_SAFE_INTEGER).optional(),
  maxHostRecordBytes: z.number().int().min(1_024).max(Number.MAX_SAFE_INTEGER).optional(),
});

export const snapshotStoreSchema = once(() =>
  z.discriminatedUnion("kind", [
    z.strictObject({
      kind: z.literal("memory"),
      maxLiveRuns: maxLiveRuns(),
      maxLiveRunsPerPrincipal: maxLiveRuns(),
      ...hostRecordLimits(),
    }),
    z.strictObject({
      kind: z.literal("sqlite"),
      path: z.string().min(1),
      secret: z.string().min(1).optional(),
      maxLiveRuns: maxLiveRuns(),
      maxLiveRunsPerPrincipal: maxLiveRuns(),
      ...hostRecordLimits(),
    }),
    z.strictObject({
      kind: z.literal("redis"),
      maxLiveRuns: maxLiveRuns(),
      maxLiveRunsPerPrincipal: maxLiveRuns(),
      ...hostRecordLimits(),
      url: z.url({ protocol: /^rediss?$/ }).optional(),
      sentinels: z
        .array(z.strictObject({ host: z.string().min(1), port: z.number().int().min(1).max(65_535) }))
        .min(1)
        .optional(),
      name: z.string().min(1).optional(),
      username: z.string().min(1).optional(),
      password: z.string().min(1).optional(),
      db: z.number().int().min(0).optional(),
      tls: z.boolean().optional(),
      keyPrefix: z.string().min(1).max(200).optional(),
      secret: z.string().min(32),
      replicaLeaseMs: z.number().int().min(300).max(600_000).optional(),
    }),
  ]),
);

/** A token's name is the principal that owns the runs it starts; it appears in logs, never the token. */
export const httpTokenSchema = once(() =>
  z.strictObject({
    name: z.string().regex(/^[A-Za-z0-9_.@-]{1,64}$/),
    token: z.string().min(16).max(4096),
  }),
);

export const httpSettingsSchema = once(() =>
  z.strictObject({
    tokens: z.array(httpTokenSchema()).optional(),
    allowedHosts: z.array(z.string().trim().min(1)).optional(),
    maxSessionsPerPrincipal: z.number().int().min(1).max(100_000).optional(),
    sessionIdleSeconds: z
      .number()
      .int()
      .min(5)
      .max(7 * 24 * 3600)
      .optional(),
    streamResumeSeconds: z.number().min(0).max(3600).optional(),
    drainSeconds: z.number().min(0).max(3600).optional(),
  }),
);

/**
 * The config file's top-level fields, each schema built on first use: building the whole file's schema
 * (some eighty zod schemas) was a large part of `codecell serve`'s start-up, and a config usually has a
 * few of its fields. Every field is optional.
 */
const gatewayConfigFields = {
  $schema: () => z.string().optional(),
  tools: () =>
    z
      .strictObject({
        codeMode: z.unknown().optional(),
        allow: patternList(),
        deny: patternList(),
        approval: patternList(),
      })
      .optional(),
  mcpServers: () => z.record(z.string().regex(/^[A-Za-z0-9_-]+$/), z.unknown()).optional(),
  mcpStartupWaitMs: () => z.number().int().min(0).max(600_000).optional(),
  plugins: () => z.array(pluginEntrySchema()).optional(),
  snapshotStore: () => snapshotStoreSchema().optional(),
  workspace: () =>
    z
      .union([
        z.string().min(1),
        z.strictObject({
          path: z.string().min(1),
          maxBytes: z.number().int().positive().optional(),
          maxWriteBytesPerRun: z.number().int().positive().optional(),
        }),
      ])
      .optional(),
  http: () => httpSettingsSchema().optional(),
  logging: () =>
    z
      .strictObject({ cellOutput: z.boolean().optional(), format: z.enum(["human", "json"]).optional() })
      .optional(),
  telemetry: () => telemetrySchema().optional(),
  agent: () => agentConfigSchema().optional(),
};
type GatewayConfigField = keyof typeof gatewayConfigFields;
type GatewayConfigShape = { [Field in GatewayConfigField]: ReturnType<(typeof gatewayConfigFields)[Field]> };

const builtFields: Partial<GatewayConfigShape> = {};
function fieldSchema<Field extends GatewayConfigField>(field: Field): GatewayConfigShape[Field] {
  builtFields[field] ??= gatewayConfigFields[field]() as GatewayConfigShape[Field];
  return builtFields[field] as GatewayConfigShape[Field];
}

/** The whole config file's schema: what error messages are worked out against (load-config.ts). */
export const gatewayConfigSchema = once(() =>
  z.strictObject(
    Object.fromEntries(
      Object.keys(gatewayConfigFields).map((field) => [field, fieldSchema(field as GatewayConfigField)]),
    ) as GatewayConfigShape,
  ),
);

/**
 * The config file's schema with only the top-level fields `input` has. It accepts exactly what the whole
 * schema accepts (every field is optional, and a key it does not know is refused by both), with the
 * same output; when it refuses, parse with the whole schema for the messages.
 */
export function gatewayConfigSchemaFor(
  input: Record<string, unknown>,
): ReturnType<typeof gatewayConfigSchema> {
  const present = (Object.keys(gatewayConfigFields) as GatewayConfigField[]).filter((field) =>
    Object.hasOwn(input, field),
  );
  return z.strictObject(
    Object.fromEntries(present.map((field) => [field, fieldSchema(field)])),
  ) as unknown as ReturnType<typeof gatewayConfigSchema>;
}

/** What each field takes, for "expected ..." in error messages. */
export const FIELD_HINTS: Record<string, string> = {
  ...AGENT_FIELD_HINTS,
  tools: 'an object such as { "codeMode": true, "deny": ["write_file"] }',
  "tools.allow": 'an array of tool ids or names, "*" globs allowed, e.g. ["core:codecell:*", "notes_*"]',
  "tools.deny": 'an array of tool ids or names, "*" globs allowed, e.g. ["mcp:memory:delete_*"]',
  "tools.approval":
    'an array of tool ids or names that need the user\'s approval, e.g. ["core:codecell:write_file"]',
  mcpServers: 'an object of server id (letters, digits, "_" or "-") to { "command", "args" } or { "url" }',
  "mcpServers.<name>": 'a server id made of letters, digits, "_" and "-", such as "memory" or "my-server"',
  logging: '{ "cellOutput": true } sends what cells print to the client as log messages',
  "logging.cellOutput":
    "true or false (default false): send console/text/json output of cells as notifications/message",
  mcpStartupWaitMs:
    "milliseconds (0 to 600000, default 10000) serve waits for MCP servers before answering; later ones are added with tools/list_changed",
  connectTimeoutMs:
    "milliseconds (100 to 600000, default 30000) the server has to answer initialize and list its tools before it is stopped and reported",
  plugins: 'an array of module paths or package names, or { "module": "...", "options": {...} }',
  snapshotStore:
    '{ "kind": "memory" }, { "kind": "sqlite", "path": "runs.db" } or { "kind": "redis", "url": "redis://...", "secret": "${CODECELL_SNAPSHOT_SECRET}" } (or "sentinels" and "name" instead of "url")',
  "snapshotStore.kind": '"memory", "sqlite" or "redis"',
  "snapshotStore.path": "a file path for the SQLite database, relative to the config file",
  "snapshotStore.maxLiveRuns":
    "how many runs may wait at once in the store (1 to 1000000, default 64; on Redis per live replica)",
  "snapshotStore.maxLiveRunsPerPrincipal":
    "how many of those runs one principal (token) may hold (1 to maxLiveRuns, default half of maxLiveRuns; on Redis per live replica)",
  "snapshotStore.maxHostRecordsPerPrincipal":
    "how many conversation records (hidden transcripts, stored responses) one principal may keep (1 to 1000000, default 256; past it its own oldest finished one is evicted)",
  "snapshotStore.maxHostRecordBytesPerPrincipal":
    "bytes of conversation records one principal may keep (at least 1024, default 67108864 = 64 MiB; past it its own oldest finished ones are evicted)",
  "snapshotStore.maxHostRecordBytes":
    "bytes of conversation records of every principal together (at least 1024 and at least maxHostRecordBytesPerPrincipal, default 268435456 = 256 MiB; past it the oldest finished ones are evicted)",
  "snapshotStore.url":
    'a Redis URL, "redis://[user:password@]host:port[/db]" or "rediss://..." for TLS (a standalone server; for Sentinel use "sentinels" and "name" instead)',
  "snapshotStore.sentinels":
    'the Sentinels of a Sentinel deployment, e.g. [{ "host": "10.0.0.5", "port": 26379 }], with "name"; instead of "url"',
  "snapshotStore.sentinels.host": 'a Sentinel\'s host name or address, e.g. "10.0.0.5"',
  "snapshotStore.sentinels.port": "a Sentinel's port, 1 to 65535 (usually 26379)",
  "snapshotStore.name":
    'the master group name the Sentinels monitor (sentinel monitor <name> ...), e.g. "mymaster"',
  "snapshotStore.username": "with sentinels: the Redis ACL user of the master and replicas",
  "snapshotStore.password": "with sentinels: the master's and replicas' password, best \"${REDIS_PASSWORD}\"",
  "snapshotStore.db": "with sentinels: the database number (default 0)",
  "snapshotStore.tls": "with sentinels: true to reach the master and replicas over TLS (default false)",
  "snapshotStore.keyPrefix": 'a prefix for every Redis key, the same on every replica (default "codecell:")',
  "snapshotStore.secret":
    'the key that signs snapshots (on Redis also every record), at least 32 bytes, e.g. "${CODECELL_SNAPSHOT_SECRET}"; required and the same on every replica for redis; for sqlite, absent, a 0600 key file is generated beside the database',
  "snapshotStore.replicaLeaseMs":
    "milliseconds (300 to 600000, default 15000) a replica's lease lasts; a silent replica's nested calls count as interrupted two to two and a third leases after its last renewal",
  workspace:
    'a folder path, relative to the config file, that the core file tools may touch, or { "path": "...", "maxBytes": 1073741824, "maxWriteBytesPerRun": 67108864 }',
  "workspace.path": "a folder path, relative to the config file, that the core file tools may touch",
  "workspace.maxBytes": "a positive integer: the most bytes write_file may grow the workspace to",
  "workspace.maxWriteBytesPerRun":
    "a positive integer: the most bytes write_file may write in one code-mode run",
  command: 'the program to start, e.g. "node"',
  args: "an array of strings",
  env: "an object of environment variable names to string values",
  cwd: "a folder path",
  package: 'an installed npm package that has a bin, e.g. "@modelcontextprotocol/server-memory"',
  bin: "the name of one of the package's bin entries",
  url: 'an http(s) URL such as "http://127.0.0.1:3001/mcp"',
  headers: "an object of header names to string values",
  transport: '"streamable-http" or "sse"',
  module: "a module path (relative to the config file) or a package name",
  http: 'an object such as { "tokens": [{ "name": "alice", "token": "${ALICE_TOKEN}" }] }',
  "http.tokens": 'an array of { "name": "alice", "token": "${ALICE_TOKEN}" } (token at least 16 characters)',
  "http.tokens.name": 'a principal name of letters, digits, "_", ".", "@" or "-" (at most 64)',
  "http.tokens.token":
    'a secret of 16 to 4096 characters, best from the environment: "${CODECELL_TOKEN}" (e.g. openssl rand -hex 32)',
  "http.allowedHosts": 'an array of host names clients use in the Host header, e.g. ["codecell.example.com"]',
  "http.maxSessionsPerPrincipal":
    "a whole number of MCP sessions one principal may hold at once (default 64)",
  "http.sessionIdleSeconds": "seconds without a request after which an MCP session is closed (default 600)",
  "http.streamResumeSeconds":
    "seconds (0 to 3600, default 5) a client whose response stream dropped has to resume it with Last-Event-ID before its request is cancelled",
  "http.drainSeconds":
    "seconds (0 to 3600, default 10) a stopping gateway waits for requests and nested calls in flight before it closes them",
  "logging.format": '"human" (default) or "json": one JSON object per stderr line',
  ...TELEMETRY_FIELD_HINTS,
};

export type GatewayConfigFile = z.infer<ReturnType<typeof gatewayConfigSchema>>;
