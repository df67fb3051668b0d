import { describe, expect, it } from "vitest";
import { looksLikeRunId, newRunId, RUN_ID_RANDOM_BYTES } from "../src/run-id.js";

describe("newRunId", () => {
  it("makes unguessable ids of 18 fresh random bytes each, across many refills of its pool", () => {
    // 2,000 ids take the pool of 227 ids round nine times: every id must still be new and random.
    const ids = Array.from({ length: 2000 }, () => newRunId());
    expect(new Set(ids).size).toBe(ids.length);
    for (const id of ids) {
      expect(looksLikeRunId(id)).toBe(true);
      const bytes = Buffer.from(id, "base64url");
      expect(bytes.length).toBe(RUN_ID_RANDOM_BYTES);
      // A byte handed out twice, or a pool not refilled, shows as zeroed bytes.
      expect(bytes.equals(Buffer.alloc(RUN_ID_RANDOM_BYTES))).toBe(false);
    }
    // Bytes spread over all values: the first bytes of 2,000 ids take well over 200 of the 256.
    expect(new Set(ids.map((id) => Buffer.from(id, "base64url")[0])).size).toBeGreaterThan(200);
  });
});
