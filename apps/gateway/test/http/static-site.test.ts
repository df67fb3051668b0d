import { mkdirSync, mkdtempSync, symlinkSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serveStatic } from "../../src/http/static-site.js";

const built = mkdtempSync(join(tmpdir(), "codecell-site-"));
const missing = join(built, "not-built");
mkdirSync(join(built, "assets"));
writeFileSync(join(built, "index.html"), "<!doctype html><title>playground</title>");
writeFileSync(join(built, "assets", "app.js"), "console.log(1)");
writeFileSync(join(tmpdir(), "codecell-outside.txt"), "secret");
symlinkSync(join(tmpdir(), "codecell-outside.txt"), join(built, "assets", "leak.txt"));

let base = "";
const server = createServer((req, res) => {
  const url = new URL(req.url ?? "/", "http://x");
  const root = url.searchParams.has("missing") ? missing : built;
  void serveStatic(url.pathname, res, "http://127.0.0.1:1/mcp", root).then((served) => {
    if (!served) res.writeHead(404, { "content-type": "application/json" }).end('{"error":"not found"}');
  });
});
beforeAll(async () => {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

describe("serveStatic", () => {
  const cases: Array<[string, string, number, RegExp | null]> = [
    ["the index", "/", 200, /playground/],
    ["an asset with its type", "/assets/app.js", 200, /console/],
    ["no page for an unknown path", "/runs/42", 404, /not found/],
    ["no page for a folder", "/assets", 404, null],
    ["a missing asset", "/assets/missing.js", 404, null],
    ["a symlink out of the folder", "/assets/leak.txt", 404, null],
    ["an encoded climb", "/..%2f..%2fetc%2fpasswd", 404, null],
  ];
  it.each(cases)("serves %s", async (_label, path, status, body) => {
    const response = await fetch(`${base}${path}`);
    expect(response.status).toBe(status);
    const text = await response.text();
    if (body) expect(text).toMatch(body);
    expect(text).not.toMatch(/secret|root:/);
  });

  it("says how to build the playground when it is not built", async () => {
    const response = await fetch(`${base}/?missing`);
    expect(response.status).toBe(200);
    expect(await response.text()).toMatch(
      /playground is not built.*pnpm --filter @codecell\/playground build/s,
    );
  });
});
