import { createHash, createHmac } from "node:crypto";
import { brotliCompressSync } from "node:zlib";
import { describe, expect, it } from "vitest";
import { decodeSnapshot, encodeSnapshot } from "../src/worker/snapshot-codec.js";

const PAGE = 4096;
const MAX = 64 * 1024 * 1024;

/** An image shaped like a VM's: mostly zero pages, some data, a short last page. */
function image(length: number): Uint8Array {
  const bytes = new Uint8Array(length);
  for (let index = 0; index < length; index++) {
    const page = Math.floor(index / PAGE);
    if (page % 5 === 0 || page === Math.floor((length - 1) / PAGE)) bytes[index] = (index * 7 + page) & 0xff;
  }
  // A page whose only non-zero byte is its last one, and one whose only one is its first.
  if (length > 3 * PAGE) {
    bytes[2 * PAGE - 1] = 1;
    bytes[3 * PAGE] = 1;
  }
  return bytes;
}

/** Envelope bytes 40..end are signed; rebuild a header around a body, as a forger without a secret can. */
function envelope(
  version: number,
  state: unknown,
  body: Uint8Array,
  secret: string | null = null,
): Uint8Array {
  const stateBytes = Buffer.from(JSON.stringify(state), "utf8");
  const out = Buffer.alloc(44 + stateBytes.length + body.length);
  out.writeUInt32LE(0x4e534343, 0);
  out.writeUInt8(version, 4);
  out.writeUInt32LE(stateBytes.length, 40);
  stateBytes.copy(out, 44);
  out.set(body, 44 + stateBytes.length);
  const signed = out.subarray(40);
  const digest =
    secret === null
      ? createHash("sha256").update(signed).digest()
      : createHmac("sha256", secret).update(signed).digest();
  digest.copy(out, 8);
  return new Uint8Array(out);
}

function pagesBody(length: number, map: Uint8Array, packed: Uint8Array): Uint8Array {
  const head = Buffer.alloc(4);
  head.writeUInt32LE(length, 0);
  return Buffer.concat([head, map, brotliCompressSync(packed)]);
}

describe("snapshot codec", () => {
  it.each([
    { name: "a VM-like image with a short last page", length: 50 * PAGE + 123 },
    { name: "an image of whole pages", length: 8 * PAGE },
    { name: "an image shorter than a page", length: 1000 },
    { name: "an all-zero image", length: 3 * PAGE, zero: true },
    { name: "an empty image", length: 0 },
  ])("round-trips $name", ({ length, zero }) => {
    const original = zero ? new Uint8Array(length) : image(length);
    const state = { controlToken: 3, pending: [{ requestId: "r1", kind: "yield" }] };
    for (const secret of [null, "s3cret"]) {
      const decoded = decodeSnapshot(encodeSnapshot(original, state, secret), secret, MAX);
      expect(Buffer.from(decoded.vmSnapshot).equals(Buffer.from(original))).toBe(true);
      expect(decoded.bridgeState).toEqual(state);
    }
  });

  it("leaves zero pages out of what it compresses", () => {
    const mostlyZero = new Uint8Array(256 * PAGE);
    for (let page = 0; page < 256; page += 16) mostlyZero.fill(0x5a, page * PAGE, page * PAGE + 100);
    const encoded = encodeSnapshot(mostlyZero, {}, null);
    // 16 pages of data plus a 32-byte page map; the image is 1 MiB.
    expect(encoded.byteLength).toBeLessThan(1024);
  });

  it.each([1, 2])("refuses a version %i envelope as an older codecell's, before reading it", (version) => {
    const old = envelope(version, { controlToken: 1 }, brotliCompressSync(image(2 * PAGE)));
    expect(() => decodeSnapshot(old, null, MAX)).toThrow(
      `the run was suspended by an older codecell (snapshot format ${version}; this one reads format 3 only); run the cell again`,
    );
  });

  // Without a secret the digest is only an integrity check: anyone can recompute it, so every
  // length inside must still be checked before it is trusted.
  it.each([
    {
      name: "an image length over the bound, before allocating it",
      body: () =>
        pagesBody(MAX + 1, new Uint8Array(Math.ceil(Math.ceil((MAX + 1) / PAGE) / 8)), new Uint8Array(0)),
      message: /over the .* bytes this run may restore/,
    },
    {
      name: "a page map cut short",
      body: () => pagesBody(64 * PAGE, new Uint8Array(3), new Uint8Array(0)).subarray(0, 4 + 3),
      message: /page map is truncated/,
    },
    {
      name: "pages that expand to more than the map says",
      body: () => pagesBody(2 * PAGE, Uint8Array.of(0b01), new Uint8Array(3 * PAGE)),
      message: /could not be decompressed/,
    },
    {
      name: "pages that expand to less than the map says",
      body: () => pagesBody(2 * PAGE, Uint8Array.of(0b11), new Uint8Array(PAGE)),
      message: /where its page map says/,
    },
    {
      name: "a body without its image length",
      body: () => Uint8Array.of(1, 2),
      message: /truncated/,
    },
  ])("refuses $name", ({ body, message }) => {
    expect(() => decodeSnapshot(envelope(3, {}, body()), null, MAX)).toThrow(message);
  });

  it("refuses an unknown version and a forged signature before reading further", () => {
    expect(() => decodeSnapshot(envelope(4, {}, new Uint8Array(8)), null, MAX)).toThrow(
      /format 4 is not one/,
    );
    const good = encodeSnapshot(image(4 * PAGE), {}, "right");
    expect(() => decodeSnapshot(good, "wrong", MAX)).toThrow(/signature/);
    const forged = envelope(3, {}, pagesBody(MAX + 1, new Uint8Array(0), new Uint8Array(0)), "guess");
    expect(() => decodeSnapshot(forged, "right", MAX)).toThrow(/signature/);
  });
});
