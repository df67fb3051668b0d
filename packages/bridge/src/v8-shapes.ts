/**
 * `@codecell/bridge/v8-shapes`: the workspace's hidden-class and elements-kind pinning for V8, apart
 * from the bridge's own API. These helpers change nothing a program can observe; they keep V8's
 * optimized code for the nested-call path from being thrown away between cells. They depend on how V8
 * (Node 20's, 11.3, and later) picks field representations, elements kinds and frees maps, which is why
 * each has a test that asks V8 itself (natives syntax or `--expose-gc`): double-zero.test.ts,
 * reference-array.test.ts, keep-shapes.test.ts. Used by `@codecell/sandbox` and `@codecell/engine`;
 * not meant for hosts.
 */
export { DOUBLE_ZERO } from "./double-zero.js";
export { keepShapes } from "./keep-shapes.js";
export { emptyReferenceArray } from "./reference-array.js";
