// The explorer's chart modules (explorer/render/chart/) as one: built by `python -m explorer.render.payload`; do not edit.
// ---- cells.js ----
// @ts-check
// Cell text: numbers as the explanations write them, and the decimals and font
// size a heatmap's cells can show them with. Pure: the text's width comes from
// a `measure` function (an SVG text in the browser, `measure.js`).

/** @typedef {(text: string, size: number) => number} Measure width in px of `text` at `size` px */

const CELL_FONT_FAMILY = '"Open Sans", verdana, arial, sans-serif'; // Plotly's own default
const MIN_GAP_PX = 2; // the least air between two numbers or tick labels (issue 31)
const CELL_PAD_PX = 4; // air beside a cell's number, in all: 2 px each side, so
// that neighbours keep MIN_GAP_PX and a 3-px outline on the cell's edge stays off it
const MIN_TEXT_HEIGHT_PX = 14;

/**
 * A number as the explanations write it (explorer.lessons.explain.number): the minus
 * sign U+2212, and no "−0.00" for a value that rounds to zero.
 * @param {number} v @param {number} decimals
 */
function formatted(v, decimals) {
  if (Number.isNaN(v)) return "NaN";
  if (v === Infinity) return "+∞";
  if (v === -Infinity) return "−∞";
  const text = v.toFixed(decimals);
  if (!text.startsWith("-")) return text;
  return /[1-9]/.test(text) ? `−${text.slice(1)}` : text.slice(1);
}

/**
 * Rows of a matrix for Plotly, with −∞, +∞ and NaN drawn as gaps; and the
 * smallest and largest finite value, whose texts are the longest.
 * @param {Float32Array} values @param {number} rows @param {number} cols
 * @returns {{rows: Float32Array[], finite: boolean, range: number[]}}
 */
function rowsOf(values, rows, cols) {
  let finite = true;
  let low = Infinity;
  let high = -Infinity;
  for (const v of values) {
    if (!Number.isFinite(v)) {
      finite = false;
      continue;
    }
    if (v < low) low = v;
    if (v > high) high = v;
  }
  const shown = finite ? values : values.map((v) => (Number.isFinite(v) ? v : NaN));
  const out = [];
  for (let r = 0; r < rows; r++) out.push(shown.subarray(r * cols, (r + 1) * cols));
  return { rows: out, finite, range: Number.isFinite(low) ? [low, high] : [] };
}

/**
 * `label(value)` of every value, as rows.
 * @param {ArrayLike<number>} values @param {number} rows @param {number} cols
 * @param {(v: number) => string} label
 * @returns {string[][]}
 */
function labelsOf(values, rows, cols, label) {
  const out = [];
  for (let r = 0; r < rows; r++) {
    const row = new Array(cols);
    for (let c = 0; c < cols; c++) row[c] = label(values[r * cols + c]);
    out.push(row);
  }
  return out;
}

/**
 * A line of text's height at `size` px where nothing measures it: Plotly's
 * font's box is about 1.36 em.
 * @param {number} size
 */
function lineHeightOf(size) {
  return Math.ceil(size * 1.36);
}

/**
 * The decimals and font size a cell of this size shows its numbers with: the
 * most decimals of `allowed` (4, 2) whose widest text, that of the smallest or
 * the largest value (`range`), fits the cell at one of `sizes` with CELL_PAD_PX
 * beside it and MIN_GAP_PX above (and at least MIN_TEXT_HEIGHT_PX tall); null for none.
 * @param {number} cellWidth @param {number} cellHeight @param {number[]} allowed
 * @param {number[]} range @param {number[]} sizes @param {Measure} measure
 * @param {(size: number) => number} [lineHeight] px of a line at `size` px
 * @returns {{decimals: number, size: number} | null}
 */
function textFor(cellWidth, cellHeight, allowed, range, sizes, measure,
                        lineHeight = lineHeightOf) {
  if (cellHeight < MIN_TEXT_HEIGHT_PX) return null;
  for (const decimals of allowed) {
    for (const size of sizes) {
      if (lineHeight(size) + MIN_GAP_PX > cellHeight) continue;
      const widest = Math.max(0, ...range.map((v) => measure(formatted(v, decimals), size)));
      if (widest + CELL_PAD_PX <= cellWidth) return { decimals, size };
    }
  }
  return null;
}

// ---- keys.js ----
// @ts-check
// A heatmap for the keyboard and a screen reader (issue 50): the cell cursor's
// moves, what is announced for a cell, the chart's accessible name and its
// matrix as table rows. Pure: access.js puts them in the page.


/** A chart's name lists at most this many tokens of an axis. */
const NAMED_LABELS = 12;

/**
 * Where the cursor at `cursor` goes on `key` in a `rows` × `cols` matrix:
 * ArrowDown / ArrowUp the next / previous row, ArrowRight / ArrowLeft the next /
 * previous column (stopping at the edges), Home / End the row's first / last
 * column; "explain" for Enter and Space, "leave" for Escape, null for any other key.
 * @param {{row: number, col: number}} cursor @param {string} key
 * @param {number} rows @param {number} cols
 * @returns {{row: number, col: number} | "explain" | "leave" | null}
 */
function moveCursor(cursor, key, rows, cols) {
  const { row, col } = cursor;
  const clamp = (/** @type {number} */ v, /** @type {number} */ n) => Math.max(0, Math.min(n - 1, v));
  switch (key) {
    case "ArrowDown": return { row: clamp(row + 1, rows), col };
    case "ArrowUp": return { row: clamp(row - 1, rows), col };
    case "ArrowRight": return { row, col: clamp(col + 1, cols) };
    case "ArrowLeft": return { row, col: clamp(col - 1, cols) };
    case "Home": return { row, col: 0 };
    case "End": return { row, col: cols - 1 };
    case "Enter": case " ": return "explain";
    case "Escape": return "leave";
    default: return null;
  }
}

/**
 * Text of a Plotly label as a reader hears it: its tags (<br>, <sub>) dropped
 * and the escapes of explorer.core.literal.plotly undone, so that a visitor's
 * "<b>" reads "<b>" (put in the page as text, never as HTML).
 * @param {unknown} text
 */
function plainText(text) {
  return String(text ?? "").replace(/<br\s*\/?>/gi, " ").replace(/<[^>]*>/g, "")
    .replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&amp;/g, "&");
}

/**
 * An axis title as the name and announcements say it: "query (row)" is "query"
 * (the sentence says which is the row).
 * @param {unknown} title
 */
function axisName(title) {
  return plainText(title).replace(/ \((row|column)\)$/, "");
}

/**
 * A cell's value in words, as the hover and the table write it: 4 decimals
 * with the minus sign U+2212; a causal mask's −∞ reads "masked (−∞)", not only
 * a grey gap.
 * @param {number} v @param {string[] | null} [words] a mask's two words (0, 1)
 */
function valueText(v, words = null) {
  if (words) return v > 0.5 ? words[1] : words[0];
  if (v === -Infinity) return "masked (−∞)";
  return formatted(v, 4);
}

/**
 * What a screen reader announces for the cell under the cursor: its row and
 * column tokens with the axes' titles, its value and its place.
 * @param {{rowTitle: string, colTitle: string, rowLabel: string, colLabel: string,
 *   value: string, row: number, col: number, rows: number, cols: number}} cell
 */
function cellAnnouncement(cell) {
  return `${cell.rowTitle} ${cell.rowLabel}, ${cell.colTitle} ${cell.colLabel}: ${cell.value}. `
    + `Row ${cell.row + 1} of ${cell.rows}, column ${cell.col + 1} of ${cell.cols}.`;
}

/**
 * Up to NAMED_LABELS of `labels`, then how many more.
 * @param {string[]} labels
 */
function someLabels(labels) {
  const shown = labels.slice(0, NAMED_LABELS).join(", ");
  return labels.length > NAMED_LABELS ? `${shown} and ${labels.length - NAMED_LABELS} more` : shown;
}

/**
 * A heatmap's accessible name: its title, its shape and its axes' tokens.
 * @param {string} title @param {string} rowTitle @param {string} colTitle
 * @param {string[]} rowLabels @param {string[]} colLabels
 */
