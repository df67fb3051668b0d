/** A signal that aborts when either of two does, and the way to unlink it once its call has ended. */
export type LinkedSignal = { readonly signal: AbortSignal; release(): void };

const nothingToRelease = () => {};

/**
 * The signal of one call that `outer` (long-lived: a session's) and `inner` (the call's own) may each
 * cancel, with the reason of whichever aborts first. `release()` unlinks it from both, so a long-lived
 * signal keeps nothing of calls that have ended. (`AbortSignal.any` would link them too, but on Node 20
 * every composite stays among the long-lived signal's dependants for that signal's life, even after
 * collection, so a long session's memory would grow with every call it ever made; nodejs/node#55351.)
 */
export function linkSignals(outer: AbortSignal, inner: AbortSignal | undefined): LinkedSignal {
  if (inner === undefined) return { signal: outer, release: nothingToRelease };
  if (inner.aborted) return { signal: AbortSignal.abort(inner.reason), release: nothingToRelease };
  if (outer.aborted) return { signal: AbortSignal.abort(outer.reason), release: nothingToRelease };
  const controller = new AbortController();
  const fromInner = () => {
    release();
    controller.abort(inner.reason);
  };
  const fromOuter = () => {
    release();
    controller.abort(outer.reason);
  };
  function release() {
    inner?.removeEventListener("abort", fromInner);
    outer.removeEventListener("abort", fromOuter);
  }
  inner.addEventListener("abort", fromInner, { once: true });
  outer.addEventListener("abort", fromOuter, { once: true });
  return { signal: controller.signal, release };
}
