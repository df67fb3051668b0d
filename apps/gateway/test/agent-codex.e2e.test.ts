import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { type ScriptedUpstream, startScriptedUpstream } from "@codecell/agent/testing";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { baseConfig, type HttpGateway, makeSetup, startHttpGateway } from "./harness.js";

// The Codex CLI (@openai/codex), unchanged, with a custom model provider pointing at the agent
// endpoint's Responses front. Codex brings its own code mode with its default model (its tools arrive
// in an additional_tools input item, its shell declared inside its own exec) and the classic tool set
// in `tools` with a model it has no metadata for; both shapes are driven here. The scripted upstream
// (a Responses API server) is the only fake: Codex runs the shell command itself.

const TOKEN = "codex-token-0123456789abcdef";
const CODEX = join(
  dirname(createRequire(import.meta.url).resolve("@openai/codex/package.json")),
  "bin",
  "codex.js",
);

type Body = Record<string, unknown>;
type Item = Record<string, unknown>;
const inputItems = (body: Body | undefined) => (body?.input ?? []) as Item[];
const toolNames = (body: Body | undefined) =>
  ((body?.tools ?? []) as Array<{ name: string }>).map((tool) => tool.name);
/** The last function_call_output of an upstream body (the exec result the model reads), parsed. */
const lastToolResult = (body: Body) => {
  const output = inputItems(body)
    .filter((item) => item.type === "function_call_output")
    .at(-1);
  return JSON.parse(String(output?.output)) as Record<string, unknown>;
};

/** A throwaway HOME and CODEX_HOME whose config.toml sends Codex's model calls to `baseUrl`. */
function codexHome(baseUrl: string): string {
  const home = mkdtempSync(join(tmpdir(), "codecell-codex-"));
  mkdirSync(join(home, ".codex"));
  writeFileSync(
    join(home, ".codex", "config.toml"),
    [
      'model_provider = "codecell"',
      "",
      "[model_providers.codecell]",
      'name = "codecell"',
      `base_url = "${baseUrl}"`,
      'wire_api = "responses"',
      'env_key = "CODECELL_TOKEN"',
      // A failure shows at once instead of after Codex's retries.
      "request_max_retries = 0",
      "stream_max_retries = 0",
      "",
    ].join("\n"),
  );
  mkdirSync(join(home, "work"));
  return home;
}

