// @ts-check
// Clicks on a heatmap's cells, reported to the chart whose plot on screen was
// clicked (a plot drawn as a spare reports once it is swapped in).

import { plotAreaBox } from "./seam.js";
import { chartOf } from "./state.js";

/** @type {WeakSet<Element>} plots that report their clicks */
const LISTENING = new WeakSet();

/**
 * Report a click on a cell of `gd`'s heatmap to the `onClick` of the chart
 * whose plot on screen `gd` is (a head switch may swap it in later).
 * @param {any} gd
 */
export function listenForClicks(gd) {
  if (LISTENING.has(gd)) return;
  LISTENING.add(gd);
  gd.on("plotly_click", (/** @type {any} */ event) => {
    const point = event.points?.[0];
    if (!point || !Array.isArray(point.pointIndex)) return;
    const [row, col] = cellUnderPointer(gd, event.event) ?? point.pointIndex;
    chartOf(gd)?.onClick?.({ trace: point.curveNumber, row, col });
  });
}

/**
 * The (row, col) under a click on a one-heatmap chart, from the pointer's
 * pixel centre: Plotly reads the pointer's whole-pixel position, which lands
 * in the previous row or column once cells are about a pixel wide.
 * @param {any} gd @param {MouseEvent | undefined} mouse
 */
function cellUnderPointer(gd, mouse) {
  const trace = gd.data;
  const area = plotAreaBox(gd);
  if (!mouse || !area || trace.length !== 1 || !Array.isArray(trace[0].z)) return null;
  const rows = trace[0].z.length;
  const cols = trace[0].z[0].length;
  const row = Math.floor(((mouse.clientY + 0.5 - area.top) / area.height) * rows);
  const col = Math.floor(((mouse.clientX + 0.5 - area.left) / area.width) * cols);
  if (row < 0 || row >= rows || col < 0 || col >= cols) return null;
  return [row, col];
}
