// What one round trip between the host thread and a worker thread costs by itself, carrying the shapes
// of one nested call (a settle down, a request with its idle report up), for each way of carrying it:
// `node bench/sandbox/thread-hop.mjs`. Prints CPU µs per round trip of each thread (schedstat, which load
// distorts far less than wall time), wall µs and sleeps per round trip, medians of interleaved rounds.
// Writes bench-results/thread-hop.json. HOP_ROUNDS and HOP_TRIPS set the rounds and the round trips.
//
//   shared slots      what the pool does: each side spins up to 0.1 ms for the other's message
//                     in @codecell/bridge's SharedChannel before it sleeps
//                     (the worker on the doorbell, the host back in its event loop, answered by port)
//   port + doorbell   what the pool did before: the host posts and rings a shared doorbell; the worker
//                     sleeps on it (Atomics.wait), takes the message with receiveMessageOnPort, posts back
//   shared ring       both directions through SharedArrayBuffers as JSON text; the worker sleeps on the
//                     doorbell, the host waits on its own bell with Atomics.waitAsync
//   ring down only    settles through the shared ring, requests by postMessage
//   event loop        postMessage both ways, the worker woken by message events (no doorbell)
//   futex only        both threads block in Atomics.wait, nothing else: the floor of a thread hop here,
//                     which no host with an event loop reaches
import { spawnSync } from "node:child_process";
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { loadavg } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { isMainThread, parentPort, receiveMessageOnPort, Worker, workerData } from "node:worker_threads";
import { createSharedChannelBuffer, SharedChannel } from "@codecell/bridge";

const MODES = {
  spin: "shared slots, spin then sleep",
  port: "port + doorbell",
  ring: "shared ring",
  "ring-down": "ring down only",
  events: "event loop",
  futex: "futex only",
};
const ROUNDS = Number(process.env.HOP_ROUNDS ?? 5);
const TRIPS = Number(process.env.HOP_TRIPS ?? 20_000);
const WARM_TRIPS = 2_000;
const RUN_ID = "6f1d2c3b-4a5e-4f60-8a7b-9c0d1e2f3a4b";
/** The pool's bounds (src/sandbox-pool.ts HOST_SPIN_MS, src/worker/sandbox-worker.js WORKER_SPIN_MS). */
const SPIN_MS = 0.1;

const settleMessage = (index) => ({
  type: "settle",
  runId: RUN_ID,
  items: [{ requestId: `r${index}`, ok: true, json: "1" }],
  deadlineAt: 1_800_000_000_000,
});
const requestBatch = (index) => ({
  type: "batch",
  messages: [
    {
      type: "request",
      runId: RUN_ID,
      request: { requestId: `r${index}`, kind: "call", target: "inc", input: { value: 1 } },
    },
    { type: "idle", runId: RUN_ID, pending: [], output: [] },
  ],
});

/** A one-slot text channel in shared memory: [length, ...UTF-8 bytes]. */
function textSlot(buffer) {
  const header = new Int32Array(buffer, 0, 1);
  const bytes = new Uint8Array(buffer, 4);
  const encoder = new TextEncoder();
  const decoder = new TextDecoder();
  return {
    write(text) {
      const { written } = encoder.encodeInto(text, bytes);
      Atomics.store(header, 0, written);
    },
    read() {
      return decoder.decode(bytes.slice(0, Atomics.load(header, 0)));
    },
  };
}

function threadUsage() {
  const threads = new Map();
  for (const tid of readdirSync("/proc/self/task")) {
    try {
      const nanos = Number(readFileSync(`/proc/self/task/${tid}/schedstat`, "utf8").split(" ")[0]);
      const status = readFileSync(`/proc/self/task/${tid}/status`, "utf8");
      const sleeps = Number(/\nvoluntary_ctxt_switches:\s+(\d+)/.exec(status)?.[1] ?? 0);
      threads.set(tid, { nanos, sleeps });
    } catch {
      // The thread ended meanwhile.
    }
  }
  return threads;
}

/**
 * A spinner with the pool's back-off: spin until `ready()` or SPIN_MS pass; a spin that ends empty
 * skips the next 1, 3, 7 ... 63 spins, one that catches resets it. Whether it became ready.
 */
