// @ts-check
// Cell text: numbers as the explanations write them, and the decimals and font
// size a heatmap's cells can show them with. Pure: the text's width comes from
// a `measure` function (an SVG text in the browser, `measure.js`).

/** @typedef {(text: string, size: number) => number} Measure width in px of `text` at `size` px */

export const CELL_FONT_FAMILY = '"Open Sans", verdana, arial, sans-serif'; // Plotly's own default
export const MIN_GAP_PX = 2; // the least air between two numbers or tick labels (issue 31)
export const CELL_PAD_PX = 4; // air beside a cell's number, in all: 2 px each side, so
// that neighbours keep MIN_GAP_PX and a 3-px outline on the cell's edge stays off it
export const MIN_TEXT_HEIGHT_PX = 14;

/**
 * A number as the explanations write it (explorer.lessons.explain.number): the minus
 * sign U+2212, and no "−0.00" for a value that rounds to zero.
 * @param {number} v @param {number} decimals
 */
export function formatted(v, decimals) {
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
export function rowsOf(values, rows, cols) {
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
export function labelsOf(values, rows, cols, label) {
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
export function lineHeightOf(size) {
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
export function textFor(cellWidth, cellHeight, allowed, range, sizes, measure,
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
