// @ts-check
// Whether a chart whose element changed width is drawn again. Pure: the state
// holds the widths and when they changed.

export const RESIZE_MIN_PX = 8; // a chart is drawn again when its width changes by this much
export const BOUNCE_MS = 1000; // a width left and come back within this is a bounce

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
export function redrawOnResize(widths, width, now) {
  if (Math.abs(width - widths.width) < RESIZE_MIN_PX) return false;
  if (width === widths.previousWidth && now - widths.resizedAt < BOUNCE_MS) return false;
  Object.assign(widths, { previousWidth: widths.width, width, resizedAt: now });
  return true;
}