function chartName(title, rowTitle, colTitle, rowLabels, colLabels) {
  return `Heatmap: ${title}. ${rowLabels.length} × ${colLabels.length} matrix; `
    + `rows (${rowTitle}): ${someLabels(rowLabels)}; columns (${colTitle}): ${someLabels(colLabels)}.`;
}

/**
 * The matrix as table rows of text, at most `limit` rows and columns: a header
 * row (the corner, then the column labels), then each row's label and values.
 * @param {ArrayLike<number>} values row-major @param {string[]} rowLabels
 * @param {string[]} colLabels @param {string[] | null} words @param {number} limit
 * @returns {string[][]}
 */
function tableRows(values, rowLabels, colLabels, words, limit) {
  const cols = colLabels.length;
  const shownCols = Math.min(cols, limit);
  const out = [["", ...colLabels.slice(0, shownCols)]];
  for (let r = 0; r < Math.min(rowLabels.length, limit); r++) {
    const row = [rowLabels[r]];
    for (let c = 0; c < shownCols; c++) row.push(valueText(values[r * cols + c], words));
    out.push(row);
  }
  return out;
}

// ---- seam.js ----
// @ts-check
// The one place that reaches what is not a public API: Plotly.js's private
// fields and DOM classes, and Streamlit's DOM attributes. Each assumption is
// listed in `SEAM_ASSUMPTIONS` and checked against the real libraries by
// tests/browser/test_browser_seam.py (`checkSeam`), which fails when an upgrade
// changes one of them.

/**
 * The plot area (the cells) of a drawn Plotly figure, in px, from Plotly's
 * private `_fullLayout.xaxis._length` / `yaxis._length`; null before the first
 * drawing.
 * @param {any} gd a Plotly graph div
 * @returns {{width: number, height: number} | null}
 */
function drawnPlotArea(gd) {
  const full = gd._fullLayout;
  if (full && full.xaxis && full.xaxis._length) {
    return { width: full.xaxis._length, height: full.yaxis._length };
  }
  return null;
}

/**
 * The width Plotly laid the figure out at (`_fullLayout.width`), without
 * forcing a layout; else the element's width.
 * @param {any} gd
 */
function drawnWidth(gd) {
  return gd._fullLayout?.width ?? gd.clientWidth;
}

/**
 * The screen box of the plot area, from Plotly's drag layer (`.nsewdrag`).
 * @param {Element} gd
 */
function plotAreaBox(gd) {
  return gd.querySelector(".nsewdrag")?.getBoundingClientRect() ?? null;
}

/**
 * The drawn title (Plotly's `.g-gtitle .gtitle`) and the figure's SVG (`.main-svg`).
 * @param {Element} gd
 */
function titleAndSvg(gd) {
  return { title: gd.querySelector(".g-gtitle .gtitle"), svg: gd.querySelector(".main-svg") };
}

/** Whether Streamlit is running the script (the app's `data-test-script-state`). */
function scriptRunning() {
  const app = /** @type {HTMLElement | null} */ (document.querySelector("[data-testid='stApp']"));
  return app?.dataset.testScriptState === "running";
}

const SEAM_ASSUMPTIONS = [
  "Plotly: a drawn heatmap's _fullLayout.xaxis._length and yaxis._length are its plot area in px",
  "Plotly: _fullLayout.width is the figure's width",
  "Plotly: .nsewdrag covers the plot area",
  "Plotly: the title is drawn as .g-gtitle .gtitle in a .main-svg (the first one is the figure's)",
  "Streamlit: [data-testid='stApp'] carries data-test-script-state, 'running' during a run",
];

/**
 * What no longer holds of `SEAM_ASSUMPTIONS` in a drawn figure `gd` (with a
 * title) on a Streamlit page that has finished its run: [] when all hold.
 * @param {any} gd
 * @returns {string[]}
 */
function checkSeam(gd) {
  const broken = [];
  const area = drawnPlotArea(gd);
  const box = plotAreaBox(gd);
  if (!area || !box || Math.abs(area.width - box.width) > 1 || Math.abs(area.height - box.height) > 1) {
    broken.push(`${SEAM_ASSUMPTIONS[0]}; ${SEAM_ASSUMPTIONS[2]} (area ${JSON.stringify(area)}, `
      + `drag box ${box && [box.width, box.height]})`);
  }
  const svg = gd.querySelector(".main-svg");
  if (!svg || Math.abs(drawnWidth(gd) - svg.getBoundingClientRect().width) > 1
      || typeof gd._fullLayout?.width !== "number") {
    broken.push(SEAM_ASSUMPTIONS[1]);
  }
  const { title } = titleAndSvg(gd);
  if (!title || !title.textContent || !title.closest(".main-svg")) broken.push(SEAM_ASSUMPTIONS[3]);
  const app = /** @type {HTMLElement | null} */ (document.querySelector("[data-testid='stApp']"));
  if (app?.dataset.testScriptState !== "notRunning" || scriptRunning()) {
    broken.push(`${SEAM_ASSUMPTIONS[4]} (now ${app?.dataset.testScriptState})`);
  }
  return broken;
}

// ---- decode.js ----
// @ts-check
// Decoding payloads (explorer.render.payload.encode): pure, apart from the matrix store
// it is handed.
//
// Payload: uint32 header length (little-endian), the header as UTF-8 JSON,
// zero padding to a multiple of 4, then one float32 block per entry of
// header.blocks that is not marked `cached`.

/** @typedef {{rows: number, cols: number, hash: string, cached: boolean}} Block */

/** The matrices a page holds, by hash, least recently used first, within a byte budget. */
class MatrixStore {
  /** @param {number} budget bytes kept at most */
  constructor(budget) {
    this.budget = budget;
    /** @type {Map<string, Float32Array>} */
    this.byHash = new Map();
  }

  /** @param {string} hash */
  get(hash) {
    return this.byHash.get(hash);
  }

  /** Keep `values` under `hash`, dropping the least recently kept beyond the budget.
   * @param {string} hash @param {Float32Array} values */
  keep(hash, values) {
    this.byHash.delete(hash);
    this.byHash.set(hash, values);
    let bytes = 0;
    for (const v of this.byHash.values()) bytes += v.byteLength;
    for (const [key, v] of this.byHash) {
      if (bytes <= this.budget) break;
      this.byHash.delete(key);
      bytes -= v.byteLength;
    }
  }
}

/**
 * The header and the matrices of a payload; `missing` lists the hashes of
 * matrices sent earlier (marked `cached`) that `store` no longer holds. Every
 * block sent is kept in `store`.
 * @param {ArrayBuffer | Uint8Array} bytes
 * @param {MatrixStore} store
 * @returns {{header: any, matrices: (Float32Array | undefined)[], missing: string[]}}
 */
function decodePayload(bytes, store) {
  const u8 = bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes);
  const view = new DataView(u8.buffer, u8.byteOffset, u8.byteLength);
  const headerLength = view.getUint32(0, true);
  const header = JSON.parse(new TextDecoder().decode(u8.subarray(4, 4 + headerLength)));
  let offset = 4 + headerLength + ((4 - (headerLength % 4)) % 4);
  const matrices = [];
  const missing = [];
  for (const block of /** @type {Block[]} */ (header.blocks)) {
    if (block.cached) {
      const known = store.get(block.hash);
      if (!known) missing.push(block.hash);
      matrices.push(known);
      continue;
    }
    const n = block.rows * block.cols;
    const values = new Float32Array(u8.buffer.slice(u8.byteOffset + offset,
                                                    u8.byteOffset + offset + 4 * n));
    offset += 4 * n;
    store.keep(block.hash, values);
    matrices.push(values);
  }
  return { header, matrices, missing };
}

// ---- state.js ----
// @ts-check
// What the page holds: its view, its charts and pickers, the matrices it was
// sent; and each chart's state in one object (`ChartState`), found through the
// plot element on screen (`chartOf`). A head switch that swaps in a spare plot
// moves that one object to it (`moveChart`).


/** @typedef {import("./view.js").View} View */

const MATRIX_CACHE_BYTES = 128 * 2 ** 20;

/**
 * The page's view and what follows it. `known` turns true once a payload from
 * the server has said what the view is (the standalone report never does: its
 * charts keep the outlines they were built with). `round` counts view changes
 * (`setView`). On `window`, so that every copy of these modules on a page (a
 * notebook's fragments each inline one) shares it.
 * @type {{view: View, known: boolean, charts: Set<HTMLElement>, pickers: Set<any>, round: number}}
 */
