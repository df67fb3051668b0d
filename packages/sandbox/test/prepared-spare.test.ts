import type { GuestSurface } from "@codecell/bridge";
import { afterAll, describe, expect, it } from "vitest";
import { createSandboxPool } from "../src/index.js";
import { limits, runToEnd, surface } from "./helpers.js";

/**
 * Once two starts in a row on a worker share a surface, the worker runs the prelude with it in the next
 * spare VM while no run is live (the per-tool work of a large catalog). A run that takes such a spare
 * must behave exactly as one that ran the prelude itself: its host function answers to this run, it is
 * a VM no other cell touched, and a run with another surface or memory limit gets its own.
 */
const pool = createSandboxPool({ size: 1 });
afterAll(() => pool.close());

const pause = () => new Promise((resolve) => setTimeout(resolve, 30));
const otherSurface: GuestSurface = {
  ...surface,
  allTools: [surface.allTools[0]!],
  toolFunctions: [{ name: "only_tool", toolId: "core:host:only_tool" }],
};

/** A cell that calls a tool, reports what it sees of the surface and of earlier cells, and leaves a mark. */
const cell = (tool: string) => `
  const seen = { marked: typeof globalThis.leftBehind, tools: ALL_TOOLS.length, names: Object.keys(tools) };
  globalThis.leftBehind = 1;
  seen.answer = await tools.${tool}({ n: 1 });
  return seen;
`;

describe("spares with the surface applied ahead of time", () => {
  it("answer host calls for the run that takes them, in a fresh VM, for the same surface only", async () => {
    const seen: unknown[] = [];
    const ask = async (
      code: string,
      runSurface: GuestSurface,
      memoryLimitBytes = limits.memoryLimitBytes,
    ) => {
      const { event, requests } = await runToEnd(pool, code, {
        surface: runSurface,
        limits: { ...limits, memoryLimitBytes },
        answer: (request) => ({ ok: true, value: `answer to ${request.requestId}` }),
      });
      expect(requests).toHaveLength(1);
      expect(event.type).toBe("completed");
      seen.push(event.type === "completed" ? event.value : event);
      await pause();
    };
    // Enough starts with one surface that later ones take spares it was applied to.
    for (let index = 0; index < 5; index++) await ask(cell("read_file"), surface);
    // Another surface, then another memory limit, then the first surface again.
    await ask(cell("only_tool"), otherSurface);
    await ask(cell("read_file"), surface, limits.memoryLimitBytes * 2);
    for (let index = 0; index < 3; index++) await ask(cell("read_file"), surface);

    const expected = (tools: number, names: string[]) => ({
      marked: "undefined",
      tools,
      names,
      answer: expect.stringMatching(/^answer to r\d+$/),
    });
    const full = expected(2, ["search", "describe", "call", "read_file", "web_search"]);
    expect(seen).toEqual([
      full,
      full,
      full,
      full,
      full,
      expected(1, ["search", "describe", "call", "only_tool"]),
      full,
      full,
      full,
      full,
    ]);
  });
});
