import { existsSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const appDir = fileURLToPath(new URL("..", import.meta.url));
const read = (file: string) => JSON.parse(readFileSync(`${appDir}/${file}`, "utf8"));

describe("the published package", () => {
  const manifest = read("package.json");
  const server = read("server.json");

  it("is publishable with a codecell bin and everything the default config needs", () => {
    expect(manifest.private).toBeUndefined();
    expect(manifest.bin).toEqual({ codecell: "./bin/codecell.js" });
    for (const file of manifest.files as string[]) expect(existsSync(`${appDir}/${file}`), file).toBe(true);
    expect(manifest.files).toEqual(
      expect.arrayContaining(["dist", "bin", "codecell.default.json5", "demo-workspace"]),
    );
  });

  it("keeps server.json in step with package.json for the MCP registry", () => {
    expect(server.name).toBe(manifest.mcpName);
    expect(server.version).toBe(manifest.version);
    expect(server.packages).toEqual([
      expect.objectContaining({ registryType: "npm", identifier: manifest.name, version: manifest.version }),
    ]);
  });
});
