// @ts-check
// Telling whoever measures (tests, `make bench`) that a chart's pixels changed,
// and why: every module that draws reports through here.

/**
 * Tell whoever measures (tests, `make bench`) that `el`'s pixels changed: the
 * time of the next frame, after the change is painted, and why it changed:
 * "view" (the page followed a click or a pick, `setView`) or "server" (a payload).
 * @param {HTMLElement} el @param {string} by
 */
export function painted(el, by) {
  requestAnimationFrame(() => {
    el.dataset.painted = String(performance.now());
    el.dataset.paintedBy = by;
    el.dispatchEvent(new CustomEvent("explorer:painted", { bubbles: true, detail: { by } }));
  });
}
