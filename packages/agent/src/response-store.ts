import type { JsonValue } from "@codecell/contract";
import type { SnapshotStore } from "@codecell/snapshot-store";
import type { TurnMessage } from "./turn.js";

/**
 * A response the Responses front answered with `store` on: the object as the client got it, and the
 * visible conversation it ends (the loop's messages, this answer included), from which a request with
 * `previous_response_id` goes on.
 */
export type StoredResponse = {
  response: Record<string, unknown>;
  messages: TurnMessage[];
  /** The instructions the conversation was answered with, so a follow-up that repeats them adds nothing. */
  instructions: string | null;
};

/** Where stored responses live, scoped by principal: another principal's id finds nothing. */
export interface ResponseStore {
  get(principal: string, id: string): Promise<StoredResponse | null>;
  put(principal: string, id: string, stored: StoredResponse, ttlSeconds: number): Promise<void>;
  delete(principal: string, id: string): Promise<boolean>;
}

const KIND = "agent-response";

/** Stored responses as host records of the snapshot store: memory, SQLite or Redis, as configured. */
export function snapshotStoreResponses(store: SnapshotStore | Promise<SnapshotStore>): ResponseStore {
  const opened = Promise.resolve(store);
  return {
    async get(principal, id) {
      return (await opened).getHostRecord<StoredResponse>({ kind: KIND, owner: principal, id });
    },
    async put(principal, id, stored, ttlSeconds) {
      await (await opened).putHostRecord(
        { kind: KIND, owner: principal, id },
        stored as unknown as JsonValue,
        ttlSeconds,
      );
    },
    async delete(principal, id) {
      return (await opened).deleteHostRecord({ kind: KIND, owner: principal, id });
    },
  };
}
