import { CodeModeError } from "@codecell/contract";
import { deriveRecordKey, macOf, sameMac } from "./record-mac.js";

/**
 * Host records (an agent endpoint's transcripts, stored responses, leases) as a durable backend keeps
 * them: `<MAC>.<value>`, the MAC an HMAC-SHA256 over what the record is (a value or a lease), its key
 * (kind, owner and id, each encoded) and its value. A record changed in the store, or copied under
 * another key (another owner's, another kind's), no longer verifies and is refused.
 */
export class HostRecordSeal {
  readonly #key: Buffer;

  /** `secret`: the backend's (at least 32 bytes, checked by the backend); a key of its own is derived. */
  constructor(secret: Uint8Array) {
    this.#key = deriveRecordKey(secret, "codecell host records 1");
  }

  #mac(what: "value" | "lease", key: string, value: string): Buffer {
    return macOf(this.#key, [`codecell-host-${what}-1`, key, value]);
  }

  seal(what: "value" | "lease", key: string, value: string): string {
    return `${this.#mac(what, key, value).toString("base64url")}.${value}`;
  }

  /** The value of a sealed record, or an integrity error that names the record's kind and what to do. */
  open(what: "value" | "lease", key: string, stored: string): string {
    const dot = stored.indexOf(".");
    const value = dot < 0 ? "" : stored.slice(dot + 1);
    const given = Buffer.from(stored.slice(0, Math.max(0, dot)), "base64url");
    if (dot < 0 || !sameMac(this.#mac(what, key, value), given)) {
      throw hostRecordTampered(key);
    }
    return value;
  }
}

/** The refusal of a host record that failed its check; says which kind of record, never its content. */
export function hostRecordTampered(key: string): CodeModeError {
  const kind = decodeURIComponent(key.slice(0, Math.max(0, key.indexOf("/"))));
  return new CodeModeError(
    "snapshot_restore_failed",
    `a stored ${kind || "host"} record was refused: it failed the snapshot store's integrity check (it was changed or copied in the store outside codecell, written before records were signed, or written by a process with a different secret). It is not used; start the conversation again. The operator should check who can write the store and that every replica has the same snapshotStore.secret.`,
  );
}
