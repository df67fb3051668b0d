import { randomUUID } from "node:crypto";
import type { JsonValue } from "@codecell/contract";
import type { ToolCallRequest } from "../sessions/session-host.js";

/** One nested call handed out of its run until the client answers whether it may run. */
export type DeferredApproval = {
  /** The key of its input request in the client's input-required result. */
  id: string;
  runId: string;
  callId: string;
  /** Whose run it is (the run context's session id): only the same owner may answer it. */
  owner: string;
  message: string;
  request: ToolCallRequest;
  input: JsonValue;
};

/** How a 2026-07-28 client answered one approval, read from its retry's `inputResponses`. */
export type ApprovalAnswer = "approved" | "declined" | "unanswered";

/** At most this many approvals wait for answers in one process; the oldest are dropped past it. */
const MAX_DEFERRED = 10_000;

/**
 * Approvals left to a client of MCP 2026-07-28, which a server cannot ask with a request of its own.
 * A nested call that needs approval is handed out of its run (the run suspends as at any slow call)
 * and kept here; exec or wait answers with an input-required result naming these approvals, and the
 * client's retry brings the answers: an approved call runs then, a declined one fails in the cell, and
 * the run resumes from its snapshot. Kept in this process: a retry must reach the gateway that asked.
 */
export class DeferredApprovals {
  readonly #byRun = new Map<string, DeferredApproval[]>();
  #count = 0;

  add(approval: Omit<DeferredApproval, "id">): void {
    const list = this.#byRun.get(approval.runId) ?? [];
    list.push({ ...approval, id: `approve-${randomUUID()}` });
    this.#byRun.set(approval.runId, list);
    if (++this.#count > MAX_DEFERRED) this.#dropOldest();
  }

  /** The approvals of `runId` that `owner` may answer, still waiting. */
  pending(runId: string, owner: string): DeferredApproval[] {
    return (this.#byRun.get(runId) ?? []).filter((approval) => approval.owner === owner);
  }

  /** Takes one approval out once it has been answered. */
  remove(approval: DeferredApproval): void {
    const list = this.#byRun.get(approval.runId);
    const index = list?.indexOf(approval) ?? -1;
    if (!list || index < 0) return;
    list.splice(index, 1);
    this.#count--;
    if (list.length === 0) this.#byRun.delete(approval.runId);
  }

  #dropOldest(): void {
    const [runId, list] = this.#byRun.entries().next().value as [string, DeferredApproval[]];
    this.#byRun.delete(runId);
    this.#count -= list.length;
  }
}
