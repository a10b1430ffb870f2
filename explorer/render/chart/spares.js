// @ts-check
// Every head at hand. A per-head chart that carries every head's matrix draws
// the heads it does not show into plots of their own, off-screen, one per task
// once the page's charts are drawn (a new heatmap costs Plotly ~15-25 ms; a
// page shows several). A head switch then swaps the plot on screen for the
// spare of the new head (a frame), moving outlines if the view changed since.
// A redraw (new numbers, new width) discards the spares; a switch before they
// are ready redraws in place, with the picture a spare would show (`headPicture`). Charts with more than PREDRAW_CELLS
// cells over all their heads keep no spares (their memory would outgrow what
// they save).

import { listenForClicks } from "./clicks.js";
import { tracesFor } from "./figure.js";
import { loadPlotly } from "./loader.js";
import { lineHeight, plotArea, textWidth } from "./measure.js";
import { distanceFromView } from "./schedule.js";
import { drawnWidth, scriptRunning } from "./seam.js";
import { chartOf, moveChart, PAGE } from "./state.js";
import { addStyle } from "./style.js";
import { figureFor } from "./view.js";

/** @typedef {import("./state.js").ChartState} ChartState */

const PREDRAW_CELLS = 2 ** 16;
// Spares are drawn one per task, the chart nearest the window first, once the
// page is not busy (`pageBusy`) for SPARE_DELAY_MS: so that they never hold up
// the charts of a run still arriving, and are ready soon after (idle callbacks
// came too rarely on a Streamlit page: 21 spares took > 5 s).
const SPARE_DELAY_MS = 50;
/** @type {Set<ChartState>} the charts that still lack a spare head */
const SPARE_JOBS = new Set();
/** @type {ReturnType<typeof setTimeout> | null} the next spare's drawing */
let spareTimer = null;

/** Remove `state`'s spares (its picture changed). @param {ChartState} state */
export function discardSpares(state) {
  const { spares } = state;
  spares.generation += 1;
  for (const { gd } of spares.byHead.values()) {
    /** @type {any} */ (window).Plotly?.purge(gd);
    gd.remove();
  }
  spares.byHead.clear();
}

/** Queue `state`'s other heads to be drawn as spares. @param {ChartState} state */
export function predrawHeads(state) {
  const heads = state.header.heads;
  const m = state.header.figure.data[0]?.matrix;
  if (!heads || heads.length < 2 || !m || m.rows * m.cols * heads.length > PREDRAW_CELLS) return;
  addStyle(); // .explorer-spare
  SPARE_JOBS.add(state);
  if (spareTimer !== null) clearTimeout(spareTimer);
  spareTimer = setTimeout(drawOneSpare, SPARE_DELAY_MS);
}

/** The plot on screen of `state`'s chart. @param {ChartState} state */
export function mainPlot(state) {
  return /** @type {HTMLElement | null} */ (state.parent.querySelector(":scope > .explorer-chart"));
}

/** The first head `state` shows no spare of yet, or -1. @param {ChartState} state */
function missingHead(state) {
  const heads = state.header.heads ?? [];
  return heads.findIndex((/** @type {any} */ _, /** @type {number} */ h) =>
    h !== state.drawn?.head && !state.spares.byHead.has(h));
}

/** Whether the page is still at work on a run: Streamlit's script running or a
 * chart drawing. Spares wait for it, so that they never delay a run's charts. */
function pageBusy() {
  return scriptRunning() || [...PAGE.charts].some((gd) => gd.dataset.drawing);
}

async function drawOneSpare() {
  spareTimer = null;
  if (pageBusy()) {
    spareTimer = setTimeout(drawOneSpare, SPARE_DELAY_MS);
    return;
  }
  /** @type {{main: HTMLElement, state: ChartState, distance: number} | null} */
  let best = null;
  for (const state of SPARE_JOBS) {
    const main = mainPlot(state);
    if (!state.parent.isConnected || !main || chartOf(main) !== state || !state.drawn
        || missingHead(state) < 0) {
      SPARE_JOBS.delete(state);
    } else if (!main.dataset.drawing) {
      const distance = distanceFromView(main);
      if (!best || distance < best.distance) best = { main, state, distance };
    }
  }
  if (best) {
    const { main, state } = best;
    const head = missingHead(state);
    const gd = document.createElement("div");
    gd.className = "explorer-spare";
    gd.setAttribute("aria-hidden", "true");
    gd.style.width = `${main.clientWidth}px`;
    main.parentElement?.insertBefore(gd, main);
    const spare = { gd, drawn: null, marks: null };
    state.spares.byHead.set(head, spare);
    await drawHead(spare, main, state, head).catch(() => gd.remove());
  }
  if (SPARE_JOBS.size && spareTimer === null) {
    spareTimer = setTimeout(drawOneSpare, best ? 0 : SPARE_DELAY_MS); // else: wait for draws
  }
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

/**
 * Draw into `spare.gd` the chart `main` shows, as it looks for `head` (the
 * layout `main` has measured, the variant's matrix, title and outlines for the view).
 * @param {{gd: any, drawn: any, marks: any}} spare @param {HTMLElement} main
 * @param {ChartState} state @param {number} head
 */
async function drawHead(spare, main, state, head) {
  const payload = state.picture;
  const shown = figureFor(state.header, { ...PAGE.view, head }, PAGE.known);
  const { traces, layout, config } = headPicture(main, state, shown);
  const Plotly = await loadPlotly(state.header.plotly);
  await Plotly.react(spare.gd, traces, layout, config);
  spare.drawn = { head, layout, config, marks: JSON.stringify(layout.shapes ?? []), payload };
  spare.marks = shown.marks;
  listenForClicks(spare.gd);
}

/**
 * Put the spare of `head` on screen in place of `gd`, which becomes the spare
 * of the head it showed; the chart's state, data attributes and place in the
 * page move with it. Returns the plot now on screen, or null without a spare.
 * @param {HTMLElement} gd @param {ChartState} state @param {number | null} head
 * @returns {HTMLElement | null}
 */
export function swapIn(gd, state, head) {
  const spares = state.spares.byHead;
  const spare = head === null ? undefined : spares.get(head);
  // Only a spare of the payload the chart holds now: one drawn before new numbers
  // came shows the old ones (seen once under load: a head switch showed them).
  if (!spare?.drawn || spare.drawn.payload !== state.picture || !state.drawn || head === null) {
    return null;
  }
  const old = state.drawn;
  const width = drawnWidth(gd); // no forced layout
  spares.delete(head);
  if (old.head !== null) spares.set(old.head, { gd, drawn: old, marks: state.marks });
  state.drawn = spare.drawn;
  state.marks = spare.marks;
  moveChart(gd, spare.gd, state);
  Object.assign(spare.gd.dataset, gd.dataset);
  // No node moves, no visibility change: only the two plots' own classes and
  // positions change, so the browser restyles two elements, not two subtrees
  // (moving them cost ~90 ms of style recalculation for 7 charts). classList,
  // not className: Plotly's own class (js-plotly-plot) scopes its CSS.
  spare.gd.classList.replace("explorer-spare", "explorer-chart");
  spare.gd.removeAttribute("aria-hidden");
  spare.gd.style.width = "";
  gd.classList.replace("explorer-chart", "explorer-spare");
  gd.setAttribute("aria-hidden", "true");
  gd.style.width = `${width}px`;
  return spare.gd;
}
