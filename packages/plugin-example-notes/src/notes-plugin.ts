import { CodeModeError, type JsonValue } from "@codecell/contract";
import { createCodeModeNamespaceTool } from "@codecell/namespaces";
import { NoteStore } from "./note-store.js";
import type { CodecellPlugin, PluginFactory, PluginTool } from "./plugin-types.js";

export const NOTES_PLUGIN_ID = "notes";

type NoteSeed = { title: string; body: string; tags?: string[] };

const DEFAULT_SEED: NoteSeed[] = [
  {
    title: "Welcome to codecell",
    body: "This notebook comes from the example plugin. Add notes with Notes.add and find them with Notes.search.",
    tags: ["intro"],
  },
  {
    title: "Release checklist",
    body: "Run the tests, write a changeset, build, then publish the packages.",
    tags: ["release", "todo"],
  },
];

function objectInput(input: JsonValue, tool: string): Record<string, JsonValue> {
  if (input === null || typeof input !== "object" || Array.isArray(input)) {
    throw new CodeModeError(
      "invalid_input",
      `${tool} takes one object argument, such as { "id": "note-1" }.`,
    );
  }
  return input;
}

function stringField(
  input: Record<string, JsonValue>,
  key: string,
  tool: string,
  required: boolean,
): string | undefined {
  const value = input[key];
  if (value === undefined || value === null) {
    if (required) throw new CodeModeError("invalid_input", `${tool} needs "${key}" (a string).`);
    return undefined;
  }
  if (typeof value !== "string") {
    throw new CodeModeError(
      "invalid_input",
      `${tool}: "${key}" must be a string, got ${JSON.stringify(value)}.`,
    );
  }
  return value;
}

function numberField(input: Record<string, JsonValue>, key: string, tool: string): number | undefined {
  const value = input[key];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== "number" || !Number.isInteger(value) || value < 1) {
    throw new CodeModeError(
      "invalid_input",
      `${tool}: "${key}" must be a positive integer, got ${JSON.stringify(value)}.`,
    );
  }
  return value;
}

function tagsField(input: Record<string, JsonValue>, tool: string): string[] | undefined {
  const value = input.tags;
  if (value === undefined || value === null) return undefined;
  if (!Array.isArray(value) || value.some((tag) => typeof tag !== "string")) {
    throw new CodeModeError("invalid_input", `${tool}: "tags" must be an array of strings.`);
  }
  return value as string[];
}

const noteSummarySchema = {
  type: "object",
  properties: {
    id: { type: "string" },
    title: { type: "string" },
    tags: { type: "array", items: { type: "string" } },
    updatedAt: { type: "string" },
  },
  required: ["id", "title", "tags", "updatedAt"],
};

function notesTools(store: NoteStore): PluginTool[] {
  return [
    {
      name: "notes_add",
      label: "Add note",
      description: "Add a note to the notebook and return it with its id.",
      parameters: {
        type: "object",
        properties: {
          title: { type: "string", description: "Short title" },
          body: { type: "string", description: "The note text" },
          tags: { type: "array", items: { type: "string" }, description: "Lower-case labels" },
        },
        required: ["title", "body"],
        additionalProperties: false,
      },
      execute(raw) {
        const input = objectInput(raw, "notes_add");
        return store.add({
          title: stringField(input, "title", "notes_add", true)!,
          body: stringField(input, "body", "notes_add", true)!,
          tags: tagsField(input, "notes_add"),
        });
      },
    },
    {
      name: "notes_list",
      label: "List notes",
      description: "List notes (id, title, tags), optionally only those with a tag.",
      parameters: {
        type: "object",
        properties: {
          tag: { type: "string" },
          limit: { type: "integer", minimum: 1, maximum: 500, default: 50 },
        },
        additionalProperties: false,
      },
      outputSchema: { type: "array", items: noteSummarySchema },
      execute(raw) {
        const input = objectInput(raw ?? {}, "notes_list");
        return store.list({
          tag: stringField(input, "tag", "notes_list", false),
          limit: numberField(input, "limit", "notes_list"),
        });
      },
    },
    {
      name: "notes_get",
      label: "Read note",
      description: "Read one note, body included, by its id.",
      parameters: {
        type: "object",
        properties: { id: { type: "string", description: 'A note id such as "note-1"' } },
        required: ["id"],
        additionalProperties: false,
      },
      execute(raw) {
        return store.get(stringField(objectInput(raw, "notes_get"), "id", "notes_get", true)!);
      },
    },
    {
      name: "notes_search",
      label: "Search notes",
      description: "Search notes by words in their title, body and tags; best matches first.",
      parameters: {
        type: "object",
        properties: {
          query: { type: "string" },
          limit: { type: "integer", minimum: 1, maximum: 100, default: 10 },
        },
        required: ["query"],
        additionalProperties: false,
      },
      execute(raw) {
        const input = objectInput(raw, "notes_search");
        return store.search(
          stringField(input, "query", "notes_search", true)!,
          numberField(input, "limit", "notes_search"),
        );
      },
    },
    {
      name: "notes_delete",
      label: "Delete note",
      description: "Delete a note by its id.",
      parameters: {
        type: "object",
        properties: { id: { type: "string" } },
        required: ["id"],
        additionalProperties: false,
      },
      execute(raw) {
        return store.remove(stringField(objectInput(raw, "notes_delete"), "id", "notes_delete", true)!);
      },
    },
  ];
}

