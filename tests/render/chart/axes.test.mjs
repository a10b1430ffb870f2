// Tick labels that never run into each other (explorer/render/chart/axes.js, issue 31).
// Text is 0.6 em a character wide and 1.36 em tall here.
import assert from "node:assert/strict";
import { test } from "node:test";
import { ordinal, tickPlan, withTicks } from "../../../explorer/render/chart/axes.js";
import { lineHeightOf } from "../../../explorer/render/chart/cells.js";

const measure = (text, size) => text.length * size * 0.6;
const tokens = (n) => Array.from({ length: n }, (_, i) => `token${i}`);

test("a vertical axis labels every token while a line and 2 px fit, shrinking to 9 px", () => {
  // 12 px: a 17-px line + 2; 11 px: 15 + 2; 10 px: 14 + 2; 9 px: 13 + 2.
  assert.deepEqual(tickPlan(tokens(8), 8 * 19, 0, true, measure, lineHeightOf),
                   { every: 1, size: 12 });
  assert.deepEqual(tickPlan(tokens(8), 8 * 17, 0, true, measure, lineHeightOf),
                   { every: 1, size: 11 });
  assert.deepEqual(tickPlan(tokens(8), 8 * 16, 0, true, measure, lineHeightOf),
                   { every: 1, size: 10 });
  assert.deepEqual(tickPlan(tokens(8), 8 * 15, 0, true, measure, lineHeightOf),
                   { every: 1, size: 9 });
  // 77 tokens in 390 px: 5.1 px each; 19 px a label at 12 px -> every 4th.
  assert.deepEqual(tickPlan(tokens(77), 390, 0, true, measure, lineHeightOf),
                   { every: 4, size: 12 });
});

test("labels at -40 degrees need their line height over sin 40 degrees", () => {
  // (17 + 2) / sin 40° = 29.6 px at 12 px; (14 + 2) / 0.643 = 24.9 px at 10 px.
  assert.deepEqual(tickPlan(tokens(6), 6 * 30, -40, false, measure, lineHeightOf),
                   { every: 1, size: 12 });
  assert.deepEqual(tickPlan(tokens(6), 6 * 25, -40, false, measure, lineHeightOf),
                   { every: 1, size: 10 });
  assert.deepEqual(tickPlan(tokens(6), 6 * 23.4, -40, false, measure, lineHeightOf),
                   { every: 1, size: 9 }); // (13 + 2) / 0.643 = 23.3
  assert.deepEqual(tickPlan(tokens(32), 32 * 10, -40, false, measure, lineHeightOf),
                   { every: 3, size: 12 });
});

test("flat labels need the widest label and 2 px: 64 dims in 250 px every 8th", () => {
  const dims = Array.from({ length: 64 }, (_, i) => String(i));
  // "10" at 12 px: 14.4 px + 2 = 16.4 px; 3.9 px a column -> 4.2 -> 5.
  assert.deepEqual(tickPlan(dims, 250, 0, false, measure, lineHeightOf), { every: 5, size: 12 });
  assert.deepEqual(tickPlan(dims.slice(0, 4), 250, 0, false, measure, lineHeightOf),
                   { every: 1, size: 12 });
  assert.equal(tickPlan([], 250, 0, false, measure, lineHeightOf), null);
});

test("the axis says when it labels only every k-th category", () => {
  const axis = { type: "category", title: { text: "query token" }, nticks: 8 };
  assert.deepEqual(withTicks(axis, { every: 1, size: 11 }),
                   { type: "category", title: { text: "query token" }, tickmode: "linear",
                     tick0: 0, dtick: 1, tickfont: { size: 11 } });
  assert.equal(withTicks(axis, { every: 4, size: 12 }).title.text,
               "query token, every 4th");
  assert.deepEqual([1, 2, 3, 4, 11, 12, 13, 21, 22, 32, 101].map(ordinal),
                   ["1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "32nd",
                    "101st"]);
});
