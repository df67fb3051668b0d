import { describe, expect, it } from "vitest";
import { createCodeModeNamespaceTool, isNamespaceToolMarker } from "../src/namespace-tool.js";

type NamespaceToolModule = typeof import("../src/namespace-tool.js");

describe("namespace tool markers", () => {
  it("are known to every copy of the package in the process (a plugin's and a bundled host's)", async () => {
    // A second instance of the same module, as a plugin's own copy of @codecell/namespaces would be
    // beside the gateway's bundled one.
    const copyUrl = new URL("../src/namespace-tool.ts?second-copy", import.meta.url).href;
    const copy = (await import(/* @vite-ignore */ copyUrl)) as NamespaceToolModule;
    expect(copy.createCodeModeNamespaceTool).not.toBe(createCodeModeNamespaceTool);

    const fromCopy = copy.createCodeModeNamespaceTool("list_issues");
    const fromHere = createCodeModeNamespaceTool("close_issue");
    expect(isNamespaceToolMarker(fromCopy)).toBe(true);
    expect(copy.isNamespaceToolMarker(fromHere)).toBe(true);
  });

  it("are recognised by identity: a look-alike object is data", () => {
    const real = createCodeModeNamespaceTool("list_issues");
    expect(isNamespaceToolMarker(real)).toBe(true);
    expect(isNamespaceToolMarker({ ...real })).toBe(false);
    expect(isNamespaceToolMarker({ toolName: "list_issues", inputMapper: undefined })).toBe(false);
    expect(isNamespaceToolMarker(null)).toBe(false);
  });
});
