// @ts-check
// Tick labels of a heatmap's category axes (tokens, dims) that never run into
// each other: every label, at the largest font that leaves MIN_GAP_PX between
// neighbours, while one fits; else every k-th label, which the axis title says
// (issue 31). Pure: the text's size comes from `measure` and `lineHeight`.

import { MIN_GAP_PX } from "./cells.js";

/** @typedef {import("./cells.js").Measure} Measure */

export const TICK_SIZES = [12, 11, 10, 9]; // Plotly's tick font is 12 px
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
export function tickPlan(labels, length, angle, vertical, measure, lineHeight) {
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
export function ordinal(k) {
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
export function withTicks(axis, plan) {
  const out = { ...axis, tickmode: "linear", tick0: 0, dtick: plan.every,
                tickfont: { ...axis.tickfont, size: plan.size } };
  delete out.nticks;
  if (plan.every > 1) { // short: a vertical title longer than its plot runs into the chart's
    const title = typeof axis.title === "string" ? { text: axis.title } : axis.title ?? {};
    out.title = { ...title, text: `${title.text ?? ""}, every ${ordinal(plan.every)}` };
  }
  return out;
}
