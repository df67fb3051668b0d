import { fileURLToPath } from "node:url";

/**
 * The gateway package's folder. This module sits at the top of `src` (so of `dist`), as does the bundled
 * CLI (`dist/cli.js`), so the path is the same whether the code runs bundled or not: files shipped with
 * the package are found from here, never relative to a module deeper in the tree.
 */
export const PACKAGE_DIR = fileURLToPath(new URL("..", import.meta.url));
