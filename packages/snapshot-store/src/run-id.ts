import { randomFillSync } from "node:crypto";

/** Random bytes in a run id: 144 bits, so ids cannot be guessed or enumerated. */
export const RUN_ID_RANDOM_BYTES = 18;

const RUN_ID_PATTERN = /^[A-Za-z0-9_-]{24}$/;

/**
 * Bytes from the system CSPRNG taken a pool at a time, each handed out once and zeroed: one
 * `randomBytes` call per run id is a system call on the main thread for every cell, a pool of 227 ids
 * one such call.
 */
const POOL_BYTES = RUN_ID_RANDOM_BYTES * 227;
const pool = Buffer.alloc(POOL_BYTES);
let poolUsed = POOL_BYTES;

/** A fresh unguessable run id: base64url of 18 bytes from the system CSPRNG (24 characters). */
export function newRunId(): string {
  if (poolUsed + RUN_ID_RANDOM_BYTES > POOL_BYTES) {
    randomFillSync(pool);
    poolUsed = 0;
  }
  const bytes = pool.subarray(poolUsed, poolUsed + RUN_ID_RANDOM_BYTES);
  poolUsed += RUN_ID_RANDOM_BYTES;
  const id = bytes.toString("base64url");
  bytes.fill(0);
  return id;
}

/** True when the text has the shape of a run id; lets the store refuse junk before a lookup. */
export function looksLikeRunId(text: string): boolean {
  return RUN_ID_PATTERN.test(text);
}
