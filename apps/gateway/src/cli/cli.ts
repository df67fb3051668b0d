import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { CodeModeError, type CodeModeResult, closestMatches } from "@codecell/contract";
import { killSpawnedServers } from "@codecell/mcp-connector";
import { formatProblem } from "../config/config-problem.js";
import { DEFAULT_CONFIG_FILE, type GatewayConfig, loadGatewayConfig } from "../config/load-config.js";
import { Gateway } from "../gateway.js";
import { Readiness } from "../http/readiness.js";
import { log, operatorLine, setLogFormat } from "../logger.js";
import { NO_APPROVAL_CLIENT } from "../mcp/approvals.js";
import { PACKAGE_DIR } from "../package-dir.js";
import { GATEWAY_VERSION } from "../version.js";
import { connectBanner } from "./banner.js";
import { EXIT } from "./exit-codes.js";
import { nothingToCall } from "./nothing-to-call.js";

/** The command as installed (what a client config should run): the bundle the build writes. */
const CLI_PATH = join(PACKAGE_DIR, "dist", "cli.js");
const MAX_AUTO_WAITS = 100;

const HELP: Record<string, string> = {
  main: `codecell ${GATEWAY_VERSION}: an MCP server that shows a model two tools, exec and wait.

Usage: codecell <command> [options]

Commands:
  serve     run the MCP server (stdio, or Streamable HTTP with --http <port>)
  exec      run one cell headless and print the result JSON
  catalog   print the hidden tool catalog as a cell sees it
  check     validate a config file and list every problem

Options: --help (also after a command), --version
Without --config the embedded default is used (demo workspace, notes plugin, memory MCP server).
Exit codes: 0 ok, 1 internal error, 2 usage error, 3 invalid config (or one that leaves a cell nothing
to call), 4 exec failed, 5 exec still waiting,
6 serve --http could not bind its port (in use or not permitted).`,
  serve: `Usage: codecell serve [--config <file>] [--http <port>] [--host 127.0.0.1] [--session <id>] [--log-format human|json]

Without --http, speaks MCP over stdin/stdout (logs go to stderr). With --http, serves MCP at /mcp,
GET /healthz, and the playground at /. --port 0 picks a free port. A --host other than loopback needs
bearer tokens in the config (http.tokens); clients then send Authorization: Bearer <token>. --session sets the stdio session id
(default "stdio"); a restart with the same id and a SQLite snapshot store can resume waiting runs.
--log-format json (or logging.format in the config) writes one JSON object per stderr line. With --http,
GET /metrics serves Prometheus metrics (behind the bearer token). OTLP traces and metrics are exported when
OTEL_EXPORTER_OTLP_ENDPOINT (or the config's telemetry block) names a collector.`,
  exec: `Usage: codecell exec [--config <file>] [--language javascript|typescript] [--typecheck] [--no-wait] <file.js|file.ts|->
       codecell exec [options] --code <cell>   (or -e <cell>)

Runs one cell (a file, "-" for stdin, or the text after --code) and prints the code-mode result as JSON
on stdout. A cell given with --code is JavaScript unless --language says otherwise. A waiting
result is continued with wait until it completes (at most ${MAX_AUTO_WAITS} times) unless --no-wait.
Calls that need approval are refused (there is no client to ask). --typecheck type-checks the cell
against the run's declarations first and prints each finding on stderr (as tools.codeMode.typecheck
"warn" does; a config's "strict" stays strict). The cell runs on a sandbox worker thread, as in serve.
Exit 0 completed, 4 failed, 5 waiting.`,
  catalog: `Usage: codecell catalog [--config <file>] [--search <query>]

Prints, as JSON, ALL_TOOLS as a cell sees it and, apart, the MCP tools as a cell calls them
(MCP.<server>.<tool>). With --search, what a cell's tools.search(query) finds (never MCP tools) and, apart,
what its API.search(query) finds (MCP tools only).`,
  check: `Usage: codecell check [--config <file>] [--connect]

Validates the config file and loads its plugins; prints every problem, one line each, on stderr, and
exits 3 if there is any. --connect also starts the MCP servers and reports those that fail.`,
};

/** Each command's options, for its parseArgs and for the "did you mean" of an option it does not take. */
const OPTIONS = {
  serve: {
    config: { type: "string" },
    http: { type: "string" },
    port: { type: "string" },
    host: { type: "string", default: "127.0.0.1" },
    session: { type: "string", default: "stdio" },
    "log-format": { type: "string" },
  },
  exec: {
    config: { type: "string" },
    language: { type: "string" },
    code: { type: "string", short: "e" },
    typecheck: { type: "boolean", default: false },
    "no-wait": { type: "boolean", default: false },
  },
  catalog: { config: { type: "string" }, search: { type: "string" } },
  check: { config: { type: "string" }, connect: { type: "boolean", default: false } },
} as const;

