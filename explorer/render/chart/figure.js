// @ts-check
// Building a figure for Plotly from a payload's figure spec: heatmap traces
// with their matrices and cell text, the layout for the chart's width (a
// narrower layout, the toolbar's margin, the height), the config. Pure: the
// cell text's width comes from a `measure` function.

import { tickPlan, withTicks } from "./axes.js";
import { formatted, labelsOf, lineHeightOf, MIN_TEXT_HEIGHT_PX, rowsOf, textFor }
  from "./cells.js";
import { valueText } from "./keys.js";

/** @typedef {import("./cells.js").Measure} Measure */
/** @typedef {{width: number, height: number}} Area the plot area (the cells), in px */

export const TOOLBAR_PX = 36; // the upright Plotly toolbar's width and a little air
export const MIN_TITLE_PX = 12; // a long title is drawn down to this size, then wrapped

/**
 * A heatmap trace from `spec` (whose `matrix` names its block and shape) with
 * its matrix and the cell text that fits cells of `area` / shape, and the
 * decimals printed (null for none).
 * @param {any} spec @param {(Float32Array | undefined)[]} matrices @param {Area} area
 * @param {number} nCharts charts in the page's row @param {Measure} measure
 * @param {(size: number) => number} [lineHeight] px of a line of text at `size` px
 * @returns {{trace: any, decimals: number | null}}
 */
export function traceWithMatrix(spec, matrices, area, nCharts, measure,
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

export const COLORBAR_AIR_PX = 6; // between two numbers on a colour bar

/**
 * How many numbers' pitches (a line of its tick font, 12 px by default, and
 * COLORBAR_AIR_PX) fit along the colour bar of a plot `height` px tall, at
 * least 2. Plotly draws the bar `len` of the plot's height (lenmode
 * "fraction") and places its numbers on that less `ypad` (10 px) at each end.
 * (A grid of heads passes one head's height, less than its bar's plot: fewer.)
 * @param {any} colorbar the trace's @param {number} height
 * @param {(size: number) => number} [lineHeight] px of a line of text at `size` px
 */
export function colorbarRoom(colorbar, height, lineHeight = lineHeightOf) {
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
export function colorbarTicks(zmin, zmax, room) {
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
export function tracesFor(data, matrices, area, nCharts, measure, lineHeight = lineHeightOf) {
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
export function textKey({ traces, layout }) {
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
export function layoutWithTicks(layout, data, area, measure, lineHeight = lineHeightOf) {
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
export function estimatedPlotArea(layout, clientWidth) {
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
export function heightFor(size, width) {
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
export function layoutFor(figureLayout, size, width, touch) {
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
export function chartConfig(filename, touch, svgButton) {
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
export function wrapWords(text, perLine) {
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
export function fittedTitle(text, font, width, room) {
  if (width <= room || room <= 0) return null;
  const size = Math.max(MIN_TITLE_PX, Math.floor((font * room) / width));
  const perLine = Math.floor((text.length * room * font) / (width * size));
  const lines = size * width <= room * font ? [text] : wrapWords(text, perLine);
  return { text: lines.join("<br>"), size, extra: Math.ceil((lines.length - 1) * size * 1.3) };
}