const PAGE = (/** @type {any} */ (window).__explorerPage ??= {
  view: { query: null, cell: null, head: 0, lines: false }, known: false, charts: new Set(),
  pickers: new Set(), round: 0,
});

/** @type {MatrixStore} hash -> matrix, shared by the page's charts (as `PAGE`) */
const MATRICES = (/** @type {any} */ (window).__explorerMatrices ??=
  new MatrixStore(MATRIX_CACHE_BYTES));

/**
 * What a plot shows, to swap it in or move its outlines without measuring
 * again: its head, its layout and config as drawn, and its outlines as JSON.
 * @typedef {{head: number | null, layout: any, config: any, marks: string,
 *   payload: string | null}} Drawn  payload: the `pictureKey` of the payload it shows
 */

/** One chart's state: its payload, what it shows, its spares and line view. */
class ChartState {
  /**
   * @param {HTMLElement} parent the Streamlit element that holds the chart
   */
  constructor(parent) {
    this.parent = parent;
    /** Mounted by `mountChart` (the floor page of `make bench` only draws): follows
     * the page's view, keeps spares and a line view. */
    this.mounted = false;
    /** @type {any} */
    this.header = null;
    /** @type {(Float32Array | undefined)[]} */
    this.matrices = [];
    /** @type {string | null} `pictureKey` of the payload it holds (set when one comes) */
    this.picture = null;
    /** @type {Drawn | null} what the plot on screen shows, once drawn */
    this.drawn = null;
    /** @type {any} the marks (explorer.render.figures) of the head on screen */
    this.marks = null;
    /** @type {((cell: {trace: number, row: number, col: number}) => void) | null} */
    this.onClick = null;
    /** @type {"view" | "server"} why the chart's pixels change next (`painted`) */
    this.cause = "server";
    /** How many drawings of this chart have started (the last one clears `data-drawing`). */
    this.drawRound = 0;
    /** @type {(always: boolean) => Promise<void> | undefined} draw the payload again */
    this.redraw = () => undefined;
    /** The element's width when last drawn, in px, the one before it, and when it
     * changed (ms): what `redrawOnResize` decides by. */
    this.width = parent?.clientWidth ?? 0;
    /** @type {number | null} */
    this.previousWidth = null;
    this.resizedAt = -Infinity;
    /** @type {{toggle: HTMLInputElement, box: HTMLElement} | null} the line view */
    this.lines = null;
    /** Spare plots of the other heads (spares.js): head -> plot and what it shows. */
    this.spares = { generation: 0, /** @type {Map<number, {gd: any, drawn: Drawn | null, marks: any}>} */
                    byHead: new Map() };
  }
}

/** @type {WeakMap<Element, ChartState>} plot on screen -> its chart's state (as `PAGE`) */
const STATES = (/** @type {any} */ (window).__explorerStates ??= new WeakMap());

/** The state of the chart whose plot on screen is `gd`, if any. @param {Element} gd */
function chartOf(gd) {
  return STATES.get(gd);
}

/** Make `gd` the plot on screen of `state`. @param {Element} gd @param {ChartState} state */
function attach(gd, state) {
  STATES.set(gd, state);
}

/**
 * Move `state` from the plot `from` to the plot `to` (a head switch swapped a
 * spare in): the one object moves, and the page's set of charts follows.
 * @param {HTMLElement} from @param {HTMLElement} to @param {ChartState} state
 */
function moveChart(from, to, state) {
  STATES.delete(from);
  STATES.set(to, state);
  PAGE.charts.delete(from);
  PAGE.charts.add(to);
}

// ---- style.js ----
// @ts-check
// The page's own CSS for pickers, the line view's switch, the plots kept
// off-screen (spares, a hidden line view) and a heatmap's cursor and table: added once.

const STYLE = `
.explorer-picker { font-family: inherit; margin-bottom: 0.5rem; }
.explorer-picker label { display: block; font-size: 14px; margin-bottom: 0.25rem;
  color: rgb(49, 51, 63); }
.explorer-picker select { width: 100%; font: inherit; font-size: 14px; padding: 0.5rem 0.6rem;
  border: 1px solid rgba(49, 51, 63, 0.2); border-radius: 0.5rem; background: #f0f2f6;
  color: rgb(49, 51, 63); }
.explorer-picker [role=radiogroup] { display: flex; flex-wrap: wrap; gap: 0; }
.explorer-picker button { font: inherit; font-size: 14px; padding: 0.25rem 0.75rem;
  border: 1px solid rgba(49, 51, 63, 0.2); background: #fff; color: rgb(49, 51, 63);
  cursor: pointer; margin-left: -1px; }
.explorer-picker button:first-child { border-radius: 0.5rem 0 0 0.5rem; margin-left: 0; }
.explorer-picker button:last-child { border-radius: 0 0.5rem 0.5rem 0; }
.explorer-offscreen { position: absolute !important; left: -100000px; top: 0;
  visibility: hidden; }
.explorer-spare { position: absolute !important; left: -100000px; top: 0; }
.explorer-lines-toggle { display: flex; align-items: center; gap: 0.4rem; font-size: 14px;
  margin: 0.25rem 0 0.5rem; cursor: pointer; color: rgb(49, 51, 63); }
.explorer-lines-toggle input { accent-color: #b3303d; width: 1rem; height: 1rem; }
.explorer-picker button[aria-checked=true] { color: #b3303d; border-color: #b3303d;
  background: rgba(255, 75, 75, 0.08); position: relative; }
/* Keyboard and screen reader (access.js): the cursor's element over the plot area while
   focused, a cursor ringed black and white (3:1 or more against any cell colour). */
.explorer-host { position: relative; }
.explorer-visually-hidden { position: absolute !important; width: 1px; height: 1px;
  overflow: hidden; clip-path: inset(50%); white-space: nowrap; }
.explorer-keys { position: absolute; left: 0; top: 0;
  pointer-events: none; outline: none; z-index: 1; }
.explorer-keys:focus-visible { outline: 3px solid #161514; outline-offset: 3px; }
.explorer-cursor { position: absolute; display: none; box-sizing: border-box;
  border: 3px solid #000; box-shadow: 0 0 0 2px #fff, inset 0 0 0 2px #fff; }
.explorer-keys:focus .explorer-cursor { display: block; }
.explorer-table { font-size: 14px; margin: 0.25rem 0 0.5rem; }
.explorer-table summary { cursor: pointer; min-height: 24px; color: rgb(49, 51, 63); }
.explorer-table table { border-collapse: collapse; margin-top: 0.25rem; display: block;
  overflow-x: auto; max-width: 100%; }
.explorer-table th, .explorer-table td { border: 1px solid #ccc; padding: 2px 6px;
  text-align: right; font-variant-numeric: tabular-nums; }
`;

/** Add the page's CSS, once. */
function addStyle() {
  if (document.getElementById("explorer-picker-style")) return;
  const style = document.createElement("style");
  style.id = "explorer-picker-style";
  style.textContent = STYLE;
  document.head.appendChild(style);
}

// ---- view.js ----
// @ts-check
// The page's view and what a chart draws for it: the head it shows, the
// variant of the figure for that head, and the outlines of the query token's
// row and of the explained cell. Pure.

/**
 * The page's view, shared by its charts and pickers: the query token (a row
 * index or null), the explained cell ([step, row, col, head] or null), the head
 * shown and whether the weights are drawn as lines.
 * @typedef {{query: number | null, cell: number[] | null, head: number, lines: boolean}} View
 */

const MARK_NAMES = ["query", "cell"]; // the shapes that follow the view (explorer.render.figures)

/**
 * The outlines of the page's view in a chart with `marks` (explorer.render.figures.
 * heatmap_chart): the query token's row where the rows are tokens, and the
 * explained cell where it lies (its step; its head for a per-head step; its
 * column among those the chart shows).
 * @param {any} marks @param {View} view @param {number | null} head
 * @returns {object[]}
 */
