// Head spares (explorer/render/chart/spares.js): a spare is swapped in only if it shows
// the payload the chart holds now.
import assert from "node:assert/strict";
import { test } from "node:test";

globalThis.window ??= globalThis; // state.js keeps the page's state on window
const { swapIn } = await import("../../../explorer/render/chart/spares.js");

const drawn = (head, payload) => ({ head, layout: {}, config: {}, marks: "[]", payload });

test("a spare drawn before new numbers came is not swapped in", () => {
  const spare = { gd: {}, drawn: drawn(0, "seed 123"), marks: null };
  const state = { picture: "seed 7", drawn: drawn(1, "seed 7"), marks: null,
                  spares: { generation: 0, byHead: new Map([[0, spare]]) } };
  assert.equal(swapIn(/** @type {any} */ ({ dataset: {} }), /** @type {any} */ (state), 0), null);
  assert.equal(state.drawn.head, 1); // nothing moved: the caller draws head 0 afresh
  assert.equal(state.spares.byHead.get(0), spare);
});
