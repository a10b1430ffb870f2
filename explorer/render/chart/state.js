// @ts-check
// What the page holds: its view, its charts and pickers, the matrices it was
// sent; and each chart's state in one object (`ChartState`), found through the
// plot element on screen (`chartOf`). A head switch that swaps in a spare plot
// moves that one object to it (`moveChart`).

import { MatrixStore } from "./decode.js";

/** @typedef {import("./view.js").View} View */

const MATRIX_CACHE_BYTES = 128 * 2 ** 20;

/**
 * The page's view and what follows it. `known` turns true once a payload from
 * the server has said what the view is (the standalone report never does: its
 * charts keep the outlines they were built with). `round` counts view changes
 * (`setView`). On `window`, so that every copy of these modules on a page (a
 * notebook's fragments each inline one) shares it.
 * @type {{view: View, known: boolean, charts: Set<HTMLElement>, pickers: Set<any>, round: number}}
 */
export const PAGE = (/** @type {any} */ (window).__explorerPage ??= {
  view: { query: null, cell: null, head: 0, lines: false }, known: false, charts: new Set(),
  pickers: new Set(), round: 0,
});

/** @type {MatrixStore} hash -> matrix, shared by the page's charts (as `PAGE`) */
export const MATRICES = (/** @type {any} */ (window).__explorerMatrices ??=
  new MatrixStore(MATRIX_CACHE_BYTES));

/**
 * What a plot shows, to swap it in or move its outlines without measuring
 * again: its head, its layout and config as drawn, and its outlines as JSON.
 * @typedef {{head: number | null, layout: any, config: any, marks: string,
 *   payload: string | null}} Drawn  payload: the `pictureKey` of the payload it shows
 */

/** One chart's state: its payload, what it shows, its spares and line view. */
export class ChartState {
  /**
   * @param {HTMLElement} parent the Streamlit element that holds the chart
   */
  constructor(parent) {
    this.parent = parent;
    /** Mounted by `mountChart` (the floor page of `make bench` only draws): follows
     * the page's view, keeps spares and a line view. */
    this.mounted = false;
    /** @type {any} */
    this.header = null;
    /** @type {(Float32Array | undefined)[]} */
    this.matrices = [];
    /** @type {string | null} `pictureKey` of the payload it holds (set when one comes) */
    this.picture = null;
    /** @type {Drawn | null} what the plot on screen shows, once drawn */
    this.drawn = null;
    /** @type {any} the marks (explorer.render.figures) of the head on screen */
    this.marks = null;
    /** @type {((cell: {trace: number, row: number, col: number}) => void) | null} */
    this.onClick = null;
    /** @type {"view" | "server"} why the chart's pixels change next (`painted`) */
    this.cause = "server";
    /** How many drawings of this chart have started (the last one clears `data-drawing`). */
    this.drawRound = 0;
    /** @type {(always: boolean) => Promise<void> | undefined} draw the payload again */
    this.redraw = () => undefined;
    /** The element's width when last drawn, in px, the one before it, and when it
     * changed (ms): what `redrawOnResize` decides by. */
    this.width = parent?.clientWidth ?? 0;
    /** @type {number | null} */
    this.previousWidth = null;
    this.resizedAt = -Infinity;
    /** @type {{toggle: HTMLInputElement, box: HTMLElement} | null} the line view */
    this.lines = null;
    /** Spare plots of the other heads (spares.js): head -> plot and what it shows. */
    this.spares = { generation: 0, /** @type {Map<number, {gd: any, drawn: Drawn | null, marks: any}>} */
                    byHead: new Map() };
  }
}

/** @type {WeakMap<Element, ChartState>} plot on screen -> its chart's state (as `PAGE`) */
const STATES = (/** @type {any} */ (window).__explorerStates ??= new WeakMap());

/** The state of the chart whose plot on screen is `gd`, if any. @param {Element} gd */
export function chartOf(gd) {
  return STATES.get(gd);
}

/** Make `gd` the plot on screen of `state`. @param {Element} gd @param {ChartState} state */
export function attach(gd, state) {
  STATES.set(gd, state);
}

/**
 * Move `state` from the plot `from` to the plot `to` (a head switch swapped a
 * spare in): the one object moves, and the page's set of charts follows.
 * @param {HTMLElement} from @param {HTMLElement} to @param {ChartState} state
 */
export function moveChart(from, to, state) {
  STATES.delete(from);
  STATES.set(to, state);
  PAGE.charts.delete(from);
  PAGE.charts.add(to);
}