class UsageError extends Error {}

function fail(code: number, message: string): never {
  log("error", message, {}, `codecell: ${message}`);
  process.exit(code);
}

function loadConfigOrExit(path: string | undefined): GatewayConfig {
  const loaded = loadGatewayConfig(path ?? DEFAULT_CONFIG_FILE);
  if (!loaded.config) {
    for (const problem of loaded.problems) {
      log(
        "error",
        formatProblem(problem),
        { file: problem.file, path: problem.path },
        formatProblem(problem),
      );
    }
    for (const warning of loaded.warnings) operatorLine(`warning: ${warning}`);
    const count = loaded.problems.length;
    fail(EXIT.config, `${count} problem${count === 1 ? "" : "s"} in the config; nothing was started.`);
  }
  for (const warning of loaded.config.warnings) operatorLine(`warning: ${warning}`);
  return loaded.config;
}

async function startGateway(
  config: GatewayConfig,
  connectMcp = true,
  mcpWaitMs?: number,
  warnFailedServers = true,
): Promise<Gateway> {
  try {
    return await Gateway.start(config, {
      connectMcp,
      ...(mcpWaitMs !== undefined ? { mcpWaitMs } : {}),
      warnFailedServers,
    });
  } catch (error) {
    if (CodeModeError.is(error) && error.code === "invalid_config") fail(EXIT.config, error.message);
    throw error;
  }
}

/**
 * Stops on SIGINT/SIGTERM: transports first, then downstream servers, plugins and the store. Installed
 * before anything starts; a signal that arrives while the gateway is still starting exits at once (the
 * exit hook below stops any server already spawned).
 */
function onStopSignal(): (stop: () => Promise<void>) => void {
  let stopping = false;
  let stopWith: (() => Promise<void>) | null = null;
  const handler = (signal: NodeJS.Signals) => {
    if (stopping) return;
    stopping = true;
    operatorLine(`${signal} received, shutting down`);
    if (!stopWith) process.exit(EXIT.ok);
    stopWith().then(
      () => process.exit(EXIT.ok),
      (error) => fail(EXIT.internal, `shutdown failed: ${String(error)}`),
    );
  };
  process.once("SIGINT", handler);
  process.once("SIGTERM", handler);
  return (stop) => {
    stopWith = stop;
  };
}

function parsePort(value: string): number {
  const port = Number(value);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    throw new UsageError(`--http needs a port number from 0 to 65535, got "${value}".`);
  }
  return port;
}

