// Cell text (explorer/render/chart/cells.js): numbers as the explanations write them,
// and the decimals a cell can show. Text is measured as 0.6 em a character here.
import assert from "node:assert/strict";
import { test } from "node:test";
import { formatted, labelsOf, rowsOf, textFor } from "../../../explorer/render/chart/cells.js";

const measure = (text, size) => text.length * size * 0.6;

test("numbers are written with U+2212 and no negative zero", () => {
  assert.equal(formatted(-1.6516, 4), "−1.6516");
  assert.equal(formatted(0.25664, 4), "0.2566");
  assert.equal(formatted(-0.00001, 2), "0.00");
  assert.equal(formatted(-0.004, 2), "0.00");
  assert.equal(formatted(-0.006, 2), "−0.01");
  assert.equal(formatted(NaN, 4), "NaN");
  assert.equal(formatted(Infinity, 4), "+∞");
  assert.equal(formatted(-Infinity, 2), "−∞");
});

test("rows are split, non-finite values become gaps, and the range is of finite values", () => {
  const values = new Float32Array([1, -Infinity, 3, NaN, -2, 0.5]);
  const { rows, finite, range } = rowsOf(values, 2, 3);
  assert.equal(finite, false);
  assert.deepEqual(range, [-2, 3]);
  assert.deepEqual(rows.map((r) => Array.from(r)), [[1, NaN, 3], [NaN, -2, 0.5]]);
  assert.deepEqual(rowsOf(new Float32Array([NaN]), 1, 1).range, []);
  assert.deepEqual(labelsOf([1, 2, 3, 4], 2, 2, String), [["1", "2"], ["3", "4"]]);
});

test("the most decimals whose widest number fits with 4 px of air, else none", () => {
  const range = [-1.6516, 0.5]; // widest texts "−1.6516" (7 chars) and "−1.65" (5)
  // 7 chars at 10 px: 42 px + 4 px of air.
  assert.deepEqual(textFor(46, 20, [4, 2], range, [10], measure), { decimals: 4, size: 10 });
  assert.deepEqual(textFor(45.9, 20, [4, 2], range, [10], measure), { decimals: 2, size: 10 });
  assert.equal(textFor(33.9, 20, [4, 2], range, [10], measure), null); // 30 + 4 > 33.9
  // At 12 px first, then 10 px.
  assert.deepEqual(textFor(60, 20, [4, 2], range, [12, 10], measure), { decimals: 4, size: 12 });
  assert.deepEqual(textFor(50, 20, [4, 2], range, [12, 10], measure), { decimals: 4, size: 10 });
  assert.equal(textFor(200, 13.9, [4, 2], range, [10], measure), null); // too short a cell
});

test("a number needs its line height and 2 px of air above it", () => {
  // A 10-px line is 14 px tall here (1.36 em): 16 px of cell at least.
  assert.deepEqual(textFor(46, 16, [4, 2], [0.5], [10], measure), { decimals: 4, size: 10 });
  assert.equal(textFor(46, 15.9, [4, 2], [0.5], [10], measure), null);
  // A 12-px line (17 px) does not fit 18 px: 10 px does.
  assert.deepEqual(textFor(200, 18, [4, 2], [0.5], [12, 10], measure), { decimals: 4, size: 10 });
});
