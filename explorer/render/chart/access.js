// @ts-check
// A heatmap for the keyboard and a screen reader (issue 50): its accessible
// name, a cell cursor moved by the keys (keys.js) whose Enter explains the
// cell through the same `onClick` as a mouse click, a live region that says
// the cell, and its matrix as a table behind a "Show as table" switch. Every
// label is put in the page as text (visitor tokens are never HTML).

import { axisName, cellAnnouncement, chartName, moveCursor, plainText, tableRows, valueText }
  from "./keys.js";
import { plotAreaBox } from "./seam.js";
import { PAGE } from "./state.js";
import { addStyle } from "./style.js";
import { figureFor } from "./view.js";

/** @typedef {import("./state.js").ChartState} ChartState */

/** The table shows at most this many rows and columns (the CSV download has them all). */
export const TABLE_LIMIT = 64;

let HINTS = 0;

/** @type {WeakMap<Element, () => void>} the cursor's element -> put it over the plot area */
const PLACERS = new WeakMap();

/**
 * The heatmap the chart shows now (the head on screen), as words: its name,
 * axes' titles and labels, its values and a mask's words; null for a chart
 * that is not one heatmap (a grid of heads, a line chart).
 * @param {ChartState} chart
 */
function shownMatrix(chart) {
  if (!chart.header) return null;
  const { figure } = figureFor(chart.header, PAGE.view, PAGE.known);
  const spec = figure.data[0];
  if (figure.data.length !== 1 || !spec?.matrix) return null;
  const values = chart.matrices[spec.matrix.block];
  if (!values) return null;
  const { layout } = figure;
  return {
    title: plainText(layout.title?.text),
    rowTitle: axisName(layout.yaxis?.title?.text ?? "row"),
    colTitle: axisName(layout.xaxis?.title?.text ?? "column"),
    rowLabels: (spec.y ?? []).map(plainText), colLabels: (spec.x ?? []).map(plainText),
    rows: spec.matrix.rows, cols: spec.matrix.cols, values,
    words: spec.matrix.words ?? null,
  };
}

/**
 * Give the chart of `parent` (whose plot on screen `onScreen()` returns) its
 * keyboard cursor, live region and table, once; then, on every call, its name
 * and table for what it shows now.
 * @param {HTMLElement} parent @param {ChartState} chart @param {() => HTMLElement} onScreen
 */
export function describeChart(parent, chart, onScreen) {
  if (!chart.header) return;
  let keys = /** @type {HTMLElement | null} */ (parent.querySelector(":scope > .explorer-keys"));
  if (!keys) keys = addKeys(parent, chart, onScreen);
  const matrix = shownMatrix(chart);
  const details = /** @type {HTMLDetailsElement} */ (parent.querySelector(":scope > .explorer-table"));
  details.hidden = !matrix;
  if (!matrix) { // a grid of heads, a line chart: a named picture, no cursor
    const { figure } = figureFor(chart.header, PAGE.view, PAGE.known);
    const heatmaps = figure.data.filter((/** @type {any} */ t) => t.matrix).length;
    keys.removeAttribute("tabindex");
    keys.removeAttribute("aria-roledescription");
    keys.removeAttribute("aria-describedby");
    keys.setAttribute("role", "img");
    keys.setAttribute("aria-label", `Chart: ${plainText(figure.layout.title?.text) || "untitled"}`
      + (heatmaps > 1 ? `, ${heatmaps} heatmaps` : ""));
    return;
  }
  keys.tabIndex = 0;
  keys.setAttribute("aria-describedby", keys.dataset.hint ?? "");
  keys.setAttribute("role", "application");
  keys.setAttribute("aria-roledescription", "heatmap");
  keys.setAttribute("aria-label", chartName(matrix.title, matrix.rowTitle, matrix.colTitle,
                                            matrix.rowLabels, matrix.colLabels));
  PLACERS.get(keys)?.();
  if (details.open) fillTable(details, chart);
}

/**
 * The cursor's element (focusable, over the plot area while focused), the live
 * region and the table's switch, added to `parent`.
 * @param {HTMLElement} parent @param {ChartState} chart @param {() => HTMLElement} onScreen
 */
