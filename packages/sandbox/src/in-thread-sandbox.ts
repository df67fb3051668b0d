// The sandbox on the host's own thread: an object with the worker-thread surface the pool uses
// (postMessage, the message/error/exit events, terminate, ref, unref), backed by the worker's own
// modules loaded into this thread (src/worker/in-thread.js) instead of a worker thread. The pool's
// code, and the worker's, are the same in both modes; only the transport differs.
import { EventEmitter } from "node:events";
import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { basename, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { Script } from "node:vm";
import type { HostToWorkerMessage, WorkerToHostMessage } from "@codecell/bridge";

/** Where a sandbox's modules run: a worker thread of their own, or the host's thread. */
export type SandboxThreadMode = "worker" | "in-thread";

/** What the pool uses of a sandbox thread: the subset of `Worker` that the in-thread sandbox provides. */
export interface SandboxThread {
  /** True for the in-thread sandbox: the pool gives it no doorbell and no shared channel. */
  readonly inThread?: boolean;
  postMessage(message: unknown, transfer?: readonly ArrayBuffer[]): void;
  on(event: "message", listener: (message: unknown) => void): this;
  on(event: "messageerror" | "error", listener: (error: Error) => void): this;
  on(event: "exit", listener: (code: number) => void): this;
  terminate(): Promise<number>;
  ref(): void;
  unref(): void;
}

type GuestSide = typeof import("./worker/in-thread.js");

/** The sandbox's modules on this thread, loaded on the first in-thread sandbox and shared by all. */
let guest: Promise<GuestSide> | null = null;
/** The in-thread sandbox each live run belongs to (the guest side is one per process). */
const owners = new Map<string, InThreadSandbox>();
/** Sandboxes that sent `init` and wait for its answer, in order (the guest side answers in order). */
const awaitingInit: InThreadSandbox[] = [];
const live = new Set<InThreadSandbox>();
/**
 * The compiled module the guest side was set up with: its VMs, spares and images are made from it, for
 * every in-thread pool of the process, so a pool with another `quickjs.wasm` is refused at its init.
 */
let guestModule: unknown = null;
const OTHER_MODULE =
  'the sandbox on the host\'s thread already runs another quickjs.wasm in this process (in-thread pools share one); use thread: "worker" for a pool with its own wasm';
/** Messages that end a run on the guest side: its owner entry goes with them. */
const TERMINAL = new Set(["completed", "failed", "suspended"]);

/**
 * The sandbox's modules for this thread: the build's bundle of them (scripts/bundle-worker.mjs), one
 * function expression compiled here with the V8 code cache the build wrote beside it, instead of some
 * twenty ES modules to resolve and link and compile on the way to the first cell; the modules themselves
 * when running from source (tests).
 */
function importGuest(): Promise<GuestSide> {
  // Resolved here, not as this module loads: where this module is inlined (the engine's bundle), its
  // `import.meta.url` resolves the package's main file, a few ms that a worker-thread pool never needs.
  const manifest = new URL("./worker/in-thread.bundle.json", import.meta.url);
  if (existsSync(fileURLToPath(manifest))) return Promise.resolve().then(() => runGuestScript(manifest));
  return import(new URL("./worker/in-thread.js", import.meta.url).href) as Promise<GuestSide>;
}

/**
 * A host's own keeping of the in-thread bundle's V8 code cache, for a host that runs with V8 flags of its
 * own: V8 takes a cache only under the flags it was made with, so it refuses the one the build ships
 * beside the bundle (made without flags) in such a process. `key` is a file name that holds the hash of
 * the bundle's exact text (`in-thread.bundle.<hash>.v8cache`).
 */
export type InThreadCodeCacheStore = {
  /** The bytes last written under `key`, or undefined when there are none. */
  read(key: string): Uint8Array | undefined;
  /** Keeps `data` under `key`. */
  write(key: string, data: Uint8Array): void;
};

let codeCacheStore: InThreadCodeCacheStore | null = null;
/** The compiled bundle, while the store has no cache of it that V8 took (saveInThreadCodeCache writes one). */
let unsavedScript: { key: string; script: Script } | null = null;

/**
 * Keeps the in-thread bundle's code cache in `store` from now on (null: the shipped one only). Takes
 * effect for the first in-thread pool this process starts; the store is read first, then the shipped
 * cache. A store that has none V8 takes is given one by saveInThreadCodeCache.
 */
export function useInThreadCodeCacheStore(store: InThreadCodeCacheStore | null): void {
  codeCacheStore = store;
}

/**
 * Writes the in-thread bundle's code cache to the store (useInThreadCodeCacheStore) when it has none V8
 * took, with every function compiled so far: call it once the first cells have run, so the functions
 * they ran are in it. Does nothing otherwise; true when it wrote.
 */
export function saveInThreadCodeCache(): boolean {
  const unsaved = unsavedScript;
  const store = codeCacheStore;
  if (unsaved === null || store === null) return false;
  unsavedScript = null;
  store.write(unsaved.key, unsaved.script.createCachedData());
  return true;
}

/** What the build records of the bundle (in-thread.bundle.json): its file, length and code cache. */
type GuestScriptManifest = { file: string; length: number; cache: string };
/** The bundle's parameters, in the order the build wrote them (its banner). */
type GuestScriptFunction = (
  exports: object,
  require: NodeJS.Require,
  module: { exports: object },
  filename: string,
  dirname: string,
  importModule: (specifier: string) => Promise<unknown>,
) => void;

function runGuestScript(manifestUrl: URL): GuestSide {
  const manifest = JSON.parse(readFileSync(manifestUrl, "utf8")) as GuestScriptManifest;
  const file = fileURLToPath(new URL(manifest.file, manifestUrl));
  // ASCII by construction (the build checks), so read without UTF-8 decoding.
  const source = readFileSync(file, "latin1");
  let cachedData: Uint8Array | undefined;
  // V8 checks a cache against the source's length, its own version and its flags, not the text; the
  // cache's name holds the hash of the text it was made from. CODECELL_CODE_CACHE=0 turns it off.
  const cached = source.length === manifest.length && process.env.CODECELL_CODE_CACHE !== "0";
  const store = cached ? codeCacheStore : null;
  // The store's key is the cache's file name, which holds the hash of the bundle's text.
  const key = basename(manifest.cache);
  try {
    cachedData = store?.read(key);
  } catch {
    // An unreadable store is one without a cache.
  }
  if (cached && cachedData === undefined) {
    try {
      cachedData = readFileSync(new URL(manifest.cache, manifestUrl));
    } catch {
      // No cache: the source is compiled, as without one.
    }
  }
  const script = new Script(source, { filename: file, ...(cachedData ? { cachedData } : {}) });
  if (store !== null && (cachedData === undefined || script.cachedDataRejected)) {
    unsavedScript = { key, script };
  }
  // The build's warm-up (scripts/warm-code-cache.mjs) writes the cache from this script once cells ran.
  const hook = (globalThis as Record<symbol, unknown>)[Symbol.for("codecell.inThreadCodeCache")];
  if (typeof hook === "function") hook(script, fileURLToPath(new URL(manifest.cache, manifestUrl)));
  const require = createRequire(file);
  // The bundle's import() calls (what it loads on first use) go through a CommonJS module of the
  // build's, whose import() Node's loader serves: a script compiled here has no loader behind it, and
  // neither does this module where a bundler inlined it into a script of its own (the gateway's CLI).
  const importModule = require("./in-thread-import.cjs") as (specifier: string) => Promise<unknown>;
  const module = { exports: {} };
  (script.runInThisContext() as GuestScriptFunction)(
    module.exports,
    require,
    module,
    file,
    dirname(file),
    importModule,
  );
  return module.exports as GuestSide;
}

function loadGuest(): Promise<GuestSide> {
  guest ??= importGuest().then((side) => {
    side.connect({ receive, fail });
    return side;
  });
  return guest;
}

/**
 * A message of the guest side. Copied at once, as a worker's postMessage copies it (the guest side
 * keeps its own objects, such as a request it also holds as pending), and handed to the host side
 * in a microtask: never inside the guest operation that posted it (the pool would be re-entered), and
 * before timers, like the worker's answer to the message that caused it.
 */
function receive(message: unknown, transfer?: ArrayBuffer[]): void {
  const copy = transfer === undefined ? structuredClone(message) : structuredClone(message, { transfer });
  queueMicrotask(() => route(copy as WorkerToHostMessage));
}

function route(message: WorkerToHostMessage): void {
  if (message.type === "init-failed") guestModule = null;
  if (message.type === "ready" || message.type === "init-failed") {
    awaitingInit.shift()?.emit("message", message);
    return;
  }
  const items = message.type === "batch" ? message.messages : [message];
  const first = items[0];
  const owner = first !== undefined && "runId" in first ? owners.get(first.runId) : undefined;
  for (const item of items) {
    if (!("runId" in item) || !TERMINAL.has(item.type)) continue;
    owners.get(item.runId)?.forget(item.runId);
    owners.delete(item.runId);
  }
  owner?.emit("message", message);
}

/**
 * A protocol violation on the guest side (a host bug): a worker thread would exit, failing its runs.
 * Here every in-thread sandbox reports the error, so the pools replace them and fail their runs.
 */
function fail(error: unknown): void {
  const reason = error instanceof Error ? error : new Error(String(error));
  for (const sandbox of [...live]) sandbox.emit("error", reason);
}

/** The sandbox's modules on the host's thread, standing in for one worker thread of a pool. */
export class InThreadSandbox extends EventEmitter implements SandboxThread {
  readonly inThread = true;
  readonly snapshotSecret: string | null;
  private alive = true;
  private readonly runIds = new Set<string>();
  /** While ref'd (runs live), this keeps the process alive, as a ref'd worker would. */
  private keepAlive: NodeJS.Timeout | null = null;

  constructor(snapshotSecret: string | null) {
    super();
    this.snapshotSecret = snapshotSecret;
    live.add(this);
    loadGuest().catch((error: Error) => {
      if (this.alive) this.emit("error", error);
    });
  }

  postMessage(message: unknown, transfer?: readonly ArrayBuffer[]): void {
    if (!this.alive) return;
    const host = message as HostToWorkerMessage;
    if (host.type === "start" || host.type === "restore") {
      owners.set(host.runId, this);
      this.runIds.add(host.runId);
    }
    if (host.type === "init") {
      if (guestModule !== null && guestModule !== host.module) {
        queueMicrotask(() => this.emit("message", { type: "init-failed", message: OTHER_MODULE }));
        return;
      }
      guestModule = host.module;
      awaitingInit.push(this);
    }
    // Copied now, as a worker's postMessage copies it (the caller keeps its limits and buffers); `init`
    // holds the compiled module and shared buffers, which this thread uses as they are.
    const copy =
      host.type === "init"
        ? host
        : structuredClone(host, transfer === undefined ? undefined : { transfer: [...transfer] });
    // After the current task (as a worker's message event would come): guest code never runs inside
    // the pool's own call that sent the message.
    void loadGuest().then((side) =>
      setImmediate(() => {
        if (this.alive) side.deliver(copy, this.snapshotSecret);
      }),
    );
  }

  /** A run of this sandbox ended on the guest side. */
  forget(runId: string): void {
    this.runIds.delete(runId);
  }

  async terminate(): Promise<number> {
    if (!this.alive) return 1;
    this.alive = false;
    live.delete(this);
    this.unref();
    const waiting = awaitingInit.indexOf(this);
    if (waiting !== -1) awaitingInit.splice(waiting, 1);
    for (const runId of this.runIds) if (owners.get(runId) === this) owners.delete(runId);
    const runIds = [...this.runIds];
    this.runIds.clear();
    if (guest !== null) (await guest).releaseRuns(runIds);
    setImmediate(() => this.emit("exit", 1));
    return 1;
  }

  ref(): void {
    this.keepAlive ??= setInterval(() => {}, 60_000);
  }

  unref(): void {
    if (this.keepAlive !== null) clearInterval(this.keepAlive);
    this.keepAlive = null;
  }
}
