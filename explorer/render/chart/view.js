// @ts-check
// The page's view and what a chart draws for it: the head it shows, the
// variant of the figure for that head, and the outlines of the query token's
// row and of the explained cell. Pure.

/**
 * The page's view, shared by its charts and pickers: the query token (a row
 * index or null), the explained cell ([step, row, col, head] or null), the head
 * shown and whether the weights are drawn as lines.
 * @typedef {{query: number | null, cell: number[] | null, head: number, lines: boolean}} View
 */

export const MARK_NAMES = ["query", "cell"]; // the shapes that follow the view (explorer.render.figures)

/**
 * The outlines of the page's view in a chart with `marks` (explorer.render.figures.
 * heatmap_chart): the query token's row where the rows are tokens, and the
 * explained cell where it lies (its step; its head for a per-head step; its
 * column among those the chart shows).
 * @param {any} marks @param {View} view @param {number | null} head
 * @returns {object[]}
 */
export function markShapes(marks, view, head) {
  const out = [];
  const { rows, cols, styles } = marks;
  const offset = marks.colOffset ?? 0;
  if (marks.queryRows && view.query !== null && view.query !== undefined && view.query < rows) {
    out.push({ type: "rect", name: "query", xref: "paper", x0: 0, x1: 1, yref: "y",
               y0: view.query - 0.5, y1: view.query + 0.5, line: styles.query });
  }
  const cell = view.cell;
  if (cell && cell[0] === marks.step && (!marks.perHead || cell[3] === head)) {
    const [row, col] = [cell[1], cell[2] - offset];
    if (row < rows && col >= 0 && col < cols) {
      out.push({ type: "rect", name: "cell", xref: "x", yref: "y", x0: col - 0.5,
                 x1: col + 0.5, y0: row - 0.5, y1: row + 0.5, line: styles.cell });
    }
  }
  return out;
}

/**
 * The head a chart shows for `view`: the view's head where the chart carries
 * that head's variant, else the head it was built for; null for a chart whose
 * picture is the same for every head.
 * @param {any} header @param {View} view
 * @returns {number | null}
 */
export function headShown(header, view) {
  const heads = header.heads;
  if (heads && view.head < heads.length) return view.head;
  return header.marks?.perHead || heads ? header.marks.head : null;
}

/**
 * `header.figure` as the page's view wants it: the variant of the head shown
 * (its matrix, title, colour range, frame and first column) and, once the
 * page's view is `known`, the view's outlines in place of those it was built with.
 * @param {any} header @param {View} view @param {boolean} known
 * @returns {{figure: {data: any[], layout: any}, marks: any, head: number | null, filename: string}}
 */
export function figureFor(header, view, known) {
  const head = headShown(header, view);
  const variant = head === null ? undefined : header.heads?.[head];
  let { data, layout } = header.figure;
  let marks = header.marks;
  if (variant && head !== header.marks.head) {
    const [first, ...rest] = data;
    const trace = { ...first, matrix: { ...first.matrix, block: variant.block },
                    zmin: variant.zmin, zmax: variant.zmax, colorscale: variant.colorscale };
    if (variant.x) trace.x = variant.x;
    data = [trace, ...rest];
    layout = { ...layout, title: { ...layout.title, text: variant.title },
               shapes: (layout.shapes ?? []).map((/** @type {any} */ s) => (s.name === "frame"
                 ? { ...s, line: { ...s.line, color: variant.frame } } : s)) };
    marks = { ...marks, head, colOffset: variant.colOffset };
  }
  if (marks && known) {
    const others = (layout.shapes ?? []).filter((/** @type {any} */ s) => !MARK_NAMES.includes(s.name));
    layout = { ...layout, shapes: [...markShapes(marks, view, head), ...others] };
  }
  return { figure: { data, layout }, marks, head,
           filename: variant?.filename ?? header.filename };
}

/**
 * What a chart's picture depends on, apart from the view's outlines and head
 * (the outlines it was built with are left out):
 * two payloads with the same key draw the same picture. Blocks are named by
 * their hash (payloads built for different heads hold the same matrices in
 * another order).
 * @param {any} header
 */
export function pictureKey(header) {
  const hashes = header.blocks.map((/** @type {any} */ b) => b.hash);
  const blank = { head: 0, query: null, cell: null, lines: false };
  return JSON.stringify(
    [figureFor(header, blank, true).figure, header.size, header.columns, header.heads,
     [...hashes].sort()],
    (key, value) => (key === "block" ? hashes[value] : value));
}

/**
 * The outlines to draw when a cell of a chart with `marks` is clicked: the
 * view change (its cell, and its row as the query where the rows are tokens),
 * or null for a chart that explains no cell.
 * @param {any} marks @param {{trace: number, row: number, col: number}} cell
 * @returns {Partial<View> | null}
 */
export function viewOfClick(marks, cell) {
  if (!marks?.step) return null;
  /** @type {Partial<View>} */
  const change = { cell: [marks.step, cell.row, cell.col + (marks.colOffset ?? 0), marks.head] };
  if (marks.queryRows) change.query = cell.row;
  return change;
}
