// The host tools every subject of performance.bench.mjs calls, so the floor, the embedded engine and the
// gateway plugin do the same host work. Results are plain JSON values.
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const itemLists = new Map();

/** `count` objects of the shape a search or list tool returns; built once per count and reused. */
export function items(count) {
  let list = itemLists.get(count);
  if (list === undefined) {
    list = Array.from({ length: count }, (_, index) => ({
      id: `item-${index}`,
      title: `Item number ${index}`,
      score: (index * 37) % 100,
      active: index % 3 !== 0,
      tags: ["alpha", index % 2 === 0 ? "even" : "odd"],
    }));
    itemLists.set(count, list);
  }
  return list;
}

/** Host implementations by tool name; each returns a promise, as a real tool would. */
export const benchTools = {
  async inc(input) {
    return input?.value ?? 0;
  },
  async sleep50() {
    await sleep(50);
    return 1;
  },
  async items(input) {
    return items(input?.count ?? 0);
  },
};

export const benchToolDefinitions = [
  {
    name: "inc",
    description: "Return the input value",
    parameters: { type: "object", properties: { value: { type: "number" } } },
  },
  { name: "sleep50", description: "Wait 50 ms, return 1", parameters: { type: "object", properties: {} } },
  {
    name: "items",
    description: "Return count list items",
    parameters: { type: "object", properties: { count: { type: "number" } } },
  },
];

/**
 * The prepared run every bench drives through an embedded engine: the bench tools as one plugin's, one
 * fixed context. `beforeCall`, when given, runs at each nested call before the tool (a bench's probe).
 */
export function prepareBenchRun(engine, beforeCall) {
  const callTool =
    beforeCall === undefined
      ? (call) => benchTools[call.tool.name](call.input)
      : (call) => {
          beforeCall();
          return benchTools[call.tool.name](call.input);
        };
  return engine.prepareRun({
    tools: benchToolDefinitions.map((tool) => ({ ...tool, source: "plugin", owner: "bench" })),
    context: { agentId: "bench", sessionKey: "bench", sessionId: "bench", runId: "bench" },
    executor: { callTool },
  });
}

/**
 * The performance cells, run by every subject of performance.bench.mjs and by the side-by-side run
 * against other code-mode runtimes (bench/peers), so all measure the same programs. `repeat` is how many
 * samples a round takes of the cell.
 */
export const CELLS = {
  C1: { label: "C1 warm `return 1 + 1`", code: "return 1 + 1", expect: 2, repeat: 5 },
  C2: {
    label: "C2 100 sequential awaited host calls",
    code: "let s = 0; for (let i = 0; i < 100; i++) s += await tools.inc({ value: 1 }); return s;",
    expect: 100,
    repeat: 2,
  },
  C2k: {
    label: "C2k 1,000 sequential nested calls",
    code: "let s = 0; for (let i = 0; i < 1000; i++) s += await tools.inc({ value: 1 }); return s;",
    expect: 1000,
    repeat: 1,
  },
  C3: {
    label: "C3 16 parallel 50 ms calls",
    code: "return (await Promise.all(Array.from({ length: 16 }, () => tools.sleep50({})))).length;",
    expect: 16,
    repeat: 1,
  },
  C4: {
    label: "C4 10,000 objects in, filtered in the guest",
    code: "const items = await tools.items({ count: 10000 }); return items.filter((item) => item.active && item.score > 50).length;",
    // A getter, so importing this file (the gateway's bench plugin does) builds no list.
    get expect() {
      return items(10000).filter((item) => item.active && item.score > 50).length;
    },
    repeat: 1,
  },
};
