import { describe, expect, it } from "vitest";
import { declaredTools, isClientCodeMode } from "../src/client-code-mode.js";
import { fromResponsesTools } from "../src/responses-tools.js";

// The reader of a client's own code-mode description (the Codex CLI's exec): the tools it declares
// become client tools. The description is the client's text, so besides the shape Codex writes, the
// reader gets odd and hostile text here: it must answer, never throw, and never scan without end.

/** A section as such a client writes one: heading, prose, then the tool's declaration. */
const section = (name: string, prose: string, declaration: string) =>
  `### \`${name}\`\n${prose}\n\nexec tool declaration:\n\`\`\`ts\ndeclare const tools: { ${declaration} };\n\`\`\`\n`;

const CODEX_LIKE = [
  "Run JavaScript that calls the nested tools on the global `tools` object.",
  "- Returns what the script passes to `text(...)`.",
  "",
  "Shared types:",
  "```ts",
  "type Note = { body: string; tags?: string[] };",
  "declare const tools: { not_a_section(args: { x: string }): void };",
  "```",
  "",
  section(
    "edit_files",
    "Edits files with a patch. The input is the patch itself, not JSON.",
    "edit_files(input: string): Promise<unknown>;",
  ),
  section(
    "run_command",
    "Runs a command in a terminal.\nSecond line of prose.",
    `run_command(args: {
  // The command line to run (in the user's shell).
  command: string;
  // Where it runs; the workspace when left out.
  cwd?: string;
  // Extra words after the command, e.g. ["-l", "-a"].
  extra_args?: Array<string>;
  /* How long to wait, in ms. */
  timeout_ms?: number;
  mode?: "plain" | "pty";
  verbose?: boolean;
}): Promise<{
  // Exit status.
  exit_code: number;
  output: string;
}>;`,
  ),
  section("current_time", "Tells the time.", "current_time(): Promise<{ now: string; zone: string }>;"),
  section("clear_state", "Forgets everything.", "clear_state(args: {}): Promise<unknown>;"),
  "### `no_declaration`\nA section whose tool is not declared in TypeScript.\n",
].join("\n");

const byName = (description: string) =>
  Object.fromEntries(declaredTools(description).map((tool) => [tool.name, tool]));

/** A deterministic generator of numbers in [0, 1) (a linear congruential one), for reproducible odd input. */
function random(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state * 1103515245 + 12345) % 2147483648;
    return state / 2147483648;
  };
}

/** Every declared tool has a heading's name, a string description and object parameters (or none). */
function expectWellFormed(description: string): void {
  const tools = declaredTools(description);
  for (const tool of tools) {
    expect(tool.name).toMatch(/^[A-Za-z_$][\w$]*$/);
    expect(typeof tool.description).toBe("string");
    if (tool.freeform) expect(tool.parameters).toBeUndefined();
    else expect(tool.parameters).toMatchObject({ type: "object" });
    // Plain data: what the run offers and hashes.
    expect(JSON.parse(JSON.stringify(tool))).toEqual(tool);
  }
}

