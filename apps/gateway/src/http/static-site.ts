import { existsSync, realpathSync, statSync } from "node:fs";
import { readFile } from "node:fs/promises";
import type { ServerResponse } from "node:http";
import { extname, isAbsolute, join, relative, resolve, sep } from "node:path";
import { PACKAGE_DIR } from "../package-dir.js";

/** Where the playground's build lands (apps/playground/dist), next to this app in the repository. */
export const PLAYGROUND_DIST = join(PACKAGE_DIR, "..", "playground", "dist");

const TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".mjs": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".json": "application/json",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".ico": "image/x-icon",
  ".woff2": "font/woff2",
  ".map": "application/json",
  ".txt": "text/plain; charset=utf-8",
};

function notBuiltPage(mcpUrl: string): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>codecell</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:42rem;margin:3rem auto;padding:0 1rem}code{background:#eee;padding:0 .25rem}</style>
</head><body>
<h1>codecell gateway</h1>
<p>The gateway is running. Its MCP endpoint is <code>${mcpUrl}</code>.</p>
<p>The playground is not built, so there is no page to show here yet. Build it with
<code>pnpm --filter @codecell/playground build</code> (or <code>pnpm build</code> at the repository root)
and reload.</p>
</body></html>
`;
}

/**
 * Serves the playground: `index.html` at `/` and the files of its build, confined to `root`. When it
 * is not built, `/` gets a short page saying so. Resolves false, sending nothing, for any other path,
 * so the caller answers it as an unknown path (the playground has no client-side routes).
 */
export async function serveStatic(
  pathname: string,
  res: ServerResponse,
  mcpUrl: string,
  root = PLAYGROUND_DIST,
): Promise<boolean> {
  const index = join(root, "index.html");
  if (!existsSync(index)) {
    if (pathname !== "/") return false;
    res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
    res.end(notBuiltPage(mcpUrl));
    return true;
  }
  let decoded: string;
  try {
    decoded = decodeURIComponent(pathname);
  } catch {
    return false;
  }
  const realRoot = realpathSync(root);
  const file = decoded === "/" ? index : resolve(realRoot, `.${decoded}`);
  if (!existsSync(file) || !statSync(file).isFile()) return false;
  const rel = relative(realRoot, realpathSync(file));
  if (rel.startsWith(`..${sep}`) || rel === ".." || isAbsolute(rel)) return false;
  const body = await readFile(file);
  res.writeHead(200, {
    "content-type": TYPES[extname(file)] ?? "application/octet-stream",
    "cache-control": file === index ? "no-cache" : "public, max-age=300",
  });
  res.end(body);
  return true;
}
