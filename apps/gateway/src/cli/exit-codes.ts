/** The `codecell` command's exit codes (documented in the README). */
export const EXIT = {
  ok: 0,
  /** An unexpected failure: a bug or an environment problem; the message says which. */
  internal: 1,
  /** Wrong command line: unknown command or flag, missing argument. */
  usage: 2,
  /** The config file has problems (`check` lists them all), or leaves a cell nothing to call. */
  config: 3,
  /** `exec`: the cell ran and its result is `failed`. */
  execFailed: 4,
  /** `exec --no-wait`: the cell is still `waiting`. */
  execWaiting: 5,
  /** `serve --http`: the port could not be bound (in use, or not permitted); nothing was started. */
  listen: 6,
} as const;
