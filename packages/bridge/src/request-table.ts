/**
 * Requests in flight by id, in the order they were added. The common case of a cell is one call at a
 * time: a `Map` that empties and refills reallocates its hash table on every cycle (V8 shrinks it when
 * the last entry goes: about 150 bytes and half a microsecond per call on this path). A lone entry is
 * held in two fields instead; a `Map` takes over when a second one comes and is dropped when it empties.
 */
export class RequestTable<V> {
  #soleId: string | undefined = undefined;
  #sole: V | undefined = undefined;
  /** Every entry, in order, from the moment a second one came until none is left (the sole fields are empty then). */
  #many: Map<string, V> | null = null;

  get size(): number {
    if (this.#many !== null) return this.#many.size;
    return this.#soleId === undefined ? 0 : 1;
  }

  get(id: string): V | undefined {
    if (this.#many !== null) return this.#many.get(id);
    return id === this.#soleId ? this.#sole : undefined;
  }

  has(id: string): boolean {
    if (this.#many !== null) return this.#many.has(id);
    return id === this.#soleId;
  }

  /** Adds an entry at the end, or replaces the value of an id already here (keeping its place). */
  set(id: string, value: V): void {
    if (this.#many !== null) {
      this.#many.set(id, value);
      return;
    }
    if (this.#soleId === undefined || this.#soleId === id) {
      this.#soleId = id;
      this.#sole = value;
      return;
    }
    this.#many = new Map<string, V>([
      [this.#soleId, this.#sole as V],
      [id, value],
    ]);
    this.#soleId = undefined;
    this.#sole = undefined;
  }

  delete(id: string): boolean {
    const many = this.#many;
    if (many !== null) {
      // The last one out drops the table (deleting it from the Map would shrink, allocate, first).
      if (many.size === 1) {
        if (!many.has(id)) return false;
        this.#many = null;
        return true;
      }
      return many.delete(id);
    }
    if (id !== this.#soleId) return false;
    this.#soleId = undefined;
    this.#sole = undefined;
    return true;
  }

  clear(): void {
    this.#many = null;
    this.#soleId = undefined;
    this.#sole = undefined;
  }

  /** The values in order, as a new array. */
  values(): V[] {
    if (this.#many !== null) return [...this.#many.values()];
    return this.#soleId === undefined ? [] : [this.#sole as V];
  }

  /** The entries in order, as a new array (safe to change the table while going through it). */
  entries(): Array<[string, V]> {
    if (this.#many !== null) return [...this.#many];
    return this.#soleId === undefined ? [] : [[this.#soleId, this.#sole as V]];
  }
}
