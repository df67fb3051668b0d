// biome-ignore-all lint/suspicious/noTemplateCurlyInString: config files use ${ENV} references
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { baseConfig, connectStdio, makeSetup, runCli, until } from "./harness.js";

describe("codecell check", () => {
  it("lists every problem of a broken config, one line each, and exits 3", async () => {
    const setup = makeSetup({});
    writeFileSync(
      setup.configPath,
      `{
        tools: { codeMode: { enabled: true, timeoutMs: "fast", langauges: ["javascript"] }, deny: "write_file", aprovals: [] },
        workspace: "./missing-folder",
        plugins: ["./no-such-plugin.js"],
        mcpServers: {
          broken: { args: ["x"] },
          remote: { url: "ftp://example.com" },
          pkg: { package: "@modelcontextprotocol/not-installed-anywhere" },
          secret: { url: "http://127.0.0.1:1/mcp", headers: { authorization: "Bearer \${CODECELL_TEST_UNSET_TOKEN}" } },
        },
        snapshotStore: { kind: "postgres" },
        extra: true,
      }`,
    );
    const { code, stderr, stdout } = await runCli(["check", "--config", setup.configPath]);
    expect(code).toBe(3);
    expect(stdout).toBe("");
    const lines = stderr.trim().split("\n");
    const expected: Array<[string, RegExp]> = [
      ["tools.codeMode.timeoutMs", /received "fast"/],
      ["tools.codeMode.langauges", /Did you mean "languages"/],
      ["tools.deny", /got "write_file".*Expected an array of tool ids or names/],
      ["tools.aprovals", /Did you mean "approval"/],
      ["workspace", /missing-folder does not exist/],
      ["plugins.0", /cannot find plugin module "\.\/no-such-plugin\.js"/],
      ["mcpServers.broken", /needs "command".*"package".*"url"/],
      ["mcpServers.remote.url", /got "ftp:\/\/example\.com"/],
      ["mcpServers.pkg.package", /not installed/],
      ["mcpServers.secret.headers.authorization", /CODECELL_TEST_UNSET_TOKEN, which is not set/],
      ["snapshotStore.kind", /got "postgres".*"memory", "sqlite" or "redis"/],
      ["extra", /unknown key/],
    ];
    for (const [path, message] of expected) {
      const line = lines.find((candidate) => candidate.startsWith(`${setup.configPath}: ${path}: `));
      expect(line, `no line for ${path} in:\n${stderr}`).toBeDefined();
      expect(line).toMatch(message);
    }
    expect(lines.at(-1)).toMatch(/^codecell: \d+ problems in the config; nothing was started\.$/);
  });

  it("reports a JSON5 syntax error with its line", async () => {
    const setup = makeSetup({});
    writeFileSync(setup.configPath, "{\n  tools: { codeMode: true },\n  workspace: ./x\n}");
    const { code, stderr } = await runCli(["check", "--config", setup.configPath]);
    expect(code).toBe(3);
    expect(stderr).toMatch(/line 3, column \d+: not valid JSON5/);
  });

  it("accepts a good config, and --connect starts its MCP servers", async () => {
    const setup = makeSetup(baseConfig());
    const plain = await runCli(["check", "--config", setup.configPath]);
    expect(plain.code, plain.stderr).toBe(0);
    expect(plain.stdout).toMatch(/^ok: .*code mode on, 1 MCP server\(s\), 1 plugin\(s\)/);
    const connected = await runCli(["check", "--connect", "--config", setup.configPath]);
    expect(connected.code, connected.stderr).toBe(0);
    expect(connected.stdout).toMatch(/17 tool\(s\) after policy/);
  });

  it("reports an MCP server that fails to start with --connect", async () => {
    const setup = makeSetup(
      baseConfig({ mcpServers: { dead: { command: process.execPath, args: ["-e", "process.exit(3)"] } } }),
    );
    const { code, stderr } = await runCli(["check", "--connect", "--config", setup.configPath]);
    expect(code).toBe(3);
    expect(stderr).toMatch(/mcpServers\.dead: .*dead/);
  });
});

