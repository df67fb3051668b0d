import {
  CODE_MODE_CONTROL_TOOL_NAMES,
  type HostTool,
  isCodeModeControlTool,
  markCodeModeControlTool,
} from "@codecell/contract";
import { describe, expect, it } from "vitest";
import { buildToolCatalog } from "../src/build-tool-catalog.js";
import { toolsAllowedBy } from "../src/policy.js";
import { toolId } from "../src/tool-id.js";
import { expectCodeModeError, hostTool } from "./support/tools.js";

const mixed: HostTool[] = [
  hostTool("mcp", "github", "create_issue"),
  hostTool("client", "app", "select_file"),
  hostTool("core", "host", "read_file", { label: "Read file" }),
  hostTool("plugin", "browser", "browser_request"),
  hostTool("core", "host", "message"),
  hostTool("mcp", "filesystem", "read_file"),
];

describe("ids and order", () => {
  it("gives <source>:<owner>:<name> ids in source, owner, name order", () => {
    const catalog = buildToolCatalog(mixed);
    expect(catalog.entries.map((entry) => entry.id)).toEqual([
      "core:host:message",
      "core:host:read_file",
      "plugin:browser:browser_request",
      "mcp:filesystem:read_file",
      "mcp:github:create_issue",
      "client:app:select_file",
    ]);
  });

  it("does not depend on the input order", () => {
    const reference = JSON.stringify(buildToolCatalog(mixed).entries.map(({ tool, ...entry }) => entry));
    for (let rotation = 1; rotation < mixed.length; rotation++) {
      const rotated = [...mixed.slice(rotation), ...mixed.slice(0, rotation)];
      expect(JSON.stringify(buildToolCatalog(rotated).entries.map(({ tool, ...entry }) => entry))).toBe(
        reference,
      );
      expect(JSON.stringify(buildToolCatalog([...rotated].reverse()).search("read"))).toBe(
        JSON.stringify(buildToolCatalog(mixed).search("read")),
      );
    }
  });

  it("counts catalogued tools by source", () => {
    expect(buildToolCatalog(mixed).countsBySource).toEqual({ core: 2, plugin: 1, mcp: 2, client: 1 });
  });

  it("rejects two tools with one id", () => {
    expectCodeModeError(
      () => buildToolCatalog([hostTool("core", "host", "a"), hostTool("core", "host", "a")]),
      "invalid_config",
      '"core:host:a"',
    );
  });

  it.each([
    ["a null tool", null, "not an object"],
    ["an empty name", { ...hostTool("core", "host", "x"), name: "" }, '"name"'],
    [
      "an unknown source",
      { ...hostTool("core", "host", "x"), source: "openclaw" },
      "use one of core, plugin, mcp, client",
    ],
    ["an empty owner", { ...hostTool("core", "host", "x"), owner: "" }, '"owner"'],
    ["a numeric description", { ...hostTool("core", "host", "x"), description: 5 }, "description"],
  ])("rejects a host tool with %s", (_case, tool, fragment) => {
    expectCodeModeError(
      () => buildToolCatalog([tool as HostTool]),
      "invalid_config",
      "Host tool 0",
      fragment,
    );
  });
});

