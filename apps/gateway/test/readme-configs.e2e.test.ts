// biome-ignore-all lint/suspicious/noTemplateCurlyInString: config files use ${ENV} references
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";
import { APP_DIR, runCli } from "./harness.js";

// The configs the root README tells a reader to write, taken from the README itself, must give a cell
// tools; and a config that gives it none is refused with what to add, by `check` and by `exec` alike.

const README = readFileSync(join(APP_DIR, "..", "..", "README.md"), "utf8");
const TOKEN = "alice-token-0123456789abcdef";

/** The first json5 block under the README heading `heading`. */
function readmeConfig(heading: string): string {
  const section = README.slice(README.indexOf(`\n## ${heading}\n`));
  const block = /```json5\n([\s\S]*?)```/.exec(section)?.[1];
  if (!block) throw new Error(`the README's "${heading}" section has no json5 block`);
  return block;
}

function folderWith(config: string, folders: string[] = []): { dir: string; config: string } {
  const dir = mkdtempSync(join(tmpdir(), "codecell-readme-config-"));
  for (const folder of folders) mkdirSync(join(dir, folder));
  writeFileSync(join(dir, "prod.json5"), config);
  return { dir, config: join(dir, "prod.json5") };
}

const env = { ALICE_TOKEN: TOKEN };

describe("the README's configs", () => {
  it("Deploy: check counts the tools a cell can call, and exec runs a cell that calls one", async () => {
    const { dir, config } = folderWith(readmeConfig("Deploy"), ["workspace"]);
    writeFileSync(join(dir, "workspace", "notes.md"), "deployed\n");
    const checked = await runCli(["check", "--config", config], { env, cwd: dir });
    expect(checked.code, checked.stderr).toBe(0);
    expect(checked.stdout).toMatch(/^ok: .*code mode on, .* ([1-9]\d*) tool\(s\) after policy/);
    const ran = await runCli(
      ["exec", "--config", config, "-e", 'return (await tools.read_file({ path: "notes.md" })).content'],
      { env, cwd: dir },
    );
    expect(ran.code, ran.stderr).toBe(0);
    expect(JSON.parse(ran.stdout)).toMatchObject({ status: "completed", value: "deployed\n" });
  });

  it("Add your own MCP server: ./my-server.js beside the config is the server a cell calls", async () => {
    const { dir, config } = folderWith(readmeConfig("Add your own MCP server"));
    const server = join(APP_DIR, "test", "fixtures", "slow-server.mjs");
    writeFileSync(join(dir, "my-server.js"), `import(${JSON.stringify(pathToFileURL(server).href)});\n`);
    const elsewhere = mkdtempSync(join(tmpdir(), "codecell-elsewhere-"));
    const checked = await runCli(["check", "--connect", "--config", config], { cwd: elsewhere });
    expect(checked.code, checked.stderr).toBe(0);
    const listed = await runCli(["catalog", "--config", config], { cwd: elsewhere });
    expect(JSON.parse(listed.stdout).mcpServers).toEqual([
      { name: "mine", call: "MCP.mine", tools: ["MCP.mine.waitLong"] },
    ]);
  });
});

describe("a config that leaves a cell nothing to call", () => {
  const bare = `{ tools: { codeMode: true }, http: { tokens: [{ name: "alice", token: "\${ALICE_TOKEN}" }] } }`;

  it("is refused by check and by exec with exit code 3 and what to add", async () => {
    const { config } = folderWith(bare);
    const checked = await runCli(["check", "--config", config], { env });
    expect(checked.code).toBe(3);
    expect(checked.stdout).toBe("");
    expect(checked.stderr.trim()).toBe(
      `${config}: code mode is on but a cell has nothing to call: no workspace, plugin or MCP server gives it a tool, so code mode stays off and an MCP client sees no tools. Add "workspace": "./workspace" (file tools), a plugin, or an MCP server under "mcpServers".`,
    );
    const ran = await runCli(["exec", "--config", config, "-e", "return 1"], { env });
    expect(ran.code).toBe(3);
    expect(ran.stdout).toBe("");
    expect(ran.stderr.trim()).toBe(`codecell: ${checked.stderr.trim()}`);
  });

  it("names the policy when tools.allow leaves none of the tools", async () => {
    const { config } = folderWith(
      `{ tools: { codeMode: true, allow: ["nothing_*"] }, workspace: "./workspace" }`,
      ["workspace"],
    );
    const checked = await runCli(["check", "--config", config]);
    expect(checked.code).toBe(3);
    expect(checked.stderr).toMatch(
      /tools\.allow and tools\.deny leave none of its \d+ tool\(s\).*Allow some of them/,
    );
  });

  it("is only a warning with an agent section, whose requests bring their own tools", async () => {
    const { config } = folderWith(
      `{ tools: { codeMode: true }, agent: { upstream: { baseUrl: "http://127.0.0.1:9/v1", apiKey: "sk-unused-0123456789" } } }`,
    );
    const checked = await runCli(["check", "--config", config]);
    expect(checked.code, checked.stderr).toBe(0);
    expect(checked.stderr).toMatch(/^codecell: warning: .*nothing to call.*Agent requests still work/);
    expect(checked.stdout).toMatch(/^ok: /);
  });

  it("is not judged by check without --connect when MCP servers may bring tools", async () => {
    const { config } = folderWith(
      `{ tools: { codeMode: true }, mcpServers: { memory: { package: "@modelcontextprotocol/server-memory" } } }`,
    );
    const checked = await runCli(["check", "--config", config]);
    expect(checked.code, checked.stderr).toBe(0);
  });
});
