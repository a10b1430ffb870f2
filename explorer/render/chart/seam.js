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
export function drawnPlotArea(gd) {
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
export function drawnWidth(gd) {
  return gd._fullLayout?.width ?? gd.clientWidth;
}

/**
 * The screen box of the plot area, from Plotly's drag layer (`.nsewdrag`).
 * @param {Element} gd
 */
export function plotAreaBox(gd) {
  return gd.querySelector(".nsewdrag")?.getBoundingClientRect() ?? null;
}

/**
 * The drawn title (Plotly's `.g-gtitle .gtitle`) and the figure's SVG (`.main-svg`).
 * @param {Element} gd
 */
export function titleAndSvg(gd) {
  return { title: gd.querySelector(".g-gtitle .gtitle"), svg: gd.querySelector(".main-svg") };
}

/** Whether Streamlit is running the script (the app's `data-test-script-state`). */
export function scriptRunning() {
  const app = /** @type {HTMLElement | null} */ (document.querySelector("[data-testid='stApp']"));
  return app?.dataset.testScriptState === "running";
}

export const SEAM_ASSUMPTIONS = [
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
export function checkSeam(gd) {
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
