import { chmodSync, mkdtempSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { keyFileFor, loadSnapshotKey } from "../src/snapshot-key.js";

describe("loadSnapshotKey", () => {
  it("generates an owner-only key file on first use and reads the same key back later", () => {
    const path = keyFileFor(join(mkdtempSync(join(tmpdir(), "codecell-key-")), "runs.db"));
    const first = loadSnapshotKey({ kind: "keyFile", path });
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(Buffer.byteLength(first)).toBeGreaterThanOrEqual(32);
    expect(readFileSync(path, "utf8").trim()).toBe(first);
    expect(loadSnapshotKey({ kind: "keyFile", path })).toBe(first);
  });

  it("refuses a key file others can read, saying how to fix it", () => {
    const path = join(mkdtempSync(join(tmpdir(), "codecell-key-")), "runs.db.key");
    writeFileSync(path, "k".repeat(64));
    chmodSync(path, 0o644);
    expect(() => loadSnapshotKey({ kind: "keyFile", path })).toThrow(/mode 644.*chmod 600/);
  });

  it("refuses a short key file and a short secret", () => {
    const path = join(mkdtempSync(join(tmpdir(), "codecell-key-")), "runs.db.key");
    writeFileSync(path, "short\n", { mode: 0o600 });
    expect(() => loadSnapshotKey({ kind: "keyFile", path })).toThrow(/holds 5 bytes; at least 32/);
    expect(() => loadSnapshotKey({ kind: "secret", secret: "short" })).toThrow(/at least 32/);
    expect(loadSnapshotKey({ kind: "secret", secret: "s".repeat(32) })).toBe("s".repeat(32));
  });

  it("gives a new random key per ephemeral source", () => {
    expect(loadSnapshotKey({ kind: "ephemeral" })).not.toBe(loadSnapshotKey({ kind: "ephemeral" }));
  });
});
