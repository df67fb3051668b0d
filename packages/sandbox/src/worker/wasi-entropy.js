// @ts-check

// The WASI imports every VM of this worker gets, and the pool of random bytes behind their random_get.

/**
 * WASI fd_write: the guest must never reach host stdout or stderr. Report every byte as written so
 * libc does not retry, and drop them.
 * @param {{ buffer: ArrayBuffer }} memory
 */
export function silentWasi(memory) {
  return {
    /** @param {number} pointer @param {number} length */
    random_get(pointer, length) {
      takeEntropy(new Uint8Array(memory.buffer, pointer, length));
      return 0;
    },
    /** @param {number} _fd @param {number} iovs @param {number} count @param {number} writtenPtr */
    fd_write(_fd, iovs, count, writtenPtr) {
      const view = new DataView(memory.buffer);
      let total = 0;
      for (let index = 0; index < count; index++) total += view.getUint32(iovs + index * 8 + 4, true);
      view.setUint32(writtenPtr, total, true);
      return 0;
    },
  };
}

/**
 * Random bytes for this worker's VMs, each used once, and how many are used: first the host's (`init`'s
 * `entropy`: in a fresh worker thread Web Crypto's first use loads its modules, and QuickJS's libc asks
 * for 4 bytes as each VM is made, the first one included), then refilled from Web Crypto a pool at a
 * time (one call for each VM's 4 bytes would put a crossing into Node's crypto on every trivial cell).
 * @type {Uint8Array | null}
 */
let entropy = null;
let entropyUsed = 0;
const ENTROPY_POOL_BYTES = 4096;

/** Start the pool with the host's bytes (init). @param {Uint8Array} bytes */
export function seedEntropy(bytes) {
  entropy = bytes;
  entropyUsed = 0;
}

/** @param {Uint8Array} target */
export function takeEntropy(target) {
  if (target.length > ENTROPY_POOL_BYTES) {
    crypto.getRandomValues(target);
    return;
  }
  if (entropy === null || entropy.length - entropyUsed < target.length) {
    entropy = crypto.getRandomValues(new Uint8Array(ENTROPY_POOL_BYTES));
    entropyUsed = 0;
  }
  const taken = entropy.subarray(entropyUsed, entropyUsed + target.length);
  target.set(taken);
  taken.fill(0);
  entropyUsed += target.length;
}
