// @ts-check
// A heatmap for the keyboard and a screen reader (issue 50): the cell cursor's
// moves, what is announced for a cell, the chart's accessible name and its
// matrix as table rows. Pure: access.js puts them in the page.

import { formatted } from "./cells.js";

/** A chart's name lists at most this many tokens of an axis. */
export const NAMED_LABELS = 12;

/**
 * Where the cursor at `cursor` goes on `key` in a `rows` × `cols` matrix:
 * ArrowDown / ArrowUp the next / previous row, ArrowRight / ArrowLeft the next /
 * previous column (stopping at the edges), Home / End the row's first / last
 * column; "explain" for Enter and Space, "leave" for Escape, null for any other key.
 * @param {{row: number, col: number}} cursor @param {string} key
 * @param {number} rows @param {number} cols
 * @returns {{row: number, col: number} | "explain" | "leave" | null}
 */
export function moveCursor(cursor, key, rows, cols) {
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
export function plainText(text) {
  return String(text ?? "").replace(/<br\s*\/?>/gi, " ").replace(/<[^>]*>/g, "")
    .replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&amp;/g, "&");
}

/**
 * An axis title as the name and announcements say it: "query (row)" is "query"
 * (the sentence says which is the row).
 * @param {unknown} title
 */
export function axisName(title) {
  return plainText(title).replace(/ \((row|column)\)$/, "");
}

/**
 * A cell's value in words, as the hover and the table write it: 4 decimals
 * with the minus sign U+2212; a causal mask's −∞ reads "masked (−∞)", not only
 * a grey gap.
 * @param {number} v @param {string[] | null} [words] a mask's two words (0, 1)
 */
export function valueText(v, words = null) {
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
export function cellAnnouncement(cell) {
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
export function chartName(title, rowTitle, colTitle, rowLabels, colLabels) {
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
export function tableRows(values, rowLabels, colLabels, words, limit) {
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
