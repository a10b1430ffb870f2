// @ts-check
// Drawing a chart with Plotly.js: draw (or update in place) the figure as the
// page's view wants it, fit a long title to its room, then let its line view
// and its spare heads follow.

import { listenForClicks } from "./clicks.js";
import { chartConfig, fittedTitle, layoutFor, layoutWithTicks, textKey, TOOLBAR_PX, tracesFor }
  from "./figure.js";
import { followLines } from "./line-view.js";
import { loadPlotly } from "./loader.js";
import { lineHeight, plotArea, textWidth, touchScreen } from "./measure.js";
import { painted } from "./painted.js";
import { titleAndSvg } from "./seam.js";
import { discardSpares, predrawHeads } from "./spares.js";
import { attach, ChartState, chartOf, PAGE } from "./state.js";
import { figureFor } from "./view.js";

/** @param {any} Plotly @param {string} filename */
function svgButton(Plotly, filename) {
  return {
    name: "Download as SVG (for print)",
    icon: Plotly.Icons.disk,
    click: (/** @type {any} */ gd) => Plotly.downloadImage(gd, { format: "svg", filename }),
  };
}

/**
 * A title wider than the room beside it (a long one on a phone; Plotly neither
 * wraps nor clips it) is drawn smaller, then wrapped (`fittedTitle`), the top
 * margin and the height growing by the added lines. Changes `layout`; returns
 * whether it did.
 * @param {Element} gd @param {any} layout @param {number} right px kept free at the right
 */
function fitTitle(gd, layout, right) {
  const { title, svg } = titleAndSvg(gd);
  const text = layout.title?.text;
  if (!title || !svg || !text) return false;
  const box = title.getBoundingClientRect();
  const room = svg.getBoundingClientRect().right - right - box.left;
  const fitted = fittedTitle(text, layout.title.font?.size ?? 17, box.width, room);
  if (!fitted) return false;
  layout.title = { ...layout.title, text: fitted.text,
                   font: { ...layout.title.font, size: fitted.size } };
  layout.margin = { ...layout.margin, t: (layout.margin?.t ?? 100) + fitted.extra };
  if (layout.height) layout.height += fitted.extra;
  return true;
}

/**
 * Draw (or update in place) `header`'s figure in `gd` as the page's view wants
 * it. `onClick({trace, row, col})` is called with the clicked cell of a heatmap.
 * (The benchmark's floor page calls this directly, without `mountChart`.)
 * @param {HTMLElement} gd @param {any} header @param {(Float32Array | undefined)[]} matrices
 * @param {((cell: {trace: number, row: number, col: number}) => void) | null} [onClick]
 */
export async function draw(gd, header, matrices, onClick = null) {
  let state = chartOf(gd);
  if (!state) {
    state = new ChartState(/** @type {HTMLElement} */ (gd.parentElement));
    attach(gd, state);
  }
  // Every call draws its own payload (the floor's edit draws new numbers in the same plot).
  Object.assign(state, { header, matrices, onClick });
  await drawChart(gd, state);
}

/**
 * Draw `state`'s payload in its plot on screen `gd`: measure the plot area by
 * drawing once, then fit the title and the cell text to it (each a redraw only
 * when it changes something).
 * @param {HTMLElement} gd @param {ChartState} state
 */
export async function drawChart(gd, state) {
  const { header, matrices } = state;
  const payload = state.picture; // the payload drawn, whatever comes while it draws
  const Plotly = await loadPlotly(header.plotly);
  discardSpares(state);
  const shown = figureFor(header, PAGE.view, PAGE.known);
  const figure = shown.figure;
  const touch = touchScreen();
  const layout = layoutFor(figure.layout, header.size, gd.clientWidth || 600, touch);
  const columns = header.columns ?? 1;
  const config = chartConfig(shown.filename, touch, svgButton(Plotly, shown.filename));
  const build = (/** @type {import("./figure.js").Area} */ area) => ({
    traces: tracesFor(figure.data, matrices, area, columns, textWidth, lineHeight),
    layout: layoutWithTicks(layout, figure.data, area, textWidth, lineHeight) });
  // A newer payload came while this drew: its own drawing paints the plot, and
  // this one stops, so that its later steps cannot paint old numbers over it.
  const superseded = () => state.picture !== payload;
  let picture = build(plotArea(gd, layout));
  await Plotly.react(gd, picture.traces, picture.layout, config);
  if (superseded()) return;
  if (fitTitle(gd, layout, touch ? 0 : TOOLBAR_PX)) {
    picture = build(plotArea(gd, layout));
    await Plotly.react(gd, picture.traces, picture.layout, config);
    if (superseded()) return;
  }
  // A drawing fixes the real plot area: draw again while the cell text or the
  // ticks chosen for it, the colour bar's too, change (twice at most: new ticks
  // can move the margins).
  for (let i = 0; i < 2; i++) {
    const again = build(plotArea(gd, picture.layout));
    if (textKey(again) === textKey(picture)) break;
    picture = again;
    await Plotly.react(gd, picture.traces, picture.layout, config);
    if (superseded()) return;
  }
  const drawnLayout = picture.layout;
  state.drawn = { head: shown.head, marks: JSON.stringify(drawnLayout.shapes ?? []), payload,
                  layout: drawnLayout, config };
  state.marks = shown.marks;
  listenForClicks(gd);
  gd.dataset.drawn = String(Number(gd.dataset.drawn ?? 0) + 1); // for tests and benchmarks
  painted(gd, state.cause);
  // Spares only of the payload still to show: a newer one may have come while this drew.
  if (state.mounted && state.header === header) {
    await followLines(gd, state);
    predrawHeads(state);
  }
}
