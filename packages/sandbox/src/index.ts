export { createSandboxPool } from "./sandbox-pool.js";
export type {
  GuestSurface,
  HostRequest,
  RestoreOptions,
  RunOptions,
  SandboxEvent,
  SandboxLimits,
  SandboxPool,
  SandboxPoolOptions,
  SandboxRun,
  SettleOutcome,
  SuspendedRun,
} from "./types.js";
export { defaultWasmPath, loadQuickJsModule } from "./wasm-module.js";
