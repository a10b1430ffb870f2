// @ts-check
// The browser half of the explorer: draws one Plotly figure (an
// explorer.render.payload.Chart payload) per Streamlit component, and the pickers of
// the page's view. Python builds the whole figure (explorer/render/figures.py); these
// modules only do what needs the browser, one job each:
//   - decode.js: the payload's matrices, raw float32 bytes, kept by hash so
//     that Python then sends a hash only;
//   - cells.js, figure.js: the cell text chosen from the real cell size, the
//     layout for the chart's width (a narrower one on a phone), the config;
//   - view.js: the page's view (query token, explained cell, head, lines) and
//     the outlines and head variant a chart draws for it;
//   - draw.js: drawing with Plotly.js, a long title fitted;
//   - loader.js: Plotly.js loaded once; measure.js: text, the plot area and
//     the screen measured as Plotly draws them; painted.js: pixels changed,
//     told to whoever measures; clicks.js: a clicked cell reported;
//   - schedule.js: the charts near the window drawn first, the others when near or idle;
//   - page.js: a change of view followed by every chart, nearest first;
//   - spares.js: the other heads drawn off-screen, swapped in on a switch;
//   - lines.js, line-view.js: the weights as lines under their heatmap;
//   - pickers.js: the query and head pickers;
//   - state.js: the page's view and each chart's state (`ChartState`);
//   - seam.js: every use of Plotly's and Streamlit's private parts;
//   - keys.js, access.js: a heatmap's name, cell cursor, live region and table
//     (keyboard and screen reader).
// Each module imports only those below it (tests/render/test_chart_js.py): the
// ones that draw report back through the callbacks they are given (`onClick`,
// the line view's `onToggle`), not by importing the page.
// The same `mountChart` serves the Streamlit component and the standalone
// report (explorer/render/export.py, which inlines these modules as one), and `draw`
// the benchmark's floor page.

import { describeChart } from "./access.js";
import { decodePayload } from "./decode.js";
import { drawChart } from "./draw.js";
import { layoutFor } from "./figure.js";
import { addLines } from "./line-view.js";
import { loadPlotly } from "./loader.js";
import { touchScreen } from "./measure.js";
import { follow, setView } from "./page.js";
import { redrawOnResize } from "./resize.js";
import { drawSoon, isStale } from "./schedule.js";
import { attach, ChartState, chartOf, MATRICES, PAGE } from "./state.js";
import { figureFor, pictureKey, viewOfClick } from "./view.js";

export { draw } from "./draw.js";
export { loadPlotly } from "./loader.js";
export { mountPicker } from "./pickers.js";
export { setView } from "./page.js";
export { checkSeam } from "./seam.js";


/**
 * The header and the matrices of a payload, with the matrices this page holds
 * (`decodePayload` with the page's store).
 * @param {ArrayBuffer | Uint8Array} bytes
 */
export function decode(bytes) {
  return decodePayload(bytes, MATRICES);
}

/**
 * The Streamlit component: one instance per chart, kept across reruns. The
 * standalone report (explorer/render/export.py) mounts its charts with it too, passing
 * { data, parentElement, setTriggerValue } itself.
 * @param {{data: any, parentElement: HTMLElement, setTriggerValue: (name: string, value: any) => void}} component
 */
export default function mountChart(component) {
  const { data, parentElement, setTriggerValue } = component;
  if (!data) return;
  const { header, matrices, missing } = decode(data);
  // Plotly.js loads while the page places its new charts (a frame, schedule.js);
  // a failure shows where the chart is drawn.
  loadPlotly(header.plotly).catch(() => {});
  // The plot on screen: a head switch may swap it for a spare (`swapIn`).
  const onScreen = () => /** @type {HTMLElement} */ (
    parentElement.querySelector(":scope > .explorer-chart"));
  const existing = onScreen();
  let state = existing ? chartOf(existing) : undefined;
  if (state) state.cause = "server";
  if (missing.length) {
    setTriggerValue("missing", missing); // Python sends them again
    return;
  }
  if (!existing || !state) {
    existing?.remove();
    const gd = document.createElement("div");
    gd.className = "explorer-chart";
    parentElement.appendChild(gd);
    const made = new ChartState(parentElement);
    made.mounted = true;
    attach(gd, made);
    state = made;
    new ResizeObserver(() => {
      if (redrawOnResize(made, parentElement.clientWidth, performance.now())) made.redraw(false);
    }).observe(parentElement);
  }
  const chart = state;
  chart.width = parentElement.clientWidth;
  if (header.view) { // the server's view: what its payloads were built for
    Object.assign(PAGE.view, header.view);
    PAGE.known = true;
  }
  // A click tells the server and moves the page's view at once (a step chart:
  // its cell, and its row as the query where the rows are tokens).
  chart.onClick = header.clickable ? (cell) => {
    setTriggerValue("click", cell);
    if (header.marks?.pick === "head") setView({ head: cell.trace }); // every head at a glance
    const change = viewOfClick(chart.marks, cell);
    if (change) setView(change);
  } : null;
  PAGE.charts.add(onScreen());
  Object.assign(chart, { header, matrices });
  chart.lines = header.lines ? addLines(parentElement, header.lines, (on) => {
    setTriggerValue("lines", on);
    setView({ lines: on });
  }) : null;
  chart.redraw = () => {
    const main = onScreen();
    main.dataset.drawing = "1"; // until the picture is on the page (tests wait for it)
    const round = ++chart.drawRound;
    return drawChart(main, chart).catch((error) => {
      main.textContent = `This chart could not be drawn: ${error.message}`;
    }).finally(() => {
      // Still drawing when a later drawing started, or when a newer payload made the
      // chart stale while this one drew (schedule.js): that one clears the mark.
      if (round === chart.drawRound && !isStale(main)) delete main.dataset.drawing;
      describeChart(parentElement, chart, onScreen);
    });
  };
  // The same picture as last time (a rerun that changed other charts, or one
  // that sent only the hashes of matrices this page holds, or only the view):
  // nothing to draw but what the view changed.
  const picture = pictureKey(header);
  if (picture === chart.picture) {
    follow(onScreen(), chart).then(() => describeChart(parentElement, chart, onScreen));
    return;
  }
  chart.picture = picture;
  // Near the window: drawn now; else when it comes near or the page is idle, a new
  // chart's height kept (schedule.js).
  const height = () => layoutFor(figureFor(header, PAGE.view, PAGE.known).figure.layout,
                                 header.size, parentElement.clientWidth || 600,
                                 touchScreen()).height;
  drawSoon({ plot: onScreen, redraw: () => chart.redraw(true) }, height);
}
