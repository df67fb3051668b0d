// What a hostile upstream model or a hostile client of the agent endpoint costs everyone else: the built
// CLI serves the agent endpoint (default agent.limits) in front of a raw upstream on loopback that
// answers as each attack scripts it. While each attack runs, /healthz is asked every 20 ms (its latency is
// the gateway's event-loop delay as a client sees it) and the gateway's RSS is sampled; a control (a
// polite streamed answer) runs the same way. Run `pnpm --filter @codecell/bench bench:agent-hostile`
// after a build; BENCH_CLI=<other build>/dist/cli.js measures another build (it must accept the config,
// which sets no limits). BENCH_HOSTILE_ROUNDS sets the rounds per attack (default 2); BENCH_ATTACKS=a,b
// runs only the attacks whose names hold one of those words (beside the control). Prints a table and
// writes bench-results/agent-hostile.json.
import { mkdirSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { connect } from "node:net";
import { join } from "node:path";
import { Worker } from "node:worker_threads";
import { benchDir, benchWorkspace, percentile, rssOf, startHttpGateway } from "./http-gateway.mjs";

const ROUNDS = Number(process.env.BENCH_HOSTILE_ROUNDS ?? 2);
const TOKEN = "agent-hostile-bench-token-0123456789";
const MIB = 1024 * 1024;
const MIN_PHASE_MS = 2_000;
const TOOLS = [
  { type: "function", function: { name: "pick", parameters: { type: "object", properties: {} } } },
];

const chunk = (delta) =>
  `data: ${JSON.stringify({ choices: [{ index: 0, delta, finish_reason: null }] })}\n\n`;
const completion = (message) =>
  JSON.stringify({ model: "m", choices: [{ index: 0, message: { role: "assistant", ...message } }] });

/** The upstream: each request goes to `handler`; `flood` writes at the pace the gateway reads. */
const upstream = { handler: (_req, res) => res.writeHead(500).end(), flooded: 0 };
async function flood(res, piece, total) {
  upstream.flooded = 0;
  while (upstream.flooded < total && !res.destroyed) {
    upstream.flooded += piece.length;
    if (!res.write(piece)) {
      await new Promise((resolve) => {
        const done = () => {
          res.off("drain", done);
          res.off("close", done);
          resolve();
        };
        res.on("drain", done);
        res.on("close", done);
      });
    }
  }
  res.end();
}
const server = createServer((req, res) => {
  req.resume();
  req.on("end", () => upstream.handler(req, res));
});
await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
const upstreamUrl = `http://127.0.0.1:${server.address().port}/v1`;

const { configPath } = benchWorkspace("codecell-agent-hostile-bench-", {
  tools: { codeMode: { enabled: true, timeoutMs: 3000 } },
  mcpServers: {},
  http: { tokens: [{ name: "bench", token: TOKEN }] },
  agent: { upstream: { baseUrl: upstreamUrl, timeoutMs: 30_000 } },
});
const { child, url } = await startHttpGateway(configPath);
const base = url.replace(/mcp$/, "");
const { port } = new URL(base);

const turn = (extra = {}) => ({
  model: "m",
  messages: [{ role: "user", content: "go" }],
  tools: TOOLS,
  ...extra,
});
const sse = (res) => res.writeHead(200, { "content-type": "text/event-stream" });
const json = (res, body) => res.writeHead(200, { "content-type": "application/json" }).end(body);

/** One request; its outcome is the status and error code (a stream's last event for a stream). */
async function post(body) {
  try {
    const response = await fetch(`${base}v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
      body: typeof body === "string" ? body : JSON.stringify(body),
      signal: AbortSignal.timeout(60_000),
    });
    const text = await response.text();
    const last = text.trim().split("\n\n").at(-1) ?? "";
    let code = "";
    try {
      const parsed = JSON.parse(last.startsWith("data: ") ? last.slice(6) : last);
      code = parsed?.error?.code ?? (parsed?.choices ? "answer" : "");
    } catch {
      code = last === "data: [DONE]" ? "answer" : "";
    }
    return `${response.status} ${code}`.trim();
  } catch (error) {
    return `failed: ${error.name}`;
  }
}

const deep = (depth) => `${'{"a":'.repeat(depth)}1${"}".repeat(depth)}`;
// The big bodies are made before anything is measured: making them is the attacker's cost, not the gateway's.
const MANY_TOOLS = JSON.stringify(
  turn({
    tools: Array.from({ length: 60_000 }, (_, i) => ({
      type: "function",
      function: { name: `t${i}`, parameters: { type: "object" } },
    })),
  }),
);
const DEEP_BODY = `{"model":"m","messages":[{"role":"user","content":"go"}],"x":${"[".repeat(200_000)}${"]".repeat(200_000)}}`;
const DEEP_ARGUMENTS = JSON.stringify(
  turn({
    messages: [
      { role: "user", content: "go" },
      {
        role: "assistant",
        content: null,
        tool_calls: [{ id: "c1", type: "function", function: { name: "pick", arguments: deep(200_000) } }],
      },
      { role: "tool", tool_call_id: "c1", content: "done" },
      { role: "user", content: "and now?" },
    ],
  }),
);

/** Each attack: what the upstream does, and the request that sets it off. */
const ATTACKS = {
  "control: a streamed answer": () => {
    upstream.handler = (_req, res) => {
      sse(res);
      for (let i = 0; i < 50; i++) res.write(chunk({ content: "word " }));
      res.end("data: [DONE]\n\n");
    };
    return post(turn({ stream: true }));
  },
  "tool call index 4294967294": () => {
    upstream.handler = (_req, res) => {
      sse(res);
      res.end(
        chunk({ tool_calls: [{ index: 4294967294, id: "c", function: { name: "exec", arguments: "{}" } }] }),
      );
    };
    return post(turn({ stream: true }));
  },
  "SSE line that never ends (64 MiB)": () => {
    upstream.handler = (_req, res) => {
      sse(res);
      void flood(res, `data: ${"x".repeat(64 * 1024)}`, 64 * MIB);
    };
    return post(turn({ stream: true }));
  },
  "endless stream (up to 512 MiB)": () => {
    upstream.handler = (_req, res) => {
      sse(res);
      void flood(res, chunk({ content: "z".repeat(4096) }), 512 * MIB);
    };
    return post(turn({ stream: true }));
  },
  "whole answer of 300 MiB": () => {
    upstream.handler = (_req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      void flood(res, " ".repeat(64 * 1024), 300 * MIB);
    };
    return post(turn());
  },
  "2,000 exec calls in one answer": () => {
    const calls = Array.from({ length: 2000 }, (_, i) => ({
      id: `c${i}`,
      type: "function",
      function: { name: "exec", arguments: JSON.stringify({ code: "return 1" }) },
    }));
    upstream.handler = (_req, res) => json(res, completion({ tool_calls: calls }));
    return post(turn());
  },
  "60,000 client tools": () => {
    upstream.handler = (_req, res) => json(res, completion({ content: "ok" }));
    return post(MANY_TOOLS);
  },
  "body nested 200,000 deep": () => post(DEEP_BODY),
  "tool-call arguments nested 200,000 deep": () => {
    upstream.handler = (_req, res) => json(res, completion({ content: "ok" }));
    return post(DEEP_ARGUMENTS);
  },
  "streaming client that does not read (upstream offers 256 MiB)": async () => {
    upstream.handler = (_req, res) => {
      sse(res);
      void flood(res, chunk({ content: "w".repeat(16 * 1024) }), 256 * MIB);
    };
    const body = JSON.stringify(turn({ stream: true }));
    upstream.flooded = 0;
    const socket = connect(Number(port), "127.0.0.1");
    await new Promise((resolve) => socket.once("connect", resolve));
    socket.write(
      `POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1:${port}\r\nauthorization: Bearer ${TOKEN}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    );
    socket.pause();
    for (let round = 0; round < 600 && upstream.flooded === 0; round++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    // Until the upstream's writes stop moving (the buffers between are full) or it has sent it all.
    let last = -1;
    for (let round = 0; round < 40 && upstream.flooded !== last && upstream.flooded < 256 * MIB; round++) {
      last = upstream.flooded;
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
    socket.destroy();
    return `upstream sent ${(upstream.flooded / MIB).toFixed(0)} MiB`;
  },
};

/**
 * /healthz every 20 ms while `run` runs, from a worker thread (this thread is busy being the upstream
 * and the attacker): its latencies and the gateway's RSS peak.
 */
async function measured(run) {
  const prober = new Worker(
    `const { parentPort, workerData } = require("node:worker_threads");
    const latencies = [];
    let probing = true;
    parentPort.on("message", () => { probing = false; });
    (async () => {
      // Warm: the worker's first requests open its connection; they are not counted.
      for (let i = 0; i < 5; i++) await fetch(workerData).then((response) => response.arrayBuffer());
      parentPort.postMessage("ready");
      while (probing) {
        const started = performance.now();
        // A gateway that does not answer within 30 s counts as 30 s (and the phase goes on).
        await fetch(workerData, { signal: AbortSignal.timeout(30000) })
          .then((response) => response.arrayBuffer())
          .catch(() => {});
        latencies.push(performance.now() - started);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      parentPort.postMessage(latencies);
    })();`,
    { eval: true, workerData: `${base}healthz` },
  );
  await new Promise((resolve) => prober.once("message", resolve));
  const started = performance.now();
  const before = rssOf(child.pid) ?? 0;
  let peak = before;
  const sampler = setInterval(() => {
    peak = Math.max(peak, rssOf(child.pid) ?? 0);
  }, 50);
  const outcomes = new Set();
  let latencies;
  try {
    for (let round = 0; round < ROUNDS; round++) outcomes.add(await run());
    // At least two seconds of probes, so a quick attack is measured over as many as a slow one's start.
    const left = MIN_PHASE_MS - (performance.now() - started);
    if (left > 0) await new Promise((resolve) => setTimeout(resolve, left));
  } finally {
    const done = new Promise((resolve) => prober.once("message", resolve));
    prober.postMessage("stop");
    latencies = await done;
    await prober.terminate();
    clearInterval(sampler);
  }
  latencies.sort((a, b) => a - b);
  return {
    outcome: [...outcomes].join(", "),
    probes: latencies.length,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    max: latencies.at(-1),
    rssBefore: before,
    rssPeak: peak,
  };
}

/** BENCH_ATTACKS: a comma-separated list of words; only attacks whose names hold one of them run. */
const only = (process.env.BENCH_ATTACKS ?? "").split(",").filter(Boolean);
const chosen = Object.entries(ATTACKS).filter(
  ([name]) => only.length === 0 || name.startsWith("control") || only.some((word) => name.includes(word)),
);
const rows = [];
try {
  for (const [name, run] of chosen) {
    rows.push({ attack: name, ...(await measured(run)) });
    console.error(`${name}: ${rows.at(-1).outcome}`);
  }
} finally {
  child.kill("SIGTERM");
  server.closeAllConnections();
  server.close();
}

const ms = (value) => `${value.toFixed(1)} ms`;
const mib = (bytes) => `${(bytes / MIB).toFixed(0)} MiB`;
console.log(
  `agent endpoint under attack, ${ROUNDS} rounds each, default agent.limits; /healthz asked every 20 ms meanwhile (Node ${process.versions.node})`,
);
console.log("| attack | outcome | /healthz p50 | p99 | max | RSS before | RSS peak |");
console.log("| --- | --- | --- | --- | --- | --- | --- |");
for (const row of rows) {
  console.log(
    `| ${row.attack} | ${row.outcome} | ${ms(row.p50)} | ${ms(row.p99)} | ${ms(row.max)} | ${mib(row.rssBefore)} | ${mib(row.rssPeak)} |`,
  );
}
mkdirSync(join(benchDir, "bench-results"), { recursive: true });
writeFileSync(
  join(benchDir, "bench-results", "agent-hostile.json"),
  `${JSON.stringify({ node: process.versions.node, rounds: ROUNDS, rows }, null, 2)}\n`,
);
