#!/usr/bin/env node
// The check .ci/run runs after the README's `npm test` (kept out of it: it takes minutes): the packed
// packages installed and run without the repository, then the image built from the root Dockerfile on
// a local stand-in for node:20-bookworm-slim, the whole build as `docker build .` runs it (pnpm install,
// build and pack, npm install of the tarballs), one container served and drained, and compose.yaml's two
// replicas on Redis resuming each other's runs (started with Debian's podman-compose). The image and the
// build's intermediate stages are removed at the end; the stand-in bases are kept for the next run.
// Without podman and its companions the container part is skipped with the reason;
// CODECELL_REQUIRE_CONTAINERS=1 (set by .ci/run) makes that a failure. Needs a built workspace.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { callCodeMode, connectGateway, waitForStatus } from "./containers/gateway-client.mjs";
import { installPackages, packPackages, runInstalledPackages } from "./containers/packages.mjs";
import { containerSkipReason, containersRequired, podmanEnv, run } from "./containers/podman.mjs";
import { STAND_IN_NODE, STAND_IN_REDIS, standInImages } from "./containers/stand-in-images.mjs";
import { freePort } from "./redis-server.mjs";

const ROOT = new URL("..", import.meta.url).pathname;
// One tag per run, so two checks on one machine neither share nor remove each other's image.
const IMAGE = `localhost/codecell:container-check-${process.pid}`;
const started = Date.now();
const log = (message) =>
  console.log(`container-check [${Math.round((Date.now() - started) / 1000)} s] ${message}`);

if (!existsSync(join(ROOT, "apps", "gateway", "dist", "cli.js"))) {
  console.error("container-check: the workspace is not built; run `npm test` or `npm run build` first");
  process.exit(1);
}

const work = mkdtempSync(join(tmpdir(), "codecell-container-check-"));
const installDir = join(work, "install");
const skipReason = containerSkipReason();
const env = skipReason ? process.env : podmanEnv(work);
const cleanups = [];

/**
 * The extra CAs the host's Node trusts (NODE_EXTRA_CA_CERTS, else the system bundle), for a machine
 * whose egress proxy intercepts TLS: the build gets them as its `ca` secret, as docs/operating.md tells
 * an operator behind such a proxy to do. Null when the host has neither.
 */
function caBundle() {
  const candidates = [process.env.NODE_EXTRA_CA_CERTS, "/etc/ssl/certs/ca-certificates.crt"];
  return candidates.find((file) => file && existsSync(file)) ?? null;
}

async function buildImage() {
  const ca = caBundle();
  const buildStarted = Date.now();
  cleanups.push(() => run("podman", ["rmi", "-f", IMAGE], { env, allowFailure: true }));
  await run(
    "podman",
    [
      "build",
      "--format",
      "docker", // OCI images drop HEALTHCHECK
      // No cached layers are kept: every run builds from scratch, as a fresh clone does, and leaves none.
      "--layers=false",
      "--build-arg",
      `BASE=${STAND_IN_NODE}`,
      ...(ca ? ["--secret", `id=ca,src=${ca}`] : []),
      "-t",
      IMAGE,
      ROOT,
    ],
    { env, timeoutMs: 1_200_000 },
  );
  const { stdout } = await run("podman", ["image", "inspect", "--format", "{{.Size}}", IMAGE], { env });
  const bytes = Number(stdout.trim());
  log(
    `image built from the repository in ${Math.round((Date.now() - buildStarted) / 1000)} s${ca ? ` (CA bundle ${ca} as the build secret ca)` : ""}: ${IMAGE}, ${(bytes / 1e6).toFixed(0)} MB uncompressed`,
  );
  const { stdout: health } = await run(
    "podman",
    ["image", "inspect", "--format", "{{json .Config.Healthcheck}}", IMAGE],
    {
      env,
    },
  );
  assert.match(health, /healthz/, "the image has no HEALTHCHECK on /healthz");
  return bytes;
}

async function singleContainer() {
  const token = randomBytes(24).toString("hex");
  const port = await freePort();
  const name = `codecell-check-${process.pid}`;
  const volume = `${name}-data`;
  cleanups.push(() => run("podman", ["rm", "-f", "-v", name], { env, allowFailure: true }));
  cleanups.push(() => run("podman", ["volume", "rm", "-f", volume], { env, allowFailure: true }));
  await run(
    "podman",
    [
      "run",
      "-d",
      "--name",
      name,
      "-p",
      `127.0.0.1:${port}:8787`,
      "-e",
      `CODECELL_TOKEN=${token}`,
      "-v",
      `${volume}:/data`,
      IMAGE,
    ],
    { env },
  );
  const ready = await waitForStatus(`http://127.0.0.1:${port}/readyz`, 200, 90_000);
  log(`container ready on 127.0.0.1:${port}: /readyz ${ready.status} ${ready.body}`);
  const { stdout: uid } = await run("podman", ["exec", name, "id", "-u"], { env });
  assert.equal(uid.trim(), "1000", "the gateway does not run as the non-root node user");
  const health = await run("podman", ["healthcheck", "run", name], { env, allowFailure: true });
  assert.equal(health.code, 0, `the HEALTHCHECK failed: ${health.stdout}${health.stderr}`);
  const refused = await fetch(`http://127.0.0.1:${port}/mcp`, { method: "POST", body: "{}" });
  assert.equal(refused.status, 401, "/mcp without the token was not refused");

  const client = await connectGateway(port, token, "container-check");
  const cell = await callCodeMode(client, "exec", {
    code: "return { answer: 6 * 7, servers: Object.keys(MCP) };",
  });
  assert.deepEqual(cell.value, { answer: 42, servers: ["memory"] }, JSON.stringify(cell));
  log("initialize with the token and an exec cell over MCP");

  // SIGTERM while a cell is in flight: not ready at once, the cell still answers, the process exits 0.
  const inFlight = callCodeMode(client, "exec", {
    code: "const until = Date.now() + 3000; while (Date.now() < until) {} return 'finished while draining';",
  });
  await new Promise((resolve) => setTimeout(resolve, 1000));
  const stop = run("podman", ["stop", "--time", "60", name], { env, timeoutMs: 90_000 });
  const draining = await waitForStatus(`http://127.0.0.1:${port}/readyz`, 503, 30_000).catch((error) => ({
    error,
  }));
  const result = await inFlight;
  await stop;
  assert.equal(result.value, "finished while draining", JSON.stringify(result));
  const { stdout: exit } = await run("podman", ["inspect", "--format", "{{.State.ExitCode}}", name], { env });
  assert.equal(exit.trim(), "0", "the gateway did not exit 0 after SIGTERM");
  const { stdout: out, stderr: logs } = await run("podman", ["logs", name], { env });
  await client.close().catch(() => {});
  log(
    `SIGTERM: the cell in flight finished, exit code 0${draining.error ? "" : `, /readyz said ${draining.body}`}; last log line: ${`${out}${logs}`.trim().split("\n").at(-1)}`,
  );
}

