// @ts-check
// Following the page's view: a click, a picker or the line view's switch
// changes it (`setView`), and every chart redraws only what the change touches
// (`follow`): the charts in view in the same frame, then the others nearest
// first.

import { followLines } from "./line-view.js";
import { loadPlotly } from "./loader.js";
import { painted } from "./painted.js";
import { distanceFromView } from "./schedule.js";
import { headPicture, swapIn } from "./spares.js";
import { chartOf, PAGE } from "./state.js";
import { figureFor } from "./view.js";

/** @typedef {import("./state.js").ChartState} ChartState */
/** @typedef {import("./view.js").View} View */

// Following the charts out of view yields a frame whenever one has taken this long.
const FRAME_BUDGET_MS = 12;

/**
 * Change the page's view (a click, a picker) and let every chart follow it:
 * the charts in view all in the next frame, then the others nearest first, a
 * frame whenever one has taken FRAME_BUDGET_MS, so that the page stays
 * responsive. A later change starts over (each chart compares with what it
 * shows). The server hears of the change separately and confirms it with its
 * payloads. (Streamlit sends a trigger value from a timer task, so the charts in
 * view are drawn before its message leaves: following them in a later task
 * sent it 30-90 ms sooner, but put the outlines past 100 ms.)
 * @param {Partial<View>} change
 */
export function setView(change) {
  Object.assign(PAGE.view, change);
  PAGE.known = true;
  for (const picker of PAGE.pickers) {
    if (!picker.box.isConnected) PAGE.pickers.delete(picker);
    else picker.show(PAGE.view[/** @type {keyof View} */ (picker.name)]);
  }
  for (const gd of PAGE.charts) if (!gd.isConnected) PAGE.charts.delete(gd);
  const order = [...PAGE.charts].map((gd) => /** @type {[number, HTMLElement]} */ (
    [distanceFromView(gd), gd])).sort((a, b) => a[0] - b[0]);
  const round = (PAGE.round += 1);
  (async () => {
    let since = performance.now();
    for (const [distance, gd] of order) {
      if (round !== PAGE.round) return; // a newer change took over
      if (distance > 0 && performance.now() - since > FRAME_BUDGET_MS) {
        await nextFrame();
        since = performance.now();
        if (round !== PAGE.round) return;
      }
      const state = chartOf(gd);
      if (!state) continue;
      state.cause = "view";
      await follow(gd, state);
    }
  })();
}

function nextFrame() {
  return new Promise((resolve) => requestAnimationFrame(() => resolve(undefined)));
}

/**
 * Follow the page's view in one chart: show the head it wants now (a spare
 * swapped in, else one redraw with the layout already measured: every head's
 * matrix has the same shape), else move its outlines (a cheap relayout of its
 * shapes) if they changed; then its line view. Resolves to whether anything was drawn.
 * @param {HTMLElement} gd the plot on screen @param {ChartState} state
 */
export async function follow(gd, state) {
  const { drew, main } = await followChart(gd, state);
  return (await followLines(main, state)) || drew;
}

/**
 * Resolves to {drew: whether it drew, main: the plot on screen afterwards}.
 * @param {HTMLElement} gd @param {ChartState} state
 */
async function followChart(gd, state) {
  const drawn = state.drawn;
  if (!drawn || gd.dataset.drawing) return { drew: false, main: gd };
  const { header } = state;
  const Plotly = await loadPlotly(header.plotly);
  const shown = figureFor(header, PAGE.view, PAGE.known);
  const swapped = shown.head !== drawn.head ? swapIn(gd, state, shown.head) : null;
  if (swapped) {
    await moveMarks(swapped, state, shown);
    painted(swapped, state.cause);
    return { drew: true, main: swapped };
  }
  if (shown.head !== drawn.head) {
    const { traces, layout, config } = headPicture(gd, state, shown);
    await Plotly.react(gd, traces, layout, config);
    state.drawn = { head: shown.head, layout, config, marks: JSON.stringify(layout.shapes),
                    payload: state.picture };
    state.marks = shown.marks;
    painted(gd, state.cause);
    return { drew: true, main: gd };
  }
  const moved = await moveMarks(gd, state, shown);
  if (moved) painted(gd, state.cause);
  return { drew: moved, main: gd };
}

/**
 * Move `gd`'s outlines to those of `shown` (figureFor the view) if they differ
 * (a cheap relayout of its shapes). Resolves to whether it moved them.
 * @param {HTMLElement} gd @param {ChartState} state @param {ReturnType<typeof figureFor>} shown
 */
async function moveMarks(gd, state, shown) {
  const drawn = state.drawn;
  if (!state.header.marks || !PAGE.known || !drawn) return false;
  const shapes = shown.figure.layout.shapes ?? [];
  const text = JSON.stringify(shapes);
  if (text === drawn.marks) return false;
  drawn.marks = text;
  drawn.layout = { ...drawn.layout, shapes };
  const Plotly = await loadPlotly(state.header.plotly);
  await Plotly.relayout(gd, { shapes });
  return true;
}
