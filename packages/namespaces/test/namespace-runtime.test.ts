import { buildToolCatalog, type ToolCatalog } from "@codecell/catalog";
import { CodeModeError, type HostTool, type JsonValue } from "@codecell/contract";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createCodeModeNamespaceRuntime } from "../src/namespace-runtime.js";
import { createCodeModeNamespaceTool } from "../src/namespace-tool.js";
import {
  clearCodeModeNamespacesForPlugin,
  clearCodeModeNamespacesForTest,
  registerCodeModeNamespaceForPlugin,
} from "../src/registry.js";
import type { NamespaceRuntime, NamespaceScopeContext } from "../src/types.js";

const tool = (source: HostTool["source"], owner: string, name: string): HostTool => ({
  name,
  description: `${name} tool`,
  parameters: { type: "object" },
  source,
  owner,
});

const githubTools = [
  tool("plugin", "github", "github_list_issues"),
  tool("plugin", "github", "github_update_issue"),
];
const run = {
  runId: "run-1",
  agentId: "agent-1",
  sessionKey: "session-key",
  sessionId: "session-1",
  config: { repository: "acme/app" },
};

function registerIssues(): void {
  registerCodeModeNamespaceForPlugin("github", {
    id: "github-issues",
    globalName: "Issues",
    description: "GitHub issue helpers for the current repository.",
    requiredToolNames: ["github_list_issues", "github_update_issue"],
    prompt: "Use Issues.list(params) and Issues.update(number, patch).",
    createScope: (context) => ({
      repository: (context.config as { repository: string }).repository,
      list: createCodeModeNamespaceTool("github_list_issues", ([params]) => params ?? {}),
      update: createCodeModeNamespaceTool("github_update_issue", ([number, patch]) => ({ number, patch })),
      raw: createCodeModeNamespaceTool("github_list_issues"),
    }),
  });
}

function errorOf(action: () => unknown): CodeModeError {
  try {
    action();
  } catch (error) {
    if (CodeModeError.is(error)) return error;
    throw error;
  }
  throw new Error("no error");
}

beforeEach(() => registerIssues());
afterEach(() => clearCodeModeNamespacesForTest());

describe("visibility and ownership", () => {
  it("exposes a namespace whose required tools are all owned by its plugin", () => {
    const runtime = createCodeModeNamespaceRuntime(run, buildToolCatalog(githubTools));
    expect(runtime.namespaces).toEqual([
      {
        namespaceId: "github-issues",
        globalName: "Issues",
        description: "GitHub issue helpers for the current repository.",
        prompt: "Use Issues.list(params) and Issues.update(number, patch).",
        scope: {
          repository: "acme/app",
          list: { $codecellCall: "list" },
          update: { $codecellCall: "update" },
          raw: { $codecellCall: "raw" },
        },
      },
    ]);
    expect(JSON.parse(JSON.stringify(runtime.namespaces))).toEqual(runtime.namespaces);
  });

  it.each([
    ["one required tool is missing", [githubTools[0]!]],
    [
      "a same-named tool comes from another plugin",
      [githubTools[0]!, tool("plugin", "evil", "github_update_issue")],
    ],
    [
      "a same-named tool comes from an MCP server named like the plugin",
      [githubTools[0]!, tool("mcp", "github", "github_update_issue")],
    ],
    ["a same-named tool is the host's own", [githubTools[0]!, tool("core", "github", "github_update_issue")]],
    ["no tools at all", []],
  ])("hides the namespace and its prompt when %s", (_case, tools) => {
    const runtime = createCodeModeNamespaceRuntime(run, buildToolCatalog(tools));
    expect(runtime.namespaces).toEqual([]);
    expect(runtime.promptText).toBe("");
    expect(runtime.callablePaths).toEqual([]);
    expect(runtime.rejected).toEqual([]);
  });

  it("follows policy: denying a required tool hides the namespace", () => {
    const catalog = buildToolCatalog(githubTools, { deny: ["github_update_issue"] });
    expect(createCodeModeNamespaceRuntime(run, catalog).namespaces).toEqual([]);
  });

  it("shows the prompt text only for visible namespaces", () => {
    registerCodeModeNamespaceForPlugin("calendar", {
      id: "calendar",
      globalName: "Calendar",
      description: "Calendar helpers.",
      requiredToolNames: ["calendar_list_events"],
      createScope: () => ({ events: createCodeModeNamespaceTool("calendar_list_events") }),
    });
    const withGithub = createCodeModeNamespaceRuntime(run, buildToolCatalog(githubTools));
    expect(withGithub.promptText).toContain(
      "- Issues: GitHub issue helpers for the current repository. Use Issues.list(params)",
    );
    expect(withGithub.promptText).not.toContain("Calendar");
    const withBoth = createCodeModeNamespaceRuntime(
      run,
      buildToolCatalog([...githubTools, tool("plugin", "calendar", "calendar_list_events")]),
    );
    expect(withBoth.namespaces.map((namespace) => namespace.globalName)).toEqual(["Calendar", "Issues"]);
    expect(withBoth.promptText).toContain("- Calendar: Calendar helpers.");
  });

  it("hands createScope the run context, the abort state and which namespace it builds", () => {
    clearCodeModeNamespacesForTest();
    const seen: NamespaceScopeContext[] = [];
    registerCodeModeNamespaceForPlugin("github", {
      id: "github-issues",
      globalName: "Issues",
      description: "Issues.",
      requiredToolNames: ["github_list_issues"],
      createScope: (context) => {
        seen.push(context);
        return { list: createCodeModeNamespaceTool("github_list_issues") };
      },
    });
    const controller = new AbortController();
    controller.abort();
    createCodeModeNamespaceRuntime({ ...run, signal: controller.signal }, buildToolCatalog(githubTools));
    expect(seen).toHaveLength(1);
    expect(seen[0]).toMatchObject({
      ...run,
      aborted: true,
      pluginId: "github",
      namespaceId: "github-issues",
    });
    expect(Object.isFrozen(seen[0])).toBe(true);
  });
});

