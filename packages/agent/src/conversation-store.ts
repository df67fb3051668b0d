import type { JsonValue } from "@codecell/contract";
import type { SnapshotStore } from "@codecell/snapshot-store";
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
  /** Present while client tool calls are out: the run waiting for their results. */
  pending?: { runId: string; calls: HandedOutCall[]; resumes: number };
};

/** Where conversation records live. Scoped by principal: another principal's key finds nothing. */
export interface ConversationStore {
  get(principal: string, key: string): Promise<ConversationRecord | null>;
  put(principal: string, key: string, record: ConversationRecord, ttlSeconds: number): Promise<void>;
  /** True for the one caller that removed the record: get then delete takes a record exactly once. */
  delete(principal: string, key: string): Promise<boolean>;
}

const KIND = "agent-conversation";

/**
 * Conversation records as host records of the snapshot store the engine uses: memory, SQLite or Redis
 * as configured, so replicas that share a Redis store share conversations as they share runs.
 */
export function snapshotStoreConversations(store: SnapshotStore | Promise<SnapshotStore>): ConversationStore {
  const opened = Promise.resolve(store);
  return {
    async get(principal, key) {
      return (await opened).getHostRecord<ConversationRecord>({ kind: KIND, owner: principal, id: key });
    },
    async put(principal, key, record, ttlSeconds) {
      await (await opened).putHostRecord(
        { kind: KIND, owner: principal, id: key },
        record as unknown as JsonValue,
        ttlSeconds,
      );
    },
    async delete(principal, key) {
      return (await opened).deleteHostRecord({ kind: KIND, owner: principal, id: key });
    },
  };
}
