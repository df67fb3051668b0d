/**
 * Objects kept for the process's life so that their hidden classes (maps) are never freed.
 *
 * V8 frees the map of a class whose objects are all gone at a full garbage collection; the next object
 * gets a new map. The objects of one cell's nested-call path (a run's handle, an exec's ready queue)
 * are made per cell and let go when it ends, so a collection between cells freed their maps, and in the
 * next cell every inline cache that had seen them changed again. That threw away the optimized code
 * that checked the old maps, and it reset V8's count towards optimizing the functions that read them:
 * a function of 700-800 bytes of bytecode (the engine's segment driver, the run handle's message
 * handler) needs seven or eight uninterrupted rounds of its interrupt budget, so with a reset after
 * each cell it was never optimized at all while other cells ran in between. One object of each such
 * class, kept here, keeps its map (the same for every object of the class made the same way).
 */
const kept: unknown[] = [];

/** Keep `values` alive for the rest of the process (one object per hot short-lived class). */
export function keepShapes(...values: unknown[]): void {
  kept.push(...values);
}
