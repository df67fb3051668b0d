import { CodeModeError } from "./code-mode-error.js";
import { CODE_MODE_LANGUAGES, type CodeModeLanguage } from "./config.js";
import { schemasOnDemand } from "./lazy-schemas.js";
import { closestMatches } from "./suggestions.js";

/** An exec tool call's arguments; `parseExecInput` validates them. */
export type CodeModeExecInput = { code?: string; command?: string; language?: CodeModeLanguage };
/** A wait tool call's arguments; `parseWaitInput` validates them. */
export type CodeModeWaitInput = { runId: string };

/** A validated exec input: the cell source and its language. */
export type ExecRequest = { code: string; language: CodeModeLanguage };

// JSON Schemas of the two model-visible tools' inputs, for tool definitions. Written out so that
// importing the contract does not load zod; a test keeps them equal to what zod derives from
// `execInputSchema` and `waitInputSchema` (without the `$schema` key, which costs every model request
// tokens and says nothing).
export const execInputJsonSchema = {
  type: "object",
  properties: {
    code: { description: "The JavaScript or TypeScript cell to run.", type: "string" },
    command: {
      description: "Alias of code for exec-compatible hooks; must equal code if both are set.",
      type: "string",
    },
    language: {
      description: 'The cell language; default "javascript".',
      type: "string",
      enum: ["javascript", "typescript"],
    },
  },
  additionalProperties: false,
};
export const waitInputJsonSchema = {
  type: "object",
  properties: {
    runId: { type: "string", minLength: 1, description: "The runId of a waiting result." },
  },
  required: ["runId"],
  additionalProperties: false,
};

const EXEC_INPUT_KEYS: ReadonlySet<string> = new Set(["code", "command", "language"]);
const WAIT_INPUT_KEYS: ReadonlySet<string> = new Set(["runId"]);

/**
 * True for an ordinary object (literal or JSON) whose own keys are all in `known`. Anything else goes to
 * zod, which decides and explains; so this check only has to be right when it says yes.
 */
function isPlainObjectWithKeys(input: object, known: ReadonlySet<string>): boolean {
  const prototype = Object.getPrototypeOf(input);
  if (prototype !== Object.prototype && prototype !== null) return false;
  for (const key of Object.keys(input)) if (!known.has(key)) return false;
  return true;
}

/** An exec input `execInputSchema` accepts as it is, checked without loading zod; else undefined. */
function commonExecInput(input: object): CodeModeExecInput | undefined {
  if (!isPlainObjectWithKeys(input, EXEC_INPUT_KEYS)) return undefined;
  const { code, command, language } = input as Record<string, unknown>;
  if (code !== undefined && typeof code !== "string") return undefined;
  if (command !== undefined && typeof command !== "string") return undefined;
  if (language !== undefined && !CODE_MODE_LANGUAGES.includes(language as CodeModeLanguage)) return undefined;
  return { code, command, language } as CodeModeExecInput;
}

function invalidInput(message: string): CodeModeError {
  return new CodeModeError("invalid_input", message);
}

/**
 * The slow path, for an input the hand-written check did not accept: zod decides, and a refusal names
 * zod's first problem in one sentence.
 */
function parseWithZod<S extends "execInputSchema" | "waitInputSchema">(
  schema: S,
  input: unknown,
  tool: string,
): S extends "execInputSchema" ? CodeModeExecInput : CodeModeWaitInput {
  const parsed = schemasOnDemand()[schema].safeParse(input);
  if (parsed.success)
    return parsed.data as S extends "execInputSchema" ? CodeModeExecInput : CodeModeWaitInput;
  const issue = parsed.error.issues[0]!;
  const known = schema === "execInputSchema" ? EXEC_INPUT_KEYS : WAIT_INPUT_KEYS;
  // An unknown key is named before a missing one: `{ run_id }` lacks runId because of it.
  const unknown =
    issue.code === "unrecognized_keys"
      ? issue.keys
      : Object.keys(input as object).filter((key) => !known.has(key));
  if (unknown.length > 0) {
    const named = unknown.map((key) => `"${key}"`).join(", ");
    throw invalidInput(`${tool} input has unknown key(s) ${named}.${meantKeys(known, unknown)}`);
  }
  const field = issue.path.join(".") || "input";
  throw invalidInput(`${tool} input: ${field}: ${issue.message}.`);
}

/** Keys models send for the ones the inputs have, besides near spellings of those (run_id, Code). */
const KEY_SYNONYMS: Readonly<Record<string, string>> = {
  script: "code",
  source: "code",
  program: "code",
  cell: "code",
  js: "code",
  javascript: "code",
  typescript: "code",
  lang: "language",
  id: "runId",
  run: "runId",
};

/** " Use "code" for "script": ..." for unknown keys that stand for the input's own, or "" when none does. */
function meantKeys(known: ReadonlySet<string>, unknown: readonly string[]): string {
  const squash = (key: string) => key.toLowerCase().replace(/[-_\s]/g, "");
  const meant = new Set<string>();
  for (const key of unknown) {
    const synonym = KEY_SYNONYMS[squash(key)];
    const near = [...known].find((name) => squash(name) === squash(key)) ?? closestMatches(key, known, 1)[0];
    const target = synonym !== undefined && known.has(synonym) ? synonym : near;
    if (target !== undefined) meant.add(`"${target}" for "${key}"`);
  }
  if (meant.size === 0) return "";
  const example =
    known === EXEC_INPUT_KEYS
      ? '{ "code": "return 1 + 1", "language": "javascript" }'
      : '{ "runId": "<the runId exec returned>" }';
  return ` Use ${[...meant].join(", ")}: ${example}.`;
}

