// @ts-check
import { takesToolCallSlot } from "@codecell/bridge";
import { isCodeModeErrorCode } from "@codecell/contract/errors";
import { QuickJS } from "quickjs-wasi";
import { HOST_FUNCTION_NAME, hostCallback } from "./host-calls.js";
import { post } from "./outbox.js";

/**
 * A run's snapshot: suspending a run into one (its VM's image and the bridge's state, sealed by the
 * snapshot codec) and restoring a run from one.
 * @typedef {import("./guest-run.js").GuestRun} GuestRun
 */

/**
 * The snapshot codec (zlib and crypto) is loaded on first use, so a worker's start-up does not pay
 * for it; a run that goes idle starts loading it in the background, since a suspend may follow.
 * @type {Promise<typeof import("./snapshot-codec.js")> | null}
 */
let snapshotCodec = null;
export function loadSnapshotCodec() {
  snapshotCodec ??= import("./snapshot-codec.js");
  return snapshotCodec;
}

/**
 * Make `run` the run a snapshot holds: a VM restored from its image, and the bridge's state (requests
 * pending, output charged, codes issued) as it was at the suspend.
 * @param {GuestRun} run @param {Uint8Array} snapshot
 */
export async function restoreRun(run, snapshot) {
  const { decodeSnapshot, SnapshotCodecError } = await loadSnapshotCodec();
  let decoded;
  /** @type {{ controlToken: number, nextRequestNumber: number, outputBytes: number, pending: import("@codecell/bridge").HostRequest[], issuedCodes: string[] }} */
  let saved;
  try {
    decoded = decodeSnapshot(
      snapshot,
      run.snapshotSecret,
      run.limits.memoryLimitBytes * 2 + 64 * 1024 * 1024,
    );
    saved = /** @type {typeof saved} */ (decoded.bridgeState);
    if (
      typeof saved !== "object" ||
      saved === null ||
      !Number.isInteger(saved.controlToken) ||
      !Number.isInteger(saved.nextRequestNumber) ||
      !Number.isInteger(saved.outputBytes) ||
      !Array.isArray(saved.pending) ||
      !Array.isArray(saved.issuedCodes)
    ) {
      throw new SnapshotCodecError("the snapshot's bridge state is malformed");
    }
    const vm = await QuickJS.restore(QuickJS.deserializeSnapshot(decoded.vmSnapshot), run.vmOptions());
    run.vm = vm;
    if (run.finished) return run.release();
    vm.registerHostCallback(HOST_FUNCTION_NAME, hostCallback(run));
    run.control = vm.importHandle(saved.controlToken);
    run.controlToken = saved.controlToken;
  } catch (error) {
    const reason =
      error instanceof SnapshotCodecError
        ? error.message
        : `QuickJS could not restore it (${String(/** @type {Error} */ (error)?.message ?? error)})`;
    run.outcome = {
      type: "failed",
      code: "snapshot_restore_failed",
      message: `The snapshot cannot be restored: ${reason}.`,
      error: null,
    };
    return run.report();
  }
  run.nextRequestNumber = saved.nextRequestNumber;
  run.outputBytes = saved.outputBytes;
  const returned = /** @type {{ returned?: { value: unknown } }} */ (saved).returned;
  if (returned !== undefined) run.outcome = { type: "completed", value: returned.value };
  run.announcePending = true;
  for (const request of saved.pending) {
    run.pending.set(request.requestId, request);
    if (takesToolCallSlot(request)) run.pendingToolCalls += 1;
  }
  for (const code of saved.issuedCodes) if (isCodeModeErrorCode(code)) run.issuedCodes.add(code);
  run.report();
}

/**
 * Suspend `run` (idle, with host calls pending) into a snapshot for the host, and end it here; a run
 * that cannot be suspended stays live and the host is told why.
 * @param {GuestRun} run
 */
export async function suspendRun(run) {
  const { encodeSnapshot } = await loadSnapshotCodec();
  const vm = run.vm;
  const failed = run.outcome !== null && run.outcome.type === "failed";
  if (vm === null || failed || run.forced !== null || run.pending.size === 0) {
    post({
      type: "suspend-failed",
      runId: run.runId,
      code: "internal_error",
      message: "The run can only be suspended while it is idle with host calls pending.",
    });
    return;
  }
  run.dropHeldStrings();
  const image = QuickJS.serializeSnapshot(vm.snapshot());
  const bridgeState = {
    controlToken: run.controlToken,
    nextRequestNumber: run.nextRequestNumber,
    outputBytes: run.outputBytes,
    pending: [...run.pending.values()],
    issuedCodes: [...run.issuedCodes],
    // The cell already returned this value; it is reported once the pending calls settle.
    ...(run.outcome?.type === "completed" ? { returned: { value: run.outcome.value } } : {}),
  };
  const bytes = encodeSnapshot(image, bridgeState, run.snapshotSecret);
  if (bytes.byteLength > run.limits.maxSnapshotBytes) {
    post({
      type: "suspend-failed",
      runId: run.runId,
      code: "snapshot_limit_exceeded",
      message: `The suspended VM is ${bytes.byteLength} bytes compressed, over maxSnapshotBytes ${run.limits.maxSnapshotBytes}. Keep less data alive while tool calls are pending; the run stays live.`,
    });
    return;
  }
  post({ type: "suspended", runId: run.runId, snapshot: bytes, pending: bridgeState.pending }, [
    /** @type {ArrayBuffer} */ (bytes.buffer),
  ]);
  run.release();
}
