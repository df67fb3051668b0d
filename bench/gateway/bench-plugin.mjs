// The gateway plugin performance.bench.mjs loads into `codecell serve`: the bench tools as plugin tools.
import { benchToolDefinitions, benchTools } from "./bench-tools.mjs";

export function createPlugin() {
  return {
    id: "bench",
    description: "Bench tools",
    tools: benchToolDefinitions.map((definition) => ({
      ...definition,
      execute: (input) => benchTools[definition.name](input),
    })),
  };
}
