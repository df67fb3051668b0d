// `@codecell/sandbox/early-start`: importing it starts compiling the default quickjs.wasm and booting the
// first worker thread (see worker-start.ts), with none of the rest of the package. The engine imports it
// before anything else of its own, so that worker boots while the engine's modules load.
import "./worker-start.js";