describe("codecell exec, catalog and the command line", () => {
  it("prints the version and help, and exits 2 on usage errors", async () => {
    const version = await runCli(["--version"]);
    expect(version).toMatchObject({ code: 0, stdout: "0.1.0\n" });
    for (const command of ["serve", "exec", "catalog", "check"]) {
      const help = await runCli([command, "--help"]);
      expect(help.code).toBe(0);
      expect(help.stdout).toMatch(new RegExp(`^Usage: codecell ${command}`));
    }
    const unknown = await runCli(["launch"]);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toBe(
      'codecell: unknown command "launch". Commands: serve, exec, catalog, check (see --help).\n',
    );
    // Names every object has are no commands either.
    for (const inherited of ["toString", "constructor", "hasOwnProperty", "__proto__"]) {
      const result = await runCli([inherited]);
      expect(result.code, inherited).toBe(2);
      expect(result.stderr).toBe(
        `codecell: unknown command "${inherited}". Commands: serve, exec, catalog, check (see --help).\n`,
      );
    }
    const optionOnly = await runCli(["--config", "x.json5"]);
    expect(optionOnly.code).toBe(2);
    expect(optionOnly.stderr).toMatch(/"--config" is an option, and no command was given/);
    const missingValue = await runCli(["serve", "--http"]);
    expect(missingValue.code).toBe(2);
    expect(missingValue.stderr).toMatch(
      /'--http <value>' argument missing \(codecell serve --help says more\)/,
    );
    const positional = await runCli(["catalog", "extra"]);
    expect(positional.code).toBe(2);
    expect(positional.stderr).toMatch(/Unexpected argument 'extra'.*\(codecell catalog --help says more\)/);
    // The language is checked before the cell is read: the file need not exist to hear about it.
    const language = await runCli(["exec", "--language", "rust", "no-such-cell.rs"]);
    expect(language.code).toBe(2);
    expect(language.stderr).toBe('codecell: --language must be javascript or typescript, got "rust".\n');
    const flag = await runCli(["catalog", "--frobnicate"]);
    expect(flag.code).toBe(2);
    expect(flag.stderr).toMatch(/--frobnicate/);
  });

  it("runs a cell from stdin and from a TypeScript file", async () => {
    const setup = makeSetup(baseConfig({ mcpServers: {} }));
    const fromStdin = await runCli(["exec", "--config", setup.configPath, "-"], {
      input:
        'const t = await tools.read_file({ path: "todo.md" }); text("read"); return t.content.split("\\n")[0];',
    });
    expect(fromStdin.code, fromStdin.stderr).toBe(0);
    expect(JSON.parse(fromStdin.stdout)).toMatchObject({
      status: "completed",
      value: "# Todo",
      output: [{ type: "text", text: "read" }],
    });
    const cell = join(setup.dir, "cell.ts");
    writeFileSync(cell, "const n: number = (await Notes.list()).length;\nreturn n * 2;\n");
    const typed = await runCli(["exec", "--config", setup.configPath, cell]);
    expect(JSON.parse(typed.stdout)).toMatchObject({ status: "completed", value: 4 });
  });

  it("runs a cell given inline with --code or -e, and says what was wrong with the command line", async () => {
    const setup = makeSetup(baseConfig({ mcpServers: {} }));
    const inline = await runCli([
      "exec",
      "--config",
      setup.configPath,
      "--code",
      "return (await Notes.list()).length + 1;",
    ]);
    expect(inline.code, inline.stderr).toBe(0);
    expect(JSON.parse(inline.stdout)).toMatchObject({ status: "completed", value: 3 });
    const typed = await runCli([
      "exec",
      "--config",
      setup.configPath,
      "--language",
      "typescript",
      "-e",
      "const n: number = 21; return n * 2;",
    ]);
    expect(typed.code, typed.stderr).toBe(0);
    expect(JSON.parse(typed.stdout)).toMatchObject({ status: "completed", value: 42 });

    // Options written before the command are taken as the command's.
    const optionsFirst = await runCli(["--config", setup.configPath, "-e", "return 7", "exec"]);
    expect(optionsFirst.code, optionsFirst.stderr).toBe(0);
    expect(JSON.parse(optionsFirst.stdout)).toMatchObject({ status: "completed", value: 7 });

    const both = await runCli(["exec", "--config", setup.configPath, "--code", "return 1", "cell.js"]);
    expect(both).toMatchObject({ code: 2, stdout: "" });
    expect(both.stderr).toMatch(/--code and a file \("cell\.js"\) were both given/);
    const empty = await runCli(["exec", "--config", setup.configPath, "--code", " "]);
    expect(empty.code).toBe(2);
    expect(empty.stderr).toMatch(/--code was given an empty cell/);
    const none = await runCli(["exec", "--config", setup.configPath]);
    expect(none.code).toBe(2);
    expect(none.stderr).toMatch(/"-" for stdin, or --code "<cell>"/);
    // A mistyped option gets the closest one the command takes and the command's usage, not Node's
    // advice about "--" for positionals.
    for (const [args, option, suggestion] of [
      [["exec", "--cod", "return 1"], "--cod", "--code"],
      [["exec", "--nowait", "-"], "--nowait", "--no-wait"],
      [["serve", "--prot", "3000"], "--prot", "--port"],
    ] as const) {
      const typo = await runCli([...args]);
      expect(typo.code).toBe(2);
      expect(typo.stderr).toContain(`${args[0]} does not take ${option}. Did you mean ${suggestion}?`);
      expect(typo.stderr).toContain(`Usage: codecell ${args[0]} `);
      expect(typo.stderr).not.toMatch(/positional argument/);
    }
  });

  it("exits 4 on a failed cell and 5 on a waiting one with --no-wait", async () => {
    const setup = makeSetup(baseConfig({ mcpServers: {} }));
    const failed = await runCli(["exec", "--config", setup.configPath, "-"], {
      input: "throw new Error('boom')",
    });
    expect(failed.code).toBe(4);
    expect(JSON.parse(failed.stdout)).toMatchObject({
      status: "failed",
      error: expect.stringMatching(/boom/),
    });
    // The failure names the expression: the engine parses the cell for that (acorn, which the CLI keeps
    // in a file beside its bundle) where QuickJS says only "not a function".
    const explained = await runCli(["exec", "--config", setup.configPath, "-"], {
      input: "const notes = {};\nreturn notes.list();",
    });
    expect(explained.code).toBe(4);
    expect(JSON.parse(explained.stdout).error).toMatch(/notes\.list is not a function \(line 2/);
    const waiting = await runCli(["exec", "--no-wait", "--config", setup.configPath, "-"], {
      input: "await yield_control('later'); return 1;",
    });
    expect(waiting.code).toBe(5);
    expect(JSON.parse(waiting.stdout)).toMatchObject({ status: "waiting", reason: "yield" });
    const resumed = await runCli(["exec", "--config", setup.configPath, "-"], {
      input: "await yield_control('later'); return 1;",
    });
    expect(resumed.code).toBe(0);
    expect(JSON.parse(resumed.stdout)).toMatchObject({ status: "completed", value: 1 });
  });

  it("prints the catalog and ranked search results", async () => {
    const setup = makeSetup(baseConfig());
    const all = await runCli(["catalog", "--config", setup.configPath]);
    expect(all.code, all.stderr).toBe(0);
    const catalog = JSON.parse(all.stdout) as {
      allTools: Array<{ id: string }>;
      mcpServers: Array<{ name: string; call: string; tools: string[] }>;
    };
    expect(catalog.allTools.map((tool) => tool.id)).toContain("plugin:notes:notes_search");
    expect(catalog.allTools.map((tool) => tool.id)).not.toContain("core:codecell:exec");
    expect(catalog.allTools.some((tool) => tool.id.startsWith("mcp:"))).toBe(false);
    // MCP tools apart, named the way a cell calls them.
    expect(catalog.mcpServers[0]).toMatchObject({
      name: "memory",
      call: "MCP.memory",
      tools: expect.arrayContaining(["MCP.memory.readGraph", "MCP.memory.createEntities"]),
    });
    const search = await runCli([
      "catalog",
      "--config",
      setup.configPath,
      "--search",
      "knowledge graph entities",
    ]);
    const ranked = JSON.parse(search.stdout) as {
      "tools.search": Array<{ id: string }>;
      "API.search": Array<{ call: string; signature: string }>;
    };
    // What a cell's tools.search finds (never an MCP tool), and apart what its API.search finds.
    expect(ranked["tools.search"].some((entry) => entry.id.startsWith("mcp:"))).toBe(false);
    expect(ranked["API.search"][0]!.call).toMatch(/^MCP\.memory\./);
    expect(ranked["API.search"][0]!.signature).toMatch(/^MCP\.memory\.\w+\(/);
  });
});

describe("code mode disabled", () => {
  it("lists the effective tools directly and forwards calls", async () => {
    const setup = makeSetup(
      baseConfig({ tools: { codeMode: false, deny: ["notes_delete", "mcp:memory:delete_*"] } }),
    );
    const gateway = await connectStdio(setup.configPath);
    try {
      const names = (await gateway.client.listTools()).tools.map((tool) => tool.name);
      expect(names).not.toContain("wait");
      expect(names).toEqual(
        expect.arrayContaining(["read_file", "list_dir", "notes_add", "read_graph", "create_entities"]),
      );
      expect(names).not.toContain("notes_delete");
      expect(names).not.toContain("delete_entities");
      expect(names).not.toContain("exec");
      const read = await gateway.client.callTool({ name: "read_file", arguments: { path: "todo.md" } });
      expect(read.structuredContent).toMatchObject({ path: "todo.md" });
      const graph = await gateway.client.callTool({ name: "read_graph", arguments: {} });
      expect(graph.structuredContent).toMatchObject({ entities: [] });
      const denied = await gateway.client.callTool({ name: "notes_delete", arguments: { id: "note-1" } });
      expect(denied.isError).toBe(true);
      expect((denied.content as Array<{ text: string }>)[0]!.text).toMatch(/Unknown tool "notes_delete"/);
    } finally {
      await gateway.close();
    }
  });
});

describe("a plugin that logs", () => {
  it("never writes to the stdio protocol stream", async () => {
    const setup = makeSetup(baseConfig({ mcpServers: {}, plugins: ["./chatty.mjs"] }));
    writeFileSync(
      join(setup.dir, "chatty.mjs"),
      `console.log("chatty loaded");
       export default { id: "chatty", tools: [{ name: "chatty_hello", description: "Says hello", parameters: { type: "object" },
         execute() { console.log("hello from a tool"); console.info("info too"); return "hello"; } }] };`,
    );
    const gateway = await connectStdio(setup.configPath);
    try {
      const result = await gateway.client.callTool({
        name: "exec",
        arguments: { code: "return await tools.chatty_hello({})" },
      });
      expect(result.structuredContent).toMatchObject({ status: "completed", value: "hello" });
      // stderr is a pipe of its own: the plugin's lines may land just after the answer.
      await until(() => gateway.stderr().includes("info too"), "the plugin's console lines on stderr");
      expect(gateway.stderr()).toMatch(/chatty loaded[\s\S]*hello from a tool[\s\S]*info too/);
    } finally {
      await gateway.close();
    }
  });
});
