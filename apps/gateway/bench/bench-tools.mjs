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
