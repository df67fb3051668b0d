// @ts-check
import { createHash, createHmac, timingSafeEqual } from "node:crypto";
import { brotliCompressSync, brotliDecompressSync, constants } from "node:zlib";

/**
 * The snapshot envelope: what `suspend()` returns and `restore()` accepts.
 *
 *   0  4   magic "CCSN"
 *   4  1   format version (3)
 *   5  3   reserved, zero
 *   8  32  SHA-256 (or HMAC-SHA-256 with the pool's snapshot secret) over bytes 40..end
 *   40 4   bridge state length N (u32 LE)
 *   44 N   bridge state JSON (UTF-8)
 *   then:  4   VM image length L (u32 LE)
 *          M   page map: bit p set when page p (PAGE_BYTES each) of the image holds a non-zero byte
 *          ..  brotli (quality 2) of those pages, in order (`QuickJS.serializeSnapshot` bytes)
 *
 * The version covers the whole record: the envelope, the bridge state's fields, and how the VM inside
 * talks to the worker (its prelude is in the image, and a restored VM keeps it). A record of any other
 * version is refused with a reason the model can act on, never read as this one: version 3 is the
 * first that needs no branch for what an older prelude or bridge state did.
 *
 * A small heap's image is mostly zero pages, so leaving them out before compressing saves brotli
 * most of its work both ways at the same size. The digest is checked before
 * anything is parsed or decompressed, so corrupt or truncated bytes never reach QuickJS; lengths
 * are checked against the caller's bound before anything is allocated. Without a secret the digest
 * detects corruption; with one it also refuses forged snapshots.
 */
const MAGIC = 0x4e534343; // "CCSN" read as u32 LE
const VERSION = 3;
const HEADER_BYTES = 44;
/** Quality 2: a snapshot is written on every suspend, so speed counts more than the last bytes of size. */
const BROTLI_QUALITY = 2;
const PAGE_BYTES = 4096;

/** @param {Uint8Array} payload @param {string | null} secret */
function digest(payload, secret) {
  return secret === null
    ? createHash("sha256").update(payload).digest()
    : createHmac("sha256", secret).update(payload).digest();
}

export class SnapshotCodecError extends Error {
  /** @param {string} message */
  constructor(message) {
    super(message);
    this.name = "SnapshotCodecError";
  }
}

/** @param {Uint8Array} map @param {number} page */
function hasPage(map, page) {
  return ((map[page >> 3] ?? 0) & (1 << (page & 7))) !== 0;
}

/**
 * Which PAGE_BYTES pages of `image` hold a non-zero byte, as a bit map, and how many bytes they hold.
 * @param {Uint8Array} image
 */
function mapPages(image) {
  const pages = Math.ceil(image.length / PAGE_BYTES);
  const map = new Uint8Array(Math.ceil(pages / 8));
  const aligned = image.byteOffset % 4 === 0;
  const words = aligned ? new Uint32Array(image.buffer, image.byteOffset, image.length >> 2) : null;
  let kept = 0;
  for (let page = 0; page < pages; page++) {
    const start = page * PAGE_BYTES;
    const end = Math.min(image.length, start + PAGE_BYTES);
    let index = start;
    let used = false;
    if (words !== null) {
      const lastWord = end >> 2;
      for (let word = start >> 2; word < lastWord; word++) {
        if (words[word] !== 0) {
          used = true;
          break;
        }
      }
      index = lastWord << 2;
    }
    for (; !used && index < end; index++) if (image[index] !== 0) used = true;
    if (used) {
      map[page >> 3] = (map[page >> 3] ?? 0) | (1 << (page & 7));
      kept += end - start;
    }
  }
  return { map, kept };
}

/**
 * @param {Uint8Array} vmSnapshot raw bytes from QuickJS.serializeSnapshot
 * @param {unknown} bridgeState JSON-safe state of the bridge (pending requests, counters, tokens)
 * @param {string | null} secret
 * @returns {Uint8Array}
 */
export function encodeSnapshot(vmSnapshot, bridgeState, secret) {
  const state = Buffer.from(JSON.stringify(bridgeState), "utf8");
  const { map, kept } = mapPages(vmSnapshot);
  const pages = Buffer.allocUnsafe(kept);
  let offset = 0;
  for (let page = 0; page * PAGE_BYTES < vmSnapshot.length; page++) {
    if (!hasPage(map, page)) continue;
    const chunk = vmSnapshot.subarray(page * PAGE_BYTES, (page + 1) * PAGE_BYTES);
    pages.set(chunk, offset);
    offset += chunk.length;
  }
  const body = brotliCompressSync(pages, {
    params: {
      [constants.BROTLI_PARAM_QUALITY]: BROTLI_QUALITY,
      [constants.BROTLI_PARAM_SIZE_HINT]: kept,
    },
  });
  const out = Buffer.alloc(HEADER_BYTES + state.length + 4 + map.length + body.length);
  out.writeUInt32LE(MAGIC, 0);
  out.writeUInt8(VERSION, 4);
  out.writeUInt32LE(state.length, 40);
  state.copy(out, HEADER_BYTES);
  out.writeUInt32LE(vmSnapshot.length, HEADER_BYTES + state.length);
  out.set(map, HEADER_BYTES + state.length + 4);
  body.copy(out, HEADER_BYTES + state.length + 4 + map.length);
  digest(out.subarray(40), secret).copy(out, 8);
  return new Uint8Array(out.buffer, out.byteOffset, out.byteLength);
}