/**
 * Validates an exec input: one of `code`/`command` must be non-empty, both must match when both are
 * given, the cell must fit in `maxCodeBytes` of UTF-8 (when given), and the language must be one the
 * config enables (`unsupported_language` otherwise). A cell sent inside a Markdown code fence is the code
 * inside it (withoutMarkdownFence), TypeScript when the fence says `ts` or `typescript`, no language was
 * given and TypeScript is enabled.
 */
export function parseExecInput(
  input: unknown,
  enabledLanguages: readonly CodeModeLanguage[],
  maxCodeBytes?: number,
): ExecRequest {
  if (input === null || typeof input !== "object" || Array.isArray(input)) {
    throw invalidInput('exec input must be an object such as { "code": "return 1 + 1" }.');
  }
  const language = (input as { language?: unknown }).language;
  if (language !== undefined && !CODE_MODE_LANGUAGES.includes(language as CodeModeLanguage)) {
    throw new CodeModeError(
      "unsupported_language",
      `exec language ${JSON.stringify(language)} is not supported; use "javascript" or "typescript".`,
    );
  }
  const accepted = commonExecInput(input) ?? parseWithZod("execInputSchema", input, "exec");
  const { code, command } = accepted;
  const hasCode = typeof code === "string" && code.trim() !== "";
  const hasCommand = typeof command === "string" && command.trim() !== "";
  if (!hasCode && !hasCommand) {
    throw invalidInput('exec needs a non-empty "code" string (the program to run).');
  }
  if (code !== undefined && command !== undefined && code !== command) {
    throw invalidInput('exec got both "code" and "command" with different values; send only "code".');
  }
  const sent = hasCode ? code! : command!;
  const fenced = withoutMarkdownFence(sent);
  const source = fenced?.code ?? sent;
  if (fenced !== null && source.trim() === "") {
    throw invalidInput(
      'exec needs a non-empty "code" string (the program to run); the Markdown fence held none.',
    );
  }
  if (maxCodeBytes !== undefined && source.length > maxCodeBytes / 3) {
    // Cheap first: a string of n UTF-16 units is at most 3n bytes, so only long cells are measured.
    const bytes = new TextEncoder().encode(source).byteLength;
    if (bytes > maxCodeBytes) {
      throw invalidInput(
        `exec code is ${bytes} bytes, over tools.codeMode.maxCodeBytes (${maxCodeBytes}). A cell is a program, not a data channel: fetch or compute large data inside the cell with tool calls instead of pasting it into the code.`,
      );
    }
  }
  const resolvedLanguage = accepted.language ?? fenceLanguage(fenced?.tag, enabledLanguages) ?? "javascript";
  if (!enabledLanguages.includes(resolvedLanguage)) {
    throw new CodeModeError(
      "unsupported_language",
      `exec language "${resolvedLanguage}" is disabled by tools.codeMode.languages; enabled: ${enabledLanguages.join(", ")}.`,
    );
  }
  return { code: source, language: resolvedLanguage };
}

/** A fence's opening line (its indentation, then its info word) and its closing line. */
const OPENING_FENCE = /^([ \t\r\n]*)```([\w+.-]*)[ \t]*(?=\r?\n)/;
const CLOSING_FENCE = /\r?\n[ \t]*```[ \t\r\n]*$/;

/**
 * The code inside a Markdown code fence, when the whole cell is one: models sometimes send a cell as they
 * would show it (three backticks and `js` on the first line, three backticks on the last). As JavaScript
 * that is a tagged template and fails with a bare "not a function", so it can only mean the code inside.
 * The two fence lines become empty lines, so every line of the code keeps the number it has in what the
 * model sent. Null when the cell is not fenced.
 */
function withoutMarkdownFence(code: string): { code: string; tag: string } | null {
  const opening = OPENING_FENCE.exec(code);
  if (opening === null) return null;
  const closing = CLOSING_FENCE.exec(code);
  const bodyStart = opening[0].length;
  if (closing === null || closing.index < bodyStart) return null;
  const lineBreak = code.startsWith("\r\n", closing.index) ? "\r\n" : "\n";
  return {
    code: `${opening[1]}${code.slice(bodyStart, closing.index)}${lineBreak}`,
    tag: opening[2]!.toLowerCase(),
  };
}

/** The language a fence names (`ts`, `typescript`), when it is enabled here; else undefined. */
function fenceLanguage(
  tag: string | undefined,
  enabledLanguages: readonly CodeModeLanguage[],
): CodeModeLanguage | undefined {
  if (tag !== "ts" && tag !== "typescript") return undefined;
  return enabledLanguages.includes("typescript") ? "typescript" : undefined;
}

/** Validates a wait input: a non-empty `runId` string and nothing else. */
export function parseWaitInput(input: unknown): CodeModeWaitInput {
  if (input === null || typeof input !== "object" || Array.isArray(input)) {
    throw invalidInput('wait input must be an object such as { "runId": "..." }.');
  }
  const runId = (input as { runId?: unknown }).runId;
  if (isPlainObjectWithKeys(input, WAIT_INPUT_KEYS) && typeof runId === "string" && runId !== "") {
    return { runId };
  }
  return parseWithZod("waitInputSchema", input, "wait");
}
