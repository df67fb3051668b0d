import { existsSync, mkdirSync, readFileSync, realpathSync, statSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, isAbsolute, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import {
  CODE_MODE_LIMITS,
  CodeModeError,
  closestMatches,
  type JsonValue,
  type ResolvedCodeModeConfig,
  resolveCodeModeConfig,
} from "@codecell/contract";
import type { McpServerConfig } from "@codecell/mcp-connector";
import { MIN_SNAPSHOT_KEY_BYTES } from "@codecell/snapshot-store";
import JSON5 from "json5";
import type { z } from "zod";
import { DEFAULT_WORKSPACE_LIMITS, type WorkspaceLimits } from "../core-tools/workspace-quota.js";
import { PACKAGE_DIR } from "../package-dir.js";
import { type AgentSettings, resolveAgentSettings } from "./agent-config.js";
import { issueMessage, knownKeysAt, unknownKeyMessage } from "./config-messages.js";
import { type ConfigProblem, describeValue } from "./config-problem.js";
import {
  FIELD_HINTS,
  gatewayConfigSchema,
  gatewayConfigSchemaFor,
  httpServerSchema,
  packageServerSchema,
  pluginEntrySchema,
  stdioServerSchema,
} from "./config-schema.js";
import { userDataDir } from "./data-dir.js";
import { expandEnvReferences } from "./env-references.js";
import { resolveTelemetry, type TelemetrySettings } from "./telemetry-config.js";

export type PluginSpec = { entry: string; module: string; options: JsonValue };
export type SnapshotStoreSpec = (
  | { kind: "memory" }
  /** `secret` signs snapshots; absent, a key file is generated beside the database (`<path>.key`). */
  | { kind: "sqlite"; path: string; secret?: string }
  /** `secret` signs snapshots and records, and must be the same on every replica. */
  | ({ kind: "redis"; secret: string; keyPrefix?: string; replicaLeaseMs?: number } & (
      | { url: string }
      /** A Sentinel deployment: the sentinels, the master's name, and how to log in to the master. */
      | {
          sentinels: Array<{ host: string; port: number }>;
          name: string;
          username?: string;
          password?: string;
          db?: number;
          tls?: boolean;
        }
    ))
) & { maxLiveRuns?: number };

/** `codecell serve --http` settings: who may call, from which host names, and how sessions are kept. */
export type HttpSettings = {
  /** Bearer tokens; empty means no authentication (allowed on loopback only). */
  tokens: Array<{ name: string; token: string }>;
  /** Host header names accepted besides the bound host (and loopback names on a loopback bind). */
  allowedHosts: string[];
  maxSessionsPerPrincipal: number;
  sessionIdleMs: number;
  /** How long a request whose stream dropped may be resumed (Last-Event-ID) before it is cancelled. */
  streamResumeMs: number;
  /** How long a stopping gateway waits for requests and nested calls in flight (SIGTERM/SIGINT). */
  drainMs: number;
};

export const DEFAULT_HTTP_SETTINGS: HttpSettings = {
  tokens: [],
  allowedHosts: [],
  maxSessionsPerPrincipal: 64,
  sessionIdleMs: 600_000,
  streamResumeMs: 5_000,
  drainMs: 10_000,
};

/**
 * How long `serve` waits for downstream servers before it answers: local servers are in by then, and a
 * server that hangs costs at most this, not its whole deadline.
 */
export const DEFAULT_MCP_STARTUP_WAIT_MS = 10_000;

/** A checked config with every path made absolute: what the gateway runs on. */
export type GatewayConfig = {
  file: string;
  configDir: string;
  codeMode: ResolvedCodeModeConfig;
  allow: string[] | undefined;
  deny: string[] | undefined;
  approval: string[];
  mcpServers: Record<string, McpServerConfig>;
  /** How long `serve` waits for MCP servers before answering; later ones arrive with list_changed. */
  mcpStartupWaitMs: number;
  /** Send a cell's output items to the client as `notifications/message` (`logging.cellOutput`). */
  logCellOutput: boolean;
  plugins: PluginSpec[];
  snapshotStore: SnapshotStoreSpec;
  /** Real path of the folder the core file tools may touch; null turns those tools off. */
  workspace: string | null;
  /** What write_file may write there: a quota for the folder and a budget per code-mode run. */
  workspaceLimits: WorkspaceLimits;
  http: HttpSettings;
  /** The agent endpoint (`POST /v1/chat/completions`); null when the config has no `agent` section. */
  agent: AgentSettings | null;
  /** OTLP export (traces, metrics) from the `telemetry` block and `OTEL_*`; null: off, no SDK loaded. */
  telemetry: TelemetrySettings | null;
  /** Stderr lines as people read them (`human`) or one JSON object each (`logging.format`). */
  logFormat: "human" | "json";
  /** Non-fatal notes, such as clamped limits. */
  warnings: string[];
};

export type LoadedConfig =
  | { config: GatewayConfig; problems: [] }
  /** Warnings (clamped limits) come with the problems, so one `check` run shows both. */
  | { config: null; problems: ConfigProblem[]; warnings: string[] };

/** The config used when no `--config` is given: shipped next to the app's `dist`. */
export const DEFAULT_CONFIG_FILE = join(PACKAGE_DIR, "codecell.default.json5");

const gatewayRequire = createRequire(import.meta.url);

function hintFor(path: string): string | undefined {
  const key = path
    .replace(/^mcpServers\.[^.]+\./, "")
    .replace(/^plugins\.\d+\./, "")
    .replace(/^http\.tokens\.\d+\./, "http.tokens.")
    .replace(/^snapshotStore\.sentinels\.\d+\./, "snapshotStore.sentinels.");
  return FIELD_HINTS[path] ?? FIELD_HINTS[key] ?? FIELD_HINTS[key.replace(/\.\d+$/, "")];
}

function valueAt(root: unknown, path: readonly PropertyKey[]): unknown {
  let current = root;
  for (const key of path) {
    if (current === null || typeof current !== "object") return undefined;
    current = (current as Record<PropertyKey, unknown>)[key];
  }
  return current;
}

/**
 * Every validator issue as a problem in our words (see config-messages.ts): the path, what was found, what
 * is accepted, and for an unknown key the nearest known key of the object it sits in, at any depth.
 */
function zodProblems(
  error: z.ZodError,
  input: unknown,
  file: string,
  schema: unknown,
  base: string[] = [],
): ConfigProblem[] {
  const problems: ConfigProblem[] = [];
  for (const issue of error.issues) {
    const segments = [...base, ...issue.path.map(String)];
    if (issue.code === "unrecognized_keys") {
      const known = knownKeysAt(schema, issue.path);
      for (const key of issue.keys) {
        problems.push({ file, path: [...segments, key].join("."), message: unknownKeyMessage(key, known) });
      }
      continue;
    }
    const path = segments.join(".");
    // A bad key of a record (a server id) is explained by what a name there may be.
    const hint =
      issue.code === "invalid_key" ? hintFor(`${segments.slice(0, -1).join(".")}.<name>`) : hintFor(path);
    const raw = valueAt(input, issue.path);
    // A secret (a token, the store secret, a Redis URL with its password) is never echoed into an error
    // message (and so into logs): only its length is.
    const shown =
      /^(http\.tokens\.\d+\.token|snapshotStore\.secret|snapshotStore\.url|snapshotStore\.password)$/.test(
        path,
      ) && typeof raw === "string"
        ? `a secret of ${raw.length} characters`
        : undefined;
    problems.push({
      file,
      path,
      message: issueMessage(issue, raw, {
        schema,
        path: issue.path,
        ...(hint ? { hint } : {}),
        ...(shown ? { shown } : {}),
      }),
    });
  }
  return problems;
}

/** The numeric code-mode limits a config sets outside their runtime range, as the contract would clamp them. */
function clampsOf(raw: unknown): Array<{ field: string; received: number; applied: number }> {
  if (raw === null || typeof raw !== "object" || Array.isArray(raw)) return [];
  const clamps: Array<{ field: string; received: number; applied: number }> = [];
  for (const [field, limit] of Object.entries(CODE_MODE_LIMITS)) {
    const received = (raw as Record<string, unknown>)[field];
    if (typeof received !== "number" || !Number.isInteger(received)) continue;
    const applied = Math.min(limit.max, Math.max(limit.min, received));
    if (applied !== received) clamps.push({ field, received, applied });
  }
  return clamps;
}

function absolute(configDir: string, path: string): string {
  return isAbsolute(path) ? path : resolve(configDir, path);
}

function isRelativeModule(spec: string): boolean {
  return spec.startsWith("./") || spec.startsWith("../") || isAbsolute(spec) || spec.startsWith("file:");
}

/** Resolves a module path or package name from the config's folder, then from the gateway itself. */
export function resolveModule(spec: string, configDir: string): string {
  if (isRelativeModule(spec)) {
    const path = spec.startsWith("file:") ? fileURLToPath(spec) : absolute(configDir, spec);
    if (!existsSync(path)) throw new Error(`no such file ${path}`);
    return path;
  }
  try {
    return createRequire(join(configDir, "codecell.config.js")).resolve(spec);
  } catch {
    return gatewayRequire.resolve(spec);
  }
}

function packageBin(name: string, bin: string | undefined, configDir: string): string {
  let manifestPath: string;
  try {
    manifestPath = resolveModule(`${name}/package.json`, configDir);
  } catch {
    throw new Error(
      `package "${name}" is not installed next to the config file or the gateway. Install it (npm install ${name}) or use { "command": ... }.`,
    );
  }
  const manifest = JSON.parse(readFileSync(manifestPath, "utf8")) as {
    bin?: string | Record<string, string>;
  };
  const bins = typeof manifest.bin === "string" ? { [name]: manifest.bin } : (manifest.bin ?? {});
  const names = Object.keys(bins);
  const chosen = bin ?? (names.length === 1 ? names[0] : undefined);
  if (!chosen || !bins[chosen]) {
    throw new Error(
      names.length === 0
        ? `package "${name}" has no bin to start.`
        : `package "${name}" has bins ${names.map((n) => `"${n}"`).join(", ")}; name one with "bin".`,
    );
  }
  return resolve(dirname(manifestPath), bins[chosen]);
}

const SERVER_KIND_KEYS = ["command", "package", "url"];

function checkServer(
  id: string,
  raw: unknown,
  configDir: string,
  file: string,
  problems: ConfigProblem[],
): McpServerConfig | null {
  const base = ["mcpServers", id];
  if (raw === null || typeof raw !== "object" || Array.isArray(raw)) {
    problems.push({
      file,
      path: base.join("."),
      message: `got ${describeValue(raw)}. Expected { "command": "node", "args": [...] }, { "package": "<npm package>" } or { "url": "http://..." }.`,
    });
    return null;
  }
  const entry = raw as Record<string, unknown>;
  const schema =
    "url" in entry
      ? httpServerSchema()
      : "package" in entry
        ? packageServerSchema()
        : "command" in entry
          ? stdioServerSchema()
          : null;
  if (!schema) {
    const kinds = `"command" (a program started over stdio), "package" (an installed npm package with a bin) or "url" (Streamable HTTP)`;
    // A misspelt "command", "package" or "url" is the likely cause: name the key and its correction.
    const misspelt = Object.keys(entry).flatMap((key) => {
      const [suggestion] = closestMatches(key, SERVER_KIND_KEYS, 1);
      return suggestion ? [{ key, suggestion }] : [];
    });
    for (const { key, suggestion } of misspelt) {
      problems.push({
        file,
        path: [...base, key].join("."),
        message: `unknown key. Did you mean "${suggestion}"? An entry needs ${kinds}.`,
      });
    }
    if (misspelt.length === 0) {
      problems.push({
        file,
        path: base.join("."),
        message: `needs ${kinds}. Got keys ${Object.keys(entry).join(", ") || "none"}.`,
      });
    }
    return null;
  }
  const parsed = schema.safeParse(entry);
  if (!parsed.success) {
    problems.push(...zodProblems(parsed.error, entry, file, schema, base));
    return null;
  }
  const value = parsed.data as Record<string, unknown>;
  const cwd = typeof value.cwd === "string" ? absolute(configDir, value.cwd) : undefined;
  if (cwd && !existsSync(cwd)) {
    problems.push({
      file,
      path: [...base, "cwd"].join("."),
      message: `folder ${cwd} does not exist. Create it or fix the path.`,
    });
    return null;
  }
  if ("url" in value) return value as McpServerConfig;
  const env = value.env as Record<string, string> | undefined;
  const args = (value.args as string[] | undefined) ?? [];
  const deadline =
    typeof value.connectTimeoutMs === "number" ? { connectTimeoutMs: value.connectTimeoutMs } : {};
  if ("package" in value) {
    try {
      const bin = packageBin(String(value.package), value.bin as string | undefined, configDir);
      return {
        command: process.execPath,
        args: [bin, ...args],
        ...(env ? { env } : {}),
        ...(cwd ? { cwd } : {}),
        ...deadline,
      };
    } catch (error) {
      problems.push({ file, path: [...base, "package"].join("."), message: (error as Error).message });
      return null;
    }
  }
  return {
    command: String(value.command),
    args,
    ...(env ? { env } : {}),
    ...(cwd ? { cwd } : {}),
    ...deadline,
  };
}

/**
 * Checks a parsed config object and resolves it against its folder. Every problem is collected, so
 * `codecell check` can report them all at once.
 */
export function resolveGatewayConfig(
  input: unknown,
  file: string,
  configDir: string,
  env = process.env,
): LoadedConfig {
  const problems: ConfigProblem[] = [];
  const dataDir = userDataDir(env);
  const builtins = { CODECELL_CONFIG_DIR: configDir, CODECELL_TMPDIR: tmpdir(), CODECELL_DATA_DIR: dataDir };
  const expanded = expandEnvReferences(input, { ...builtins, ...env }, file, problems);
  // The data folder is made only for a config that uses it, so it exists before a server writes there.
  if (/\$\{CODECELL_DATA_DIR[:}]/.test(JSON.stringify(input) ?? "")) {
    try {
      mkdirSync(dataDir, { recursive: true });
    } catch (error) {
      problems.push({
        file,
        path: "",
        message: `cannot create the data folder ${dataDir} (${(error as NodeJS.ErrnoException).code ?? (error as Error).message}). Set CODECELL_DATA_DIR to a folder you can write.`,
      });
    }
  }
  if (expanded === null || typeof expanded !== "object" || Array.isArray(expanded)) {
    problems.push({
      file,
      path: "",
      message: `the config must be an object, got ${describeValue(expanded)}.`,
    });
    return { config: null, problems, warnings: [] };
  }
  // Checked with the schema of the fields it has; a refusal is worked out against the whole file's schema,
  // which refuses exactly the same, so every message is as that schema gives it.
  const accepted = gatewayConfigSchemaFor(expanded as Record<string, unknown>).safeParse(expanded);
  const parsed = accepted.success ? accepted : gatewayConfigSchema().safeParse(expanded);
  if (!parsed.success) problems.push(...zodProblems(parsed.error, expanded, file, gatewayConfigSchema()));
  const data = (parsed.success ? parsed.data : expanded) as Record<string, unknown>;
  const tools = (parsed.success ? parsed.data.tools : undefined) ?? {};

  let codeMode: ResolvedCodeModeConfig | null = null;
  const warnings: string[] = [];
  try {
    codeMode = resolveCodeModeConfig((expanded as { tools?: { codeMode?: unknown } }).tools?.codeMode);
    for (const clamp of codeMode.clamped) {
      warnings.push(
        `${file}: tools.codeMode.${clamp.field}: ${clamp.received} is outside its range; using ${clamp.applied}.`,
      );
    }
  } catch (error) {
    if (!CodeModeError.is(error)) throw error;
    // The contract stops at the first invalid field; the limits it would have clamped are still news.
    const rawCodeMode = (expanded as { tools?: { codeMode?: unknown } }).tools?.codeMode;
    for (const clamp of clampsOf(rawCodeMode)) {
      warnings.push(
        `${file}: tools.codeMode.${clamp.field}: ${clamp.received} is outside its range; using ${clamp.applied}.`,
      );
    }
    const listed = (error.details?.problems as Array<{ path: string; message: string }> | undefined) ?? [];
    if (listed.length === 0) problems.push({ file, path: "tools.codeMode", message: error.message });
    for (const problem of listed) {
      problems.push({ file, path: problem.path, message: problem.message.replace(`${problem.path}: `, "") });
    }
  }

  const mcpServers: Record<string, McpServerConfig> = {};
  const rawServers = (expanded as { mcpServers?: unknown }).mcpServers;
  if (rawServers && typeof rawServers === "object" && !Array.isArray(rawServers)) {
    for (const [id, raw] of Object.entries(rawServers)) {
      const server = checkServer(id, raw, configDir, file, problems);
      if (server) mcpServers[id] = server;
    }
  }

  const plugins: PluginSpec[] = [];
  // Resolved even when other parts failed, so one `check` run reports a missing plugin too.
  const rawPlugins = (expanded as { plugins?: unknown }).plugins;
  if (Array.isArray(rawPlugins)) {
    for (const [index, raw] of rawPlugins.entries()) {
      const entry = pluginEntrySchema().safeParse(raw);
      if (!entry.success) continue;
      const { data } = entry;
      const spec = typeof data === "string" ? data : data.module;
      try {
        plugins.push({
          entry: spec,
          module: resolveModule(spec, configDir),
          options: (typeof data === "string" ? null : (data.options ?? null)) as JsonValue,
        });
      } catch (error) {
        problems.push({
          file,
          path: `plugins.${index}${typeof data === "string" ? "" : ".module"}`,
          message: `cannot find plugin module "${spec}" (${(error as Error).message.split("\n")[0]}). Use a path relative to the config file ("./my-plugin.js") or an installed package name.`,
        });
      }
    }
  }

  let workspace: string | null = null;
  const workspaceEntry = data.workspace as
    | string
    | { path?: unknown; maxBytes?: number; maxWriteBytesPerRun?: number }
    | undefined;
  const workspacePath = typeof workspaceEntry === "string" ? workspaceEntry : workspaceEntry?.path;
  const workspaceLimits: WorkspaceLimits = {
    maxBytes:
      (typeof workspaceEntry === "object" && workspaceEntry.maxBytes) || DEFAULT_WORKSPACE_LIMITS.maxBytes,
    maxWriteBytesPerRun:
      (typeof workspaceEntry === "object" && workspaceEntry.maxWriteBytesPerRun) ||
      DEFAULT_WORKSPACE_LIMITS.maxWriteBytesPerRun,
  };
  if (typeof workspacePath === "string") {
    const path = absolute(configDir, workspacePath);
    if (!existsSync(path) || !statSync(path).isDirectory()) {
      problems.push({
        file,
        path: typeof workspaceEntry === "string" ? "workspace" : "workspace.path",
        message: `folder ${path} does not exist. Create it or point "workspace" at an existing folder.`,
      });
    } else {
      workspace = realpathSync(path);
    }
  }

  let snapshotStore: SnapshotStoreSpec = { kind: "memory" };
  if (parsed.success && parsed.data.snapshotStore?.kind === "sqlite") {
    const path = absolute(configDir, parsed.data.snapshotStore.path);
    if (!existsSync(dirname(path))) {
      problems.push({
        file,
        path: "snapshotStore.path",
        message: `folder ${dirname(path)} does not exist. Create it first.`,
      });
    }
    const secret = parsed.data.snapshotStore.secret;
    if (secret !== undefined && Buffer.byteLength(secret) < MIN_SNAPSHOT_KEY_BYTES) {
      problems.push({
        file,
        path: "snapshotStore.secret",
        message: `has ${Buffer.byteLength(secret)} bytes; at least ${MIN_SNAPSHOT_KEY_BYTES} are needed (e.g. openssl rand -base64 48, passed as "\${CODECELL_SNAPSHOT_SECRET}"), or leave it out to have a key file generated beside the database.`,
      });
    }
    snapshotStore = { kind: "sqlite", path, ...(secret ? { secret } : {}) };
  }
  if (parsed.success && parsed.data.snapshotStore?.kind === "memory") snapshotStore = { kind: "memory" };
  if (parsed.success && parsed.data.snapshotStore?.kind === "redis") {
    const { url, sentinels, name, username, password, db, tls, keyPrefix, secret, replicaLeaseMs } =
      parsed.data.snapshotStore;
    const sentinelOnly = { name, username, password, db, tls };
    if ((url === undefined) === (sentinels === undefined)) {
      problems.push({
        file,
        path: "snapshotStore",
        message:
          url === undefined
            ? 'a redis store needs "url" (a standalone server, "redis://host:6379") or "sentinels" with "name" (a Sentinel deployment, e.g. "sentinels": [{ "host": "10.0.0.5", "port": 26379 }], "name": "mymaster").'
            : 'has both "url" and "sentinels": keep "url" for a standalone server, or drop it for a Sentinel deployment (and give the password, db and tls it held as "password", "db" and "tls").',
      });
    } else if (sentinels !== undefined && name === undefined) {
      problems.push({
        file,
        path: "snapshotStore.name",
        message:
          'is missing: with "sentinels", give the master group name the Sentinels monitor (sentinel monitor <name> ...), e.g. "name": "mymaster".',
      });
    } else if (url !== undefined) {
      for (const [field, value] of Object.entries(sentinelOnly)) {
        if (value === undefined) continue;
        problems.push({
          file,
          path: `snapshotStore.${field}`,
          message: `applies only with "sentinels"; with "url" put it in the URL (redis://user:password@host:port/db, rediss:// for TLS) or drop it.`,
        });
      }
    }
    const target =
      sentinels !== undefined
        ? {
            sentinels,
            name: name ?? "",
            ...(username !== undefined ? { username } : {}),
            ...(password !== undefined ? { password } : {}),
            ...(db !== undefined ? { db } : {}),
            ...(tls !== undefined ? { tls } : {}),
          }
        : { url: url ?? "" };
    snapshotStore = {
      kind: "redis",
      ...target,
      secret,
      ...(keyPrefix !== undefined ? { keyPrefix } : {}),
      ...(replicaLeaseMs !== undefined ? { replicaLeaseMs } : {}),
    };
  }
  const maxLiveRuns = parsed.success ? parsed.data.snapshotStore?.maxLiveRuns : undefined;
  if (maxLiveRuns !== undefined) snapshotStore.maxLiveRuns = maxLiveRuns;

  const http = { ...DEFAULT_HTTP_SETTINGS, tokens: [] as HttpSettings["tokens"] };
  const rawHttp = parsed.success ? parsed.data.http : undefined;
  if (rawHttp) {
    const names = new Set<string>();
    const secrets = new Set<string>();
    for (const [index, entry] of (rawHttp.tokens ?? []).entries()) {
      if (names.has(entry.name)) {
        problems.push({
          file,
          path: `http.tokens.${index}.name`,
          message: `"${entry.name}" is named twice. Each token needs its own name (the principal that owns its runs).`,
        });
      }
      if (secrets.has(entry.token)) {
        problems.push({
          file,
          path: `http.tokens.${index}.token`,
          message: "this token is used twice. Give each principal its own secret.",
        });
      }
      names.add(entry.name);
      secrets.add(entry.token);
      http.tokens.push({ name: entry.name, token: entry.token });
    }
    http.allowedHosts = (rawHttp.allowedHosts ?? []).map((host) => host.toLowerCase());
    if (rawHttp.maxSessionsPerPrincipal !== undefined)
      http.maxSessionsPerPrincipal = rawHttp.maxSessionsPerPrincipal;
    if (rawHttp.sessionIdleSeconds !== undefined) http.sessionIdleMs = rawHttp.sessionIdleSeconds * 1000;
    if (rawHttp.streamResumeSeconds !== undefined) http.streamResumeMs = rawHttp.streamResumeSeconds * 1000;
    if (rawHttp.drainSeconds !== undefined) http.drainMs = rawHttp.drainSeconds * 1000;
  }

  const agent = resolveAgentSettings(parsed.success ? parsed.data.agent : undefined, file, problems);
  const telemetry = resolveTelemetry(parsed.success ? parsed.data.telemetry : undefined, env, file, problems);

  if (problems.length > 0 || !codeMode) return { config: null, problems, warnings };
  return {
    config: {
      file,
      configDir,
      codeMode,
      allow: tools.allow,
      deny: tools.deny,
      approval: tools.approval ?? [],
      mcpServers,
      mcpStartupWaitMs:
        (parsed.success ? parsed.data.mcpStartupWaitMs : undefined) ?? DEFAULT_MCP_STARTUP_WAIT_MS,
      logCellOutput: (parsed.success ? parsed.data.logging?.cellOutput : undefined) ?? false,
      plugins,
      snapshotStore,
      workspace,
      workspaceLimits,
      http,
      agent,
      telemetry,
      logFormat: (parsed.success ? parsed.data.logging?.format : undefined) ?? "human",
      warnings,
    },
    problems: [],
  };
}

/** Reads a JSON5 config file, expands `${ENV}` references and checks it. */
export function loadGatewayConfig(path: string, env = process.env): LoadedConfig {
  const file = resolve(path);
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const reason =
      code === "ENOENT"
        ? "the file does not exist. Check the path given to --config"
        : code === "EISDIR"
          ? "that is a folder, not a file. Name the config file itself"
          : code === "EACCES"
            ? "this user may not read it. Fix its permissions"
            : `${code ?? (error as Error).message}`;
    return {
      config: null,
      problems: [{ file, path: "", message: `cannot read the config: ${reason}.` }],
      warnings: [],
    };
  }
  let input: unknown;
  try {
    input = JSON5.parse(text);
  } catch (error) {
    const { lineNumber, columnNumber, message } = error as SyntaxError & {
      lineNumber?: number;
      columnNumber?: number;
    };
    const where = lineNumber ? `line ${lineNumber}, column ${columnNumber}` : "";
    return {
      config: null,
      problems: [
        {
          file,
          path: where,
          message: `not valid JSON5: ${message.replace(/^JSON5: /, "").replace(/ at \d+:\d+$/, "")}. Fix the syntax there.`,
        },
      ],
      warnings: [],
    };
  }
  return resolveGatewayConfig(input, file, dirname(file), env);
}