describe("control tools", () => {
  // Spec: "The catalog omits code mode's control tools: exec, wait, tool_search_code, tool_search,
  // tool_describe, tool_call." By name for every one but exec (the host's shell exec is catalogued, "like
  // any other tool"); the code-mode exec is known by its mark. MCP tools live under MCP.<server>, where
  // a server's own wait is that server's tool.
  const namedControls = CODE_MODE_CONTROL_TOOL_NAMES.filter((name) => name !== "exec");
  it.each(
    (["core", "plugin", "client"] as const).flatMap((source) => namedControls.map((name) => [source, name])),
  )("leaves out an unmarked %s tool named %s, from every view and id", (source, name) => {
    const catalog = buildToolCatalog([
      hostTool(source as "core", "owner", name as string),
      hostTool("core", "host", "read_file"),
    ]);
    expect(catalog.entries.map((entry) => entry.id)).toEqual(["core:host:read_file"]);
    expect(catalog.guestEntries.map((entry) => entry.name)).toEqual(["read_file"]);
    expect(catalog.convenienceNames.map((entry) => entry.name)).toEqual(["read_file"]);
    expect(catalog.search(name as string).map((entry) => entry.id)).not.toContain(`${source}:owner:${name}`);
    expect(() => catalog.resolve(`${source}:owner:${name}`)).toThrow();
    expect(() => catalog.resolve(name as string)).toThrow();
  });

  it.each([
    ["core", "exec"],
    ["plugin", "exec"],
    ["client", "exec"],
    ["mcp", "exec"],
    ["mcp", "wait"],
    ["mcp", "tool_search"],
    ["mcp", "tool_call"],
  ] as const)("catalogues an unmarked %s tool named %s like any tool", (source, name) => {
    const catalog = buildToolCatalog([hostTool(source, "owner", name)]);
    expect(catalog.entries.map((entry) => entry.id)).toEqual([`${source}:owner:${name}`]);
  });

  it.each(CODE_MODE_CONTROL_TOOL_NAMES)("leaves out a marked control tool named %s", (name) => {
    const control = markCodeModeControlTool(hostTool("core", "host", name));
    const catalog = buildToolCatalog([control, hostTool("core", "host", "read_file")]);
    expect(catalog.entries.map((entry) => entry.id)).toEqual(["core:host:read_file"]);
    expect(() => catalog.resolve(`core:host:${name}`)).toThrow();
  });

  it("knows the code-mode exec by its mark: a spread copy keeps it, JSON loses it", () => {
    const control = markCodeModeControlTool(hostTool("core", "host", "exec"));
    expect(isCodeModeControlTool({ ...control })).toBe(true);
    expect(buildToolCatalog([{ ...control }]).entries).toEqual([]);
    const fromData = JSON.parse(JSON.stringify(control)) as HostTool;
    expect(isCodeModeControlTool(fromData)).toBe(false);
    expect(buildToolCatalog([fromData]).entries.map((entry) => entry.id)).toEqual(["core:host:exec"]);
  });

  it("keeps the host shell exec callable by id, hidden from nothing but the model", () => {
    const catalog = buildToolCatalog([hostTool("core", "host", "exec")]);
    expect(catalog.resolve("core:host:exec").id).toBe("core:host:exec");
    expect(catalog.guestEntries.map((entry) => entry.id)).toEqual(["core:host:exec"]);
    expect(catalog.convenienceNames).toEqual([
      { name: "exec", toolId: "core:host:exec", aliases: ["Exec", "EXEC"] },
    ]);
  });
});