/** `codex exec` with `prompt` in a fresh workspace; its final message, its output and exit code. */
function codexExec(
  home: string,
  prompt: string,
  args: string[] = [],
): Promise<{ code: number; lastMessage: string; output: string }> {
  const lastMessagePath = join(home, "last-message.txt");
  const child = spawn(
    process.execPath,
    [
      CODEX,
      "exec",
      "--skip-git-repo-check",
      // The command is harmless; no OS sandbox (bubblewrap may be missing where the tests run).
      "--sandbox",
      "danger-full-access",
      "--output-last-message",
      lastMessagePath,
      ...args,
      prompt,
    ],
    {
      cwd: join(home, "work"),
      env: {
        PATH: process.env.PATH ?? "",
        HOME: home,
        CODEX_HOME: join(home, ".codex"),
        CODECELL_TOKEN: TOKEN,
      },
      // No stdin: codex exec reads more of the prompt from a stdin that is not closed.
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  let output = "";
  child.stdout.on("data", (chunk: Buffer) => {
    output += chunk.toString("utf8");
  });
  child.stderr.on("data", (chunk: Buffer) => {
    output += chunk.toString("utf8");
  });
  const killer = setTimeout(() => child.kill("SIGKILL"), 100_000);
  return new Promise((resolve) => {
    child.once("close", (code) => {
      clearTimeout(killer);
      let lastMessage = "";
      try {
        lastMessage = readFileSync(lastMessagePath, "utf8");
      } catch {
        // Codex wrote none: the assertions say so, with its output.
      }
      resolve({ code: code ?? -1, lastMessage, output });
    });
  });
}

const SHELL_CELL =
  'const out = await tools.exec_command({ cmd: "echo codex-shell-$((6 * 7))" }); text("ran it"); return out;';

describe("the Codex CLI in front of the agent endpoint", () => {
  let upstream: ScriptedUpstream;
  let gateway: HttpGateway;

  beforeAll(async () => {
    upstream = await startScriptedUpstream({ api: "responses" });
    gateway = await startHttpGateway(
      makeSetup(
        baseConfig({
          tools: { codeMode: { enabled: true, timeoutMs: 5000 } },
          mcpServers: {},
          http: { tokens: [{ name: "codex", token: TOKEN }] },
          agent: {
            upstream: {
              api: "responses",
              baseUrl: upstream.baseUrl,
              apiKey: "upstream-key",
              timeoutMs: 20_000,
            },
            maxModelTurns: 6,
          },
        }),
      ).configPath,
    );
  });
  afterAll(async () => {
    await gateway?.stop();
    await upstream?.close();
  });
  beforeEach(() => {
    upstream.bodies.length = 0;
  });

  const scriptShellRun = () =>
    upstream.script(
      { text: "Running it.", toolCalls: [{ name: "exec", arguments: { code: SHELL_CELL } }] },
      (body) => {
        const result = lastToolResult(body);
        return { text: `The shell said: ${JSON.stringify(result.value)}` };
      },
    );

  for (const shape of [
    { name: "its default model (its own code mode in additional_tools)", args: [] as string[] },
    { name: "a model it has no metadata for (the classic tools)", args: ["-m", "scripted-model"] },
  ]) {
    it(`runs a cell's call of Codex's shell tool in Codex, with ${shape.name}`, async () => {
      scriptShellRun();
      const home = codexHome(`${gateway.url}v1`);
      const run = await codexExec(home, "Print the answer with the shell.", shape.args);
      expect(run.code, run.output).toBe(0);
      // The cell's call went to Codex, which ran the command; its output reached the cell, and the
      // model's final answer reached Codex's output.
      expect(run.lastMessage).toContain("The shell said:");
      expect(run.lastMessage).toContain("codex-shell-42");
      expect(upstream.bodies).toHaveLength(2);
      for (const body of upstream.bodies) {
        expect(toolNames(body)).toEqual(["exec", "wait"]);
        // Codex's own tools never reach the model except through the cells' catalog.
        expect(inputItems(body).some((item) => item.type === "additional_tools")).toBe(false);
      }
      const result = lastToolResult(upstream.bodies[1]!);
      expect(JSON.stringify(result.value)).toContain("codex-shell-42");
    }, 120_000);
  }

  it("hands a cell's call of Codex's freeform apply_patch to Codex as a custom_tool_call with the patch as its input, and its output reaches the cell", async () => {
    const patch = [
      "*** Begin Patch",
      "*** Add File: greeting.txt",
      "+hello from a cell",
      "*** End Patch",
    ].join("\n");
    upstream.script(
      {
        toolCalls: [
          {
            name: "exec",
            arguments: {
              code: `const out = await tools.apply_patch({ input: ${JSON.stringify(patch)} }); return { kind: typeof out, out };`,
            },
          },
        ],
      },
      (body) => ({ text: `Patched: ${JSON.stringify(lastToolResult(body).value)}` }),
    );
    const home = codexHome(`${gateway.url}v1`);
    const run = await codexExec(home, "Add a greeting file.");
    expect(run.code, run.output).toBe(0);
    // Codex applied the patch the cell wrote: the string went to it as the call's input, unwrapped.
    expect(readFileSync(join(home, "work", "greeting.txt"), "utf8")).toBe("hello from a cell\n");
    expect(upstream.bodies).toHaveLength(2);
    // Codex's custom_tool_call_output reached the cell as the call's value: text naming the file.
    const result = lastToolResult(upstream.bodies[1]!);
    expect(result.status).toBe("completed");
    const value = result.value as { kind: string; out: unknown };
    expect(JSON.stringify(value.out)).toContain("greeting.txt");
    expect(run.lastMessage).toContain("greeting.txt");
  }, 120_000);
});
