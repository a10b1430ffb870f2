// Decoding payloads (explorer/render/chart/decode.js), built here byte by byte as
// explorer.render.payload.encode writes them.
import assert from "node:assert/strict";
import { test } from "node:test";
import { decodePayload, MatrixStore } from "../../../explorer/render/chart/decode.js";

/** A payload: uint32 LE header length, the JSON header, zero padding to 4, float32 blocks. */
function payload(header, ...blocks) {
  const json = new TextEncoder().encode(JSON.stringify(header));
  const padding = (4 - (json.length % 4)) % 4;
  const floats = blocks.flat();
  const bytes = new Uint8Array(4 + json.length + padding + 4 * floats.length);
  new DataView(bytes.buffer).setUint32(0, json.length, true);
  bytes.set(json, 4);
  new Float32Array(bytes.buffer, 4 + json.length + padding).set(floats);
  return bytes;
}

const block = (hash, rows, cols, cached = false) => ({ rows, cols, hash, cached });

test("every header length pads the blocks to a multiple of 4 and the values come back", () => {
  for (const filename of ["a", "ab", "abc", "abcd"]) { // four paddings, 0 to 3 bytes
    const store = new MatrixStore(1024);
    const bytes = payload({ filename, blocks: [block("h1", 2, 3), block("h2", 1, 1)] },
                          [1, -2.5, 3, 0.25, -0, 6], [Infinity]);
    const { header, matrices, missing } = decodePayload(bytes, store);
    assert.equal(header.filename, filename);
    assert.deepEqual(Array.from(matrices[0]), [1, -2.5, 3, 0.25, -0, 6]);
    assert.deepEqual(Array.from(matrices[1]), [Infinity]);
    assert.deepEqual(missing, []);
    assert.equal(store.get("h1"), matrices[0]);
  }
});

test("a payload inside a larger buffer (Streamlit hands a view) decodes from its offset", () => {
  const inner = payload({ blocks: [block("h", 1, 2)] }, [0.1, 0.2]);
  const outer = new Uint8Array(inner.length + 8);
  outer.set(inner, 8);
  const { matrices } = decodePayload(outer.subarray(8), new MatrixStore(1024));
  assert.deepEqual(Array.from(matrices[0]), [Math.fround(0.1), Math.fround(0.2)]);
});

test("a block sent earlier comes from the store, and one the store lost is missing", () => {
  const store = new MatrixStore(1024);
  decodePayload(payload({ blocks: [block("kept", 1, 2)] }, [7, 8]), store);
  const { matrices, missing } = decodePayload(
    payload({ blocks: [block("kept", 1, 2, true), block("lost", 2, 2, true)] }), store);
  assert.deepEqual(Array.from(matrices[0]), [7, 8]);
  assert.equal(matrices[1], undefined);
  assert.deepEqual(missing, ["lost"]);
});

test("the store keeps at most its budget, dropping the least recently kept", () => {
  const store = new MatrixStore(32); // 8 floats
  store.keep("a", new Float32Array(4));
  store.keep("b", new Float32Array(4));
  store.keep("a", new Float32Array(4)); // "a" is now the most recent
  store.keep("c", new Float32Array(4));
  assert.deepEqual([...store.byHash.keys()], ["a", "c"]);
});