describe("policy", () => {
  const tools = [
    hostTool("core", "host", "exec"),
    hostTool("core", "host", "read_file"),
    hostTool("core", "host", "write_file"),
    hostTool("mcp", "github", "create_issue"),
    hostTool("mcp", "github", "list_issues"),
    hostTool("plugin", "calendar", "create_event"),
  ];
  it.each([
    [
      "no policy",
      {},
      [
        "core:host:exec",
        "core:host:read_file",
        "core:host:write_file",
        "plugin:calendar:create_event",
        "mcp:github:create_issue",
        "mcp:github:list_issues",
      ],
    ],
    ["an empty allow list", { allow: [] }, []],
    ["allow by name", { allow: ["read_file", "exec"] }, ["core:host:exec", "core:host:read_file"]],
    ["allow by id glob", { allow: ["mcp:github:*"] }, ["mcp:github:create_issue", "mcp:github:list_issues"]],
    ["allow by name glob", { allow: ["*_file"] }, ["core:host:read_file", "core:host:write_file"]],
    [
      "deny by id",
      { deny: ["core:host:exec"] },
      [
        "core:host:read_file",
        "core:host:write_file",
        "plugin:calendar:create_event",
        "mcp:github:create_issue",
        "mcp:github:list_issues",
      ],
    ],
    [
      "deny wins over allow",
      { allow: ["*"], deny: ["*issue*", "exec"] },
      ["core:host:read_file", "core:host:write_file", "plugin:calendar:create_event"],
    ],
    [
      "deny by name glob across sources",
      { deny: ["create_*"] },
      ["core:host:exec", "core:host:read_file", "core:host:write_file", "mcp:github:list_issues"],
    ],
    ["a glob does not treat dots as wildcards", { allow: ["read.file"] }, []],
  ])("%s", (_case, policy, expected) => {
    expect(buildToolCatalog(tools, policy).entries.map((entry) => entry.id)).toEqual(expected);
  });

  it("leaves a denied tool in no view and unreachable by a guessed id or name", () => {
    const catalog = buildToolCatalog(tools, { deny: ["core:host:exec", "mcp:github:create_issue"] });
    const ids = (entries: ReadonlyArray<{ id: string }>) => entries.map((entry) => entry.id);
    expect(ids(catalog.entries)).not.toContain("core:host:exec");
    expect(ids(catalog.guestEntries)).not.toContain("core:host:exec");
    expect(ids(catalog.search("exec shell command", { includeMcp: true }))).not.toContain("core:host:exec");
    expect(ids(catalog.search("create issue", { includeMcp: true }))).not.toContain(
      "mcp:github:create_issue",
    );
    expect(catalog.get("core:host:exec")).toBeUndefined();
    expect(catalog.convenienceNames.map((entry) => entry.name)).not.toContain("exec");
    const error = expectCodeModeError(
      () => catalog.resolve("core:host:exec"),
      "invalid_input",
      "Unknown tool",
    );
    expect(JSON.stringify(error.details)).not.toContain('"core:host:exec"]');
    expectCodeModeError(
      () => catalog.describe("create_issue", { includeMcp: true }),
      "invalid_input",
      "Unknown tool",
    );
  });

  it("applies to directOnly tools too", () => {
    const catalog = buildToolCatalog([hostTool("core", "host", "screen", { directOnly: true })], {
      deny: ["screen"],
    });
    expect(catalog.directOnly).toEqual([]);
  });

  it.each([
    ["a string instead of a list", { allow: "exec" }, 'policy "allow"'],
    ["an empty pattern", { deny: [""] }, 'policy "deny[0]"'],
    ["a non-string pattern", { deny: [3] }, 'policy "deny[0]"'],
  ])("rejects %s", (_case, policy, fragment) => {
    expectCodeModeError(() => buildToolCatalog(tools, policy as never), "invalid_config", fragment);
  });

  // What a run with code mode off shows the model: the same rules, every other tool untouched.
  it("toolsAllowedBy keeps, in their order, exactly the tools the catalog's policy admits", () => {
    const policies = [{}, { allow: [] }, { deny: ["core:*"] }, { allow: ["mcp:github:*", "exec"] }];
    for (const policy of policies) {
      const admitted = toolsAllowedBy(tools, policy);
      expect(admitted.every((tool) => tools.includes(tool))).toBe(true);
      expect(admitted.map((tool) => toolId(tool.source, tool.owner, tool.name)).sort()).toEqual(
        buildToolCatalog(tools, policy)
          .entries.map((entry) => entry.id)
          .sort(),
      );
    }
    expect(toolsAllowedBy(tools, { allow: [] })).toEqual([]);
  });
});

describe("views", () => {
  it("sets directOnly tools aside, untouched", () => {
    const direct = hostTool("core", "host", "screen_share", { directOnly: true });
    const catalog = buildToolCatalog([direct, hostTool("core", "host", "read_file")]);
    expect(catalog.directOnly).toEqual([direct]);
    expect(catalog.directOnly[0]).toBe(direct);
    expect(catalog.get("core:host:screen_share")).toBeUndefined();
  });

  it("refuses a directOnly tool that would clash with a control tool at the model surface", () => {
    expectCodeModeError(
      () => buildToolCatalog([hostTool("core", "host", "wait", { directOnly: true })]),
      "invalid_config",
      "directOnly",
      '"wait"',
    );
  });

  it("shows compact non-MCP entries to the guest, with no schema", () => {
    const catalog = buildToolCatalog(mixed);
    expect(catalog.guestEntries.map((entry) => entry.id)).toEqual([
      "core:host:message",
      "core:host:read_file",
      "plugin:browser:browser_request",
      "client:app:select_file",
    ]);
    expect(catalog.guestEntries[1]).toEqual({
      id: "core:host:read_file",
      name: "read_file",
      label: "Read file",
      description: "read file tool",
      source: "core",
      sourceName: "host",
    });
    expect(JSON.parse(JSON.stringify(catalog.guestEntries))).toEqual(catalog.guestEntries);
  });

  it("keeps host objects out of the guest entries", () => {
    for (const entry of buildToolCatalog(mixed).guestEntries) {
      expect(Object.keys(entry).sort()).toEqual(
        ["description", "id", "name", "source", "sourceName", ...("label" in entry ? ["label"] : [])].sort(),
      );
    }
  });
});
