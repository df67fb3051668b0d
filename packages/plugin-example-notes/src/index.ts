export { type Note, NoteStore, type NoteSummary } from "./note-store.js";
export { createNotesPlugin, createPlugin, NOTES_PLUGIN_ID } from "./notes-plugin.js";
export type {
  BeforeToolCallDecision,
  BeforeToolCallEvent,
  CodecellPlugin,
  PluginFactory,
  PluginHooks,
  PluginSetup,
  PluginTool,
  PluginToolContext,
} from "./plugin-types.js";
