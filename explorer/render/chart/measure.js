// @ts-check
// What a drawing measures in the page before it lays out a figure: text as
// Plotly draws it, the plot area, and whether the screen has hover (a toolbar).

import { CELL_FONT_FAMILY } from "./cells.js";
import { estimatedPlotArea } from "./figure.js";
import { drawnPlotArea } from "./seam.js";

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
export function plotArea(gd, layout) {
  return drawnPlotArea(gd) ?? estimatedPlotArea(layout, gd.clientWidth);
}
