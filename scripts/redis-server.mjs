// A throwaway redis-server for tests and benchmarks: Debian's binary, a free loopback port, no
// persistence, its own temporary folder; never the system service and never a fixed port.
// CODECELL_REQUIRE_REDIS=1 (set by .ci/run) turns a missing binary into a failure instead of a skip.
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { connect, createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

export const REDIS_SERVER = process.env.CODECELL_REDIS_SERVER ?? "/usr/bin/redis-server";
export const hasRedis = existsSync(REDIS_SERVER);
export const redisRequired = process.env.CODECELL_REQUIRE_REDIS === "1";
/** Why Redis tests are skipped, or null when they run. */
export const redisSkipReason =
  hasRedis || redisRequired
    ? null
    : `redis-server not found at ${REDIS_SERVER}: Redis tests skipped; install Debian's redis-server package (CI sets CODECELL_REQUIRE_REDIS=1 and fails instead)`;

/** A port nobody listens on right now (the kernel picks it). */
export function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

/** Sends one command and resolves with the first line of the reply (enough for +OK, :1, -ERR ...). */
function sendCommand(port, args) {
  return new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1");
    socket.on("connect", () =>
      socket.write(
        `*${args.length}\r\n${args.map((arg) => `$${Buffer.byteLength(String(arg))}\r\n${arg}\r\n`).join("")}`,
      ),
    );
    socket.once("data", (data) => {
      socket.destroy();
      resolve(data.toString().split("\r\n")[0]);
    });
    socket.on("error", reject);
  });
}

function answersPing(port) {
  return new Promise((resolve) => {
    const socket = connect(port, "127.0.0.1");
    socket.setTimeout(500);
    socket.on("connect", () => socket.write("PING\r\n"));
    socket.on("data", (data) => {
      socket.destroy();
      resolve(data.toString().startsWith("+PONG"));
    });
    socket.on("error", () => resolve(false));
    socket.on("timeout", () => {
      socket.destroy();
      resolve(false);
    });
  });
}

/**
 * Starts redis-server on a free loopback port. `restart()` stops it (SIGKILL) and starts it again on the
 * same port: empty without persistence (what an operator gets from a Redis without RDB/AOF), with its
 * data back with `{ persistence: "aof" }` (an append-only file fsynced on every write, so a SIGKILL loses
 * nothing the server acknowledged). `stop()` cleans up.
 */
export async function startRedisServer(options = {}) {
  if (!hasRedis) {
    throw new Error(
      `CODECELL_REQUIRE_REDIS=1 but redis-server was not found at ${REDIS_SERVER}; install Debian's redis-server package`,
    );
  }
  const dir = mkdtempSync(join(tmpdir(), "codecell-redis-"));
  const port = await freePort();
  let child = null;
  let log = "";

  async function launch() {
    const started = spawn(
      REDIS_SERVER,
      [
        "--port",
        String(port),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        ...(options.persistence === "aof"
          ? ["--appendonly", "yes", "--appendfsync", "always"]
          : ["--appendonly", "no"]),
        "--dir",
        dir,
        // DEBUG SLEEP lets a test make the server slow; only from loopback.
        "--enable-debug-command",
        "local",
      ],
      { stdio: ["ignore", "pipe", "pipe"] },
    );
    started.stdout.on("data", (chunk) => {
      log = (log + chunk.toString()).slice(-4000);
    });
    started.stderr.on("data", (chunk) => {
      log = (log + chunk.toString()).slice(-4000);
    });
    child = started;
    // Bounded: 200 tries of 25 ms.
    for (let attempt = 0; attempt < 200; attempt += 1) {
      if (started.exitCode !== null) break;
      if (await answersPing(port)) return;
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    started.kill("SIGKILL");
    throw new Error(`redis-server did not start on port ${port}:\n${log}`);
  }

  async function halt() {
    const running = child;
    child = null;
    if (running === null || running.exitCode !== null) return;
    const exited = new Promise((resolve) => running.once("exit", resolve));
    running.kill("SIGKILL");
    await exited;
  }

  await launch();
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    async restart() {
      await halt();
      await launch();
    },
    halt,
    /** Starts it again after `halt` (on the same port and folder). */
    start: launch,
    /** Deletes what it persisted (while halted): the next start comes back empty. */
    wipe() {
      rmSync(dir, { recursive: true, force: true });
      mkdirSync(dir, { recursive: true });
    },
    /** Sends one command (e.g. "DEBUG", "SLEEP", "2") and resolves with the reply's first line. */
    command: (...args) => sendCommand(port, args),
    /** The server's process id (for SIGSTOP/SIGCONT), or null while it is halted. */
    pid: () => child?.pid ?? null,
    async stop() {
      await halt();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