async function serve(args: string[]): Promise<number | undefined> {
  const { values } = parseArgs({ args, options: OPTIONS.serve });
  const httpPort = values.http ?? values.port;
  // Over stdio, stdout carries the protocol: anything a plugin logs goes to stderr instead.
  if (httpPort === undefined)
    for (const method of ["log", "info", "debug"] as const) console[method] = console.error;
  const logFormatFlag = values["log-format"];
  if (logFormatFlag !== undefined && logFormatFlag !== "human" && logFormatFlag !== "json") {
    throw new UsageError(`--log-format must be human or json, got "${logFormatFlag}".`);
  }
  // Set before the config is read, so its problems already come in the format asked for.
  if (logFormatFlag !== undefined) setLogFormat(logFormatFlag);
  const config = loadConfigOrExit(values.config);
  if (logFormatFlag === undefined) setLogFormat(config.logFormat);
  // The OpenTelemetry SDK and its exporters load only when OTLP is configured (see telemetry/).
  const telemetry = config.telemetry
    ? await (await import("../telemetry/otel-setup.js")).startTelemetry(config.telemetry)
    : null;
  // The HTTP transport (its server framework, session store and node:http) loads only when serving
  // HTTP: over stdio it is dead weight on the way to the first tools/list. Either transport brings the
  // MCP SDK's server with it, which `exec` never evaluates.
  const httpTransport = httpPort === undefined ? undefined : await import("../http/http-transport.js");
  // Before anything starts: a reachable bind without tokens is refused outright.
  httpTransport?.checkHttpExposure(values.host, config.http);
  // The port is bound before any downstream server starts, so a taken port costs a second, not a startup.
  const bound =
    httpPort === undefined || httpTransport === undefined
      ? undefined
      : await httpTransport.listenHttp(parsePort(httpPort), values.host).catch((error: unknown) => {
          if (error instanceof httpTransport.ListenError) fail(EXIT.listen, error.message);
          throw error;
        });
  const stopWith = onStopSignal();
  // Serving starts once the servers are in or the startup wait is over; late ones come with list_changed.
  const gateway = await startGateway(config, true, config.mcpStartupWaitMs).catch((error: unknown) => {
    bound?.server.close();
    throw error;
  });
  gateway.traceRequest = telemetry?.traceRequest ?? null;
  // Counted from the start: /metrics over HTTP, and OTLP metrics when configured.
  if (httpPort !== undefined || telemetry?.meter) await gateway.enableMetrics(telemetry?.meter ?? null);
  // Cells are coming: the sandbox's first worker boots (and compiles QuickJS) on another core while this
  // thread answers initialize and tools/list, instead of after the first exec arrives.
  gateway.engine.warmUp();
  if (httpPort === undefined || httpTransport === undefined) {
    const { serveStdio } = await import("../mcp/stdio-transport.js");
    operatorLine(`serving MCP over stdio (config: ${config.file}, session "${values.session}")`);
    stopWith(async () => {
      await gateway.close();
      await telemetry?.shutdown();
    });
    const end = await serveStdio(gateway, values.session);
    await gateway.close();
    await telemetry?.shutdown();
    if (!end.expected) {
      // Exit 0 would tell a supervisor the client hung up; a broken stream is a failure to report.
      log(
        "error",
        `the stdio connection failed: ${end.reason}`,
        {},
        `codecell: the stdio connection failed: ${end.reason}`,
      );
      process.exit(EXIT.internal);
    }
    process.exit(EXIT.ok);
  }
  const readiness = new Readiness();
  if (bound) readiness.watch(bound.server);
  gateway.metrics?.watchReadiness(() => readiness.state);
  const http = await httpTransport.serveHttp(gateway, {
    port: parsePort(httpPort),
    host: values.host,
    bound,
    readiness,
  });
  readiness.ready();
  stopWith(async () => {
    if (bound) {
      const drainMs = config.http.drainMs;
      // Nested calls of waiting runs are worth waiting for only when another replica can deliver them
      // (a shared store); on memory or SQLite the runs' next wait is in this process, which is stopping.
      const shared = gateway.store.sharesOutcomes;
      const report = await readiness.drain(bound.server, drainMs, () =>
        shared ? gateway.engine.callsInFlight().calls : 0,
      );
      if (report.requests > 0 || report.calls > 0) {
        process.stderr.write(
          `codecell: after ${drainMs} ms (http.drainSeconds), ${report.requests} request(s) and ${report.calls} nested call(s) were still running; closing them\n`,
        );
      }
    }
    await http.close();
    await gateway.close();
    // What is still buffered goes to the collector before the process exits.
    await telemetry?.shutdown();
  });
  process.stdout.write(
    `${connectBanner({
      url: http.url,
      mcpUrl: http.mcpUrl,
      configFile: config.file,
      cliPath: CLI_PATH,
      tokens: config.http.tokens.length > 0,
      agentRoutes: http.agentRoutes,
    })}\n`,
  );
  return undefined;
}

function readCell(path: string): string {
  try {
    return readFileSync(path === "-" ? 0 : path, "utf8");
  } catch (error) {
    throw new UsageError(
      `cannot read the cell ${path === "-" ? "from stdin" : `"${path}"`}: ${(error as Error).message}`,
    );
  }
}

/** The cell `exec` runs: the text of --code, or the one file (or "-") named, read once it is valid. */
function execCell(inline: string | undefined, positionals: string[]): { code: string } | { file: string } {
  if (inline !== undefined) {
    if (positionals.length > 0)
      throw new UsageError(
        `exec takes one cell: --code and a file ("${positionals[0]}") were both given; drop one.`,
      );
    if (inline.trim() === "") throw new UsageError("--code was given an empty cell; pass the cell's text.");
    return { code: inline };
  }
  if (positionals.length !== 1)
    throw new UsageError(
      'exec needs exactly one cell: a .js or .ts file, "-" for stdin, or --code "<cell>".',
    );
  return { file: positionals[0]! };
}

