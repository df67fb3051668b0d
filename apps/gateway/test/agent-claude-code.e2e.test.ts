import { randomBytes } from "node:crypto";
import { mkdtempSync, realpathSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type ScriptedReply, type ScriptedUpstream, startScriptedUpstream } from "@codecell/agent/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { baseConfig, type HttpGateway, makeSetup, startHttpGateway } from "./harness.js";
import { runClaudeCode } from "./support/claude-code.js";

// The real Claude Code (@anthropic-ai/claude-code, headless) against the gateway's Messages front with
// its default requests: mid-conversation system messages, adaptive thinking, output_config,
// context_management, metadata, the ?beta=true query; on each upstream kind. Its own tools go behind exec and wait; a cell
// calls its Bash and Read, which it runs itself, and the answer reaches its JSON output.

const TOKEN = "claude-code-token-0123456789";

type Body = Record<string, unknown>;
type Api = "messages" | "chat-completions" | "responses";

function toolNames(body: Body, api: Api): string[] {
  const tools = (body.tools ?? []) as Array<{ name?: string; function?: { name: string } }>;
  return tools.map((tool) => (api === "chat-completions" ? String(tool.function?.name) : String(tool.name)));
}

/** The exec results the model has read so far, as text (tool_result blocks, tool messages or output items). */
function execResults(body: Body): string[] {
  if (Array.isArray(body.input)) {
    return (body.input as Array<Record<string, unknown>>)
      .filter((item) => item.type === "function_call_output")
      .map((item) => String(item.output));
  }
  const messages = (body.messages ?? []) as Array<{ role: string; content: unknown }>;
  return messages.flatMap((message) => {
    if (message.role === "tool") return [String(message.content)];
    if (!Array.isArray(message.content)) return [];
    return (message.content as Array<Record<string, unknown>>)
      .filter((block) => block.type === "tool_result")
      .map((block) => String(block.content));
  });
}

/**
 * The scripted model: with exec and wait offered and no cell run yet, a cell that has Claude Code run
 * a shell command writing a note and read the note back; once the cell's result is in, an answer that
 * quotes what the cell read. A request without them (one Claude Code makes aside) gets a short answer.
 */
function model(api: Api, folder: string, marker: string) {
  const cell = [
    `const ran = await tools.Bash({ command: "printf '${marker}' > note.txt && echo wrote-the-note", description: "Write the note" });`,
    `const read = await tools.Read({ file_path: ${JSON.stringify(join(folder, "note.txt"))} });`,
    `return { ran, read };`,
  ].join("\n");
  return (body: Body): ScriptedReply => {
    if (!toolNames(body, api).includes("exec")) return { text: "aside" };
    const results = execResults(body);
    if (results.length === 0) {
      return {
        text: "Let me write and read the note.",
        toolCalls: [{ name: "exec", arguments: { code: cell } }],
      };
    }
    const last = results.at(-1) ?? "";
    return { text: last.includes(marker) ? `The note says ${marker}.` : `No note: ${last.slice(0, 300)}` };
  };
}

describe.each<Api>(["messages", "chat-completions", "responses"])("Claude Code on a %s upstream", (api) => {
  let upstream: ScriptedUpstream;
  let gateway: HttpGateway;

  beforeAll(async () => {
    upstream = await startScriptedUpstream({ api });
    const agent = { upstream: { api, baseUrl: upstream.baseUrl, apiKey: "upstream-key", timeoutMs: 20_000 } };
    gateway = await startHttpGateway(
      makeSetup(
        baseConfig({
          tools: { codeMode: { enabled: true, timeoutMs: 20_000 } },
          http: { tokens: [{ name: "claude", token: TOKEN }] },
          agent,
        }),
      ).configPath,
    );
  });
  afterAll(async () => {
    await gateway?.stop();
    await upstream?.close();
  });

  it("answers the HEAD request Claude Code sends to its base URL with 200 and no body", async () => {
    const response = await fetch(gateway.url, { method: "HEAD" });
    expect(response.status).toBe(200);
    expect(await response.text()).toBe("");
  });

  it("runs a cell that calls its own Bash and Read, and prints the model's answer", async () => {
    const folder = realpathSync(mkdtempSync(join(tmpdir(), "codecell-claude-work-")));
    const marker = `note-${randomBytes(6).toString("hex")}`;
    const step = model(api, folder, marker);
    upstream.script(...Array.from({ length: 12 }, () => step));
    const result = await runClaudeCode({
      baseUrl: gateway.url.replace(/\/$/, ""),
      apiKey: TOKEN,
      prompt: "Write a note and read it back.",
      cwd: folder,
      allowedTools: ["Bash", "Read"],
    });
    expect(result.is_error, JSON.stringify(result)).toBe(false);
    expect(result.result).toContain(`The note says ${marker}.`);
    // Claude Code ran both tools itself: one round trip each through the suspended cell.
    expect(result.num_turns).toBeGreaterThanOrEqual(3);
    const codeMode = upstream.bodies.filter((body) => toolNames(body, api).length > 0);
    expect(codeMode.length).toBeGreaterThanOrEqual(2);
    for (const body of codeMode) expect(toolNames(body, api)).toEqual(["exec", "wait"]);
    // Its betas (which turn on the fields it sends) went with each call to a Messages upstream.
    if (api === "messages") {
      for (const headers of upstream.headers)
        expect(String(headers["anthropic-beta"])).toContain("claude-code-");
    }
    // Its mid-conversation system message (its environment, naming the folder) reached the model as one.
    const listed = (codeMode[0]!.messages ?? codeMode[0]!.input) as Array<{
      role?: string;
      content?: unknown;
    }>;
    const systems = listed
      .filter((entry) => entry.role === "system")
      .map((entry) => JSON.stringify(entry.content));
    expect(systems.some((text) => text.includes(folder))).toBe(true);
    // The cell got what Claude Code's tools gave: the shell's output and the note it read.
    const cellResult = execResults(codeMode.at(-1)!).at(-1)!;
    expect(cellResult).toContain("wrote-the-note");
    expect(cellResult).toContain(marker);
  });
});
