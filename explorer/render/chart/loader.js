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
export function loadPlotly(url) {
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