describe("a client's code-mode declarations", () => {
  it("recognises a client's exec that declares tools, and nothing else", () => {
    expect(isClientCodeMode({ name: "exec", description: CODEX_LIKE })).toBe(true);
    expect(isClientCodeMode({ name: "exec", description: "Runs a shell command." })).toBe(false);
    expect(isClientCodeMode({ name: "run", description: CODEX_LIKE })).toBe(false);
    expect(isClientCodeMode({ name: "exec", description: 42 })).toBe(false);
  });

  it("reads each section's tool: freeform, fields with their comments, no arguments", () => {
    const tools = byName(CODEX_LIKE);
    // Sections only: the shared types block and a section without a declaration declare nothing.
    expect(Object.keys(tools)).toEqual(["edit_files", "run_command", "current_time", "clear_state"]);
    expect(tools.edit_files).toEqual({
      name: "edit_files",
      description: "Edits files with a patch. The input is the patch itself, not JSON.",
      freeform: true,
    });
    expect(tools.run_command).toEqual({
      name: "run_command",
      description: "Runs a command in a terminal.\nSecond line of prose.",
      freeform: false,
      parameters: {
        type: "object",
        properties: {
          command: { type: "string", description: "The command line to run (in the user's shell)." },
          cwd: { type: "string", description: "Where it runs; the workspace when left out." },
          extra_args: {
            type: "array",
            items: { type: "string" },
            description: 'Extra words after the command, e.g. ["-l", "-a"].',
          },
          timeout_ms: { type: "number", description: "How long to wait, in ms." },
          mode: { type: "string", enum: ["plain", "pty"] },
          verbose: { type: "boolean" },
        },
        required: ["command"],
      },
    });
    // The return type's fields are not arguments.
    expect(tools.current_time?.parameters).toEqual({ type: "object", properties: {} });
    expect(tools.clear_state?.parameters).toEqual({ type: "object", properties: {} });
  });

  it("reads the types declarations use, however they are laid out", () => {
    const [tool] = declaredTools(
      section(
        "odd",
        "Odd but valid.",
        `odd(args: {
  // Called back (a function: its arrow is no bracket); the fields after it still count.
  callback?: (value: string) => void;
  // A union over lines.
  level:
    | "low"
    | "high";
  matrix: number[][];
  counts?: Record<string, number>;
  nested: {
    inner: boolean; // said of inner: a comment after a field is not the next field's
    /* its own */ deep?: { leaf: string } };
  either?: string | null;
  readonly fixed: string; "quoted-key"?: number;
  [extra: string]: unknown;
  method(x: number): string;
  __proto__: string;
  later: 'single'
  last: string
}): Promise<unknown>;`,
      ),
    );
    expect(tool?.parameters).toEqual({
      type: "object",
      properties: {
        callback: {
          description: "Called back (a function: its arrow is no bracket); the fields after it still count.",
        },
        level: { type: "string", enum: ["low", "high"], description: "A union over lines." },
        matrix: { type: "array", items: { type: "array", items: { type: "number" } } },
        counts: { type: "object", additionalProperties: { type: "number" } },
        nested: {
          type: "object",
          properties: {
            inner: { type: "boolean" },
            deep: {
              type: "object",
              properties: { leaf: { type: "string" } },
              required: ["leaf"],
              description: "its own",
            },
          },
          required: ["inner"],
        },
        either: { anyOf: [{ type: "string" }, { type: "null" }] },
        fixed: { type: "string" },
        "quoted-key": { type: "number" },
        later: { type: "string", enum: ["single"] },
        last: { type: "string" },
      },
      required: ["level", "matrix", "nested", "fixed", "later", "last"],
    });
    expect(Object.getPrototypeOf(tool?.parameters)).toBe(Object.prototype);
  });

  it("gives any value where brackets, strings or comments never close", () => {
    for (const broken of [
      "broken(args: { a: string; b: Array<string; c: number }): Promise<unknown>;",
      'broken(args: { a: "never closed; b: string }): Promise<unknown>;',
      "broken(args: { /* never closed a: string; }): Promise<unknown>;",
      "broken(args: { a: string; // no newline after this",
      "broken(args: { a: string }",
      "broken(args: ))))}}}}>>>>: string",
      "broken(",
    ]) {
      const description = section("broken", "Broken.", broken).replace(/\n```\n$/, "");
      expectWellFormed(description);
      expect(declaredTools(description).map((tool) => tool.name)).toEqual(["broken"]);
    }
  });

  it("stays bounded on huge and deeply nested declarations", () => {
    // Types nested past any real declaration take any value below a few levels (no deep recursion).
    const deep = declaredTools(
      section("deep", "Deep.", `deep(args: { a: ${"Array<".repeat(5000)}string${">".repeat(5000)} }): void;`),
    )[0]!;
    let level = (deep.parameters as { properties: Record<string, unknown> }).properties.a as Record<
      string,
      unknown
    >;
    let levels = 0;
    while (level.items && levels < 100) {
      level = level.items as Record<string, unknown>;
      levels++;
    }
    expect(levels).toBeGreaterThan(0);
    expect(levels).toBeLessThan(20);
    expect(level).toEqual({});
    // Objects nested as deep, and a parameter list longer than any real one: any object.
    expectWellFormed(
      section("objects", "Deep.", `objects(args: ${"{ a: ".repeat(5000)}string${" }".repeat(5000)}): void;`),
    );
    const long = section("long", "Long.", `long(args: {\n${"  f: string;\n".repeat(20_000)}}): void;`);
    expect(declaredTools(long)[0]?.parameters).toEqual({ type: "object" });
    // Text that makes a backtracking reader scan again and again: whitespace after the fence, many
    // headings, fences without an end, sections without fences.
    expect(declaredTools(`### \`t\`\n\`\`\`ts${" \n".repeat(200_000)}x`)).toEqual([]);
    expect(declaredTools("### `t`\n".repeat(100_000))).toEqual([]);
    expect(
      declaredTools(`### \`t\`\n\`\`\`ts\ndeclare const tools: { t(${"(".repeat(200_000)}`),
    ).toHaveLength(1);
    expect(
      declaredTools(`${"### `t`\nprose\n".repeat(20_000)}\`\`\`ts\ndeclare const tools: { t(x: string) };`),
    ).toHaveLength(1);
    const manyTools = Array.from({ length: 2000 }, (_, index) =>
      section(`tool_${index}`, "One of many.", `tool_${index}(args: { a: string }): void;`),
    ).join("");
    expect(declaredTools(manyTools)).toHaveLength(2000);
  }, 60_000);

  it("never throws on random text made of the declarations' own pieces", () => {
    const pieces = [
      "### `t`\n",
      "### `u_2`\n",
      "```ts\n",
      "```\n",
      "declare const tools: { t(",
      "args: {",
      "input: string",
      "a?: ",
      "string",
      "Array<",
      "Record<string, ",
      ">",
      "=>",
      "{",
      "}",
      "(",
      ")",
      "[",
      "]",
      ";",
      ",",
      ":",
      "|",
      '"',
      "'",
      "`",
      "\\",
      "//",
      "/*",
      "*/",
      "\n",
      " ",
      "__proto__",
      "constructor",
      "exec tool declaration:",
      "é",
      "\u0000",
    ];
    for (let seed = 1; seed <= 400; seed++) {
      const next = random(seed);
      let text = "";
      const length = Math.floor(next() * 400);
      for (let index = 0; index < length; index++) text += pieces[Math.floor(next() * pieces.length)];
      expectWellFormed(text);
    }
  });

  it("offers a freeform declared tool as a custom client tool, and a declared one the client also offers keeps the client's", () => {
    const tools = fromResponsesTools(
      [
        { type: "custom", name: "exec", description: CODEX_LIKE },
        { type: "function", name: "wait", parameters: { type: "object", properties: {} } },
        {
          type: "function",
          name: "current_time",
          description: "The client's own.",
          parameters: { type: "object", properties: { zone: { type: "string" } } },
        },
      ],
      "drop",
    );
    expect(tools.dropped).toEqual(["exec", "wait"]);
    expect(tools.tools.map((tool) => tool.name)).toEqual([
      "current_time",
      "edit_files",
      "run_command",
      "clear_state",
    ]);
    expect(tools.tools[0]?.description).toBe("The client's own.");
    expect([...tools.custom]).toEqual(["edit_files"]);
    expect(tools.tools[1]?.parameters).toMatchObject({
      properties: { input: { type: "string" } },
      required: ["input"],
    });
  });
});
