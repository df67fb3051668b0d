/**
 * What each example must produce against the embedded default config: the status badges in order
 * (a waiting result is continued with Wait), text the final result shows, and nested tool ids the
 * trajectory records. The Node and the browser tests check the same table.
 */
export type ExampleExpectation = {
  badges: string[];
  shows: string[];
  nestedTools: string[];
  /** For a failure: the line the error points to. */
  errorLine?: number;
};

export const EXPECTATIONS: Record<string, ExampleExpectation> = {
  "search-then-call": {
    badges: ["completed"],
    shows: ["core:codecell:read_file", "2550", "1880", "using core:codecell:read_file; it needs path"],
    nestedTools: ["core:codecell:read_file"],
  },
  "mcp-declaration": {
    badges: ["completed"],
    shows: ["API files: mcp/index.d.ts, mcp/memory.d.ts", "function createEntities", "playground"],
    nestedTools: ["mcp:memory:create_entities", "mcp:memory:search_nodes"],
  },
  parallel: {
    badges: ["completed"],
    shows: ["# Demo workspace", "Welcome to codecell", "Release checklist"],
    nestedTools: [
      "core:codecell:read_file",
      "core:codecell:read_file",
      "plugin:notes:notes_list",
      "mcp:memory:read_graph",
    ],
  },
  namespace: {
    badges: ["completed"],
    shows: ["Playground visit", "added note-"],
    nestedTools: ["plugin:notes:notes_add", "plugin:notes:notes_search"],
  },
  "yield-then-wait": {
    badges: ["waiting · yield", "completed"],
    shows: ["resumed by wait", "Write a summary to reports/summary.md"],
    nestedTools: ["core:codecell:read_file"],
  },
  typescript: {
    badges: ["completed"],
    shows: ["2025-01", "2100", "2025-02", "2730"],
    nestedTools: ["core:codecell:read_file"],
  },
  "fails-with-code": {
    badges: ["failed · module_access_denied"],
    shows: ["module_access_denied", "dynamic import()"],
    nestedTools: [],
    errorLine: 4,
  },
};
