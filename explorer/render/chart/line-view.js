// @ts-check
// The line view under a weights chart: its switch and, while the page's view
// says so, the lines (`linesFigure`) for the head and query the chart shows.
// While it is off, the lines are drawn off-screen in idle time, so that
// turning it on only reveals them.

import { linesFigure } from "./lines.js";
import { loadPlotly } from "./loader.js";
import { touchScreen } from "./measure.js";
import { painted } from "./painted.js";
import { PAGE } from "./state.js";
import { addStyle } from "./style.js";
import { figureFor } from "./view.js";

/** @typedef {import("./state.js").ChartState} ChartState */

/**
 * The switch and the box of the line view, once per chart (under its element).
 * `onToggle(on)` is called when the learner turns the switch on or off (the
 * chart tells the server and changes the page's view).
 * @param {HTMLElement} parent @param {any} spec explorer.render.figures.lines_spec
 * @param {(on: boolean) => void} onToggle
 */
export function addLines(parent, spec, onToggle) {
  let toggle = /** @type {HTMLInputElement | null} */ (
    parent.querySelector(":scope > .explorer-lines-toggle input"));
  let box = /** @type {HTMLElement | null} */ (parent.querySelector(":scope > .explorer-lines"));
  if (!toggle || !box) {
    addStyle();
    const label = document.createElement("label");
    label.className = "explorer-lines-toggle";
    label.title = spec.help;
    toggle = document.createElement("input");
    toggle.type = "checkbox";
    toggle.setAttribute("role", "switch");
    label.append(toggle, ` ${spec.toggle}`);
    box = document.createElement("div");
    box.className = "explorer-lines explorer-offscreen";
    parent.append(label, box);
  }
  const input = toggle;
  input.onchange = () => onToggle(input.checked);
  return { toggle: input, box };
}

/**
 * Show or hide the line view of the chart whose plot on screen is `gd`, as the
 * page's view says. Resolves to whether anything changed on screen.
 * @param {HTMLElement} gd @param {ChartState} state
 */
export async function followLines(gd, state) {
  if (!state.header.lines || !state.lines || !PAGE.known) return false;
  const { toggle, box } = state.lines;
  const on = Boolean(PAGE.view.lines);
  toggle.checked = on;
  const wasOn = !box.classList.contains("explorer-offscreen");
  if (!on) {
    box.classList.add("explorer-offscreen");
    box.style.width = `${gd.clientWidth}px`;
    const later = /** @type {any} */ (window).requestIdleCallback ?? setTimeout;
    later(() => drawLines(state), { timeout: 3000 });
    return wasOn;
  }
  box.classList.remove("explorer-offscreen");
  box.style.width = "";
  const drew = await drawLines(state);
  if (!drew && !wasOn) painted(box, state.cause);
  return drew || !wasOn;
}

/**
 * Draw the lines of `state`'s weights for the page's view into its line box,
 * unless they are drawn already. Resolves to whether it drew.
 * @param {ChartState} state
 */
async function drawLines(state) {
  if (!state.lines) return false;
  const { box } = state.lines;
  const spec = state.header.lines;
  const shown = figureFor(state.header, PAGE.view, PAGE.known);
  const block = shown.figure.data[0].matrix.block;
  const key = JSON.stringify([state.header.blocks[block].hash, shown.head, PAGE.view.query,
                              box.clientWidth]);
  if (key === box.dataset.key || !box.isConnected) return false;
  box.dataset.key = key;
  const Plotly = await loadPlotly(state.header.plotly);
  const { data, layout } = linesFigure(/** @type {Float32Array} */ (state.matrices[block]),
                                       spec.labels.length, spec, PAGE.view.query, shown.head);
  await Plotly.react(box, data, layout, {
    displaylogo: false, responsive: true,
    displayModeBar: touchScreen() ? false : "hover",
    toImageButtonOptions: { format: "png", filename: spec.filename, scale: 2 } });
  box.dataset.drawn = String(Number(box.dataset.drawn ?? 0) + 1);
  if (!box.classList.contains("explorer-offscreen")) painted(box, state.cause);
  return true;
}
