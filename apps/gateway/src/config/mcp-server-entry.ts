import { existsSync, readFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { closestMatches } from "@codecell/contract";
import type { McpServerConfig } from "@codecell/mcp-connector";
import { type ConfigProblem, describeValue } from "./config-problem.js";
import { httpServerSchema, packageServerSchema, stdioServerSchema } from "./config-schema.js";
import { absolute, resolveModule } from "./resolve-module.js";
import { zodProblems } from "./zod-problems.js";

/**
 * One `mcpServers` entry made into what the connector starts: `{ "command" }` as written, `{ "package" }`
 * as node running that package's bin, `{ "url" }` as written. Which of the three it is, is decided by its
 * key, so each is checked against its own schema and the messages name only that kind's fields.
 */

const SERVER_KIND_KEYS = ["command", "package", "url"];

/** A command or argument written as a path from a folder: `./x`, `../x` (or with `\` on Windows). */
function isRelativePath(value: string): boolean {
  return /^\.\.?[\\/]/.test(value);
}

/**
 * The command and args with every `./` and `../` path made absolute against `from`: the entry's `cwd`
 * when it has one, else the config file's folder (so a `cwd` keeps meaning what it did). The program and
 * the script it runs (the command and the first argument, when written as such paths) must exist: a
 * server that cannot start is one line naming the file at load time, not a crash on spawn. Later
 * arguments may name files a server creates.
 */
function resolvePaths(
  command: string | undefined,
  args: string[],
  from: { dir: string; is: string },
  file: string,
  base: string[],
  problems: ConfigProblem[],
): { command: string | undefined; args: string[] } | null {
  const where = `(a path that starts with ./ or ../ is relative to ${from.is}, ${from.dir})`;
  const absoluteCommand =
    command !== undefined && isRelativePath(command) ? resolve(from.dir, command) : command;
  if (absoluteCommand !== command && absoluteCommand !== undefined && !existsSync(absoluteCommand)) {
    problems.push({
      file,
      path: [...base, "command"].join("."),
      message: `no such program ${absoluteCommand} ${where}. Fix the path or create the file.`,
    });
    return null;
  }
  const resolved = args.map((arg) => (isRelativePath(arg) ? resolve(from.dir, arg) : arg));
  // A `package` entry's script is its bin (checked where it is found); its args are the bin's own.
  const script = command === undefined ? undefined : resolved[0];
  if (script !== undefined && script !== args[0] && !existsSync(script)) {
    problems.push({
      file,
      path: [...base, "args", "0"].join("."),
      message: `no such file ${script} ${where}. Fix the path or create the file.`,
    });
    return null;
  }
  return { command: absoluteCommand, args: resolved };
}

/** The bin file of an installed package: the one it has, or the one named with `"bin"`. */
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

/** What the connector starts for one entry; null, with its problems added, when it has any. */
export function resolveMcpServer(
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
  const paths = resolvePaths(
    "command" in value ? String(value.command) : undefined,
    (value.args as string[] | undefined) ?? [],
    cwd ? { dir: cwd, is: "the entry's cwd" } : { dir: configDir, is: "the config file's folder" },
    file,
    base,
    problems,
  );
  if (!paths) return null;
  const args = paths.args;
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
    command: String(paths.command),
    args,
    ...(env ? { env } : {}),
    ...(cwd ? { cwd } : {}),
    ...deadline,
  };
}

/**
 * Every entry of the `mcpServers` section that checks out. Read from the unvalidated input, so each entry
 * is checked (and reported) even when another part of the file is wrong.
 */
export function resolveMcpServers(
  raw: unknown,
  configDir: string,
  file: string,
  problems: ConfigProblem[],
): Record<string, McpServerConfig> {
  const servers: Record<string, McpServerConfig> = {};
  if (!raw || typeof raw !== "object" || Array.isArray(raw)) return servers;
  for (const [id, entry] of Object.entries(raw)) {
    const server = resolveMcpServer(id, entry, configDir, file, problems);
    if (server) servers[id] = server;
  }
  return servers;
}