describe("refused scopes", () => {
  const register = (createScope: () => unknown, requiredToolNames = ["github_list_issues"]) =>
    registerCodeModeNamespaceForPlugin("github", {
      id: "github-broken",
      globalName: "Broken",
      description: "A namespace with a bad scope.",
      requiredToolNames,
      createScope,
    });

  it.each([
    ["a raw scope function", () => ({ list: async () => [] }), "raw function"],
    [
      "a callable path to an undeclared tool",
      () => ({ drop: createCodeModeNamespaceTool("github_update_issue") }),
      "not in requiredToolNames",
    ],
    [
      "a createScope that throws",
      () => {
        throw new Error("no token");
      },
      "createScope threw: no token",
    ],
  ])("leaves out a namespace with %s and reports it", (_case, createScope, fragment) => {
    register(createScope);
    const runtime = createCodeModeNamespaceRuntime(run, buildToolCatalog(githubTools));
    expect(runtime.namespaces.map((namespace) => namespace.namespaceId)).toEqual(["github-issues"]);
    expect(runtime.promptText).not.toContain("Broken");
    expect(runtime.callablePaths.every((callable) => callable.namespaceId === "github-issues")).toBe(true);
    expect(runtime.rejected).toHaveLength(1);
    expect(runtime.rejected[0]!.namespaceId).toBe("github-broken");
    expect(runtime.rejected[0]!.error.message).toContain(fragment);
    expect(() => runtime.resolveCall("github-broken", "list", [])).toThrow(/Unknown namespace/);
  });
});

