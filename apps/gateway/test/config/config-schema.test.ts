import { describe, expect, it } from "vitest";
import { gatewayConfigSchema, gatewayConfigSchemaFor } from "../../src/config/config-schema.js";

// The loader checks a config with the schema of the fields it has (building all of them was a large part
// of `codecell serve`'s start-up) and falls back to the whole schema for messages, so the two must agree.
const CONFIGS: Record<string, unknown>[] = [
  {},
  { tools: { codeMode: { enabled: true }, deny: [" write_file "] }, plugins: ["./p.mjs"] },
  { tools: { allow: [""] } },
  { tools: { codeMode: true, unknown: 1 } },
  { plugins: [{ module: "./p.mjs", options: { a: 1 } }, 3] },
  { mcpServers: { memory: { command: "node" }, "bad id": {} } },
  { snapshotStore: { kind: "sqlite", path: "runs.db", maxLiveRuns: 8 } },
  { snapshotStore: { kind: "redis", url: "redis://localhost:6379", secret: "short" } },
  { workspace: { path: "./w", maxBytes: 10 }, logging: { cellOutput: true } },
  { http: { tokens: [{ name: "alice", token: "0123456789abcdef" }], sessionIdleSeconds: 4 } },
  { mcpStartupWaitMs: 1000, $schema: "./schema.json" },
  { tool: {}, plugins: [] },
];

describe("the config schema of the fields a config has", () => {
  it("accepts and refuses exactly what the whole file's schema does, with the same output", () => {
    for (const config of CONFIGS) {
      const whole = gatewayConfigSchema().safeParse(config);
      const present = gatewayConfigSchemaFor(config).safeParse(config);
      expect(present.success, JSON.stringify(config)).toBe(whole.success);
      if (whole.success && present.success) expect(present.data).toEqual(whole.data);
    }
    expect(
      CONFIGS.filter((config) => gatewayConfigSchema().safeParse(config).success).length,
    ).toBeGreaterThan(4);
    expect(
      CONFIGS.filter((config) => !gatewayConfigSchema().safeParse(config).success).length,
    ).toBeGreaterThan(4);
  });
});
