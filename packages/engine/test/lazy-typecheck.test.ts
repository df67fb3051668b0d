import { createRequire } from "node:module";
import { typecheckWorkersStarted } from "@codecell/typecheck";
import { afterAll, expect, it, vi } from "vitest";
import { createCodeModeEngine } from "../src/index.js";
import { context, hostTools, TestExecutor } from "./support.js";

// Its own file, so its module graph is fresh: nothing else in this process has started a checker.
const require = createRequire(import.meta.url);
const compilerModules = () =>
  Object.keys(require.cache).filter((path) => /[\\/]typescript[\\/]lib[\\/]/.test(path));
const off = createCodeModeEngine({ config: { enabled: true } });
const warn = createCodeModeEngine({ config: { enabled: true, typecheck: "warn" } });
afterAll(async () => {
  await off.close();
  await warn.close();
});

it("loads nothing of the compiler with typecheck off, and starts it when a run with typecheck on is prepared", async () => {
  off.warmUp();
  const run = off.prepareRun({ tools: hostTools, context: context(), executor: new TestExecutor() });
  expect(await run.exec({ code: "return 1 + 1" }, { toolCallId: "js" })).toMatchObject({ value: 2 });
  expect(
    await run.exec({ code: "const n: number = 2; return n;", language: "typescript" }, { toolCallId: "ts" }),
  ).toMatchObject({ value: 2 });
  expect(typecheckWorkersStarted()).toBe(0);
  expect(compilerModules()).toEqual([]);

  // Typecheck on: preparing the run starts the checker's thread (it loads the compiler and the run's
  // declarations while the model writes its first cell), no cell needed.
  const checked = warn.prepareRun({ tools: hostTools, context: context(), executor: new TestExecutor() });
  await vi.waitFor(() => expect(typecheckWorkersStarted()).toBe(1), { timeout: 20_000, interval: 20 });
  expect(await checked.exec({ code: "return 3" }, { toolCallId: "warn" })).toMatchObject({ value: 3 });
  expect(typecheckWorkersStarted()).toBe(1);
  // The compiler lives on the checker's thread, never on the host's.
  expect(compilerModules()).toEqual([]);
});