function spinner() {
  let misses = 0;
  let skips = 0;
  return (ready) => {
    if (skips > 0) {
      skips -= 1;
      return false;
    }
    const until = performance.now() + SPIN_MS;
    do {
      for (let index = 0; index < 64; index++) {
        if (ready()) {
          misses = 0;
          return true;
        }
      }
    } while (performance.now() < until);
    misses = Math.min(misses + 1, 6);
    skips = (1 << misses) - 1;
    return false;
  };
}

/** The worker of "shared slots": serveWaitingRuns' loop with one message a round trip. */
function spinningWorker(bell, channel) {
  let index = 0;
  const spinUntil = spinner();
  channel.listen();
  for (;;) {
    const rung = Atomics.load(bell, 0);
    let message = channel.take(true);
    if (message !== null) message = JSON.parse(message);
    else {
      const next = receiveMessageOnPort(parentPort);
      if (next !== undefined) {
        channel.noteTaken();
        message = next.message;
      }
    }
    if (message === null) {
      if (spinUntil(() => Atomics.load(bell, 0) !== rung)) continue;
      if (Atomics.wait(bell, 0, rung, 5_000) === "timed-out") return;
      continue;
    }
    index += 1;
    const answer = requestBatch(index);
    if (!channel.canSend() || !channel.send(JSON.stringify(answer))) {
      channel.notePosted();
      parentPort.postMessage(answer);
    }
  }
}

function workerSide() {
  const { mode, bellBuffer, downBuffer, upBuffer, channelBuffer } = workerData;
  if (mode === "spin")
    return spinningWorker(new Int32Array(bellBuffer), new SharedChannel(channelBuffer, "worker"));
  const bell = new Int32Array(bellBuffer);
  const down = textSlot(downBuffer);
  const up = textSlot(upBuffer);
  let index = 0;
  if (mode === "events") {
    parentPort.on("message", () => parentPort.postMessage(requestBatch(++index)));
    return;
  }
  if (mode === "futex") {
    for (let seen = 0; ; ) {
      if (Atomics.wait(bell, 0, seen, 5_000) === "timed-out") return;
      seen = Atomics.load(bell, 0);
      Atomics.add(bell, 1, 1);
      Atomics.notify(bell, 1);
    }
  }
  let handled = 0;
  for (;;) {
    const rung = Atomics.load(bell, 0);
    let message;
    if (mode === "port") message = receiveMessageOnPort(parentPort)?.message;
    else if (rung !== handled) message = JSON.parse(down.read());
    if (message === undefined) {
      if (Atomics.wait(bell, 0, rung, 5_000) === "timed-out") return;
      continue;
    }
    handled = rung;
    index += 1;
    if (mode === "ring") {
      up.write(JSON.stringify(requestBatch(index)));
      Atomics.add(bell, 1, 1);
      Atomics.notify(bell, 1);
    } else {
      parentPort.postMessage(requestBatch(index));
    }
  }
}

