import { afterAll, describe, expect, it } from "vitest";
import { createSandboxPool, type SandboxEvent, type SandboxRun } from "../src/index.js";
import { emptySurface, limits } from "./helpers.js";

// Quick settles and the worker's answers cross through shared memory while the other side spins for
// them, and through the port otherwise (packages/bridge/src/shared-channel.ts). Which path a message
// takes depends on timing; these runs mix every kind of message so that a message lost, taken twice or
// overtaken on either path changes what the cell returns or what the caller sees.
const pool = createSandboxPool({ size: 1, maxWorkers: 1 });
afterAll(() => pool.close());

type Answer = (request: { requestId: string; target?: string; input?: unknown }) => unknown;

/** Drive a run the way the engine does: wait for the idle event, then settle what is pending. */
async function drive(run: SandboxRun, answer: Answer, settled = new Set<string>()) {
  const events: SandboxEvent[] = [];
  for (;;) {
    const event = await run.next();
    events.push(event);
    if (event.type !== "idle") return { event, events };
    for (const request of event.pending) {
      if (settled.has(request.requestId)) continue;
      settled.add(request.requestId);
      run.settle(request.requestId, { ok: true, value: answer(request) });
    }
  }
}

function start(code: string, onRequest: (request: { requestId: string }) => void = () => {}) {
  return pool.run({
    code,
    language: "javascript",
    surface: emptySurface,
    limits,
    deadlineAt: Date.now() + 60_000,
    onRequest,
  });
}

const echo: Answer = (request) => (request.input as { v: unknown }).v;