async function composePair() {
  const token = randomBytes(24).toString("hex");
  const [port1, port2] = [await freePort(), await freePort()];
  const project = `codecell-check-${process.pid}`;
  const composeEnv = {
    ...env,
    CODECELL_IMAGE: IMAGE,
    CODECELL_REDIS_IMAGE: STAND_IN_REDIS,
    CODECELL_TOKEN: token,
    CODECELL_SNAPSHOT_SECRET: randomBytes(48).toString("base64"),
    CODECELL_PORT_1: String(port1),
    CODECELL_PORT_2: String(port2),
  };
  const compose = (args, options = {}) =>
    run("podman-compose", ["-p", project, "-f", join(ROOT, "compose.yaml"), ...args], {
      env: composeEnv,
      cwd: ROOT,
      timeoutMs: 180_000,
      ...options,
    });
  // podman-compose 1.0 leaves the project's network behind; it goes too.
  cleanups.push(() =>
    run("podman", ["network", "rm", "-f", `${project}_default`], { env, allowFailure: true }),
  );
  cleanups.push(() => compose(["down", "-v"], { allowFailure: true }));
  await compose(["up", "-d", "--no-build"]);
  await waitForStatus(`http://127.0.0.1:${port1}/readyz`, 200, 90_000);
  await waitForStatus(`http://127.0.0.1:${port2}/readyz`, 200, 90_000);
  log(`compose pair ready on 127.0.0.1:${port1} and 127.0.0.1:${port2}, Redis behind them`);

  const onFirst = await connectGateway(port1, token, "compose-check");
  const onSecond = await connectGateway(port2, token, "compose-check");
  try {
    const waiting = await callCodeMode(onFirst, "exec", {
      code: `const a = 20; await yield_control("resume me elsewhere"); return a + 22;`,
    });
    assert.equal(waiting.status, "waiting", JSON.stringify(waiting));
    const resumed = await callCodeMode(onSecond, "wait", { runId: waiting.runId });
    assert.deepEqual(
      { status: resumed.status, value: resumed.value },
      { status: "completed", value: 42 },
      JSON.stringify(resumed),
    );
  } finally {
    await onFirst.close().catch(() => {});
    await onSecond.close().catch(() => {});
  }
  log("a run suspended on replica 1 was resumed by replica 2 through Redis");
}

let failed = false;
try {
  if (skipReason) {
    const message = `containers cannot run here: ${skipReason}`;
    if (containersRequired) throw new Error(`${message} (CODECELL_REQUIRE_CONTAINERS=1)`);
    log(`${message}; the image and compose checks are skipped, the package check runs`);
  }
  // The packages' check (pack, install into an empty folder, run) goes on while the stand-in bases are
  // made and the image is built from the repository: they share nothing.
  const packageCheck = (async () => {
    const tarballs = await packPackages(ROOT, join(work, "tarballs"));
    log(`packed ${tarballs.length} packages`);
    await installPackages(ROOT, tarballs, installDir);
    log(`installed them with npm into an empty folder`);
    await runInstalledPackages(ROOT, installDir, log);
  })();
  const imageCheck = skipReason
    ? null
    : (async () => {
        await standInImages(work, env, log);
        await buildImage();
        await singleContainer();
        await composePair();
      })();
  // Both run to their end (no build is left running behind a failure), and each failure is reported.
  const outcomes = await Promise.allSettled([packageCheck, imageCheck]);
  const failures = outcomes.filter((outcome) => outcome.status === "rejected").map((o) => o.reason);
  for (const other of failures.slice(1))
    console.error(`container-check: also FAILED: ${other.stack ?? other}`);
  if (failures.length > 0) throw failures[0];
  log("all checks passed");
} catch (error) {
  failed = true;
  console.error(`container-check: FAILED: ${error.stack ?? error}`);
} finally {
  for (const cleanup of cleanups.reverse()) await cleanup().catch(() => {});
  rmSync(work, { recursive: true, force: true });
}
process.exit(failed ? 1 : 0);
