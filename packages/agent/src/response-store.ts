import type { SnapshotStore } from "@codecell/snapshot-store";
import { hostRecords, type PrincipalRecords } from "./conversation-store.js";
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
export type ResponseStore = PrincipalRecords<StoredResponse>;

/** Stored responses as host records of the snapshot store: memory, SQLite or Redis, as configured. */
export function snapshotStoreResponses(store: SnapshotStore | Promise<SnapshotStore>): ResponseStore {
  return hostRecords<StoredResponse>(store, "agent-response");
}