describe("the shared channel between the host and a worker", () => {
  it("loses, doubles and reorders nothing in a long loop of calls mixed with output and parallel calls", async () => {
    const seen: string[] = [];
    const run = start(
      `const out = [];
      for (let i = 0; i < 400; i++) {
        out.push(await tools.call('t', { v: i }));
        if (i % 7 === 0) console.log('line ' + i);
        if (i % 11 === 0) {
          const all = await Promise.all([1, 2, 3].map((k) => tools.call('t', { v: i * 10 + k })));
          out.push(all.join('+'));
        }
      }
      return out.join(',');`,
      (request) => seen.push(request.requestId),
    );
    const { event, events } = await drive(run, echo);
    const expected: string[] = [];
    for (let i = 0; i < 400; i++) {
      expected.push(String(i));
      if (i % 11 === 0) expected.push([1, 2, 3].map((k) => i * 10 + k).join("+"));
    }
    expect(event).toMatchObject({ type: "completed", value: expected.join(",") });
    // Every request reached the caller exactly once, in the order the guest made them.
    const calls = 400 + 3 * Math.ceil(400 / 11);
    expect(seen).toEqual(Array.from({ length: calls }, (_, index) => `r${index + 1}`));
    // Every line of output arrived once, in order, across idle events and the final one.
    const lines = events.flatMap((item) =>
      item.type === "idle" || item.type === "completed"
        ? item.output.map((line) => (line as { text: string }).text)
        : [],
    );
    expect(lines).toEqual(Array.from({ length: Math.ceil(400 / 7) }, (_, index) => `line ${index * 7}`));
    expect(pool.stats().workersReplaced).toBe(0);
  });

  it("carries results larger than the slot and non-ASCII results between small ones, each to its await", async () => {
    const big = "x".repeat(20_000);
    const texts = ["plain", "héllo wörld", "emoji 😀 and 中文", big, `${big}é`, "\u2028 line separator", "z"];
    // A fingerprint of each text (its length and a checksum of its UTF-16 units): the texts themselves
    // would pass the run's output limit.
    const fingerprint = (text: string) => {
      let sum = 0;
      for (let index = 0; index < text.length; index++)
        sum = (sum * 31 + text.charCodeAt(index)) % 1_000_000_007;
      return `${text.length}:${sum}`;
    };
    const run = start(
      `const fingerprint = ${fingerprint.toString()};
      const got = [];
      for (let round = 0; round < 30; round++)
        for (let k = 0; k < ${texts.length}; k++) {
          got.push(fingerprint(await tools.call('t', { v: k })));
          // Output larger than the slot leaves with the next idle report, through the port.
          if (round < 3 && k === 2) console.log('y'.repeat(9000) + round);
        }
      return got;`,
    );
    const { event, events } = await drive(run, (request) => texts[(request.input as { v: number }).v]);
    expect(event.type === "failed" ? event.message : event.type).toBe("completed");
    const lines = events.flatMap((item) => (item.type === "idle" ? item.output : []));
    expect(lines).toEqual(
      [0, 1, 2].map((round) => ({ type: "text", text: `${"y".repeat(9000)}${round}`, level: "log" })),
    );
    const got = event.type === "completed" ? (event.value as string[]) : [];
    expect(got).toHaveLength(30 * texts.length);
    for (let index = 0; index < got.length; index++)
      expect(got[index]).toBe(fingerprint(texts[index % texts.length] as string));
  });

  it("delivers every result of a cell that computes between calls (the spins time out)", async () => {
    const run = start(
      `let s = 0;
      for (let i = 0; i < 40; i++) {
        s += await tools.call('t', { v: i });
        const until = Date.now() + 3;
        while (Date.now() < until) {}
      }
      return s;`,
    );
    const { event } = await drive(run, echo);
    expect(event).toMatchObject({ type: "completed", value: (39 * 40) / 2 });
  });

  it("keeps two runs on one worker apart while both make quick calls", async () => {
    const code = (tag: string) =>
      `let s = ''; for (let i = 0; i < 150; i++) s += await tools.call('t', { v: '${tag}' }); return s;`;
    const [a, b] = await Promise.all([drive(start(code("a")), echo), drive(start(code("b")), echo)]);
    expect(a.event).toMatchObject({ type: "completed", value: "a".repeat(150) });
    expect(b.event).toMatchObject({ type: "completed", value: "b".repeat(150) });
  });

  it("takes a late result after a timeout and a suspend of a loop of quick calls as before", async () => {
    // Timed out while results still flow: the caller's late settle is dropped, the run says timeout.
    const timed = pool.run({
      code: "for (;;) await tools.call('t', { v: 1 });",
      language: "javascript",
      surface: emptySurface,
      limits,
      deadlineAt: Date.now() + 300,
      onRequest: () => {},
    });
    const { event } = await drive(timed, echo);
    expect(event).toMatchObject({ type: "failed", code: "timeout" });
    expect(() => timed.settle("r999999", { ok: true, value: 1 })).not.toThrow();

    // Suspended after a stretch of quick calls: the snapshot's pending call is the last one issued.
    const run = start(
      "let s = 0; for (let i = 0; i < 50; i++) s += await tools.call('t', { v: i }); return s + (await tools.call('last', {}));",
    );
    const settled = new Set<string>();
    let idle: SandboxEvent | undefined;
    for (;;) {
      idle = await run.next();
      if (idle.type !== "idle") break;
      const request = idle.pending.find((item) => !settled.has(item.requestId));
      if (request === undefined || (request as { target?: string }).target === "last") break;
      settled.add(request.requestId);
      run.settle(request.requestId, {
        ok: true,
        value: (request as unknown as { input: { v: number } }).input.v,
      });
    }
    expect(idle?.type).toBe("idle");
    const suspended = await run.suspend();
    expect(suspended.pending.map((request) => request.requestId)).toEqual(["r51"]);
    const restored = pool.restore({
      snapshot: suspended.snapshot,
      limits,
      deadlineAt: Date.now() + 30_000,
      onRequest: () => {},
    });
    expect((await restored.next()).type).toBe("idle");
    restored.settle("r51", { ok: true, value: 1000 });
    expect(await restored.next()).toMatchObject({ type: "completed", value: (49 * 50) / 2 + 1000 });
  });

  it("fails the runs of a worker stopped in the middle of a loop of quick calls, and the next pool works", async () => {
    const own = createSandboxPool({ size: 1, maxWorkers: 1 });
    let calls = 0;
    const run = own.run({
      code: "for (;;) await tools.call('t', { v: 1 });",
      language: "javascript",
      surface: emptySurface,
      limits,
      deadlineAt: Date.now() + 60_000,
      onRequest: () => {
        calls += 1;
        // Stopped while the host may be spinning for the worker's next answer.
        if (calls === 300) void own.close();
      },
    });
    const { event } = await drive(run, echo);
    expect(event).toMatchObject({ type: "failed", code: "aborted" });
    expect(calls).toBe(300);
  });

  it("keeps the host's event loop turning while a run makes a long loop of quick calls", async () => {
    let ticks = 0;
    const timer = setInterval(() => ticks++, 1);
    // The timer's count at every 4,000th call answered: it must grow between each two of them.
    let calls = 0;
    const seen: number[] = [];
    const counting: Answer = (request) => {
      calls++;
      if (calls % 4_000 === 0) seen.push(ticks);
      return echo(request);
    };
    try {
      const run = start(
        "let s = 0; for (let i = 0; i < 20000; i++) s += await tools.call('t', { v: 1 }); return s;",
      );
      const { event } = await drive(run, counting);
      expect(event).toMatchObject({ type: "completed", value: 20_000 });
    } finally {
      clearInterval(timer);
    }
    // The host serves quick calls synchronously for a couple of milliseconds at a time, then lets its
    // event loop turn: the timer fires all through the run, between every few thousand calls. A host
    // that never yielded would answer all 20,000 with the count standing still.
    expect(calls).toBe(20_000);
    expect(seen).toHaveLength(5);
    for (let index = 1; index < seen.length; index++) expect(seen[index]!).toBeGreaterThan(seen[index - 1]!);
  });
});
