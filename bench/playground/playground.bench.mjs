// What a user waits for in the playground: the built page's size, the time from navigation to a live
// MCP session, and the time from pressing Run (or Wait) to the rendered result, per example. The built
// gateway CLI serves the built page on 127.0.0.1; headless Chromium (Debian's /usr/bin/chromium) drives
// it. Run `pnpm --filter @codecell/bench bench:playground` (turbo builds first). Prints a table and writes
// bench-results/playground.json.
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";
import { chromium } from "playwright-core";
import {
  CHROMIUM,
  CHROMIUM_FLAGS,
  GATEWAY_CLI,
  startGateway,
} from "../../apps/playground/test/browser-harness.mjs";

const benchDir = fileURLToPath(new URL("..", import.meta.url));
const appDir = fileURLToPath(new URL("../../apps/playground/", import.meta.url));
const LOADS = Number(process.env.BENCH_LOADS ?? 10);
const RUNS = Number(process.env.BENCH_RUNS ?? 20);
const WARMUP = 3;
const EXAMPLES = [
  "search-then-call",
  "mcp-declaration",
  "parallel",
  "namespace",
  "yield-then-wait",
  "typescript",
  "fails-with-code",
];

if (!existsSync(CHROMIUM)) {
  console.log(
    `Chromium not found at ${CHROMIUM}: nothing measured; install the Debian packages chromium and chromium-driver`,
  );
  process.exit(0);
}
for (const needed of [join(appDir, "dist", "index.html"), GATEWAY_CLI]) {
  if (!existsSync(needed)) throw new Error(`${needed} is missing: build first (turbo run bench builds it).`);
}

function stats(times) {
  const sorted = [...times].sort((a, b) => a - b);
  const at = (p) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
  return { n: sorted.length, p50: at(50), p90: at(90), max: sorted.at(-1) };
}

function bundleSizes() {
  const assets = join(appDir, "dist", "assets");
  const sizes = { js: { raw: 0, gzip: 0 }, css: { raw: 0, gzip: 0 } };
  for (const name of readdirSync(assets)) {
    const kind = name.endsWith(".js") ? "js" : name.endsWith(".css") ? "css" : null;
    if (!kind) continue;
    const body = readFileSync(join(assets, name));
    sizes[kind].raw += body.length;
    sizes[kind].gzip += gzipSync(body).length;
  }
  return sizes;
}

const gateway = await startGateway();
const { url } = gateway;
// launch() keeps its own fresh, temporary profile; every measured load also gets a fresh context.
const browser = await chromium.launch({
  executablePath: CHROMIUM,
  args: CHROMIUM_FLAGS,
});
try {
  // Navigation to a connected MCP session, each load in a fresh context (no cache).
  const loads = [];
  for (let i = 0; i < LOADS + 1; i++) {
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const page = await context.newPage();
    const started = performance.now();
    await page.goto(url);
    await page.waitForSelector('[data-testid="connection"][data-state="connected"]', { timeout: 30_000 });
    if (i > 0) loads.push(performance.now() - started);
    await context.close();
  }

  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const page = await context.newPage();
  await page.goto(url);
  await page.waitForSelector('[data-testid="connection"][data-state="connected"]', { timeout: 30_000 });
  let settled = 0;
  // Timed inside the page (performance.now around the call and the rendering), so the browser
  // driver's own latency is not counted.
  const press = async (testId) => {
    await page.getByTestId(testId).click();
    settled += 1;
    const area = page.locator(`[data-testid="result-area"][data-settled="${settled}"]`);
    await area.waitFor({ timeout: 30_000 });
    return {
      call: Number(await area.getAttribute("data-round-trip-ms")),
      total: Number(await area.getAttribute("data-total-ms")),
    };
  };
  const perExample = {};
  for (const id of EXAMPLES) {
    await page.getByTestId("examples").selectOption(id);
    const times = { execCall: [], execShown: [], waitCall: [], waitShown: [] };
    for (let i = 0; i < WARMUP + RUNS; i++) {
      const run = await press("run");
      const waiting = (await page.getByTestId("status").textContent())?.startsWith("waiting");
      const wait = waiting ? await press("wait") : undefined;
      if (i < WARMUP) continue;
      times.execCall.push(run.call);
      times.execShown.push(run.total);
      if (wait) {
        times.waitCall.push(wait.call);
        times.waitShown.push(wait.total);
      }
    }
    perExample[id] = Object.fromEntries(
      Object.entries(times)
        .filter(([, list]) => list.length > 0)
        .map(([key, list]) => [key, stats(list)]),
    );
  }
  await context.close();

  const sizes = bundleSizes();
  const load = stats(loads);
  const rows = [
    [
      "page JS (raw / gzip)",
      `${(sizes.js.raw / 1024).toFixed(0)} KB / ${(sizes.js.gzip / 1024).toFixed(0)} KB`,
    ],
    [
      "page CSS (raw / gzip)",
      `${(sizes.css.raw / 1024).toFixed(1)} KB / ${(sizes.css.gzip / 1024).toFixed(1)} KB`,
    ],
    [`load to connected (n=${load.n})`, `p50 ${load.p50.toFixed(0)} ms, p90 ${load.p90.toFixed(0)} ms`],
    ...Object.entries(perExample).flatMap(([id, result]) =>
      [
        ["exec", result.execCall, result.execShown],
        ["wait", result.waitCall, result.waitShown],
      ]
        .filter(([, call]) => call)
        .map(([kind, call, shown]) => [
          `${kind} ${id} (n=${call.n}): call / shown`,
          `p50 ${call.p50.toFixed(1)} / ${shown.p50.toFixed(1)} ms, p90 ${call.p90.toFixed(1)} / ${shown.p90.toFixed(1)} ms`,
        ]),
    ),
  ];
  const width = Math.max(...rows.map(([label]) => label.length));
  console.log(`playground bench (Node ${process.version}, ${browser.version()})`);
  for (const [label, value] of rows) console.log(`${label.padEnd(width)}  ${value}`);
  mkdirSync(join(benchDir, "bench-results"), { recursive: true });
  writeFileSync(
    join(benchDir, "bench-results", "playground.json"),
    `${JSON.stringify({ node: process.version, chromium: browser.version(), bundle: sizes, loadToConnectedMs: load, examples: perExample }, null, 2)}\n`,
  );
} finally {
  await browser.close();
  await gateway.stop();
}