function markShapes(marks, view, head) {
  const out = [];
  const { rows, cols, styles } = marks;
  const offset = marks.colOffset ?? 0;
  if (marks.queryRows && view.query !== null && view.query !== undefined && view.query < rows) {
    out.push({ type: "rect", name: "query", xref: "paper", x0: 0, x1: 1, yref: "y",
               y0: view.query - 0.5, y1: view.query + 0.5, line: styles.query });
  }
  const cell = view.cell;
  if (cell && cell[0] === marks.step && (!marks.perHead || cell[3] === head)) {
    const [row, col] = [cell[1], cell[2] - offset];
    if (row < rows && col >= 0 && col < cols) {
      out.push({ type: "rect", name: "cell", xref: "x", yref: "y", x0: col - 0.5,
                 x1: col + 0.5, y0: row - 0.5, y1: row + 0.5, line: styles.cell });
    }
  }
  return out;
}

/**
 * The head a chart shows for `view`: the view's head where the chart carries
 * that head's variant, else the head it was built for; null for a chart whose
 * picture is the same for every head.
 * @param {any} header @param {View} view
 * @returns {number | null}
 */
function headShown(header, view) {
  const heads = header.heads;
  if (heads && view.head < heads.length) return view.head;
  return header.marks?.perHead || heads ? header.marks.head : null;
}

/**
 * `header.figure` as the page's view wants it: the variant of the head shown
 * (its matrix, title, colour range, frame and first column) and, once the
 * page's view is `known`, the view's outlines in place of those it was built with.
 * @param {any} header @param {View} view @param {boolean} known
 * @returns {{figure: {data: any[], layout: any}, marks: any, head: number | null, filename: string}}
 */
function figureFor(header, view, known) {
  const head = headShown(header, view);
  const variant = head === null ? undefined : header.heads?.[head];
  let { data, layout } = header.figure;
  let marks = header.marks;
  if (variant && head !== header.marks.head) {
    const [first, ...rest] = data;
    const trace = { ...first, matrix: { ...first.matrix, block: variant.block },
                    zmin: variant.zmin, zmax: variant.zmax, colorscale: variant.colorscale };
    if (variant.x) trace.x = variant.x;
    data = [trace, ...rest];
    layout = { ...layout, title: { ...layout.title, text: variant.title },
               shapes: (layout.shapes ?? []).map((/** @type {any} */ s) => (s.name === "frame"
                 ? { ...s, line: { ...s.line, color: variant.frame } } : s)) };
    marks = { ...marks, head, colOffset: variant.colOffset };
  }
  if (marks && known) {
    const others = (layout.shapes ?? []).filter((/** @type {any} */ s) => !MARK_NAMES.includes(s.name));
    layout = { ...layout, shapes: [...markShapes(marks, view, head), ...others] };
  }
  return { figure: { data, layout }, marks, head,
           filename: variant?.filename ?? header.filename };
}

/**
 * What a chart's picture depends on, apart from the view's outlines and head
 * (the outlines it was built with are left out):
 * two payloads with the same key draw the same picture. Blocks are named by
 * their hash (payloads built for different heads hold the same matrices in
 * another order).
 * @param {any} header
 */
function pictureKey(header) {
  const hashes = header.blocks.map((/** @type {any} */ b) => b.hash);
  const blank = { head: 0, query: null, cell: null, lines: false };
  return JSON.stringify(
    [figureFor(header, blank, true).figure, header.size, header.columns, header.heads,
     [...hashes].sort()],
    (key, value) => (key === "block" ? hashes[value] : value));
}

/**
 * The outlines to draw when a cell of a chart with `marks` is clicked: the
 * view change (its cell, and its row as the query where the rows are tokens),
 * or null for a chart that explains no cell.
 * @param {any} marks @param {{trace: number, row: number, col: number}} cell
 * @returns {Partial<View> | null}
 */
function viewOfClick(marks, cell) {
  if (!marks?.step) return null;
  /** @type {Partial<View>} */
  const change = { cell: [marks.step, cell.row, cell.col + (marks.colOffset ?? 0), marks.head] };
  if (marks.queryRows) change.query = cell.row;
  return change;
}

// ---- access.js ----
// @ts-check
// A heatmap for the keyboard and a screen reader (issue 50): its accessible
// name, a cell cursor moved by the keys (keys.js) whose Enter explains the
// cell through the same `onClick` as a mouse click, a live region that says
// the cell, and its matrix as a table behind a "Show as table" switch. Every
// label is put in the page as text (visitor tokens are never HTML).


/** @typedef {import("./state.js").ChartState} ChartState */

