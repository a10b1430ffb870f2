import assert from "node:assert/strict";
import { test } from "node:test";

import { BOUNCE_MS, redrawOnResize, RESIZE_MIN_PX } from "../../../explorer/render/chart/resize.js";

const drawnAt = (width) => ({ width, previousWidth: null, resizedAt: -Infinity });

test("a width change under the threshold keeps the picture", () => {
  const widths = drawnAt(600);
  assert.equal(redrawOnResize(widths, 600 + RESIZE_MIN_PX - 1, 0), false);
  assert.equal(redrawOnResize(widths, 600 - RESIZE_MIN_PX, 0), true);
  assert.equal(widths.width, 600 - RESIZE_MIN_PX);
});

test("a scroll bar that comes and goes with each drawing is drawn for once", () => {
  const widths = drawnAt(600);
  assert.equal(redrawOnResize(widths, 585, 0), true); // the bar came
  assert.equal(redrawOnResize(widths, 600, 40), false); // the new height took it away
  assert.equal(redrawOnResize(widths, 585, 80), false); // and so on: nothing to draw
  // A window resized back later is drawn again.
  assert.equal(redrawOnResize(widths, 600, BOUNCE_MS + 1), true);
  assert.equal(redrawOnResize(widths, 900, BOUNCE_MS + 2), true);
});
