import { randomBytes } from "node:crypto";

/** Random bytes in a run id: 144 bits, so ids cannot be guessed or enumerated. */
export const RUN_ID_RANDOM_BYTES = 18;

const RUN_ID_PATTERN = /^[A-Za-z0-9_-]{24}$/;

/** A fresh unguessable run id: base64url of 18 bytes from the system CSPRNG (24 characters). */
export function newRunId(): string {
  return randomBytes(RUN_ID_RANDOM_BYTES).toString("base64url");
}

/** True when the text has the shape of a run id; lets the store refuse junk before a lookup. */
export function looksLikeRunId(text: string): boolean {
  return RUN_ID_PATTERN.test(text);
}