async function hostSide(mode) {
  const bellBuffer = new SharedArrayBuffer(8);
  const downBuffer = new SharedArrayBuffer(4096);
  const upBuffer = new SharedArrayBuffer(4096);
  const bell = new Int32Array(bellBuffer);
  const down = textSlot(downBuffer);
  const up = textSlot(upBuffer);
  const channelBuffer = createSharedChannelBuffer();
  const channel = new SharedChannel(channelBuffer, "host");
  const worker = new Worker(fileURLToPath(import.meta.url), {
    workerData: { mode, bellBuffer, downBuffer, upBuffer, channelBuffer },
  });
  await new Promise((resolve) => worker.once("online", resolve));
  const total = WARM_TRIPS + TRIPS;
  let trips = 0;
  let before = null;
  let started = 0;
  const measured = () => {
    trips += 1;
    if (trips === WARM_TRIPS) {
      before = threadUsage();
      started = performance.now();
    }
    return trips < total;
  };
  const send = (index) => {
    if (mode === "ring" || mode === "ring-down") down.write(JSON.stringify(settleMessage(index)));
    else worker.postMessage(settleMessage(index));
    if (mode !== "events") {
      Atomics.add(bell, 0, 1);
      Atomics.notify(bell, 0);
    }
  };
  await new Promise((resolve) => {
    if (mode === "futex") {
      for (let seen = 0; ; ) {
        Atomics.add(bell, 0, 1);
        Atomics.notify(bell, 0);
        Atomics.wait(bell, 1, seen);
        seen = Atomics.load(bell, 1);
        if (!measured()) break;
      }
      resolve();
    } else if (mode === "spin") {
      // The pool's host side: send, spin for the answer and take it at once; on a miss, stop listening
      // and take the answer from the port. At most 2 ms of this per turn of the event loop.
      const spinUntil = spinner();
      const sendSpinning = (index) => {
        const message = settleMessage(index);
        channel.listen();
        if (!channel.canSend() || !channel.send(JSON.stringify(message))) {
          channel.notePosted();
          worker.postMessage(message);
        }
        Atomics.add(bell, 0, 1);
        Atomics.notify(bell, 0);
        if (spinUntil(() => channel.full())) return channel.take(false);
        return channel.stopListening();
      };
      const serve = (first) => {
        const turnStarted = performance.now();
        let index = first;
        for (;;) {
          const answer = sendSpinning(index);
          if (answer === null) return;
          JSON.parse(answer);
          if (!measured()) return resolve();
          index = trips;
          if (performance.now() - turnStarted > 2) return setImmediate(serve, index);
        }
      };
      worker.on("message", () => {
        channel.noteTaken();
        if (!measured()) return resolve();
        serve(trips);
      });
      serve(0);
    } else if (mode === "ring") {
      let seen = 0;
      const arm = () => {
        const wait = Atomics.waitAsync(bell, 1, seen);
        if (wait.async) wait.value.then(answered);
        else answered();
      };
      const answered = () => {
        seen = Atomics.load(bell, 1);
        JSON.parse(up.read());
        if (!measured()) return resolve();
        send(trips);
        arm();
      };
      arm();
      send(0);
    } else {
      worker.on("message", () => {
        if (!measured()) return resolve();
        send(trips);
      });
      send(0);
    }
  });
  const wall = performance.now() - started;
  const after = threadUsage();
  await worker.terminate();
  let main = { nanos: 0, sleeps: 0 };
  let busiest = { nanos: 0, sleeps: 0 };
  for (const [tid, usage] of after) {
    const start = before.get(tid) ?? { nanos: 0, sleeps: 0 };
    const used = { nanos: usage.nanos - start.nanos, sleeps: usage.sleeps - start.sleeps };
    if (tid === String(process.pid)) main = used;
    else if (used.nanos > busiest.nanos) busiest = used;
  }
  const perTrip = (value) => value / TRIPS;
  return {
    mainMicros: perTrip(main.nanos) / 1000,
    workerMicros: perTrip(busiest.nanos) / 1000,
    wallMicros: (perTrip(wall) * 1000) | 0,
    mainSleeps: perTrip(main.sleeps),
    workerSleeps: perTrip(busiest.sleeps),
  };
}

if (!isMainThread) {
  workerSide();
} else if (process.argv[2] === "child") {
  process.stdout.write(`${JSON.stringify(await hostSide(process.argv[3]))}\n`);
} else {
  const samples = Object.fromEntries(Object.keys(MODES).map((mode) => [mode, []]));
  for (let round = 0; round < ROUNDS; round++) {
    for (const mode of Object.keys(MODES)) {
      const child = spawnSync(process.execPath, [fileURLToPath(import.meta.url), "child", mode], {
        encoding: "utf8",
      });
      if (child.status !== 0) throw new Error(`${mode} failed: ${child.stderr}`);
      samples[mode].push(JSON.parse(child.stdout));
    }
  }
  const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
  const rows = {};
  for (const [mode, label] of Object.entries(MODES)) {
    const of = (key) => median(samples[mode].map((sample) => sample[key]));
    rows[label] = {
      "main µs CPU": +of("mainMicros").toFixed(1),
      "worker µs CPU": +of("workerMicros").toFixed(1),
      "wall µs": of("wallMicros"),
      "main sleeps": +of("mainSleeps").toFixed(2),
      "worker sleeps": +of("workerSleeps").toFixed(2),
    };
  }
  const load = loadavg().map((value) => value.toFixed(1));
  console.log(`One host-worker round trip (${ROUNDS} rounds of ${TRIPS}, medians; load ${load.join(" ")})`);
  console.table(rows);
  const here = fileURLToPath(new URL(".", import.meta.url));
  mkdirSync(join(here, "..", "bench-results"), { recursive: true });
  writeFileSync(
    join(here, "..", "bench-results", "thread-hop.json"),
    `${JSON.stringify({ node: process.version, date: new Date().toISOString(), loadavg: loadavg(), rounds: ROUNDS, trips: TRIPS, rows }, null, 2)}\n`,
  );
}
