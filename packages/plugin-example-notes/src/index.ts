export { type Note, NoteStore, type NoteSummary } from "./note-store.js";
export { createNotesPlugin, createPlugin, NOTES_PLUGIN_ID } from "./notes-plugin.js";
export type {
  CodecellPlugin,
  PluginFactory,
  PluginSetup,
  PluginTool,
  PluginToolContext,
} from "./plugin-types.js";
