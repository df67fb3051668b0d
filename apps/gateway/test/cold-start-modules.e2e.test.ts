import { execFileSync, spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { APP_DIR, CLI } from "./harness.js";

// Cold start: the way to a first result loads only what it needs. These tests protect that
// without timing anything: a fresh process records every module it loads (ES modules through a loader
// hook, CommonJS through the require cache), and the list must not hold the libraries that only some
// paths need. A positive control makes sure the trace would see them if they were loaded.

const TRACE = join(APP_DIR, "test", "fixtures", "trace-modules.mjs");
const COLD_EXEC = join(APP_DIR, "test", "fixtures", "cold-exec.mjs");

/** Runs a script of the fixtures in a fresh node, returns the module files its main thread loaded. */
function loadedModules(script: string, args: string[] = []): string[] {
  const file = join(mkdtempSync(join(tmpdir(), "codecell-trace-")), "modules.json");
  execFileSync(process.execPath, ["--import", TRACE, script, ...args], {
    cwd: APP_DIR,
    env: { ...process.env, TRACE_MODULES_FILE: file },
    stdio: ["ignore", "inherit", "inherit"],
    timeout: 60_000,
  });
  return JSON.parse(readFileSync(file, "utf8")) as string[];
}

/**
 * Starts `codecell serve` over stdio with one plugin tool and no MCP server, answers initialize, lists
 * the tools, runs `return 1 + 1`, closes stdin; returns the module files its main thread loaded.
 */
async function serveModules(env: NodeJS.ProcessEnv = {}): Promise<string[]> {
  const dir = mkdtempSync(join(tmpdir(), "codecell-trace-serve-"));
  const file = join(dir, "modules.json");
  writeFileSync(
    join(dir, "plugin.mjs"),
    `export function createPlugin() {
      return { id: "probe", tools: [{ name: "inc", description: "Adds one.",
        parameters: { type: "object", properties: { value: { type: "number" } } },
        execute: (input) => input.value + 1 }] };
    }`,
  );
  writeFileSync(
    join(dir, "codecell.json5"),
    JSON.stringify({
      tools: { codeMode: { enabled: true, timeoutMs: 60_000 } },
      plugins: [{ module: "./plugin.mjs" }],
    }),
  );
  const child = spawn(
    process.execPath,
    ["--import", TRACE, CLI, "serve", "--config", join(dir, "codecell.json5")],
    {
      env: { ...withoutOtel(process.env), ...env, TRACE_MODULES_FILE: file },
      stdio: ["pipe", "pipe", "inherit"],
    },
  );
  const answers = new Map<number, unknown>();
  let buffer = "";
  const answered = (id: number) =>
    new Promise<unknown>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no answer to request ${id}`)), 60_000);
      const check = () => {
        if (!answers.has(id)) return;
        clearTimeout(timer);
        child.stdout.off("data", check);
        resolve(answers.get(id));
      };
      child.stdout.on("data", check);
      check();
    });
  child.stdout.on("data", (chunk: Buffer) => {
    buffer += chunk.toString("utf8");
    for (let newline = buffer.indexOf("\n"); newline >= 0; newline = buffer.indexOf("\n")) {
      const message = JSON.parse(buffer.slice(0, newline)) as { id?: number };
      buffer = buffer.slice(newline + 1);
      if (typeof message.id === "number") answers.set(message.id, message);
    }
  });
  const send = (message: unknown) => child.stdin.write(`${JSON.stringify(message)}\n`);
  const exited = new Promise((resolve) => child.on("exit", resolve));
  send({
    jsonrpc: "2.0",
    id: 1,
    method: "initialize",
    params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "trace", version: "1" } },
  });
  await answered(1);
  send({ jsonrpc: "2.0", method: "notifications/initialized" });
  send({ jsonrpc: "2.0", id: 2, method: "tools/list" });
  expect(JSON.stringify(await answered(2))).toContain('"name":"exec"');
  send({
    jsonrpc: "2.0",
    id: 3,
    method: "tools/call",
    params: { name: "exec", arguments: { code: "return 1 + 1" } },
  });
  expect(await answered(3)).toMatchObject({
    result: { structuredContent: { status: "completed", value: 2 } },
  });
  child.stdin.end();
  await exited;
  return JSON.parse(readFileSync(file, "utf8")) as string[];
}

/** The environment without OpenTelemetry's variables: the test decides whether OTLP is configured. */
function withoutOtel(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(env).filter(([name]) => !name.startsWith("OTEL_")));
}

/** The OpenTelemetry packages (API included) and prom-client in a module list, by package. */
function telemetryPackages(files: string[]): string[] {
  const found = new Set<string>();
  for (const file of files) {
    const match = /[\\/]node_modules[\\/](@opentelemetry[\\/][^\\/]+|prom-client)[\\/]/.exec(file);
    if (match) found.add(match[1]!.replace("\\", "/"));
  }
  return [...found].sort();
}

/** Which of the libraries the first result must not need appear in a module list. */
function heavyLibraries(files: string[]): string[] {
  const heavy = new Set<string>();
  for (const file of files) {
    const dependency =
      /[\\/]node_modules[\\/](zod|minisearch|better-sqlite3|ioredis|sucrase|@modelcontextprotocol[\\/]sdk)[\\/]/.exec(
        file,
      );
    if (dependency) heavy.add(dependency[1]!.replace("\\", "/"));
    const workspace = /[\\/]packages[\\/](mcp-connector|transpile)[\\/]/.exec(file);
    if (workspace) heavy.add(`@codecell/${workspace[1]}`);
  }
  return [...heavy].sort();
}

/** The files of packages/* in a module list, relative to that folder, sorted. */
function workspaceModules(files: string[]): string[] {
  return files
    .filter((file) => /[\\/]packages[\\/]/.test(file))
    .map((file) => file.replace(/^.*[\\/]packages[\\/]/, "").replaceAll("\\", "/"))
    .sort();
}

describe("cold start: the sandbox's first worker", () => {
  it("starts before the engine's own modules load, so it boots while they do", () => {
    const file = join(mkdtempSync(join(tmpdir(), "codecell-worker-first-")), "verdict.json");
    const child = spawnSync(
      process.execPath,
      ["--import", join(APP_DIR, "test", "fixtures", "worker-first.mjs"), COLD_EXEC],
      {
        cwd: APP_DIR,
        env: { ...process.env, TRACE_WORKER_FIRST_FILE: file },
        stdio: ["ignore", "inherit", "inherit"],
        timeout: 60_000,
      },
    );
    const engineModules = JSON.parse(readFileSync(file, "utf8")) as { url: string; afterWorker: boolean }[];
    // The published engine (packages/engine/scripts/bundle-engine.mjs) is its entry and one ES module
    // the entry imports once the worker start has run.
    expect(engineModules.map((module) => module.url.replace(/^.*[\\/]engine[\\/]/, ""))).toEqual([
      "dist/bundle/engine.js",
    ]);
    expect(engineModules.filter((module) => !module.afterWorker)).toEqual([]);
    expect(child.status).toBe(0);
  });
});

describe("cold start: what the first result loads", () => {
  it("importing @codecell/engine and running `return 1 + 1` loads no zod, search library, SQLite, Redis, TypeScript or MCP code", () => {
    const files = loadedModules(COLD_EXEC);
    expect(heavyLibraries(files)).toEqual([]);
    // The engine traces through @opentelemetry/api, which it loads only once a host registers a provider.
    expect(telemetryPackages(files)).toEqual([]);
    // The engine is its published bundle (its entry, and the engine as one ES module), and of the other
    // codecell packages only the sandbox's worker start loads as ES modules (the rest are inlined).
    expect(workspaceModules(files)).toEqual([
      "engine/dist/bundle/engine.js",
      "engine/dist/bundle/index.js",
      "sandbox/dist/prelude-bytecode.js",
      "sandbox/dist/wasm-module.js",
      "sandbox/dist/worker-start.js",
    ]);
  });

  it("a search and a refused input do load the search library and zod (the trace sees lazy loads)", () => {
    const files = loadedModules(COLD_EXEC, ["search-and-refusal"]);
    expect(heavyLibraries(files)).toEqual(["minisearch", "zod"]);
  });

  it("`codecell serve` with no MCP server loads the bundled CLI, and none of those libraries nor node:http, up to its first exec result", async () => {
    const files = await serveModules();
    expect(files).toContain(CLI);
    expect(files).toContain(join(APP_DIR, "dist", "cli-main.js"));
    // The CLI is one bundle beside its entry: the MCP SDK (with zod and ajv) is inside it, not loaded
    // file by file.
    expect(
      files.filter((file) => /[\\/]node_modules[\\/](@modelcontextprotocol|zod|ajv)[\\/]/.test(file)),
    ).toEqual([]);
    expect(heavyLibraries(files)).toEqual([]);
    // So are the codecell packages: of them, only the sandbox's worker start loads as ES modules (it
    // starts the first worker before anything else loads and holds the sandbox's process-wide state).
    expect(workspaceModules(files)).toEqual([
      "sandbox/dist/prelude-bytecode.js",
      "sandbox/dist/wasm-module.js",
      "sandbox/dist/worker-start.js",
    ]);
    // Over stdio the HTTP transport and Node's HTTP stack stay unloaded (the trace does see built-ins:
    // the sandbox's worker_threads is there).
    expect(files).toContain("node:worker_threads");
    expect(files.filter((file) => /^node:(_?https?|http2|_http_\w+|tls|_tls_\w+)$/.test(file))).toEqual([]);
    // No downstream server and no shell command ran, so nothing was spawned: child_process (and the
    // dgram module it loads) waits for the first one.
    expect(files.filter((file) => /^node:(child_process|dgram)$/.test(file))).toEqual([]);
    // Ajv and acorn are in files of their own beside the bundle, read with the first approval and the
    // first cell that needs the parser.
    expect(files.filter((file) => /cli-(ajv|acorn)\.cjs$/.test(file))).toEqual([]);
    // Without OTLP configured no OpenTelemetry package is read, not even the API, and no prom-client.
    expect(telemetryPackages(files)).toEqual([]);
  });

  it("with OTEL_EXPORTER_OTLP_ENDPOINT set, the SDK and the exporter are loaded (the trace sees them; positive control)", async () => {
    // Nothing listens there, and the sampler keeps nothing, so nothing is sent: only loading is looked at.
    const files = await serveModules({
      OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:9",
      OTEL_METRICS_EXPORTER: "none",
      OTEL_TRACES_SAMPLER: "always_off",
    });
    expect(telemetryPackages(files)).toEqual(
      expect.arrayContaining([
        "@opentelemetry/api",
        "@opentelemetry/exporter-trace-otlp-proto",
        "@opentelemetry/sdk-trace-base",
        "@opentelemetry/sdk-trace-node",
      ]),
    );
    // No metrics exporter and no /metrics over stdio: prom-client stays unloaded.
    expect(telemetryPackages(files)).not.toContain("prom-client");
  });
});

describe("cold start: which commands start a sandbox worker", () => {
  const COUNT_WORKERS = join(APP_DIR, "test", "fixtures", "count-workers.mjs");
  const dir = mkdtempSync(join(tmpdir(), "codecell-workers-"));
  writeFileSync(
    join(dir, "plugin.mjs"),
    `export function createPlugin() {
      return { id: "probe", tools: [{ name: "inc", description: "Adds one.",
        parameters: { type: "object", properties: { value: { type: "number" } } },
        execute: (input) => input.value + 1 }] };
    }`,
  );
  const config = join(dir, "codecell.json5");
  writeFileSync(
    config,
    JSON.stringify({ tools: { codeMode: { enabled: true } }, plugins: [{ module: "./plugin.mjs" }] }),
  );
  const { CODECELL_SANDBOX_EARLY_START: _ignored, ...envWithoutSwitch } = process.env;

  /** Runs the CLI with these arguments; returns its exit code, stdout and what the preload counted. */
  function counted(args: string[], env: NodeJS.ProcessEnv = envWithoutSwitch) {
    const file = join(mkdtempSync(join(tmpdir(), "codecell-workers-count-")), "count.json");
    const child = spawnSync(process.execPath, ["--import", COUNT_WORKERS, CLI, ...args], {
      cwd: dir,
      env: { ...env, COUNT_WORKERS_FILE: file },
      encoding: "utf8",
      timeout: 60_000,
    });
    const count = JSON.parse(readFileSync(file, "utf8")) as { workers: number; earlyStart: string | null };
    return { status: child.status, stdout: child.stdout, stderr: child.stderr, ...count };
  }

  it("`check` and `catalog` run no cell and start no worker, and leave the early-start switch as they found it", () => {
    for (const command of ["check", "catalog"]) {
      const { status, workers, earlyStart } = counted([command, "--config", config]);
      expect({ command, status, workers, earlyStart }).toEqual({
        command,
        status: 0,
        workers: 0,
        earlyStart: null,
      });
    }
    const kept = counted(["check", "--config", config], {
      ...envWithoutSwitch,
      CODECELL_SANDBOX_EARLY_START: "1",
    });
    expect(kept.earlyStart).toBe("1");
  });

  it("`exec` starts exactly one worker, the early one, which its pool takes for the cell", () => {
    const result = counted(["exec", "--config", config, "--code", "return await tools.inc({ value: 1 })"]);
    expect(JSON.parse(result.stdout)).toMatchObject({ status: "completed", value: 2 });
    expect(result.status).toBe(0);
    expect(result.workers).toBe(1);
    expect(result.earlyStart).toBeNull();
  });

  it("`exec --sandbox` (an option of the removed in-thread mode) is a usage error that says so", () => {
    const result = counted(["exec", "--config", config, "--sandbox", "worker", "--code", "return 1"]);
    expect(result.status).toBe(2);
    expect(result.stderr).toContain("exec does not take --sandbox.");
  });
});