function addKeys(parent, chart, onScreen) {
  addStyle();
  parent.classList.add("explorer-host");
  const hint = document.createElement("p");
  hint.id = `explorer-keys-hint-${++HINTS}`;
  hint.className = "explorer-visually-hidden";
  hint.textContent = "Arrow keys move the cell cursor, Home and End go to the row's ends, "
    + "Enter explains the cell, Escape leaves the chart.";
  const keys = document.createElement("div");
  keys.className = "explorer-keys";
  keys.dataset.hint = hint.id; // what the keys do, said after the chart's name
  const cursor = document.createElement("div");
  cursor.className = "explorer-cursor";
  keys.append(cursor);
  const live = document.createElement("div");
  live.className = "explorer-visually-hidden explorer-live";
  live.setAttribute("aria-live", "polite");
  const details = document.createElement("details");
  details.className = "explorer-table";
  const summary = document.createElement("summary");
  summary.textContent = "Show as table";
  details.append(summary);
  details.addEventListener("toggle", () => { if (details.open) fillTable(details, chart); });
  parent.prepend(hint, keys, live);
  parent.append(details);
  let at = { row: 0, col: 0 };
  const place = () => {
    const matrix = shownMatrix(chart);
    const area = plotAreaBox(onScreen());
    if (!matrix || !area) return null;
    at = { row: Math.min(at.row, matrix.rows - 1), col: Math.min(at.col, matrix.cols - 1) };
    const host = parent.getBoundingClientRect();
    Object.assign(keys.style, { left: `${area.left - host.left}px`, top: `${area.top - host.top}px`,
                                width: `${area.width}px`, height: `${area.height}px` });
    const w = area.width / matrix.cols;
    const h = area.height / matrix.rows;
    Object.assign(cursor.style, { left: `${at.col * w}px`, top: `${at.row * h}px`,
                                  width: `${w}px`, height: `${h}px` });
    return matrix;
  };
  const say = (/** @type {string} */ text) => { live.textContent = text; };
  const announce = () => {
    const matrix = place();
    if (!matrix) return;
    const value = matrix.values[at.row * matrix.cols + at.col];
    say(cellAnnouncement({ ...matrix, rowLabel: matrix.rowLabels[at.row] ?? "",
                           colLabel: matrix.colLabels[at.col] ?? "",
                           value: valueText(value, matrix.words),
                           row: at.row, col: at.col }));
  };
  PLACERS.set(keys, place);
  keys.addEventListener("focus", () => {
    describeChart(parent, chart, onScreen); // the head shown may have changed since
    announce();
  });
  keys.addEventListener("keydown", (event) => {
    const matrix = shownMatrix(chart);
    if (!matrix || event.altKey || event.ctrlKey || event.metaKey) return;
    const next = moveCursor(at, event.key, matrix.rows, matrix.cols);
    if (next === null) return;
    event.preventDefault();
    if (next === "leave") {
      keys.blur();
    } else if (next === "explain") {
      if (chart.onClick) {
        chart.onClick({ trace: 0, row: at.row, col: at.col }); // as a click on the cell
        say(`Explained: ${matrix.rowLabels[at.row] ?? ""}, ${matrix.colLabels[at.col] ?? ""}.`);
      } else {
        say("This chart explains no cell.");
      }
    } else {
      at = next;
      announce();
    }
  });
  return keys;
}

/**
 * (Re)build the table of the matrix `chart` shows, under its switch `details`:
 * row and column headers, the values as the hover writes them.
 * @param {HTMLDetailsElement} details @param {ChartState} chart
 */
function fillTable(details, chart) {
  details.querySelector("table")?.remove();
  details.querySelector("p")?.remove();
  const matrix = shownMatrix(chart);
  if (!matrix) return;
  const rows = tableRows(matrix.values, matrix.rowLabels, matrix.colLabels, matrix.words,
                         TABLE_LIMIT);
  const table = document.createElement("table");
  const caption = document.createElement("caption");
  caption.textContent = `${matrix.title}: rows ${matrix.rowTitle}, columns ${matrix.colTitle}`;
  table.append(caption);
  const head = document.createElement("thead");
  const body = document.createElement("tbody");
  rows.forEach((cells, r) => {
    const tr = document.createElement("tr");
    cells.forEach((text, c) => {
      const header = (r === 0) !== (c === 0); // the corner is an empty data cell
      const cell = document.createElement(header ? "th" : "td");
      cell.textContent = text;
      if (header) cell.setAttribute("scope", r === 0 ? "col" : "row");
      tr.append(cell);
    });
    (r === 0 ? head : body).append(tr);
  });
  table.append(head, body);
  table.tabIndex = 0; // it scrolls sideways when wide: reachable by keyboard
  details.append(table);
  if (matrix.rows > TABLE_LIMIT || matrix.cols > TABLE_LIMIT) {
    const note = document.createElement("p");
    note.textContent = `The first ${TABLE_LIMIT} rows and columns of ${matrix.rows} × `
      + `${matrix.cols}: the CSV download holds them all.`;
    details.append(note);
  }
}
