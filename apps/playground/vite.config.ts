import { defineConfig } from "vite";

// The page is served by the gateway at "/", next to its MCP endpoint at "/mcp" (same origin).
export default defineConfig({
  base: "/",
  build: {
    outDir: "dist",
    emptyOutDir: true,
    target: "es2022",
    sourcemap: true,
    // CodeMirror and the MCP SDK (with its schema validator) make one ~600 KB chunk; it is served
    // from the local gateway, so a split buys nothing here.
    chunkSizeWarningLimit: 1200,
    rollupOptions: {
      onwarn(warning, warn) {
        // zod's comments trip Rollup's pure-annotation parser; harmless, and not ours to fix.
        if (warning.code === "INVALID_ANNOTATION" && warning.id?.includes("node_modules")) return;
        warn(warning);
      },
    },
  },
  server: {
    // `pnpm dev` proxies MCP to a gateway started with `codecell serve --http 8787`.
    proxy: { "/mcp": "http://127.0.0.1:8787" },
  },
});