/**
 * @param {Buffer} body brotli bytes
 * @param {number} maxBytes
 */
function expand(body, maxBytes) {
  try {
    return brotliDecompressSync(body, { maxOutputLength: Math.max(1, maxBytes) });
  } catch (error) {
    throw new SnapshotCodecError(
      `the snapshot's VM image could not be decompressed: ${/** @type {Error} */ (error).message}`,
    );
  }
}

/**
 * Version 2 body: the image length, the page map and the compressed pages.
 * @param {Buffer} rest
 * @param {number} maxVmBytes
 */
function decodePages(rest, maxVmBytes) {
  if (rest.length < 4) throw new SnapshotCodecError("the snapshot's VM image is truncated");
  const length = rest.readUInt32LE(0);
  if (length > maxVmBytes) {
    throw new SnapshotCodecError(
      `the snapshot's VM image is ${length} bytes, over the ${maxVmBytes} bytes this run may restore`,
    );
  }
  const pages = Math.ceil(length / PAGE_BYTES);
  const mapBytes = Math.ceil(pages / 8);
  if (rest.length < 4 + mapBytes) throw new SnapshotCodecError("the snapshot's page map is truncated");
  const map = rest.subarray(4, 4 + mapBytes);
  let kept = 0;
  for (let page = 0; page < pages; page++) {
    if (hasPage(map, page)) kept += Math.min(PAGE_BYTES, length - page * PAGE_BYTES);
  }
  const packed = expand(rest.subarray(4 + mapBytes), kept);
  if (packed.length !== kept) {
    throw new SnapshotCodecError(
      `the snapshot's VM pages hold ${packed.length} bytes where its page map says ${kept}`,
    );
  }
  const image = new Uint8Array(length);
  let offset = 0;
  for (let page = 0; page < pages; page++) {
    if (!hasPage(map, page)) continue;
    const size = Math.min(PAGE_BYTES, length - page * PAGE_BYTES);
    image.set(packed.subarray(offset, offset + size), page * PAGE_BYTES);
    offset += size;
  }
  return image;
}

/**
 * Why a record of `version` is refused: an older codecell suspended it, or it is no version this one
 * knows (a newer codecell's, or not a record at all). Either way the run cannot go on; its cell can run
 * again.
 * @param {number} version
 */
function otherVersion(version) {
  const which =
    version < VERSION
      ? `the run was suspended by an older codecell (snapshot format ${version}; this one reads format ${VERSION} only)`
      : `snapshot format ${version} is not one this codecell reads (it reads format ${VERSION}; the run was suspended by another codecell version)`;
  return `${which}; run the cell again`;
}

/**
 * @param {Uint8Array} bytes
 * @param {string | null} secret
 * @param {number} maxVmBytes largest decompressed VM image accepted (guards against decompression bombs)
 * @returns {{ vmSnapshot: Uint8Array, bridgeState: unknown }}
 */
export function decodeSnapshot(bytes, secret, maxVmBytes) {
  const input = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (input.length < HEADER_BYTES)
    throw new SnapshotCodecError(`the snapshot is truncated (${input.length} bytes)`);
  if (input.readUInt32LE(0) !== MAGIC)
    throw new SnapshotCodecError("the bytes are not a codecell snapshot (bad magic)");
  const version = input.readUInt8(4);
  if (version !== VERSION) throw new SnapshotCodecError(otherVersion(version));
  const expected = digest(input.subarray(40), secret);
  if (!timingSafeEqual(expected, input.subarray(8, 40))) {
    throw new SnapshotCodecError(
      secret === null
        ? "the snapshot failed its integrity check (corrupt or altered bytes)"
        : "the snapshot failed its signature check (corrupt, altered, or signed with another secret)",
    );
  }
  const stateLength = input.readUInt32LE(40);
  if (HEADER_BYTES + stateLength > input.length)
    throw new SnapshotCodecError("the snapshot's bridge state is truncated");
  let bridgeState;
  try {
    bridgeState = JSON.parse(input.subarray(HEADER_BYTES, HEADER_BYTES + stateLength).toString("utf8"));
  } catch {
    throw new SnapshotCodecError("the snapshot's bridge state is not valid JSON");
  }
  const rest = input.subarray(HEADER_BYTES + stateLength);
  return { vmSnapshot: decodePages(rest, maxVmBytes), bridgeState };
}
