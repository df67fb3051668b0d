import { isTypeScriptLoaded } from "@codecell/transpile";
import { afterAll, expect, it } from "vitest";
import { createCodeModeEngine } from "../src/index.js";
import { context, hostTools, TestExecutor } from "./support.js";

// Its own file, so its module graph is fresh: nothing else in this process has loaded the transformer.
const disabled = createCodeModeEngine({ config: false });
const enabled = createCodeModeEngine({ config: true });
afterAll(async () => {
  await disabled.close();
  await enabled.close();
});

it("never loads the TypeScript transformer on the host thread, for JavaScript or TypeScript cells", async () => {
  disabled.prepareRun({ tools: hostTools, context: context(), executor: new TestExecutor() });
  const run = enabled.prepareRun({ tools: hostTools, context: context(), executor: new TestExecutor() });
  expect(await run.exec({ code: "return 1 + 1" }, { toolCallId: "js" })).toMatchObject({
    status: "completed",
    value: 2,
  });
  expect(isTypeScriptLoaded()).toBe(false);
  const typed = await run.exec(
    { code: "const n: number = 2; return n * 2;", language: "typescript" },
    { toolCallId: "ts" },
  );
  expect(typed).toMatchObject({ status: "completed", value: 4 });
  // Cells are checked and transpiled on the sandbox's worker threads: the host never loads it.
  expect(isTypeScriptLoaded()).toBe(false);
});
