import { test } from "node:test";
import assert from "node:assert/strict";
import { axisName, cellAnnouncement, chartName, moveCursor, plainText, tableRows, valueText }
  from "../../../explorer/render/chart/keys.js";

test("arrows move the cursor one cell and stop at the edges", () => {
  assert.deepEqual(moveCursor({ row: 0, col: 0 }, "ArrowDown", 6, 4), { row: 1, col: 0 });
  assert.deepEqual(moveCursor({ row: 0, col: 0 }, "ArrowRight", 6, 4), { row: 0, col: 1 });
  assert.deepEqual(moveCursor({ row: 0, col: 0 }, "ArrowUp", 6, 4), { row: 0, col: 0 });
  assert.deepEqual(moveCursor({ row: 0, col: 0 }, "ArrowLeft", 6, 4), { row: 0, col: 0 });
  assert.deepEqual(moveCursor({ row: 5, col: 3 }, "ArrowDown", 6, 4), { row: 5, col: 3 });
  assert.deepEqual(moveCursor({ row: 5, col: 3 }, "ArrowRight", 6, 4), { row: 5, col: 3 });
});

test("Home and End go to the row's ends; Enter, Space and Escape act", () => {
  assert.deepEqual(moveCursor({ row: 2, col: 2 }, "Home", 6, 4), { row: 2, col: 0 });
  assert.deepEqual(moveCursor({ row: 2, col: 1 }, "End", 6, 4), { row: 2, col: 3 });
  assert.equal(moveCursor({ row: 2, col: 1 }, "Enter", 6, 4), "explain");
  assert.equal(moveCursor({ row: 2, col: 1 }, " ", 6, 4), "explain");
  assert.equal(moveCursor({ row: 2, col: 1 }, "Escape", 6, 4), "leave");
  assert.equal(moveCursor({ row: 2, col: 1 }, "Tab", 6, 4), null);
});

test("a visitor's markup reads as text, Plotly's tags are dropped", () => {
  assert.equal(plainText("&lt;img src=x onerror=alert(1)&gt; &amp;amp;"),
               "<img src=x onerror=alert(1)> &amp;");
  assert.equal(plainText("Scores ω<br>6×6<sub>q</sub>"), "Scores ω 6×6q");
});

test("a masked cell reads masked, a number has 4 decimals and U+2212", () => {
  assert.equal(valueText(-Infinity), "masked (−∞)");
  assert.equal(valueText(-0.61504), "−0.6150");
  assert.equal(valueText(1, ["kept", "masked"]), "masked");
  assert.equal(valueText(0, ["kept", "masked"]), "kept");
});

test("the announcement names the row and column tokens, the value and the place", () => {
  assert.equal(cellAnnouncement({ rowTitle: "query", colTitle: "key", rowLabel: "is",
                                  colLabel: "Life", value: "−0.6150", row: 1, col: 0,
                                  rows: 6, cols: 6 }),
               "query is, key Life: −0.6150. Row 2 of 6, column 1 of 6.");
});

test("the name says the shape and lists the tokens, a long axis cut", () => {
  const many = Array.from({ length: 20 }, (_, i) => `t${i}`);
  const name = chartName("ω", "query", "dimension", ["a", "b"], many);
  assert.equal(name, "Heatmap: ω. 2 × 20 matrix; rows (query): a, b; columns (dimension): "
    + "t0, t1, t2, t3, t4, t5, t6, t7, t8, t9, t10, t11 and 8 more.");
});

test("table rows hold the same numbers as the matrix, cut at the limit", () => {
  const values = Float32Array.from([1, -2, -Infinity, 0.5]);
  assert.deepEqual(tableRows(values, ["a", "b"], ["x", "y"], null, 10),
                   [["", "x", "y"], ["a", "1.0000", "−2.0000"], ["b", "masked (−∞)", "0.5000"]]);
  assert.deepEqual(tableRows(values, ["a", "b"], ["x", "y"], null, 1), [["", "x"], ["a", "1.0000"]]);
});

test("an axis title loses its (row) or (column)", () => {
  assert.equal(axisName("query (row)"), "query");
  assert.equal(axisName("key (column)"), "key");
  assert.equal(axisName("d_k (dimension)"), "d_k (dimension)");
});