describe("call resolution", () => {
  let catalog: ToolCatalog;
  let runtime: NamespaceRuntime;
  beforeEach(() => {
    catalog = buildToolCatalog([...githubTools, tool("plugin", "github", "github_delete_repo")]);
    runtime = createCodeModeNamespaceRuntime(run, catalog);
  });

  it("publishes the callable-path table", () => {
    expect(runtime.callablePaths).toEqual([
      {
        namespaceId: "github-issues",
        path: "list",
        toolId: "plugin:github:github_list_issues",
        toolName: "github_list_issues",
      },
      {
        namespaceId: "github-issues",
        path: "update",
        toolId: "plugin:github:github_update_issue",
        toolName: "github_update_issue",
      },
      {
        namespaceId: "github-issues",
        path: "raw",
        toolId: "plugin:github:github_list_issues",
        toolName: "github_list_issues",
      },
    ]);
  });

  it.each<[string, string, JsonValue[], JsonValue]>([
    ["the mapper's first argument", "list", [{ state: "open" }], { state: "open" }],
    ["the mapper's fallback", "list", [], {}],
    ["a two-argument mapper", "update", [7, { title: "x" }], { number: 7, patch: { title: "x" } }],
    ["a mapper whose output drops undefined", "update", [7], { number: 7 }],
    ["the default mapper's first argument", "raw", [{ state: "closed" }, "ignored"], { state: "closed" }],
    ["the default mapper with no argument", "raw", [], {}],
  ])("maps the guest arguments through %s", (_case, path, args, input) => {
    const call = runtime.resolveCall("github-issues", path, args);
    expect(call.input).toEqual(input);
    // The id is a real catalog id: the engine runs it through the catalog's normal call path.
    expect(catalog.resolve(call.toolId).tool.name).toBe(call.toolName);
    expect(JSON.parse(JSON.stringify(call))).toEqual(call);
  });

  it.each<[string, unknown, unknown, string]>([
    ["a forged namespace id", "github-admin", "list", "Unknown namespace"],
    ["a namespace id that is not a string", 7, "list", "Unknown namespace"],
    ["a forged path", "github-issues", "delete_repo", 'no function at "delete_repo"'],
    ["a data member as a path", "github-issues", "repository", 'no function at "repository"'],
    ["a prototype path", "github-issues", "__proto__", 'no function at "__proto__"'],
    ["a tool name as a path", "github-issues", "github_delete_repo", "no function"],
    ["a misspelt path", "github-issues", "updat", 'Did you mean "update"'],
  ])("rejects %s as invalid_input", (_case, namespaceId, path, fragment) => {
    const error = errorOf(() => runtime.resolveCall(namespaceId as string, path as string, []));
    expect(error.code).toBe("invalid_input");
    expect(error.message).toContain(fragment);
    // What the guest catches is plain data.
    expect(JSON.parse(JSON.stringify(error.toData()))).toEqual(error.toData());
  });

  it("rejects arguments that are not an array", () => {
    expect(errorOf(() => runtime.resolveCall("github-issues", "list", { state: "open" } as never)).code).toBe(
      "invalid_input",
    );
  });

  it("turns a mapper that throws into an invalid_input the guest can catch", () => {
    clearCodeModeNamespacesForTest();
    registerCodeModeNamespaceForPlugin("github", {
      id: "github-issues",
      globalName: "Issues",
      description: "Issues.",
      requiredToolNames: ["github_update_issue"],
      createScope: () => ({
        update: createCodeModeNamespaceTool("github_update_issue", ([number]) => {
          if (typeof number !== "number") throw new TypeError("an issue number is required");
          return { number };
        }),
      }),
    });
    const strict = createCodeModeNamespaceRuntime(run, catalog);
    const error = errorOf(() => strict.resolveCall("github-issues", "update", ["seven"]));
    expect(error.code).toBe("invalid_input");
    expect(error.message).toBe("Issues.update rejected its arguments: an issue number is required");
    expect(strict.resolveCall("github-issues", "update", [7]).input).toEqual({ number: 7 });
  });

  it("resolves the same way when the runtime is rebuilt for a resumed run", () => {
    const resumed = createCodeModeNamespaceRuntime(run, buildToolCatalog([...githubTools].reverse()));
    expect(resumed.namespaces).toEqual(runtime.namespaces);
    expect(resumed.resolveCall("github-issues", "update", [1, { state: "closed" }])).toEqual(
      runtime.resolveCall("github-issues", "update", [1, { state: "closed" }]),
    );
  });

  it("stops resolving a rolled-back plugin's namespace in runtimes built afterwards", () => {
    clearCodeModeNamespacesForPlugin("github");
    const after = createCodeModeNamespaceRuntime(run, catalog);
    expect(after.namespaces).toEqual([]);
    expect(errorOf(() => after.resolveCall("github-issues", "list", [])).code).toBe("invalid_input");
  });
});
