// @ts-check
// Drawing a chart with Plotly.js: load it once, draw (or update in place) the
// figure as the page's view wants it, fit a long title, report clicks, and tell
// whoever measures when the pixels changed.

import { CELL_FONT_FAMILY } from "./cells.js";
import { chartConfig, estimatedPlotArea, fittedTitle, layoutFor, layoutWithTicks, TOOLBAR_PX,
  tracesFor } from "./figure.js";
import { followLines } from "./line-view.js";
import { drawnPlotArea, plotAreaBox, titleAndSvg } from "./seam.js";
import { discardSpares, predrawHeads } from "./spares.js";
import { attach, ChartState, chartOf, PAGE } from "./state.js";
import { figureFor } from "./view.js";

/** @type {Promise<any> | null} */
let plotlyLoading = null;

/**
 * Plotly.js: `window.Plotly` where the page has it (the report inlines it),
 * else loaded once from `url`.
 * @param {string} url
 * @returns {Promise<any>}
 */
export function loadPlotly(url) {
  const w = /** @type {any} */ (window);
  if (w.Plotly) return Promise.resolve(w.Plotly);
  plotlyLoading ??= new Promise((resolve, reject) => {
    const script = document.createElement("script");
    script.src = url;
    script.onload = () => resolve(w.Plotly);
    script.onerror = () => reject(new Error(`could not load ${url}`));
    document.head.appendChild(script);
  });
  return plotlyLoading;
}

const SVG_NS = "http://www.w3.org/2000/svg";
/** @type {SVGTextElement | null} */
let probe = null;
/** @type {Map<string, DOMRect>} "size|text" -> its box */
const BOXES = new Map();

/**
 * The box of `text` drawn at `size` px in Plotly's font, measured as Plotly
 * draws it (an SVG text off-screen: a canvas measured numbers up to 6 px
 * narrower than the SVG draws them).
 * @param {string} text @param {number} size
 */
function textBox(text, size) {
  const key = `${size}|${text}`;
  let box = BOXES.get(key);
  if (!box) {
    if (!probe || !probe.isConnected) {
      const svg = document.createElementNS(SVG_NS, "svg");
      svg.setAttribute("aria-hidden", "true");
      svg.setAttribute("style", "position: absolute; left: -10000px; top: 0; visibility: hidden");
      probe = document.createElementNS(SVG_NS, "text");
      probe.style.fontFamily = CELL_FONT_FAMILY;
      svg.appendChild(probe);
      document.body.appendChild(svg);
    }
    probe.style.fontSize = `${size}px`;
    probe.textContent = text;
    box = probe.getBBox();
    if (BOXES.size > 5000) BOXES.clear();
    BOXES.set(key, box);
  }
  return box;
}

/**
 * The width in px of `text` drawn at `size` px in the cells' font.
 * @param {string} text @param {number} size
 */
export function textWidth(text, size) {
  return textBox(text, size).width;
}

/**
 * The height in px of a line of text at `size` px in the cells' font.
 * @param {number} size
 */
export function lineHeight(size) {
  return textBox("Ag0", size).height;
}

/** Whether the page is on a touch screen (no hover: no toolbar). */
export function touchScreen() {
  return Boolean(window.matchMedia?.("(hover: none)").matches);
}

/** The plot area of `gd` drawn with `layout`: as Plotly drew it, else a guess.
 * @param {any} gd @param {any} layout */
function plotArea(gd, layout) {
  return drawnPlotArea(gd) ?? estimatedPlotArea(layout, gd.clientWidth);
}

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
  // ticks chosen for it change (twice at most: new ticks can move the margins).
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

/**
 * What the text of a picture depends on: each trace's cell text (its template,
 * size and first number, which shows the decimals) and each axis's ticks.
 * @param {{traces: any[], layout: any}} picture
 */
function textKey({ traces, layout }) {
  return JSON.stringify([traces.map((t) => [t.texttemplate, t.textfont?.size, t.text?.[0]?.[0]]),
                         [layout.xaxis, layout.yaxis].map((a) => [a?.dtick, a?.tickfont?.size])]);
}

/**
 * The traces, layout and config of `shown` (figureFor a view) drawn in the
 * layout `state`'s plot on screen has measured (its size, margins and title
 * font), with the shown head's matrix, title, outlines and download name: the
 * picture of a spare, or of a head switch drawn in place. Every head's matrix
 * has the same shape, so nothing needs measuring again.
 * @param {HTMLElement} gd the plot on screen @param {ChartState} state
 * @param {ReturnType<typeof figureFor>} shown
 */
export function headPicture(gd, state, shown) {
  const { header, matrices } = state;
  const drawn = /** @type {import("./state.js").Drawn} */ (state.drawn);
  const layout = { ...drawn.layout, shapes: shown.figure.layout.shapes,
                   title: { ...drawn.layout.title, text: shown.figure.layout.title.text } };
  const traces = tracesFor(shown.figure.data, matrices, plotArea(gd, layout),
                           header.columns ?? 1, textWidth, lineHeight);
  const config = { ...drawn.config, toImageButtonOptions: {
    ...drawn.config.toImageButtonOptions, filename: shown.filename } };
  return { traces, layout, config };
}

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

/**
 * Tell whoever measures (tests, `make bench`) that `el`'s pixels changed: the
 * time of the next frame, after the change is painted, and why it changed:
 * "view" (the page followed a click or a pick, `setView`) or "server" (a payload).
 * @param {HTMLElement} el @param {string} by
 */
export function painted(el, by) {
  requestAnimationFrame(() => {
    el.dataset.painted = String(performance.now());
    el.dataset.paintedBy = by;
    el.dispatchEvent(new CustomEvent("explorer:painted", { bubbles: true, detail: { by } }));
  });
}
