/** The cell languages code mode knows. */
export const CODE_MODE_LANGUAGES = ["javascript", "typescript"] as const;
export type CodeModeLanguage = (typeof CODE_MODE_LANGUAGES)[number];
