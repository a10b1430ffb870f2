// @ts-check
// Decoding payloads (explorer.render.payload.encode): pure, apart from the matrix store
// it is handed.
//
// Payload: uint32 header length (little-endian), the header as UTF-8 JSON,
// zero padding to a multiple of 4, then one float32 block per entry of
// header.blocks that is not marked `cached`.

/** @typedef {{rows: number, cols: number, hash: string, cached: boolean}} Block */

/** The matrices a page holds, by hash, least recently used first, within a byte budget. */
export class MatrixStore {
  /** @param {number} budget bytes kept at most */
  constructor(budget) {
    this.budget = budget;
    /** @type {Map<string, Float32Array>} */
    this.byHash = new Map();
  }

  /** @param {string} hash */
  get(hash) {
    return this.byHash.get(hash);
  }

  /** Keep `values` under `hash`, dropping the least recently kept beyond the budget.
   * @param {string} hash @param {Float32Array} values */
  keep(hash, values) {
    this.byHash.delete(hash);
    this.byHash.set(hash, values);
    let bytes = 0;
    for (const v of this.byHash.values()) bytes += v.byteLength;
    for (const [key, v] of this.byHash) {
      if (bytes <= this.budget) break;
      this.byHash.delete(key);
      bytes -= v.byteLength;
    }
  }
}

/**
 * The header and the matrices of a payload; `missing` lists the hashes of
 * matrices sent earlier (marked `cached`) that `store` no longer holds. Every
 * block sent is kept in `store`.
 * @param {ArrayBuffer | Uint8Array} bytes
 * @param {MatrixStore} store
 * @returns {{header: any, matrices: (Float32Array | undefined)[], missing: string[]}}
 */
export function decodePayload(bytes, store) {
  const u8 = bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes);
  const view = new DataView(u8.buffer, u8.byteOffset, u8.byteLength);
  const headerLength = view.getUint32(0, true);
  const header = JSON.parse(new TextDecoder().decode(u8.subarray(4, 4 + headerLength)));
  let offset = 4 + headerLength + ((4 - (headerLength % 4)) % 4);
  const matrices = [];
  const missing = [];
  for (const block of /** @type {Block[]} */ (header.blocks)) {
    if (block.cached) {
      const known = store.get(block.hash);
      if (!known) missing.push(block.hash);
      matrices.push(known);
      continue;
    }
    const n = block.rows * block.cols;
    const values = new Float32Array(u8.buffer.slice(u8.byteOffset + offset,
                                                    u8.byteOffset + offset + 4 * n));
    offset += 4 * n;
    store.keep(block.hash, values);
    matrices.push(values);
  }
  return { header, matrices, missing };
}