async function exec(args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({ args, allowPositionals: true, options: OPTIONS.exec });
  const cell = execCell(values.code, positionals);
  const language =
    values.language ?? ("file" in cell && /\.(m|c)?ts$/.test(cell.file) ? "typescript" : "javascript");
  if (language !== "javascript" && language !== "typescript") {
    throw new UsageError(`--language must be javascript or typescript, got "${language}".`);
  }
  const code = "file" in cell ? readCell(cell.file) : cell.code;
  const loaded = loadConfigOrExit(values.config);
  // --typecheck asks for the findings; a config that already refuses cells with errors keeps doing so.
  const config =
    values.typecheck && loaded.codeMode.typecheck === "off"
      ? { ...loaded, codeMode: { ...loaded.codeMode, typecheck: "warn" as const } }
      : loaded;
  if (!config.codeMode.enabled) {
    fail(
      EXIT.config,
      `${config.file}: tools.codeMode is not enabled, so there is no exec. Set "tools": { "codeMode": true }.`,
    );
  }
  const gateway = await startGateway(config, true);
  const empty = nothingToCall(gateway, true);
  if (empty) {
    await gateway.close();
    fail(EXIT.config, empty);
  }
  gateway.engine.warmUp();
  try {
    const session = gateway.openSession(`exec-${process.pid}-${Date.now()}`, NO_APPROVAL_CLIENT);
    let result: CodeModeResult = await session.exec({ code, language });
    for (
      let waits = 0;
      result.status === "waiting" && !values["no-wait"] && waits < MAX_AUTO_WAITS;
      waits++
    ) {
      result = await session.wait({ runId: result.runId });
    }
    process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
    const shownAs = "file" in cell && cell.file !== "-" ? cell.file : "cell.ts";
    for (const line of diagnosticLines(result, shownAs)) process.stderr.write(`${line}\n`);
    if (result.typecheckNote) process.stderr.write(`${shownAs}: ${result.typecheckNote}\n`);
    await session.end();
    return result.status === "completed"
      ? EXIT.ok
      : result.status === "failed"
        ? EXIT.execFailed
        : EXIT.execWaiting;
  } finally {
    await gateway.close();
  }
}

/** The cell's type-check findings as a compiler prints them, `file:line:column code message`. */
function diagnosticLines(result: CodeModeResult, file: string): string[] {
  return (result.diagnostics ?? []).map(
    (item) =>
      `${file}:${item.line}:${item.column} ${item.code} ${item.message.replaceAll("\n", " ")}` +
      (item.accepts ? ` (accepts: ${item.accepts.join(", ")})` : ""),
  );
}

async function catalog(args: string[]): Promise<number> {
  const { values } = parseArgs({ args, options: OPTIONS.catalog });
  const gateway = await startGateway(loadConfigOrExit(values.config));
  try {
    const { catalogView } = await import("../mcp/mcp-front.js");
    process.stdout.write(`${JSON.stringify(catalogView(gateway, values.search), null, 2)}\n`);
    return EXIT.ok;
  } finally {
    await gateway.close();
  }
}

async function check(args: string[]): Promise<number> {
  const { values } = parseArgs({ args, options: OPTIONS.check });
  const config = loadConfigOrExit(values.config);
  // A server that fails to start is one of check's problems below, not also a start-up warning.
  const gateway = await startGateway(config, values.connect, undefined, false);
  try {
    const problems = values.connect
      ? gateway.connector.diagnostics.map((d) => `${config.file}: mcpServers.${d.server}: ${d.message}`)
      : [];
    for (const problem of problems) log("error", problem, {}, problem);
    if (problems.length) {
      const summary = `${problems.length} MCP server${problems.length === 1 ? "" : "s"} failed to start.`;
      log("error", summary, {}, `codecell: ${summary}`);
      return EXIT.config;
    }
    const empty = nothingToCall(gateway, values.connect);
    // With an agent section, the agent's own tools join the catalog of each of its requests: only MCP
    // clients are left with nothing, which is worth a warning, not a refusal.
    if (empty && config.agent) {
      operatorLine(`warning: ${empty} Agent requests still work: their own tools join the catalog.`);
    } else if (empty) {
      log("error", empty, {}, empty);
      return EXIT.config;
    }
    const tools = gateway.catalog();
    process.stdout.write(
      `ok: ${config.file}: code mode ${config.codeMode.enabled ? "on" : "off"}, ${Object.keys(config.mcpServers).length} MCP server(s), ${config.plugins.length} plugin(s), ${tools.entries.length} tool(s) after policy${values.connect ? "" : " (MCP tools not counted without --connect)"}\n`,
    );
    return EXIT.ok;
  } finally {
    await gateway.close();
  }
}

const COMMANDS: Record<string, (args: string[]) => Promise<number | undefined>> = {
  serve,
  exec,
  catalog,
  check,
};

/**
 * `codecell --config c.json5 serve`: options written before the command are moved after it, as if the
 * command had come first (each command takes its options after it). Unchanged when no command follows.
 */
