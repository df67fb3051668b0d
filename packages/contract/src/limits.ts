// Zod-free and import-free, so the errors entry can export it to sandbox workers (their first VM is
// made for the default memory limit).

/**
 * Defaults and runtime ranges of the numeric fields. A value outside its range is clamped to it (and
 * reported in `clamped`); a value that is not an integer is an error.
 */
export const CODE_MODE_LIMITS = {
  timeoutMs: { default: 10_000, min: 100, max: 60_000 },
  memoryLimitBytes: { default: 67_108_864, min: 1_048_576, max: 1_073_741_824 },
  maxOutputBytes: { default: 65_536, min: 1_024, max: 10_485_760 },
  maxSnapshotBytes: { default: 10_485_760, min: 1_024, max: 268_435_456 },
  maxPendingToolCalls: { default: 16, min: 1, max: 128 },
  // Calls past maxPendingToolCalls wait their turn in order (a Promise.all over 60 items is what a
  // model writes first); only a queue longer than this fails. 0 keeps failing at maxPendingToolCalls.
  maxQueuedToolCalls: { default: 1_000, min: 0, max: 100_000 },
  // A cell is a short program; data belongs in tool calls. 256 KiB is far above any honest cell and
  // keeps a pasted multi-megabyte blob from costing a worker seconds of parsing.
  maxCodeBytes: { default: 262_144, min: 1_024, max: 16_777_216 },
  snapshotTtlSeconds: { default: 900, min: 1, max: 86_400 },
  maxSearchLimit: { default: 50, min: 1, max: 50 },
  // How long the opt-in type check of one cell may take (typecheck "warn" or "strict"), the compiler's
  // first load included when the cell has to wait for it. Generous: a first check on a loaded machine
  // takes seconds; a check that does not finish in time runs the cell unchecked ("warn") or refuses it
  // ("strict").
  typecheckTimeoutMs: { default: 15_000, min: 1, max: 120_000 },
  // How long one cell's check may keep the loaded compiler busy (every session shares one checker, so
  // a cell whose types make the compiler explode is stopped here, well before typecheckTimeoutMs, and
  // the checks of others go on). Honest cells take milliseconds; applied as at most typecheckTimeoutMs.
  typecheckBudgetMs: { default: 5_000, min: 1, max: 120_000 },
  // Values a cell keeps with store(key, value) for later cells of the same conversation. They live this
  // long after the conversation's last store (default: an agent endpoint transcript's lifetime).
  storeTtlSeconds: { default: 3_600, min: 1, max: 86_400 },
  // The JSON bytes of one stored value, of all values of one conversation, and of all conversations of
  // one principal. A conversation's values are one record of the snapshot store, read whole by a load,
  // so its cap stays well under maxSnapshotBytes.
  maxStoreValueBytes: { default: 1_048_576, min: 1, max: 67_108_864 },
  maxStoreBytes: { default: 4_194_304, min: 1_024, max: 134_217_728 },
  maxStorePrincipalBytes: { default: 16_777_216, min: 1_024, max: 1_073_741_824 },
  // The base64 characters of one image(...) output item, when tools.codeMode.images is on. It counts
  // against maxOutputBytes too, which an operator who turns images on raises to fit.
  maxImageBytes: { default: 1_048_576, min: 1_024, max: 10_485_760 },
  // Its upper bound is the resolved maxSearchLimit, applied after that field is resolved.
  searchDefaultLimit: { default: 8, min: 1, max: 50 },
} as const;
