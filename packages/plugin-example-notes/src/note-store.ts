import { CodeModeError, closestMatches } from "@codecell/contract";

export type Note = {
  id: string;
  title: string;
  body: string;
  tags: string[];
  createdAt: string;
  updatedAt: string;
};
export type NoteSummary = Pick<Note, "id" | "title" | "tags" | "updatedAt">;

const MAX_NOTES = 10_000;
const MAX_BODY_CHARS = 100_000;

function summary(note: Note): NoteSummary {
  return { id: note.id, title: note.title, tags: note.tags, updatedAt: note.updatedAt };
}

function words(text: string): string[] {
  return text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [];
}

/** An in-process notebook: small, bounded, and predictable enough to test against. */
export class NoteStore {
  readonly #notes = new Map<string, Note>();
  #next = 1;
  readonly #clock: () => Date;

  constructor(
    seed: ReadonlyArray<{ title: string; body: string; tags?: string[] }> = [],
    clock = () => new Date(),
  ) {
    this.#clock = clock;
    for (const note of seed) this.add(note);
  }

  get size(): number {
    return this.#notes.size;
  }

  add(input: { title: string; body: string; tags?: string[] }): Note {
    if (this.#notes.size >= MAX_NOTES) {
      throw new CodeModeError(
        "invalid_input",
        `The notebook is full (${MAX_NOTES} notes); delete some first.`,
      );
    }
    const title = input.title.trim();
    if (title === "") throw new CodeModeError("invalid_input", "A note needs a non-empty title.");
    if (input.body.length > MAX_BODY_CHARS) {
      throw new CodeModeError(
        "invalid_input",
        `A note body is limited to ${MAX_BODY_CHARS} characters; this one has ${input.body.length}. Split it.`,
      );
    }
    const now = this.#clock().toISOString();
    const note: Note = {
      id: `note-${this.#next++}`,
      title,
      body: input.body,
      tags: [...new Set((input.tags ?? []).map((tag) => tag.trim().toLowerCase()).filter(Boolean))],
      createdAt: now,
      updatedAt: now,
    };
    this.#notes.set(note.id, note);
    return note;
  }

  get(id: string): Note {
    const note = this.#notes.get(id);
    if (note) return note;
    const suggestions = closestMatches(id, this.#notes.keys());
    const hint = suggestions.length ? ` Did you mean ${suggestions.map((s) => `"${s}"`).join(" or ")}?` : "";
    throw new CodeModeError(
      "invalid_input",
      `There is no note "${id}".${hint} List ids with notes_list (Notes.list()).`,
      { id },
    );
  }

  remove(id: string): { deleted: string } {
    this.get(id);
    this.#notes.delete(id);
    return { deleted: id };
  }

  list(options: { tag?: string; limit?: number } = {}): NoteSummary[] {
    const tag = options.tag?.trim().toLowerCase();
    const limit = Math.max(1, Math.min(options.limit ?? 50, 500));
    const all = [...this.#notes.values()].filter((note) => !tag || note.tags.includes(tag));
    return all.slice(0, limit).map(summary);
  }

  /** Notes ranked by how many query words they contain (title words count double). */
  search(query: string, limit = 10): Array<NoteSummary & { score: number }> {
    const terms = [...new Set(words(query))];
    if (terms.length === 0) return [];
    const ranked: Array<NoteSummary & { score: number }> = [];
    for (const note of this.#notes.values()) {
      const title = new Set(words(note.title));
      const body = new Set([...words(note.body), ...note.tags]);
      let score = 0;
      for (const term of terms) score += (title.has(term) ? 2 : 0) + (body.has(term) ? 1 : 0);
      if (score > 0) ranked.push({ ...summary(note), score });
    }
    ranked.sort((a, b) => b.score - a.score || a.id.localeCompare(b.id, "en"));
    return ranked.slice(0, Math.max(1, Math.min(limit, 100)));
  }
}
