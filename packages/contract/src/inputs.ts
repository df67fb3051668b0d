import { z } from "zod";
import { CodeModeError } from "./code-mode-error.js";
import { CODE_MODE_LANGUAGES, type CodeModeLanguage } from "./config.js";

export const execInputSchema = z.strictObject({
  code: z.string().optional().describe("The JavaScript or TypeScript cell to run."),
  command: z
    .string()
    .optional()
    .describe("Alias of code for exec-compatible hooks; must equal code if both are set."),
  language: z.enum(CODE_MODE_LANGUAGES).optional().describe('The cell language; default "javascript".'),
});

export const waitInputSchema = z.strictObject({
  runId: z.string().min(1).describe("The runId of a waiting result."),
});

export type CodeModeExecInput = z.infer<typeof execInputSchema>;
export type CodeModeWaitInput = z.infer<typeof waitInputSchema>;

/** A validated exec input: the cell source and its language. */
export type ExecRequest = { code: string; language: CodeModeLanguage };

/** A schema for a tool definition: the `$schema` key costs every model request tokens and says nothing. */
function forToolDefinition<T extends object>(schema: T): Omit<T, "$schema"> {
  const { $schema: _dialect, ...rest } = schema as T & { $schema?: unknown };
  return rest;
}

/** JSON Schemas of the two model-visible tools' inputs, for tool definitions. */
export const execInputJsonSchema = forToolDefinition(z.toJSONSchema(execInputSchema, { target: "draft-7" }));
export const waitInputJsonSchema = forToolDefinition(z.toJSONSchema(waitInputSchema, { target: "draft-7" }));

function invalidInput(message: string): CodeModeError {
  return new CodeModeError("invalid_input", message);
}

function firstIssue(error: z.ZodError, tool: string): string {
  const issue = error.issues[0]!;
  if (issue.code === "unrecognized_keys") {
    return `${tool} input has unknown key(s) ${issue.keys.map((key) => `"${key}"`).join(", ")}.`;
  }
  const field = issue.path.join(".") || "input";
  return `${tool} input: ${field}: ${issue.message}.`;
}

/**
 * Validates an exec input: one of `code`/`command` must be non-empty, both must match when both are
 * given, the cell must fit in `maxCodeBytes` of UTF-8 (when given), and the language must be one the
 * config enables (`unsupported_language` otherwise).
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
  const parsed = execInputSchema.safeParse(input);
  if (!parsed.success) throw invalidInput(firstIssue(parsed.error, "exec"));
  const { code, command } = parsed.data;
  const hasCode = typeof code === "string" && code.trim() !== "";
  const hasCommand = typeof command === "string" && command.trim() !== "";
  if (!hasCode && !hasCommand) {
    throw invalidInput('exec needs a non-empty "code" string (the program to run).');
  }
  if (code !== undefined && command !== undefined && code !== command) {
    throw invalidInput('exec got both "code" and "command" with different values; send only "code".');
  }
  const source = hasCode ? code! : command!;
  if (maxCodeBytes !== undefined && source.length > maxCodeBytes / 3) {
    // Cheap first: a string of n UTF-16 units is at most 3n bytes, so only long cells are measured.
    const bytes = new TextEncoder().encode(source).byteLength;
    if (bytes > maxCodeBytes) {
      throw invalidInput(
        `exec code is ${bytes} bytes, over tools.codeMode.maxCodeBytes (${maxCodeBytes}). A cell is a program, not a data channel: fetch or compute large data inside the cell with tool calls instead of pasting it into the code.`,
      );
    }
  }
  const resolvedLanguage = parsed.data.language ?? "javascript";
  if (!enabledLanguages.includes(resolvedLanguage)) {
    throw new CodeModeError(
      "unsupported_language",
      `exec language "${resolvedLanguage}" is disabled by tools.codeMode.languages; enabled: ${enabledLanguages.join(", ")}.`,
    );
  }
  return { code: source, language: resolvedLanguage };
}

/** Validates a wait input: a non-empty `runId` string and nothing else. */
export function parseWaitInput(input: unknown): CodeModeWaitInput {
  if (input === null || typeof input !== "object" || Array.isArray(input)) {
    throw invalidInput('wait input must be an object such as { "runId": "..." }.');
  }
  const parsed = waitInputSchema.safeParse(input);
  if (!parsed.success) throw invalidInput(firstIssue(parsed.error, "wait"));
  return parsed.data;
}