function commandFirst(argv: string[]): string[] {
  const first = argv[0];
  if (first === undefined || !first.startsWith("-") || ["--help", "-h", "--version", "-v"].includes(first))
    return argv;
  const takesValue = new Set<string>();
  for (const options of Object.values(OPTIONS)) {
    for (const [name, option] of Object.entries(options)) {
      if (option.type !== "string") continue;
      takesValue.add(`--${name}`);
      if ("short" in option) takesValue.add(`-${option.short}`);
    }
  }
  for (let index = 0; index < argv.length; index++) {
    const token = argv[index]!;
    if (token === "--") return argv;
    if (token.startsWith("-")) {
      if (takesValue.has(token)) index++;
      continue;
    }
    return Object.hasOwn(COMMANDS, token) ? [token, ...argv.slice(0, index), ...argv.slice(index + 1)] : argv;
  }
  return argv;
}

async function main(argv: string[]): Promise<void> {
  const [command, ...rest] = commandFirst(argv);
  if (command === "--version" || command === "-v") {
    process.stdout.write(`${GATEWAY_VERSION}\n`);
    return;
  }
  if (command === undefined || command === "--help" || command === "-h" || command === "help") {
    process.stdout.write(`${HELP.main}\n`);
    return;
  }
  const run = Object.hasOwn(COMMANDS, command) ? COMMANDS[command] : undefined;
  if (!run && command.startsWith("-"))
    throw new UsageError(
      `"${command}" is an option, and no command was given: write one first, as in codecell serve ${command} .... Commands: serve, exec, catalog, check (see --help).`,
    );
  if (!run)
    throw new UsageError(`unknown command "${command}". Commands: serve, exec, catalog, check (see --help).`);
  if (rest.includes("--help") || rest.includes("-h")) {
    process.stdout.write(`${HELP[command]}\n`);
    return;
  }
  const code = await run(rest).catch((error: unknown) => {
    throw commandUsageError(command, error);
  });
  if (typeof code === "number") {
    process.exitCode = code;
    // Downstream servers and timers are closed; exit explicitly so a stray handle cannot hold the CLI.
    process.exit(code);
  }
}

/**
 * A command line the command's parseArgs refused, as a usage error of that command. An option it does
 * not take is said with the closest one it does and its usage line: Node's message for it suggests `--`
 * for a positional that starts with "-", which is not what a mistyped or guessed option needs. Other
 * errors pass unchanged.
 */
function commandUsageError(command: string, error: unknown): unknown {
  const code = (error as { code?: string }).code;
  const more = `(codecell ${command} --help says more)`;
  if (code === "ERR_PARSE_ARGS_INVALID_OPTION_VALUE" || code === "ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL")
    return new UsageError(`${(error as Error).message} ${more}`);
  if (code !== "ERR_PARSE_ARGS_UNKNOWN_OPTION") return error;
  const option = /Unknown option '([^']+)'/.exec((error as Error).message)?.[1] ?? "an option";
  const known = Object.keys(OPTIONS[command as keyof typeof OPTIONS] ?? {});
  const [closest] = closestMatches(option.replace(/^-+/, ""), known, 1);
  const hint = closest === undefined ? "" : ` Did you mean --${closest}?`;
  const usage = HELP[command]?.split("\n\n")[0] ?? "";
  return new UsageError(`${command} does not take ${option}.${hint}\n${usage}\n${more}`);
}

/**
 * An error nobody expected is one line; the stack trace is for developers who ask for it, because a user
 * can act on the message but not on the frames.
 */
function unexpected(error: unknown): never {
  const message = error instanceof Error ? error.message : String(error);
  if (process.env.CODECELL_DEBUG_CODE_MODE === "1") {
    fail(EXIT.internal, `unexpected error: ${(error as Error)?.stack ?? message}`);
  }
  fail(
    EXIT.internal,
    `unexpected error: ${message.split("\n")[0]} (run again with CODECELL_DEBUG_CODE_MODE=1 to see where it happened)`,
  );
}

// Whatever way the process ends (a crash included), no downstream server it spawned outlives it.
process.on("exit", () => killSpawnedServers());

// A failure after startup (a server callback, a late rejection) goes the same way as one during it.
process.on("uncaughtException", (error) => unexpected(error));
process.on("unhandledRejection", (reason) => unexpected(reason));

main(process.argv.slice(2)).catch((error: unknown) => {
  if (error instanceof UsageError) fail(EXIT.usage, `${error.message}`);
  if (CodeModeError.is(error))
    fail(error.code === "invalid_config" ? EXIT.config : EXIT.internal, `${error.code}: ${error.message}`);
  unexpected(error);
});
