import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { runTrivialCellText } from "./helpers.js";

/**
 * Sandbox workers never keep their host's process alive on their own: a script that imports the
 * package (which starts the early worker), or makes a pool and leaves it idle without closing it, ends
 * when its own work ends. Node re-refs a worker's port when a "message" listener is added, so the order
 * of `unref` and listeners matters; this runs the built package in fresh processes to hold it.
 */

const dist = fileURLToPath(new URL("../dist/", import.meta.url));
/** Far beyond a healthy exit and beyond the early worker's 10 s unclaimed timer; a hang fails. */
const HANG_MS = 25_000;

function runScript(body: string): Promise<{ code: number | null; stdout: string; hung: boolean }> {
  const script = `
    const sandbox = await import(${JSON.stringify(`${dist}index.js`)});
    const { earlyWorkerWaiting } = await import(${JSON.stringify(`${dist}worker-start.js`)});
    process.on("exit", () => process.stdout.write(JSON.stringify({ earlyWaiting: earlyWorkerWaiting() })));
    ${body}
  `;
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--input-type=module", "-e", script], {
      stdio: ["ignore", "pipe", "inherit"],
      env: { ...process.env, CODECELL_SANDBOX_EARLY_START: "1" },
    });
    let stdout = "";
    let hung = false;
    child.stdout.on("data", (chunk) => {
      stdout += chunk;
    });
    const timer = setTimeout(() => {
      hung = true;
      child.kill("SIGKILL");
    }, HANG_MS);
    child.on("error", reject);
    // "close", not "exit": Node emits "exit" before it has read the last of the child's stdout.
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, hung });
    });
  });
}

describe("a process using the sandbox", () => {
  it("exits once it has imported the package, while the early worker still waits for a pool", async () => {
    const result = await runScript("");
    expect(result.hung).toBe(false);
    expect(result.code).toBe(0);
    // Still waiting: the process did not sit until the unclaimed timer stopped the worker.
    expect(JSON.parse(result.stdout)).toEqual({ earlyWaiting: true });
  }, 40_000);

  it("exits with an idle pool it never closed", async () => {
    const result = await runScript(`
      const pool = sandbox.createSandboxPool({ size: 2 });
      globalThis.keep = pool;
    `);
    expect(result.hung).toBe(false);
    expect(result.code).toBe(0);
    expect(JSON.parse(result.stdout)).toEqual({ earlyWaiting: false });
  }, 40_000);

  it("exits after a cell completes on a pool it never closed", async () => {
    const result = await runScript(`
      const pool = sandbox.createSandboxPool({ size: 1 });
      ${runTrivialCellText}
    `);
    expect(result.hung).toBe(false);
    expect(result.code).toBe(0);
  }, 40_000);
});
