// A throwaway redis-server for tests and benchmarks: Debian's binary, a free loopback port, no
// persistence, its own temporary folder; never the system service and never a fixed port.
// CODECELL_REQUIRE_REDIS=1 (set by .ci/run) turns a missing binary into a failure instead of a skip.
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
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
        // e.g. ["--replicaof", "127.0.0.1", "6380"] for a replica.
        ...(options.args ?? []),
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

/**
 * Starts redis-server in Sentinel mode on a free loopback port, monitoring the master at `masterPort`
 * under `name` with quorum 1: it takes the master for down after `downAfterMs` and fails over to a
 * replica. The config file lives in its own temporary folder (a sentinel rewrites it as it learns).
 */
export async function startRedisSentinel({ masterPort, name, downAfterMs = 1000, failoverTimeoutMs = 3000 }) {
  if (!hasRedis) {
    throw new Error(
      `CODECELL_REQUIRE_REDIS=1 but redis-server was not found at ${REDIS_SERVER}; install Debian's redis-server package`,
    );
  }
  const dir = mkdtempSync(join(tmpdir(), "codecell-sentinel-"));
  const port = await freePort();
  const conf = join(dir, "sentinel.conf");
  writeFileSync(
    conf,
    [
      `port ${port}`,
      "bind 127.0.0.1",
      `dir ${dir}`,
      `sentinel monitor ${name} 127.0.0.1 ${masterPort} 1`,
      `sentinel down-after-milliseconds ${name} ${downAfterMs}`,
      `sentinel failover-timeout ${name} ${failoverTimeoutMs}`,
      `sentinel parallel-syncs ${name} 1`,
      "",
    ].join("\n"),
  );
  let log = "";
  const child = spawn(REDIS_SERVER, [conf, "--sentinel"], { stdio: ["ignore", "pipe", "pipe"] });
  const keep = (chunk) => {
    log = (log + chunk.toString()).slice(-8000);
  };
  child.stdout.on("data", keep);
  child.stderr.on("data", keep);
  // Bounded: 200 tries of 25 ms.
  let up = false;
  for (let attempt = 0; attempt < 200 && !up; attempt += 1) {
    if (child.exitCode !== null) break;
    up = await answersPing(port);
    if (!up) await new Promise((resolve) => setTimeout(resolve, 25));
  }
  if (!up) {
    child.kill("SIGKILL");
    throw new Error(`redis-server --sentinel did not start on port ${port}:\n${log}`);
  }
  return {
    port,
    /** What the sentinel has logged (e.g. "+switch-master"), for waiting on a failover and for failures. */
    log: () => log,
    /** The port of the master the sentinel names now. */
    async masterPort() {
      const reply = await new Promise((resolve, reject) => {
        const socket = connect(port, "127.0.0.1");
        let data = "";
        socket.on("connect", () => socket.write(`SENTINEL GET-MASTER-ADDR-BY-NAME ${name}\r\n`));
        socket.on("data", (chunk) => {
          data += chunk.toString();
          const lines = data.split("\r\n");
          if (lines.length >= 5) {
            socket.destroy();
            resolve(Number(lines[4]));
          }
        });
        socket.on("error", reject);
      });
      return reply;
    },
    async stop() {
      if (child.exitCode === null) {
        const exited = new Promise((resolve) => child.once("exit", resolve));
        child.kill("SIGKILL");
        await exited;
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
