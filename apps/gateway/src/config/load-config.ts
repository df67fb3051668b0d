import { mkdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import type { ResolvedCodeModeConfig } from "@codecell/contract";
import type { McpServerConfig } from "@codecell/mcp-connector";
import JSON5 from "json5";
import type { WorkspaceLimits } from "../core-tools/workspace-quota.js";
import { PACKAGE_DIR } from "../package-dir.js";
import { type AgentSettings, resolveAgentSettings } from "./agent-config.js";
import { resolveCodeMode } from "./code-mode-config.js";
import { type ConfigProblem, describeValue } from "./config-problem.js";
import { gatewayConfigSchema, gatewayConfigSchemaFor } from "./config-schema.js";
import { userDataDir } from "./data-dir.js";
import { expandEnvReferences } from "./env-references.js";
import { type HttpSettings, resolveHttpSettings } from "./http-config.js";
import { resolveMcpServers } from "./mcp-server-entry.js";
import { type PluginSpec, resolvePlugins } from "./plugins-config.js";
import { resolveSnapshotStore, type SnapshotStoreSpec } from "./snapshot-store-config.js";
import { resolveTelemetry, type TelemetrySettings } from "./telemetry-config.js";
import { resolveWorkspace } from "./workspace-config.js";
import { zodProblems } from "./zod-problems.js";

/**
 * The config file, read and checked: each section is resolved by its own module (`*-config.ts`,
 * `mcp-server-entry.ts`); this one reads the file, expands references, validates the whole and puts
 * the sections together.
 */

export { DEFAULT_HTTP_SETTINGS, type HttpSettings } from "./http-config.js";
export type { PluginSpec } from "./plugins-config.js";
export type { SnapshotStoreSpec } from "./snapshot-store-config.js";

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

/**
 * `${ENV}` references expanded, with the gateway's own `CODECELL_CONFIG_DIR`, `CODECELL_TMPDIR` and
 * `CODECELL_DATA_DIR` beside the environment.
 */
function expandReferences(
  input: unknown,
  file: string,
  configDir: string,
  env: NodeJS.ProcessEnv,
  problems: ConfigProblem[],
): unknown {
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
  return expanded;
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
  const expanded = expandReferences(input, file, configDir, env, problems);
  if (expanded === null || typeof expanded !== "object" || Array.isArray(expanded)) {
    problems.push({
      file,
      path: "",
      message: `the config must be an object, got ${describeValue(expanded)}.`,
    });
    return { config: null, problems, warnings: [] };
  }
  const raw = expanded as Record<string, unknown> & { tools?: { codeMode?: unknown } };
  // Checked with the schema of the fields it has; a refusal is worked out against the whole file's schema,
  // which refuses exactly the same, so every message is as that schema gives it.
  const accepted = gatewayConfigSchemaFor(raw).safeParse(raw);
  const parsed = accepted.success ? accepted : gatewayConfigSchema().safeParse(raw);
  if (!parsed.success) problems.push(...zodProblems(parsed.error, raw, file, gatewayConfigSchema()));
  // The sections that name files (servers, plugins, the workspace) are also read from the unvalidated
  // input, so one `check` run reports a missing file beside the schema's problems; the others only
  // from a valid file.
  const valid = parsed.success ? parsed.data : undefined;
  const tools = valid?.tools ?? {};

  const { codeMode, warnings } = resolveCodeMode(raw.tools?.codeMode, file, problems);
  const mcpServers = resolveMcpServers(raw.mcpServers, configDir, file, problems);
  const plugins = resolvePlugins(raw.plugins, configDir, file, problems);
  const { workspace, workspaceLimits } = resolveWorkspace(
    (valid ?? raw).workspace,
    configDir,
    file,
    problems,
  );
  const snapshotStore = resolveSnapshotStore(valid?.snapshotStore, configDir, file, problems);
  const http = resolveHttpSettings(valid?.http, file, problems);
  const agent = resolveAgentSettings(valid?.agent, file, problems);
  const telemetry = resolveTelemetry(valid?.telemetry, env, file, problems);

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
      mcpStartupWaitMs: valid?.mcpStartupWaitMs ?? DEFAULT_MCP_STARTUP_WAIT_MS,
      logCellOutput: valid?.logging?.cellOutput ?? false,
      plugins,
      snapshotStore,
      workspace,
      workspaceLimits,
      http,
      agent,
      telemetry,
      logFormat: valid?.logging?.format ?? "human",
      warnings,
    },
    problems: [],
  };
}

/** Why a config file cannot be read, in words that say what to do. */
function unreadableReason(error: unknown): string {
  const code = (error as NodeJS.ErrnoException).code;
  return code === "ENOENT"
    ? "the file does not exist. Check the path given to --config"
    : code === "EISDIR"
      ? "that is a folder, not a file. Name the config file itself"
      : code === "EACCES"
        ? "this user may not read it. Fix its permissions"
        : `${code ?? (error as Error).message}`;
}

/** Reads a JSON5 config file, expands `${ENV}` references and checks it. */
export function loadGatewayConfig(path: string, env = process.env): LoadedConfig {
  const file = resolve(path);
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (error) {
    return {
      config: null,
      problems: [{ file, path: "", message: `cannot read the config: ${unreadableReason(error)}.` }],
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