/** The table shows at most this many rows and columns (the CSV download has them all). */
const TABLE_LIMIT = 64;

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
function describeChart(parent, chart, onScreen) {
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

// ---- clicks.js ----
// @ts-check
// Clicks on a heatmap's cells, reported to the chart whose plot on screen was
// clicked (a plot drawn as a spare reports once it is swapped in).


/** @type {WeakSet<Element>} plots that report their clicks */
const LISTENING = new WeakSet();

/**
 * Report a click on a cell of `gd`'s heatmap to the `onClick` of the chart
 * whose plot on screen `gd` is (a head switch may swap it in later).
 * @param {any} gd
 */
function listenForClicks(gd) {
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

// ---- axes.js ----
// @ts-check
// Tick labels of a heatmap's category axes (tokens, dims) that never run into
// each other: every label, at the largest font that leaves MIN_GAP_PX between
// neighbours, while one fits; else every k-th label, which the axis title says
// (issue 31). Pure: the text's size comes from `measure` and `lineHeight`.


/** @typedef {import("./cells.js").Measure} Measure */

const TICK_SIZES = [12, 11, 10, 9]; // Plotly's tick font is 12 px
const EVERY = [1, 2, 3, 4, 5, 8, 10, 16, 20, 25, 32, 50, 64, 100, 128, 256, 512, 1024];

/**
 * Which labels of an axis of `labels.length` categories over `length` px to
 * draw, and at which font size: `every` 1 (all) where they fit, else the
 * smallest step of EVERY that leaves room. A label needs its line height (and
 * MIN_GAP_PX) of room on a vertical axis, its width on a horizontal one, and
 * its line height over sin(angle) when it is drawn at `angle` degrees.
 * @param {string[]} labels @param {number} length px @param {number} angle degrees
 * @param {boolean} vertical @param {Measure} measure
 * @param {(size: number) => number} lineHeight px of a line of text at `size` px
 * @returns {{every: number, size: number} | null}
 */
function tickPlan(labels, length, angle, vertical, measure, lineHeight) {
  if (!labels.length || !(length > 0)) return null;
  const spacing = length / labels.length;
  const need = (/** @type {number} */ size) => {
    if (vertical) return lineHeight(size) + MIN_GAP_PX;
    if (angle) return (lineHeight(size) + MIN_GAP_PX) / Math.sin((Math.abs(angle) * Math.PI) / 180);
    return Math.max(...labels.map((label) => measure(label, size))) + MIN_GAP_PX;
  };
  for (const size of TICK_SIZES) if (need(size) <= spacing) return { every: 1, size };
  const size = TICK_SIZES[0];
  const wanted = need(size) / spacing;
  return { every: EVERY.find((k) => k >= wanted) ?? Math.ceil(wanted), size };
}

/**
 * "2nd", "3rd", "4th", "21st" ...
 * @param {number} k
 */
function ordinal(k) {
  const tens = k % 100;
  const suffix = tens >= 11 && tens <= 13 ? "th" : ({ 1: "st", 2: "nd", 3: "rd" })[k % 10] ?? "th";
  return `${k}${suffix}`;
}

/**
 * `axis` (a layout axis) with the ticks of `plan`: every `plan.every`-th
 * category from the first, at `plan.size` px, and a title that says when not
 * every label is drawn.
 * @param {any} axis @param {{every: number, size: number}} plan
 */
function withTicks(axis, plan) {
  const out = { ...axis, tickmode: "linear", tick0: 0, dtick: plan.every,
                tickfont: { ...axis.tickfont, size: plan.size } };
  delete out.nticks;
  if (plan.every > 1) { // short: a vertical title longer than its plot runs into the chart's
    const title = typeof axis.title === "string" ? { text: axis.title } : axis.title ?? {};
    out.title = { ...title, text: `${title.text ?? ""}, every ${ordinal(plan.every)}` };
  }
  return out;
}

// ---- figure.js ----
// @ts-check
// Building a figure for Plotly from a payload's figure spec: heatmap traces
// with their matrices and cell text, the layout for the chart's width (a
// narrower layout, the toolbar's margin, the height), the config. Pure: the
// cell text's width comes from a `measure` function.


/** @typedef {import("./cells.js").Measure} Measure */
/** @typedef {{width: number, height: number}} Area the plot area (the cells), in px */

const TOOLBAR_PX = 36; // the upright Plotly toolbar's width and a little air
const MIN_TITLE_PX = 12; // a long title is drawn down to this size, then wrapped

/**
 * A heatmap trace from `spec` (whose `matrix` names its block and shape) with
 * its matrix and the cell text that fits cells of `area` / shape, and the
 * decimals printed (null for none).
 * @param {any} spec @param {(Float32Array | undefined)[]} matrices @param {Area} area
 * @param {number} nCharts charts in the page's row @param {Measure} measure
 * @param {(size: number) => number} [lineHeight] px of a line of text at `size` px
 * @returns {{trace: any, decimals: number | null}}
 */
function traceWithMatrix(spec, matrices, area, nCharts, measure,
                                lineHeight = lineHeightOf) {
  const m = spec.matrix;
  const values = /** @type {Float32Array} */ (matrices[m.block]);
  const { rows, finite, range } = rowsOf(values, m.rows, m.cols);
  const trace = { ...spec, z: rows };
  delete trace.matrix;
  const cellWidth = area.width / m.cols;
  const cellHeight = area.height / m.rows;
  const sizes = cellWidth >= 56 && nCharts === 1 ? [12, 10] : [10];
  const text = m.words ? (cellWidth >= 44 && cellHeight >= MIN_TEXT_HEIGHT_PX
    ? { decimals: 0, size: sizes[0] } : null)
    : textFor(cellWidth, cellHeight, m.decimals ?? [4, 2], range, sizes, measure, lineHeight);
  const decimals = text ? text.decimals : null;
  const word = (/** @type {number} */ v) => (v > 0.5 ? m.words[1] : m.words[0]);
  // Plotly's %{z:.4f} writes a hyphen: a matrix with a negative number gets its
  // hover labels from `formatted`, with the minus sign U+2212 as the page writes it.
  if (m.words || !finite || decimals !== null || range[0] < 0) {
    // a causal mask's −∞ reads "masked (−∞)", not only a grey gap (issue 50)
    const exact = m.words ? word : (/** @type {number} */ v) => valueText(v);
    trace.customdata = labelsOf(values, m.rows, m.cols, exact);
    trace.hovertemplate = `${m.hover}value: %{customdata}<extra></extra>`;
  } else {
    trace.hovertemplate = `${m.hover}value: %{z:.4f}<extra></extra>`;
  }
  if (spec.showscale) {
    const room = colorbarRoom(spec.colorbar, area.height, lineHeight);
    const ticks = colorbarTicks(spec.zmin, spec.zmax, room);
    trace.colorbar = { ...spec.colorbar, ...(ticks ? { tickmode: "array", ...ticks }
                                                   : { nticks: Math.floor(room) }) };
  }
  if (text && decimals !== null) {
    trace.text = m.words ? trace.customdata
      : labelsOf(values, m.rows, m.cols, (v) => formatted(v, decimals));
    trace.texttemplate = "%{text}";
    trace.textfont = { size: text.size };
  } else {
    trace.texttemplate = "";
  }
  return { trace, decimals };
}

const COLORBAR_AIR_PX = 6; // between two numbers on a colour bar

/**
 * How many numbers' pitches (a line of its tick font, 12 px by default, and
 * COLORBAR_AIR_PX) fit along the colour bar of a plot `height` px tall, at
 * least 2. Plotly draws the bar `len` of the plot's height (lenmode
 * "fraction") and places its numbers on that less `ypad` (10 px) at each end.
 * (A grid of heads passes one head's height, less than its bar's plot: fewer.)
 * @param {any} colorbar the trace's @param {number} height
 * @param {(size: number) => number} [lineHeight] px of a line of text at `size` px
 */
function colorbarRoom(colorbar, height, lineHeight = lineHeightOf) {
  const len = colorbar?.len ?? 1;
  const length = (colorbar?.lenmode === "pixels" ? len : Math.round(len * height))
    - 2 * (colorbar?.ypad ?? 10);
  return Math.max(2, length / (lineHeight(colorbar?.tickfont?.size ?? 12) + COLORBAR_AIR_PX));
}

/**
 * The numbers on a colour bar from `zmin` to `zmax` with room for `room` of
 * them (`colorbarRoom`): the multiples of the smallest step of 1, 2 or 5 × 10^k
 * that lie at least a pitch (1 / `room` of the bar) apart, at most `room` of
 * them in the range; where that leaves fewer than two (a short bar), the two
 * ends. A scale needs two numbers to be read, and numbers that touch cannot be
 * read: Plotly's own `nticks` is only an upper bound, and left a short bar one
 * number. A count alone is not enough: three numbers 2 apart fit a room of 3,
 * but on −3.8 to 3.8 they lie 2 / 7.6 of the bar apart, closer than 1 / 3.
 * Null when the range is empty or not finite (Plotly's default then).
 * @param {number} zmin @param {number} zmax @param {number} room at least 2
 * @returns {{tickvals: number[], ticktext: string[]} | null}
 */
function colorbarTicks(zmin, zmax, room) {
  const span = zmax - zmin;
  if (!Number.isFinite(span) || !(span > 0)) return null;
  let power = 10 ** (Math.floor(Math.log10(span / room)) - 1);
  for (;;) {
    for (const m of [1, 2, 5]) {
      const step = m * power;
      const first = Math.ceil(zmin / step - 1e-9);
      const count = Math.floor(zmax / step + 1e-9) - first + 1;
      if (count > room || span / step > room) continue;
      if (count < 2) {
        const decimals = Math.max(0, Math.min(4, 2 - Math.floor(Math.log10(
          Math.max(Math.abs(zmin), Math.abs(zmax))))));
        return { tickvals: [zmin, zmax], ticktext: [zmin, zmax].map((v) => formatted(v, decimals)) };
      }
      const decimals = Math.max(0, -Math.floor(Math.log10(step) + 1e-9));
      const tickvals = Array.from({ length: count }, (_, i) => (first + i) * step);
      return { tickvals, ticktext: tickvals.map((v) => formatted(v, decimals)) };
    }
    power *= 10;
  }
}

/**
 * The traces of `data` (a figure's), each heatmap with its matrix (`traceWithMatrix`).
 * @param {any[]} data @param {(Float32Array | undefined)[]} matrices @param {Area} area
 * @param {number} nCharts @param {Measure} measure
 * @param {(size: number) => number} [lineHeight]
 */
function tracesFor(data, matrices, area, nCharts, measure, lineHeight = lineHeightOf) {
  return data.map((spec) => (spec.matrix
    ? traceWithMatrix(spec, matrices, area, nCharts, measure, lineHeight).trace : spec));
}

/**
 * What the text of a picture depends on: each trace's cell text (its template,
 * size and first number, which shows the decimals) and colour bar's numbers,
 * and each axis's ticks. Numbers chosen for a guessed plot area and drawn
 * without this key changing would stay on a bar shorter than they were chosen for.
 * @param {{traces: any[], layout: any}} picture
 */
function textKey({ traces, layout }) {
  return JSON.stringify([traces.map((t) => [t.texttemplate, t.textfont?.size, t.text?.[0]?.[0],
                                            t.colorbar?.tickvals ?? t.colorbar?.nticks]),
                         [layout.xaxis, layout.yaxis].map((a) => [a?.dtick, a?.tickfont?.size])]);
}

/**
 * `layout` with the tick labels of a one-heatmap figure's category axes planned
 * for the plot `area` (`tickPlan`): every label while they fit, else every k-th,
 * said in the axis title. Other figures (grids of heads) keep Plotly's own ticks.
 * @param {any} layout @param {any[]} data @param {Area} area @param {Measure} measure
 * @param {(size: number) => number} [lineHeight]
 */
function layoutWithTicks(layout, data, area, measure, lineHeight = lineHeightOf) {
  if (data.length !== 1 || !data[0].matrix) return layout;
  const out = { ...layout };
  for (const [name, labels, length, vertical] of /** @type {const} */ ([
    ["xaxis", data[0].x, area.width, false], ["yaxis", data[0].y, area.height, true]])) {
    const axis = layout[name];
    if (!axis || axis.type !== "category" || !Array.isArray(labels)) continue;
    const plan = tickPlan(labels.map(String), length, vertical ? 0 : axis.tickangle ?? 0,
                          vertical, measure, lineHeight);
    if (plan) out[name] = withTicks(axis, plan);
  }
  return out;
}

/**
 * A guess at the plot area before Plotly has drawn the figure once.
 * @param {any} layout @param {number} clientWidth
 * @returns {Area}
 */
function estimatedPlotArea(layout, clientWidth) {
  const width = (layout.width ?? clientWidth ?? 600) - (layout.margin?.l ?? 80)
    - (layout.margin?.r ?? 80) - 60;
  return { width: Math.max(width, 50), height: (layout.height ?? 300) - 100 };
}

/**
 * A chart's height for its width: cells as square as the width allows (less
 * the toolbar's extra margin, which `width` leaves out), within the limits of
 * its `size` (explorer.render.figures).
 * @param {any} size @param {number} width
 */
function heightFor(size, width) {
  const cell = Math.min(size.max_cell, Math.max(1, (width - size.chrome) / size.cols));
  return Math.round(Math.min(size.max_height,
    Math.max(size.min_height, size.rows * cell + size.vertical)));
}

/**
 * The layout to draw `figureLayout` with at `width` px: autosized; the last of
 * the figure's narrower layouts whose `below` the width is under (fewer columns
 * of small multiples); without a touch screen, the toolbar upright in a right
 * margin of at least TOOLBAR_PX (so it never covers the title or the top-right
 * cells); and the height for the width.
 * @param {any} figureLayout @param {any} size the payload's `size` (or null)
 * @param {number} width @param {boolean} touch
 */
function layoutFor(figureLayout, size, width, touch) {
  const layout = { ...figureLayout, width: undefined, autosize: true };
  for (const narrower of size?.narrower ?? []) {
    if (width < narrower.below) {
      Object.assign(layout, narrower.layout);
      size = { ...size, ...narrower.size };
    }
  }
  const marginRight = layout.margin?.r ?? 0;
  if (!touch) {
    layout.modebar = { ...layout.modebar, orientation: "v" };
    layout.margin = { ...layout.margin, r: Math.max(marginRight, TOOLBAR_PX) };
  }
  if (size) layout.height = heightFor(size, width - ((layout.margin?.r ?? 0) - marginRight));
  return layout;
}

/**
 * The Plotly config of a chart: its toolbar on hover (none on a touch screen),
 * downloads named `filename`, and five buttons (PNG, SVG, zoom, pan, reset)
 * that stay one upright column, even on the shortest chart.
 * @param {string} filename @param {boolean} touch @param {object} svgButton
 */
function chartConfig(filename, touch, svgButton) {
  return {
    displaylogo: false,
    responsive: true,
    displayModeBar: touch ? false : "hover",
    toImageButtonOptions: { format: "png", filename, scale: 2 },
    modeBarButtonsToAdd: [svgButton],
    modeBarButtonsToRemove: ["select2d", "lasso2d", "autoScale2d", "zoomIn2d", "zoomOut2d",
      "toggleSpikelines", "hoverClosestCartesian", "hoverCompareCartesian"],
  };
}

/**
 * Words of `text` in lines of at most `perLine` characters (a longer word alone); a
 * number is never parted from the word before it ("head 1", "layer 2").
 * @param {string} text @param {number} perLine
 */
function wrapWords(text, perLine) {
  const lines = [];
  let line = "";
  for (const word of text.split(/ (?!\d)/)) { // "head 1": a number stays with its word
    if (line && line.length + 1 + word.length > perLine) {
      lines.push(line);
      line = word;
    } else {
      line = line ? `${line} ${word}` : word;
    }
  }
  return [...lines, line];
}

/**
 * A title drawn `width` px wide at `font` px, with `room` px beside it: null
 * when it fits; else the text and size to draw it with (smaller, down to
 * MIN_TITLE_PX, then wrapped at spaces) and the px its lines add.
 * @param {string} text @param {number} font @param {number} width @param {number} room
 * @returns {{text: string, size: number, extra: number} | null}
 */
function fittedTitle(text, font, width, room) {
  if (width <= room || room <= 0) return null;
  const size = Math.max(MIN_TITLE_PX, Math.floor((font * room) / width));
  const perLine = Math.floor((text.length * room * font) / (width * size));
  const lines = size * width <= room * font ? [text] : wrapWords(text, perLine);
  return { text: lines.join("<br>"), size, extra: Math.ceil((lines.length - 1) * size * 1.3) };
}

// ---- lines.js ----
// @ts-check
// The weights as lines (BertViz's head view), as a Plotly figure built from the
// matrix a chart holds, for the head and the query token the page shows. The
// spec (bins, threshold, colours, labels, words) comes from
// explorer.render.figures.lines_spec. Pure.


/**
 * The line view's figure of an (n, n) weights matrix: one line per weight of
 * at least `spec.threshold`, in bins of width and opacity, the query's lines
 * highlighted; invisible markers carry the hover text; the tokens at both ends.
 * @param {Float32Array} values row-major (n, n) @param {number} n
 * @param {any} spec @param {number | null | undefined} query @param {number | null} head
 * @returns {{data: any[], layout: any}}
 */
function linesFigure(values, n, spec, query, head) {
  const data = [];
  const hover = { x: [], y: [], text: [] };
  const hasQuery = query !== null && query !== undefined && query < n;
  let dropped = false;
  for (const v of values) if (!Number.isFinite(v) || v < 0) dropped = true;
  for (const [low, high, width, opacity] of spec.bins) {
    for (const highlighted of [false, true]) {
      if (highlighted && !hasQuery) continue;
      const xs = [];
      const ys = [];
      for (let i = 0; i < n; i++) {
        if (hasQuery && (i === query) !== highlighted) continue;
        for (let j = 0; j < n; j++) {
          const v = values[i * n + j];
          if (!Number.isFinite(v) || !(v > low) || (high !== null && v > high)
              || v < spec.threshold) continue;
          xs.push(0, 1, null);
          ys.push(i, j, null);
          hover.x.push(0.85);
          hover.y.push(i + 0.85 * (j - i));
          hover.text.push(`${spec.labels[i]} → ${spec.labels[j]}: α = ${formatted(v, 4)}`);
        }
      }
      if (!xs.length) continue;
      const legend = high !== null ? `α in (${low}, ${high}]` : `α > ${low}`;
      data.push({ type: "scatter", mode: "lines", x: xs, y: ys, name: legend,
                  showlegend: !highlighted, hoverinfo: "skip", legendgroup: legend, opacity,
                  line: { width, color: highlighted ? spec.highlight : spec.colour } });
    }
  }
  if (hover.x.length) {
    data.push({ type: "scatter", mode: "markers", x: hover.x, y: hover.y,
                hovertext: hover.text, hoverinfo: "text", showlegend: false,
                marker: { size: 8, color: "rgba(0,0,0,0)" } });
  }
  const rows = [...Array(n).keys()];
  for (const [x, side, what] of [[0, "middle left", "query"], [1, "middle right", "key"]]) {
    data.push({ type: "scatter", mode: spec.showLabels ? "text" : "markers", x: rows.map(() => x),
                y: rows, showlegend: false, text: spec.labels, textposition: side,
                hovertext: spec.labels.map((label, i) => `${what} ${i}: ${label}`),
                hoverinfo: "text", marker: { size: 3, color: "#555555" },
                textfont: { size: spec.fontSize } });
  }
  const notes = [];
  if (spec.threshold > 0) notes.push(`weights ≥ ${spec.threshold} only (${n} tokens)`);
  if (dropped) notes.push("negative and non-finite weights not drawn");
  const title = `${spec.label}${spec.perHead ? `, head ${head}` : ""}: query → key`
    + (notes.length ? `; ${notes.join(", ")}` : "");
  const width = spec.showLabels ? spec.labelWidth : 10;
  const layout = {
    title: { text: title, x: 0, xanchor: "left", font: { size: 15 } },
    xaxis: { visible: false, range: [-0.6, 1.6], fixedrange: true },
    yaxis: { visible: false, autorange: "reversed", fixedrange: true },
    margin: { l: 10 + Math.floor(width / 2), r: 10 + Math.floor(width / 2), t: 50, b: 10 },
    legend: { orientation: "h", y: -0.02, yanchor: "top", x: 0, title: { text: "weight" } },
    dragmode: false, hovermode: "closest", plot_bgcolor: "#ffffff", showlegend: true,
    height: Math.round(Math.min(2400, Math.max(260, n * 24 + 140))), autosize: true,
  };
  return { data, layout };
}

// ---- loader.js ----
// @ts-check
// Plotly.js on the page: loaded once, by whichever module draws first (a
// chart, a spare, a line view, a change of view).

/** @type {Promise<any> | null} */
let plotlyLoading = null;

/**
 * Plotly.js: `window.Plotly` where the page has it (the report inlines it),
 * else loaded once from `url`.
 * @param {string} url
 * @returns {Promise<any>}
 */
function loadPlotly(url) {
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

// ---- measure.js ----
// @ts-check
// What a drawing measures in the page before it lays out a figure: text as
// Plotly draws it, the plot area, and whether the screen has hover (a toolbar).


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
function textWidth(text, size) {
  return textBox(text, size).width;
}

/**
 * The height in px of a line of text at `size` px in the cells' font.
 * @param {number} size
 */
function lineHeight(size) {
  return textBox("Ag0", size).height;
}

/** Whether the page is on a touch screen (no hover: no toolbar). */
function touchScreen() {
  return Boolean(window.matchMedia?.("(hover: none)").matches);
}

/** The plot area of `gd` drawn with `layout`: as Plotly drew it, else a guess.
 * @param {any} gd @param {any} layout */
function plotArea(gd, layout) {
  return drawnPlotArea(gd) ?? estimatedPlotArea(layout, gd.clientWidth);
}

// ---- painted.js ----
// @ts-check
// Telling whoever measures (tests, `make bench`) that a chart's pixels changed,
// and why: every module that draws reports through here.

/**
 * Tell whoever measures (tests, `make bench`) that `el`'s pixels changed: the
 * time of the next frame, after the change is painted, and why it changed:
 * "view" (the page followed a click or a pick, `setView`) or "server" (a payload).
 * @param {HTMLElement} el @param {string} by
 */
function painted(el, by) {
  requestAnimationFrame(() => {
    el.dataset.painted = String(performance.now());
    el.dataset.paintedBy = by;
    el.dispatchEvent(new CustomEvent("explorer:painted", { bubbles: true, detail: { by } }));
  });
}

// ---- line-view.js ----
// @ts-check
// The line view under a weights chart: its switch and, while the page's view
// says so, the lines (`linesFigure`) for the head and query the chart shows.
// While it is off, the lines are drawn off-screen in idle time, so that
// turning it on only reveals them.


/** @typedef {import("./state.js").ChartState} ChartState */

/**
 * The switch and the box of the line view, once per chart (under its element).
 * `onToggle(on)` is called when the learner turns the switch on or off (the
 * chart tells the server and changes the page's view).
 * @param {HTMLElement} parent @param {any} spec explorer.render.figures.lines_spec
 * @param {(on: boolean) => void} onToggle
 */
function addLines(parent, spec, onToggle) {
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
async function followLines(gd, state) {
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

// ---- schedule.js ----
// @ts-check
// Drawing what the learner sees first (issue 26). A payload's chart in the
// window is drawn at once; the others are marked stale: those within one window's
// height of it are drawn next (the IntersectionObserver's first report, a frame
// later), the rest when they come near or when the page is idle, one per task
// and nearest first, yielding between charts. Drawing the near charts at once as
// well made the window's wait for them: Self-attention's first screen 2.48 s
// against 2.21 s (medians of 3, Chromium, 1400×900, 2 cores, 2026-11-25).
// A stale chart keeps its last picture, or reserves its height when it has none,
// so that nothing below it jumps when it is drawn. Tests and spares see a stale
// chart as drawing (`data-drawing`) until it is drawn.
// A new chart (no picture yet) is placed a frame later, once every chart mounted
// with it has reserved its height: a page's charts mount together, and read at
// once, the charts below the first one still lay in the window, so that eight
// of Self-attention's eleven were drawn at once on a first open, the window's
// own chart last (logged, 2026-11-26; the first screen then waited for Plotly.js
// to load more than for the drawing, README "Speed").

/**
 * How far an element lies from the window: 0 when it is in view.
 * @param {Element} el
 */
function distanceFromView(el) {
  const box = el.getBoundingClientRect();
  if (box.bottom >= 0 && box.top <= window.innerHeight) return 0;
  return box.top > window.innerHeight ? box.top - window.innerHeight : -box.bottom;
}

/** How near the window, in window heights, a stale chart is drawn as soon as it
 * is seen there (the IntersectionObserver's margin). */
const NEAR_SCREENS = 1;

/**
 * Whether a chart `distance` px from the window is drawn at once: in it (0).
 * @param {number} distance
 */
function drawnAtOnce(distance) {
  return distance === 0;
}

/**
 * The job of `jobs` nearest the window (`distance` of each), or null.
 * @template T @param {Iterable<T>} jobs @param {(job: T) => number} distance
 * @returns {T | null}
 */
function nearest(jobs, distance) {
  let best = null;
  let bestDistance = Infinity;
  for (const job of jobs) {
    const d = distance(job);
    if (d < bestDistance) [best, bestDistance] = [job, d];
  }
  return best;
}

/** @typedef {{plot: () => HTMLElement | null, redraw: () => Promise<void> | undefined}} Job */

/** @type {Set<Job>} stale charts, drawn when near or idle */
const STALE = new Set();
/** @type {IntersectionObserver | null} */
let observer = null;
/** @type {WeakMap<Element, Job>} */
const JOB_OF = new WeakMap();
let pumping = false;
let placing = false; // a frame is asked to place new charts (`drawInView`)

/**
 * Draw `job`'s chart now when it is in the window, else mark it stale: drawn
 * when it is (or comes) near, or when the page is idle. A chart that has no picture yet
 * reserves `height()` px (asked only then: the figure is laid out for it) and
 * is placed at the next frame (`drawInView`), with the charts mounted with it.
 * @param {Job} job @param {() => number | undefined} height
 */
function drawSoon(job, height) {
  const gd = job.plot();
  if (!gd) return;
  const earlier = JOB_OF.get(gd); // a payload that came while this chart was stale
  if (earlier) STALE.delete(earlier);
  const placed = gd.querySelector(".main-svg") !== null;
  if (!placed) {
    const reserved = height();
    if (reserved) gd.style.minHeight = `${reserved}px`;
  }
  if (typeof IntersectionObserver === "undefined"
      || (placed && drawnAtOnce(distanceFromView(gd)))) {
    drawNow(job);
    return;
  }
  if (!placed && !placing) {
    placing = true;
    requestAnimationFrame(drawInView);
  }
  gd.dataset.drawing = "1";
  STALE.add(job);
  JOB_OF.set(gd, job);
  observer ??= new IntersectionObserver((entries) => {
    for (const entry of entries) {
      // While another chart draws (the window's first), a near one waits for the
      // idle drawing, which takes the nearest first.
      const near = entry.isIntersecting ? JOB_OF.get(entry.target) : undefined;
      if (near && STALE.has(near) && !busy()) drawNow(near);
    }
  }, { rootMargin: `${NEAR_SCREENS * 100}% 0px` });
  observer.observe(gd);
  if (!pumping) {
    pumping = true;
    setTimeout(pump, 0);
  }
}

/** Draw the stale charts in the window (new charts, placed now that those
 * mounted with them have their heights). */
function drawInView() {
  placing = false;
  const inView = [...STALE].filter((job) => {
    const gd = job.plot();
    return gd?.isConnected && drawnAtOnce(distanceFromView(gd));
  });
  for (const job of inView) drawNow(job);
}

/** Whether the plot `gd` waits, stale, to be drawn. @param {Element} gd */
function isStale(gd) {
  const job = JOB_OF.get(gd);
  return job !== undefined && STALE.has(job);
}

/** Draw `job`'s chart now (no longer stale); resolves once it is drawn. @param {Job} job */
async function drawNow(job) {
  STALE.delete(job);
  const gd = job.plot();
  if (gd) observer?.unobserve(gd);
  try {
    await job.redraw();
  } finally {
    if (gd) gd.style.minHeight = "";
  }
}

/** Whether a chart is being drawn (not stale ones): the idle pump waits for it. */
function busy() {
  return [...document.querySelectorAll(".explorer-chart[data-drawing]")]
    .some((gd) => !isStale(gd));
}

/** Draw the stale chart nearest the window, one per task, once nothing else draws. */
async function pump() {
  for (const job of [...STALE]) {
    const gd = job.plot();
    if (!gd || !gd.isConnected) STALE.delete(job);
  }
  if (!STALE.size) {
    pumping = false;
    return;
  }
  if (!busy()) {
    const job = nearest(STALE, (j) => distanceFromView(/** @type {Element} */ (j.plot())));
    if (job) await drawNow(job);
  }
  const later = /** @type {any} */ (window).requestIdleCallback ?? setTimeout;
  later(pump, { timeout: 200 });
}

// ---- spares.js ----
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
function discardSpares(state) {
  const { spares } = state;
  spares.generation += 1;
  for (const { gd } of spares.byHead.values()) {
    /** @type {any} */ (window).Plotly?.purge(gd);
    gd.remove();
  }
  spares.byHead.clear();
}

/** Queue `state`'s other heads to be drawn as spares. @param {ChartState} state */
function predrawHeads(state) {
  const heads = state.header.heads;
  const m = state.header.figure.data[0]?.matrix;
  if (!heads || heads.length < 2 || !m || m.rows * m.cols * heads.length > PREDRAW_CELLS) return;
  addStyle(); // .explorer-spare
  SPARE_JOBS.add(state);
  if (spareTimer !== null) clearTimeout(spareTimer);
  spareTimer = setTimeout(drawOneSpare, SPARE_DELAY_MS);
}

/** The plot on screen of `state`'s chart. @param {ChartState} state */
function mainPlot(state) {
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
function headPicture(gd, state, shown) {
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
function swapIn(gd, state, head) {
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

// ---- draw.js ----
// @ts-check
// Drawing a chart with Plotly.js: draw (or update in place) the figure as the
// page's view wants it, fit a long title to its room, then let its line view
// and its spare heads follow.


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
async function draw(gd, header, matrices, onClick = null) {
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
async function drawChart(gd, state) {
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

// ---- page.js ----
// @ts-check
// Following the page's view: a click, a picker or the line view's switch
// changes it (`setView`), and every chart redraws only what the change touches
// (`follow`): the charts in view in the same frame, then the others nearest
// first.


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
function setView(change) {
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
async function follow(gd, state) {
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

// ---- resize.js ----
// @ts-check
// Whether a chart whose element changed width is drawn again. Pure: the state
// holds the widths and when they changed.

const RESIZE_MIN_PX = 8; // a chart is drawn again when its width changes by this much
const BOUNCE_MS = 1000; // a width left and come back within this is a bounce

/**
 * @typedef {{width: number, previousWidth: number | null, resizedAt: number}} Widths
 * the width the chart was last drawn for, the one before it, and when (ms) it changed
 */

/**
 * Whether the chart of `widths` is drawn again now that its element is `width`
 * px wide at time `now` (ms); updates `widths` when it is. Not for a change under
 * `RESIZE_MIN_PX`, and not for a bounce: a drawing that changes the chart's height
 * can bring or take away the page's scroll bar, which changes every chart's width
 * by its breadth; drawing again for the width just left would take it away or bring
 * it back, for ever. The picture is then kept (a scroll bar's breadth off).
 * @param {Widths} widths @param {number} width @param {number} now
 */
function redrawOnResize(widths, width, now) {
  if (Math.abs(width - widths.width) < RESIZE_MIN_PX) return false;
  if (width === widths.previousWidth && now - widths.resizedAt < BOUNCE_MS) return false;
  Object.assign(widths, { previousWidth: widths.width, width, resizedAt: now });
  return true;
}

// ---- pickers.js ----
// @ts-check
// Pickers of the page's view: the query token (a drop-down) and the head (a
// row of buttons). A choice changes the page's view at once, so every chart
// follows within a frame, and then tells the server (which confirms it).
// Spec (explorer/ui/component.py `picker`): {name, label, help, options: [labels],
// value: index or null, none: label of "no choice" or null, buttons: bool}.


/** One picker on the page: its element, the view value it picks, how it shows a value. */
class Picker {
  /** @param {HTMLElement} box @param {string} name */
  constructor(box, name) {
    this.box = box;
    this.name = name;
    /** @type {(value: number | null) => void} */
    this.choose = () => {};
  }

  /** Show `value` (an index, or null for no choice) as chosen. @param {any} value */
  show(value) {
    const select = this.box.querySelector("select");
    if (select) select.value = value === null || value === undefined ? "" : String(value);
    this.box.querySelectorAll("button").forEach((button, i) => {
      button.setAttribute("aria-checked", String(i === value));
    });
  }
}

/** @type {WeakMap<Element, Picker>} a picker's element -> the picker */
const PICKERS = new WeakMap();

/**
 * The `<select>` options of a drop-down: [value, text], with "" for `none`.
 * @param {string[]} options @param {string | null | undefined} none
 * @returns {[string, string][]}
 */
function selectOptions(options, none) {
  const picks = options.map((text, i) => /** @type {[string, string]} */ ([String(i), text]));
  return none !== null && none !== undefined ? [["", none], ...picks] : picks;
}

/**
 * Build a picker's element from its spec.
 * @param {any} spec @param {(value: number | null) => void} choose
 */
function buildPicker(spec, choose) {
  const box = document.createElement("div");
  box.className = "explorer-picker";
  box.dataset.name = spec.name;
  const id = `explorer-picker-${spec.name}`;
  const label = document.createElement("label");
  label.textContent = spec.label;
  if (spec.help) label.title = spec.help;
  box.appendChild(label);
  if (spec.buttons) {
    const group = document.createElement("div");
    group.setAttribute("role", "radiogroup");
    group.setAttribute("aria-label", spec.label);
    spec.options.forEach((/** @type {string} */ text, /** @type {number} */ i) => {
      const button = document.createElement("button");
      button.type = "button";
      button.setAttribute("role", "radio");
      button.textContent = text;
      button.addEventListener("click", () => choose(i));
      group.appendChild(button);
    });
    box.appendChild(group);
  } else {
    const select = document.createElement("select");
    select.id = id;
    label.htmlFor = id;
    for (const [value, text] of selectOptions(spec.options, spec.none)) {
      const option = document.createElement("option");
      option.value = value;
      option.textContent = text;
      select.appendChild(option);
    }
    select.addEventListener("change", () => choose(
      select.value === "" ? null : Number(select.value)));
    box.appendChild(select);
  }
  return box;
}

/**
 * The Streamlit component of a picker (explorer/ui/component.py `picker`).
 * @param {{data: any, parentElement: HTMLElement, setTriggerValue: (name: string, value: any) => void}} component
 */
function mountPicker(component) {
  const { data, parentElement, setTriggerValue } = component;
  if (!data) return;
  const spec = typeof data === "string" ? JSON.parse(data) : data;
  addStyle();
  let box = /** @type {HTMLElement | null} */ (parentElement.querySelector(":scope > .explorer-picker"));
  const shape = JSON.stringify([spec.name, spec.label, spec.options, spec.none, spec.buttons]);
  let picker = box && PICKERS.get(box);
  if (!box || !picker || box.dataset.shape !== shape) {
    box?.remove();
    const made = buildPicker(spec, (value) => PICKERS.get(made)?.choose(value));
    made.dataset.shape = shape;
    parentElement.appendChild(made);
    picker = new Picker(made, spec.name);
    PICKERS.set(made, picker);
    PAGE.pickers.add(picker);
  }
  picker.choose = (value) => {
    if (value === PAGE.view[/** @type {keyof import("./view.js").View} */ (spec.name)]) return;
    setTriggerValue("pick", value === null ? -1 : value);
    setView({ [spec.name]: value });
  };
  /** @type {any} */ (PAGE.view)[spec.name] = spec.value; // the server's choice wins when it speaks
  PAGE.known = true;
  picker.show(spec.value);
}

// ---- chart.js ----
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


export { draw };
export { loadPlotly };
export { mountPicker };
export { setView };
export { checkSeam };


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
