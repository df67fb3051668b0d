import { CodeModeError } from "@codecell/contract";
import { afterEach, describe, expect, it } from "vitest";
import { createCodeModeNamespaceTool } from "../src/namespace-tool.js";
import {
  clearCodeModeNamespacesForPlugin,
  clearCodeModeNamespacesForTest,
  registerCodeModeNamespaceForPlugin,
  registeredNamespaces,
} from "../src/registry.js";
import type { CodeModeNamespaceRegistration } from "../src/types.js";

const valid = (overrides: Partial<CodeModeNamespaceRegistration> = {}): CodeModeNamespaceRegistration => ({
  id: "github-issues",
  globalName: "Issues",
  description: "GitHub issue helpers.",
  requiredToolNames: ["github_list_issues"],
  createScope: () => ({ list: createCodeModeNamespaceTool("github_list_issues") }),
  ...overrides,
});

function registrationError(pluginId: string, registration: unknown): CodeModeError {
  try {
    registerCodeModeNamespaceForPlugin(pluginId, registration as CodeModeNamespaceRegistration);
  } catch (error) {
    if (CodeModeError.is(error)) return error;
    throw error;
  }
  throw new Error("registration was accepted");
}

afterEach(() => clearCodeModeNamespacesForTest());

describe("registration validation", () => {
  it.each([
    ["an empty plugin id", "", valid(), "owning plugin's id"],
    ["a missing id", "github", valid({ id: "" }), '"id" must be'],
    [
      "a global name that is not an identifier",
      "github",
      valid({ globalName: "My Issues" }),
      "not a JavaScript identifier",
    ],
    [
      "a global name starting with a digit",
      "github",
      valid({ globalName: "1ssues" }),
      "not a JavaScript identifier",
    ],
    ["the tools global", "github", valid({ globalName: "tools" }), "built-in code-mode global"],
    ["the namespaces global", "github", valid({ globalName: "namespaces" }), "built-in code-mode global"],
    ["the text global", "github", valid({ globalName: "text" }), "built-in code-mode global"],
    ["the json global", "github", valid({ globalName: "json" }), "built-in code-mode global"],
    [
      "the yield_control global",
      "github",
      valid({ globalName: "yield_control" }),
      "built-in code-mode global",
    ],
    ["the MCP global", "github", valid({ globalName: "MCP" }), "built-in code-mode global"],
    ["the API global", "github", valid({ globalName: "API" }), "built-in code-mode global"],
    ["the ALL_TOOLS global", "github", valid({ globalName: "ALL_TOOLS" }), "built-in code-mode global"],
    ["the internal prefix", "github", valid({ globalName: "__codecellIssues" }), "internal prefix"],
    ["a standard global", "github", valid({ globalName: "JSON" }), "standard JavaScript global"],
    ["a reserved word", "github", valid({ globalName: "class" }), "reserved word"],
    ["empty requiredToolNames", "github", valid({ requiredToolNames: [] }), "requiredToolNames"],
    ["a blank required tool name", "github", valid({ requiredToolNames: [""] }), "requiredToolNames"],
    ["no description", "github", valid({ description: " " }), '"description"'],
    ["a non-string prompt", "github", valid({ prompt: 3 as unknown as string }), '"prompt"'],
    ["no createScope", "github", valid({ createScope: undefined as never }), '"createScope"'],
    ["a registration that is not an object", "github", null, "not an object"],
  ])("rejects %s", (_case, pluginId, registration, fragment) => {
    const error = registrationError(pluginId, registration);
    expect(error.code).toBe("invalid_config");
    expect(error.message).toContain(fragment);
    expect(registeredNamespaces()).toEqual([]);
  });

  it("accepts a valid registration", () => {
    registerCodeModeNamespaceForPlugin("github", valid({ prompt: "Use Issues.list(params)." }));
    expect(registeredNamespaces().map((entry) => [entry.pluginId, entry.id, entry.globalName])).toEqual([
      ["github", "github-issues", "Issues"],
    ]);
  });

  it("keeps ids and global names unique across plugins", () => {
    registerCodeModeNamespaceForPlugin("github", valid());
    expect(registrationError("gitlab", valid({ globalName: "Tickets" })).message).toContain(
      'already registered by plugin "github"',
    );
    expect(registrationError("gitlab", valid({ id: "gitlab-issues" })).message).toContain(
      'globalName "Issues" is already used by namespace "github-issues"',
    );
  });

  it("copies requiredToolNames, so the caller cannot widen them later", () => {
    const names = ["github_list_issues"];
    registerCodeModeNamespaceForPlugin("github", valid({ requiredToolNames: names }));
    names.push("github_delete_repo");
    expect(registeredNamespaces()[0]!.requiredToolNames).toEqual(["github_list_issues"]);
  });
});

describe("cleanup", () => {
  it("plugin rollback clears only that plugin's namespaces", () => {
    registerCodeModeNamespaceForPlugin("github", valid());
    registerCodeModeNamespaceForPlugin("github", valid({ id: "github-prs", globalName: "Pulls" }));
    registerCodeModeNamespaceForPlugin("calendar", valid({ id: "calendar", globalName: "Calendar" }));
    clearCodeModeNamespacesForPlugin("github");
    expect(registeredNamespaces().map((entry) => entry.id)).toEqual(["calendar"]);
    // The freed id and global name can be registered again, as a reloaded plugin would.
    registerCodeModeNamespaceForPlugin("github", valid());
    expect(registeredNamespaces().map((entry) => entry.id)).toEqual(["calendar", "github-issues"]);
  });

  it("is the process's: another copy of this package registers into it and sees its entries", async () => {
    // A second instance of the module, as a bundle that inlines its own copy of this package has (the
    // published engine beside a host that registers through its own import).
    const specifier = "../src/registry.js?second-copy";
    const copy = (await import(/* @vite-ignore */ specifier)) as typeof import("../src/registry.js");
    expect(copy.registerCodeModeNamespaceForPlugin).not.toBe(registerCodeModeNamespaceForPlugin);
    copy.registerCodeModeNamespaceForPlugin("github", valid());
    expect(registeredNamespaces().map((entry) => entry.id)).toEqual(["github-issues"]);
    expect(registrationError("other", valid({ id: "other-issues" })).message).toContain(
      'globalName "Issues" is already used',
    );
    clearCodeModeNamespacesForPlugin("github");
    expect(copy.registeredNamespaces()).toEqual([]);
  });

  it("clearCodeModeNamespacesForTest empties the registry", () => {
    registerCodeModeNamespaceForPlugin("github", valid());
    clearCodeModeNamespacesForTest();
    expect(registeredNamespaces()).toEqual([]);
  });
});

describe("createCodeModeNamespaceTool", () => {
  it.each([
    ["an empty tool name", "", undefined],
    ["a non-function mapper", "github_list_issues", "params"],
  ])("rejects %s", (_case, toolName, mapper) => {
    expect(() => createCodeModeNamespaceTool(toolName, mapper as never)).toThrow(CodeModeError);
  });
});
