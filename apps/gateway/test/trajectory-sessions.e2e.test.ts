import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadGatewayConfig } from "../src/config/load-config.js";
import { Gateway } from "../src/gateway.js";
import { NO_APPROVAL_CLIENT } from "../src/mcp/approvals.js";
import { makeSetup } from "./harness.js";

// The promise tested here: the trajectory is kept per session, read per session, and freed with the session.
describe("the gateway's trajectory per session", () => {
  let gateway: Gateway;
  beforeAll(async () => {
    const setup = makeSetup({
      tools: { codeMode: { enabled: true, timeoutMs: 30_000 } },
      workspace: "./workspace",
    });
    const loaded = loadGatewayConfig(setup.configPath);
    if (!loaded.config) throw new Error(JSON.stringify(loaded.problems));
    gateway = await Gateway.start(loaded.config, { connectMcp: false, log: () => {} });
  });
  afterAll(async () => {
    await gateway?.close();
  });

  const writeIn = async (session: ReturnType<Gateway["openSession"]>, marker: string) => {
    const result = await session.exec({
      code: `await tools.write_file({ path: "${marker}.txt", content: "${marker}" }); return 1;`,
    });
    expect(result).toMatchObject({ status: "completed" });
  };

  it("shows a session only its own calls, and frees them when the session ends", async () => {
    const a = gateway.openSession("trajectory-A", NO_APPROVAL_CLIENT);
    const b = gateway.openSession("trajectory-B", NO_APPROVAL_CLIENT);
    await writeIn(a, "marker-of-A");
    await writeIn(b, "marker-of-B");
    const ofB = JSON.stringify(b.trajectory());
    expect(ofB).toContain("marker-of-B");
    expect(ofB).not.toContain("marker-of-A");
    expect(JSON.stringify(a.trajectory())).toContain("marker-of-A");
    const held = gateway.engine.trajectoryStats;

    a.end();
    expect(gateway.engine.trajectoryStats.sessions).toBe(held.sessions - 1);
    expect(gateway.engine.trajectoryStats.bytes).toBeLessThan(held.bytes);
    expect(JSON.stringify(gateway.engine.exportTrajectory())).not.toContain("marker-of-A");
    b.end();
    expect(JSON.stringify(gateway.engine.exportTrajectory())).not.toContain("marker-of-B");
  });

  it("keeps an owner's trajectory while another of its sessions is open, and frees it after the last", async () => {
    const owner = { principal: "local", conversation: "shared-conversation" };
    const first = gateway.openSession("shared-1", NO_APPROVAL_CLIENT, owner);
    const second = gateway.openSession("shared-2", NO_APPROVAL_CLIENT, owner);
    await writeIn(first, "marker-of-first");
    first.end();
    expect(JSON.stringify(gateway.engine.exportTrajectory())).toContain("marker-of-first");
    second.end();
    expect(JSON.stringify(gateway.engine.exportTrajectory())).not.toContain("marker-of-first");
  });
});
