// The page's view in a chart (explorer/render/chart/view.js): outlines, the head
// shown, the head's variant of the figure, and what a click changes.
import assert from "node:assert/strict";
import { test } from "node:test";
import { figureFor, headShown, markShapes, pictureKey, viewOfClick }
  from "../../../explorer/render/chart/view.js";

const STYLES = { query: { color: "#d62728", width: 3 }, cell: { color: "#000", width: 3 } };
const view = (change) => ({ query: null, cell: null, head: 0, lines: false, ...change });
// A per-head scores chart of head 1 (explorer.render.figures.heatmap_chart), 6 x 6, all columns.
const MARKS = { step: "attn_scores", head: 1, perHead: true, queryRows: true, colOffset: 0,
                rows: 6, cols: 6, styles: STYLES };

test("the query row spans the chart, the explained cell is its own square", () => {
  assert.deepEqual(markShapes(MARKS, view({ query: 2, cell: ["attn_scores", 3, 1, 1] }), 1), [
    { type: "rect", name: "query", xref: "paper", x0: 0, x1: 1, yref: "y", y0: 1.5, y1: 2.5,
      line: STYLES.query },
    { type: "rect", name: "cell", xref: "x", yref: "y", x0: 0.5, x1: 1.5, y0: 2.5, y1: 3.5,
      line: STYLES.cell }]);
});

test("a cell of another step, another head, or outside the columns shown is not outlined", () => {
  assert.deepEqual(markShapes(MARKS, view({ cell: ["attn_weights", 3, 1, 1] }), 1), []);
  assert.deepEqual(markShapes(MARKS, view({ cell: ["attn_scores", 3, 1, 0] }), 1), []);
  const right = { ...MARKS, colOffset: 4, cols: 2 }; // a chart of columns 4 and 5
  assert.deepEqual(markShapes(right, view({ cell: ["attn_scores", 0, 3, 1] }), 1), []);
  assert.equal(markShapes(right, view({ cell: ["attn_scores", 0, 5, 1] }), 1)[0].x0, 0.5);
  assert.deepEqual(markShapes({ ...MARKS, queryRows: false }, view({ query: 2 }), 1), []);
  assert.deepEqual(markShapes(MARKS, view({ query: 6 }), 1), []); // past the last row
});

// A payload's header for head 1 that carries both heads' variants.
const HEADER = {
  filename: "scores_head1",
  blocks: [{ hash: "h0" }, { hash: "h1" }],
  figure: {
    data: [{ type: "heatmap", matrix: { block: 1, rows: 6, cols: 6 }, zmin: -1, zmax: 1 }],
    layout: { title: { text: "Scores, head 1" },
              shapes: [{ name: "frame", line: { color: "blue" } },
                       { name: "query", y0: 0.5 }] } },
  marks: MARKS,
  heads: [{ block: 0, title: "Scores, head 0", zmin: -2, zmax: 2, colorscale: "RdBu",
            frame: "orange", filename: "scores_head0", colOffset: 0 },
          { block: 1, title: "Scores, head 1", zmin: -1, zmax: 1, colorscale: "RdBu",
            frame: "blue", filename: "scores_head1", colOffset: 0 }],
};

test("the head shown is the view's where the chart carries it, else its own", () => {
  assert.equal(headShown(HEADER, view({ head: 0 })), 0);
  assert.equal(headShown(HEADER, view({ head: 5 })), 1);
  assert.equal(headShown({ marks: { perHead: false } }, view({ head: 1 })), null);
});

test("another head's variant: its matrix, range, title, frame and download name", () => {
  const shown = figureFor(HEADER, view({ head: 0, query: 4 }), true);
  const [trace] = shown.figure.data;
  assert.equal(shown.head, 0);
  assert.deepEqual([trace.matrix.block, trace.zmin, trace.zmax], [0, -2, 2]);
  assert.equal(shown.figure.layout.title.text, "Scores, head 0");
  assert.equal(shown.filename, "scores_head0");
  // The view's query outline replaces the one built in; the frame takes head 0's colour.
  assert.deepEqual(shown.figure.layout.shapes.map((s) => [s.name, s.y0 ?? s.line.color]),
                   [["query", 3.5], ["frame", "orange"]]);
  assert.equal(shown.marks.head, 0);
  // Until the page's view is known (the report), the outlines built in stay.
  assert.deepEqual(figureFor(HEADER, view({ head: 1, query: 4 }), false).figure.layout.shapes,
                   HEADER.figure.layout.shapes);
});

test("payloads built for other heads or outlines are the same picture", () => {
  const forHead0 = { ...HEADER, blocks: [{ hash: "h1" }, { hash: "h0" }],
                     figure: { ...HEADER.figure,
                               data: [{ ...HEADER.figure.data[0], matrix: { block: 0, rows: 6,
                                                                            cols: 6 } }],
                               layout: { ...HEADER.figure.layout,
                                         shapes: [HEADER.figure.layout.shapes[0]] } },
                     heads: HEADER.heads.map((h) => ({ ...h, block: 1 - h.block })) };
  assert.equal(pictureKey(forHead0), pictureKey(HEADER));
  const newNumbers = { ...HEADER, blocks: [{ hash: "h0" }, { hash: "h2" }] };
  assert.notEqual(pictureKey(newNumbers), pictureKey(HEADER));
});

test("a click explains its cell (columns counted from the step's first) and picks its row", () => {
  assert.deepEqual(viewOfClick({ ...MARKS, colOffset: 4 }, { trace: 0, row: 2, col: 1 }),
                   { cell: ["attn_scores", 2, 5, 1], query: 2 });
  assert.deepEqual(viewOfClick({ ...MARKS, queryRows: false }, { trace: 0, row: 2, col: 1 }),
                   { cell: ["attn_scores", 2, 1, 1] });
  assert.equal(viewOfClick({ pick: "head" }, { trace: 1, row: 0, col: 0 }), null);
});
