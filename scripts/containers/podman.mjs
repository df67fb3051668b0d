// Running podman from the container check: Debian's podman with Debian's runc (crun refuses this kind of
// machine's cgroup setup) and explicit limits (podman's defaults ask for more open files and processes
// than such a machine allows), set through a containers.conf of the check's own so that podman-compose's
// podman calls get them too. Nothing here touches the system's podman configuration.
import { spawn } from "node:child_process";
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";

export const containersRequired = process.env.CODECELL_REQUIRE_CONTAINERS === "1";

const TOOLS = {
  podman: "/usr/bin/podman",
  runc: "/usr/bin/runc",
  mmdebstrap: "/usr/bin/mmdebstrap",
  "podman-compose": "/usr/bin/podman-compose",
};

/** Why containers cannot run here, or null when the tools are in place. */
export function containerSkipReason() {
  const missing = Object.entries(TOOLS).filter(([, path]) => !existsSync(path));
  if (missing.length === 0) return null;
  return `${missing.map(([name, path]) => `${name} (${path})`).join(", ")} not found: install Debian's podman, runc, mmdebstrap and podman-compose packages`;
}

/** The environment every podman call of the check runs with (its own containers.conf). */
export function podmanEnv(workDir) {
  const conf = join(workDir, "containers.conf");
  writeFileSync(
    conf,
    [
      "[containers]",
      'default_ulimits = ["nofile=1024:1024", "nproc=4096:4096"]',
      "[engine]",
      'runtime = "runc"',
      "",
    ].join("\n"),
  );
  return { ...process.env, CONTAINERS_CONF: conf };
}

/**
 * Runs a command to its end within timeoutMs (then kills it) and resolves with its status and output;
 * rejects with the output when it fails, unless allowFailure.
 */
export function run(
  command,
  args,
  { env, cwd, timeoutMs = 120_000, allowFailure = false, quiet = false } = {},
) {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { env, cwd, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk) => {
      stdout += chunk;
    });
    child.stderr.on("data", (chunk) => {
      stderr += chunk;
    });
    const timer = setTimeout(() => {
      stderr += `\n(killed after ${timeoutMs} ms)`;
      child.kill("SIGKILL");
    }, timeoutMs);
    child.on("error", (error) => {
      clearTimeout(timer);
      reject(new Error(`could not run ${command}: ${error.message}`));
    });
    child.on("close", (code) => {
      clearTimeout(timer);
      const result = { code, stdout, stderr };
      if (code === 0 || allowFailure) return resolve(result);
      const shown = `${command} ${args.join(" ")}`;
      if (!quiet) process.stderr.write(`${stdout}\n${stderr}\n`);
      reject(new Error(`"${shown}" exited with ${code}: ${stderr.trim().split("\n").slice(-5).join(" | ")}`));
    });
  });
}
