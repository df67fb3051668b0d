import { CodeModeError, type CodeModeOutput, type JsonValue } from "@codecell/contract";
import type { SnapshotStore } from "@codecell/snapshot-store";
import { AgentError } from "./agent-error.js";
import type { TurnMessage, TurnToolCall } from "./turn.js";

/** A client tool call the loop handed out and waits for: the id the client sees and the run's call. */
export type HandedOutCall = {
  /** The tool call id in the assistant message the client got. */
  visibleId: string;
  /** The nested call's id inside the code-mode run. */
  callId: string;
  name: string;
  arguments: string;
};

/**
 * What the endpoint keeps of one conversation between requests: the hidden transcript (what the
 * upstream model has seen, its exec and wait calls and their results included), how much of the
 * visible conversation it covers, and, while client tools are out, the suspended run they belong to.
 */
export type ConversationRecord = {
  /** Stable over the conversation: the code-mode runs' session and agent run are made from it. */
  threadId: string;
  /** Visible messages the transcript covers (the client's, then the endpoint's last answer). */
  visibleCount: number;
  /** `conversationHash` of those visible messages: a client that rewrote them starts afresh. */
  visibleHash: string;
  /** Every message the upstream model has been sent or has answered, in order. */
  upstream: TurnMessage[];
  /** Tool calls of the last upstream assistant message that have no result yet (the first may be suspended). */
  unanswered: TurnToolCall[];
  /**
   * Present while client tool calls are out: the run waiting for their results, and what its cell
   * wrote before it handed them out (the model reads it with the cell's result, after the resume).
   */
  pending?: { runId: string; calls: HandedOutCall[]; resumes: number; output?: CodeModeOutput[] };
  /**
   * The client's messages that came after its tool results while the run still waits on others (a
   * Messages user turn of tool results and text): they go to the model once its calls are answered.
   */
  deferred?: TurnMessage[];
};

/** Where conversation records live. Scoped by principal: another principal's key finds nothing. */
export interface ConversationStore {
  get(principal: string, key: string): Promise<ConversationRecord | null>;
  /**
   * `inUse`: a run waits on this record (client tools are out), so the store never evicts it to make
   * room for other records; a finished one may be evicted, its principal's oldest first.
   */
  put(
    principal: string,
    key: string,
    record: ConversationRecord,
    ttlSeconds: number,
    options?: { inUse?: boolean },
  ): Promise<void>;
  /** Removes a record (one the conversation has moved on from). */
  delete(principal: string, key: string): Promise<boolean>;
  /**
   * Marks the conversation under `key` taken by `holder` for `ttlSeconds`, or renews the mark for its
   * holder; false while another holder has it. The record itself stays as it is. Atomic across every
   * process that shares the store; a mark not renewed runs out (its process died).
   */
  take(principal: string, key: string, holder: string, ttlSeconds: number): Promise<boolean>;
  /** Ends `holder`'s mark (a mark that ran out or passed to another holder is left alone). */
  release(principal: string, key: string, holder: string): Promise<void>;
}

/** The mark of a conversation being answered: a lease beside its record, under the same id. */
const TAKEN_KIND = "agent-conversation-taken";

/** Records of one kind, scoped by principal (the owner), in the snapshot store's host records. */
export type PrincipalRecords<T> = {
  get(principal: string, key: string): Promise<T | null>;
  put(
    principal: string,
    key: string,
    record: T,
    ttlSeconds: number,
    options?: { inUse?: boolean },
  ): Promise<void>;
  /** True for the one caller that removed the record. */
  delete(principal: string, key: string): Promise<boolean>;
};

/** Host records of `kind` in a snapshot store, owned by the principal that put them. */
export function hostRecords<T>(
  store: SnapshotStore | Promise<SnapshotStore>,
  kind: string,
): PrincipalRecords<T> {
  const opened = Promise.resolve(store);
  return {
    async get(principal, key) {
      try {
        return await (await opened).getHostRecord<T>({ kind, owner: principal, id: key });
      } catch (error) {
        throw refusedRecord(error);
      }
    },
    async put(principal, key, record, ttlSeconds, options) {
      await (await opened).putHostRecord(
        { kind, owner: principal, id: key },
        record as unknown as JsonValue,
        ttlSeconds,
        options,
      );
    },
    async delete(principal, key) {
      return (await opened).deleteHostRecord({ kind, owner: principal, id: key });
    },
  };
}

/**
 * Conversation records as host records of the snapshot store the engine uses: memory, SQLite or Redis
 * as configured, so replicas that share a Redis store share conversations as they share runs.
 */
export function snapshotStoreConversations(store: SnapshotStore | Promise<SnapshotStore>): ConversationStore {
  const opened = Promise.resolve(store);
  return {
    ...hostRecords<ConversationRecord>(opened, "agent-conversation"),
    async take(principal, key, holder, ttlSeconds) {
      return (await opened).leaseHostRecord(
        { kind: TAKEN_KIND, owner: principal, id: key },
        holder,
        ttlSeconds,
      );
    },
    async release(principal, key, holder) {
      await (await opened).releaseHostRecord({ kind: TAKEN_KIND, owner: principal, id: key }, holder);
    },
  };
}

/**
 * A stored record that failed the store's integrity check is the server's fault, not the client's: the
 * client hears that its conversation cannot go on and what to do, nothing of the store (the store's
 * own account, which kind of record and what the operator should check, stays the error's cause).
 */
function refusedRecord(error: unknown): unknown {
  if (!CodeModeError.is(error) || error.code !== "snapshot_restore_failed") return error;
  return new AgentError(
    "internal",
    "The gateway could not use what it had kept of this conversation (its stored copy failed an integrity check), so the request was not answered. Your request is not at fault: start a new conversation. If it keeps happening, tell the gateway's operator.",
    { cause: error },
  );
}
