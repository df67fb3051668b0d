#!/usr/bin/env node
// The `codecell` command's entry (scripts/bundle-cli.mjs bundles it, with cli.ts and everything that
// imports, into dist/cli.js). Two things happen before the command itself loads:
//
// 1. The sandbox starts booting its first worker and compiling QuickJS, so the worker's start overlaps
//    the loading of the rest of the command instead of following it.
// 2. The V8 flags for QuickJS's wasm (below), which the CLI owns as the process's owner; the library
//    packages never set one.

// The command line as the entry reads it, before cli.ts parses it: an argument `serve` anywhere (even an
// option's value) means a long-lived process; `serve` and `exec` run cells.
const args = process.argv.slice(2);
const longLived = args.includes("serve");
const runsCells = longLived || args.includes("exec");

// A command that runs no cell (`catalog`, `check`, help) needs no worker: one booting beside it would
// take CPU from it, and its exit would wait for the thread. The sandbox's own switch turns the early
// start off, for this import only (children never see it).
const earlyStartSetting = process.env.CODECELL_SANDBOX_EARLY_START;
if (!runsCells) process.env.CODECELL_SANDBOX_EARLY_START = "0";
try {
  await import("@codecell/sandbox/worker-start");
} finally {
  if (earlyStartSetting === undefined) delete process.env.CODECELL_SANDBOX_EARLY_START;
  else process.env.CODECELL_SANDBOX_EARLY_START = earlyStartSetting;
}

/** V8's default `--wasm-tiering-budget` (1,800,000 in Node 20's V8) times 100, for one-shot commands. */
const ONE_SHOT_WASM_TIERING_BUDGET = 180_000_000;

// V8 tiers QuickJS's hot wasm functions up to TurboFan on background threads, as many at once as its
// platform has threads (four in Node), and on a small machine those compiles take the cores from the
// sandbox's worker running its first cells and from this thread answering the client. One compile at a
// time leaves the other core to the threads doing the work; what is compiled, and its speed once
// compiled, are the same. Set after the worker start, so loading node:v8 does not delay the spawn.
const v8 = await import("node:v8");
v8.setFlagsFromString("--wasm-num-compilation-tasks=1");
// A one-shot command (everything but `serve`) also raises the budget after which V8 recompiles a hot
// QuickJS function with TurboFan. A process cannot exit while such a compile is running (Node waits for
// V8's compile threads), and a first cell sets off compiles of QuickJS's interpreter whose code the
// command then never runs: `codecell exec` of `return 1` printed its result and then waited for them to
// exit. A cell that computes for long still reaches the budget and is compiled. `serve` keeps V8's
// default: its cells run for the life of the process.
if (!longLived) v8.setFlagsFromString(`--wasm-tiering-budget=${ONE_SHOT_WASM_TIERING_BUDGET}`);

await import("./cli.js");
