// Issue 40: hover labels write the minus sign U+2212 as the page does, and a title
// is never wrapped between "head" and its number.
import { test } from "node:test";
import assert from "node:assert/strict";
import { traceWithMatrix, wrapWords } from "../../../explorer/render/chart/figure.js";

const SPEC = { type: "heatmap", matrix: { block: 0, rows: 2, cols: 2, hover: "q: %{y}<br>" } };
const measure = (/** @type {string} */ text, /** @type {number} */ size) => text.length * size * 0.6;

test("cells too narrow for text still hover their negative numbers with U+2212", () => {
  const values = [Float32Array.from([0.25, -1.36371, 2, -0.00001])];
  const { trace, decimals } = traceWithMatrix(SPEC, values, { width: 20, height: 20 }, 1, measure);
  assert.equal(decimals, null); // no cell text: the hover labels alone carry the numbers
  assert.equal(trace.hovertemplate, "q: %{y}<br>value: %{customdata}<extra></extra>");
  assert.deepEqual(trace.customdata, [["0.2500", "−1.3637"], ["2.0000", "0.0000"]]);
  assert.ok(!JSON.stringify(trace.customdata).includes("-"));
});

test("a matrix without a negative number keeps Plotly's own hover format", () => {
  const values = [Float32Array.from([0.25, 1, 2, 0])];
  const { trace } = traceWithMatrix(SPEC, values, { width: 20, height: 20 }, 1, measure);
  assert.equal(trace.hovertemplate, "q: %{y}<br>value: %{z:.4f}<extra></extra>");
});

test("a wrapped title keeps a number with the word before it", () => {
  assert.deepEqual(wrapWords("Queries: Q = X·W_query (6×2), head 1", 33),
                   ["Queries: Q = X·W_query (6×2),", "head 1"]);
  assert.deepEqual(wrapWords("attention weights of query head 12", 30),
                   ["attention weights of query", "head 12"]);
});
