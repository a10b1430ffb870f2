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
export function distanceFromView(el) {
  const box = el.getBoundingClientRect();
  if (box.bottom >= 0 && box.top <= window.innerHeight) return 0;
  return box.top > window.innerHeight ? box.top - window.innerHeight : -box.bottom;
}

/** How near the window, in window heights, a stale chart is drawn as soon as it
 * is seen there (the IntersectionObserver's margin). */
export const NEAR_SCREENS = 1;

/**
 * Whether a chart `distance` px from the window is drawn at once: in it (0).
 * @param {number} distance
 */
export function drawnAtOnce(distance) {
  return distance === 0;
}

/**
 * The job of `jobs` nearest the window (`distance` of each), or null.
 * @template T @param {Iterable<T>} jobs @param {(job: T) => number} distance
 * @returns {T | null}
 */
export function nearest(jobs, distance) {
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
export function drawSoon(job, height) {
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
export function isStale(gd) {
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