function parseSeed(options: JsonValue): NoteSeed[] {
  if (
    options === null ||
    typeof options !== "object" ||
    Array.isArray(options) ||
    options.seed === undefined
  ) {
    return DEFAULT_SEED;
  }
  const seed = options.seed;
  const valid =
    Array.isArray(seed) &&
    seed.every(
      (note) =>
        note !== null &&
        typeof note === "object" &&
        !Array.isArray(note) &&
        typeof note.title === "string" &&
        typeof note.body === "string",
    );
  if (!valid) {
    throw new CodeModeError(
      "invalid_config",
      'The notes plugin option "seed" must be an array of { "title": string, "body": string, "tags"?: string[] }.',
    );
  }
  return seed as unknown as NoteSeed[];
}

/** The notebook's tools that change it; `readOnly` blocks them. */
const WRITING_TOOLS = new Set(["notes_add", "notes_delete"]);

/**
 * Builds the notes plugin: five tools and the `Notes` namespace over one in-process notebook. Option
 * `readOnly: true` adds a `before_tool_call` hook that blocks the notebook's writing tools.
 */
export const createPlugin: PluginFactory = ({ options }) =>
  createNotesPlugin(parseSeed(options ?? null), {
    readOnly:
      options !== null && typeof options === "object" && !Array.isArray(options) && options.readOnly === true,
  });

export function createNotesPlugin(
  seed: ReadonlyArray<NoteSeed> = DEFAULT_SEED,
  settings: { readOnly?: boolean } = {},
): CodecellPlugin & { store: NoteStore } {
  const store = new NoteStore(seed);
  return {
    id: NOTES_PLUGIN_ID,
    ...(settings.readOnly
      ? {
          hooks: {
            // Sees every tool call of the gateway; acts only on this plugin's own writing tools.
            before_tool_call: (event) =>
              event.owner === NOTES_PLUGIN_ID && WRITING_TOOLS.has(event.toolName)
                ? { block: true, reason: "the notebook is read-only (notes plugin option readOnly)" }
                : undefined,
          },
        }
      : {}),
    description: "A small notebook: add, list, read, search and delete notes.",
    store,
    tools: notesTools(store),
    namespaces: [
      {
        id: "notes",
        globalName: "Notes",
        description: "The notebook of the notes plugin.",
        requiredToolNames: ["notes_add", "notes_list", "notes_get", "notes_search", "notes_delete"],
        prompt:
          "Notes.list({tag?}), Notes.get(id), Notes.search(query, limit?), Notes.add({title, body, tags?}), Notes.remove(id).",
        createScope: () => ({
          list: createCodeModeNamespaceTool("notes_list", ([filter]) => filter ?? {}),
          get: createCodeModeNamespaceTool("notes_get", ([id]) => ({ id })),
          search: createCodeModeNamespaceTool("notes_search", ([query, limit]) =>
            limit === undefined ? { query } : { query, limit },
          ),
          add: createCodeModeNamespaceTool("notes_add", ([note]) => note ?? {}),
          remove: createCodeModeNamespaceTool("notes_delete", ([id]) => ({ id })),
        }),
      },
    ],
  };
}
