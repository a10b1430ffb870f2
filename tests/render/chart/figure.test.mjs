// Building a figure (explorer/render/chart/figure.js): cell text in traces, the layout
// for a width, titles that fit.
import assert from "node:assert/strict";
import { test } from "node:test";
import { colorbarRoom, colorbarTicks, fittedTitle, heightFor, layoutFor, layoutWithTicks, textKey,
  traceWithMatrix, wrapWords } from "../../../explorer/render/chart/figure.js";

const measure = (text, size) => text.length * size * 0.6;
const SPEC = { type: "heatmap", matrix: { block: 0, rows: 2, cols: 2, hover: "q: %{y}<br>" } };
const M = [Float32Array.from([0.25, -1.5, 2, NaN])];

test("a heatmap gets its rows, its cell text and an exact hover value", () => {
  const { trace, decimals } = traceWithMatrix(SPEC, M, { width: 200, height: 100 }, 1, measure);
  assert.equal(decimals, 4);
  assert.equal(trace.matrix, undefined);
  assert.deepEqual(trace.z.map((r) => Array.from(r)), [[0.25, -1.5], [2, NaN]]);
  assert.deepEqual(trace.text, [["0.2500", "−1.5000"], ["2.0000", "NaN"]]);
  assert.deepEqual(trace.textfont, { size: 12 }); // 100-px cells of a chart alone
  assert.equal(trace.hovertemplate, "q: %{y}<br>value: %{customdata}<extra></extra>");
});

test("cells too narrow for any number print none", () => {
  const { trace, decimals } = traceWithMatrix(SPEC, M, { width: 40, height: 100 }, 1, measure);
  assert.equal(decimals, null);
  assert.equal(trace.texttemplate, "");
  assert.equal(trace.text, undefined);
});

test("a mask's cells print its words where they fit", () => {
  const mask = { ...SPEC, matrix: { ...SPEC.matrix, words: ["keep", "mask"] } };
  const values = [Float32Array.from([0, 1, 0, 0])];
  const { trace } = traceWithMatrix(mask, values, { width: 100, height: 40 }, 2, measure);
  assert.deepEqual(trace.text, [["keep", "mask"], ["keep", "keep"]]);
});

const SIZE = { rows: 6, cols: 6, max_cell: 60, chrome: 120, vertical: 150, min_height: 250,
               max_height: 700 };

test("the height makes cells as square as the width allows, within limits", () => {
  assert.equal(heightFor(SIZE, 480), 6 * 60 + 150); // (480 - 120) / 6 = 60 px cells
  assert.equal(heightFor(SIZE, 300), 6 * 30 + 150);
  assert.equal(heightFor(SIZE, 150), 250);
  assert.equal(heightFor({ ...SIZE, max_cell: 200 }, 2000), 700);
});

test("a narrower layout below its width, and the toolbar's margin off touch screens", () => {
  const size = { ...SIZE, narrower: [{ below: 600, layout: { grid: { columns: 2 } },
                                        size: { cols: 3 } }] };
  const wide = layoutFor({ margin: { r: 10 } }, size, 800, false);
  assert.equal(wide.grid, undefined);
  assert.equal(wide.margin.r, 36);
  assert.equal(wide.height, heightFor(SIZE, 800 - 26));
  const phone = layoutFor({ margin: { r: 10 } }, size, 390, true);
  assert.deepEqual(phone.grid, { columns: 2 });
  assert.equal(phone.margin.r, 10);
  assert.equal(phone.height, heightFor({ ...SIZE, cols: 3 }, 390));
});

test("a title too wide shrinks, down to 12 px, then wraps at spaces", () => {
  assert.equal(fittedTitle("Scores", 15, 100, 120), null);
  assert.deepEqual(fittedTitle("Attention scores", 15, 200, 180),
                   { text: "Attention scores", size: 13, extra: 0 });
  const wrapped = fittedTitle("Attention weights of every head", 15, 400, 200);
  assert.equal(wrapped.size, 12);
  assert.deepEqual(wrapped.text.split("<br>"), wrapWords("Attention weights of every head", 19));
  assert.equal(wrapped.extra, Math.ceil(12 * 1.3));
  assert.deepEqual(wrapWords("a bb ccc dddd", 5), ["a bb", "ccc", "dddd"]);
});

test("a one-heatmap figure's category axes get planned ticks; a grid keeps Plotly's", () => {
  const spec = { ...SPEC, x: ["0", "1", "2", "3"], y: ["a", "b", "c", "d", "e", "f", "g", "h"] };
  const layout = { xaxis: { type: "category", tickangle: 0, title: { text: "dim" } },
                   yaxis: { type: "category", title: { text: "token" } } };
  // 8 rows in 80 px: 10 px each, under a 12-px label's 19 -> every 2nd.
  const out = layoutWithTicks(layout, [spec], { width: 200, height: 80 }, measure);
  assert.deepEqual([out.xaxis.dtick, out.xaxis.tickfont.size], [1, 12]);
  assert.deepEqual([out.yaxis.dtick, out.yaxis.title.text], [2, "token, every 2nd"]);
  assert.equal(layout.yaxis.dtick, undefined); // the figure's own layout is left alone
  assert.equal(layoutWithTicks(layout, [spec, spec], { width: 200, height: 80 }, measure),
               layout);
});

test("a colour bar's numbers: nice steps within its room, else its two ends", () => {
  assert.deepEqual(colorbarTicks(0, 1, 6), { tickvals: [0, 0.2, 0.4, 0.6000000000000001, 0.8, 1],
                                             ticktext: ["0.0", "0.2", "0.4", "0.6", "0.8", "1.0"] });
  assert.deepEqual(colorbarTicks(-4.3, 4.1, 5).ticktext, ["−4", "−2", "0", "2", "4"]);
  // Room for 3: a step of 2 gives 5 numbers and one of 5 a single 0, so the two ends.
  assert.deepEqual(colorbarTicks(-4.3, 4.1, 3).ticktext, ["−4.30", "4.10"]);
  // Room for 2 on 0.05-0.32: a step of 0.2 leaves one number (0.2), so the two ends.
  assert.deepEqual(colorbarTicks(0.05, 0.32, 2), { tickvals: [0.05, 0.32],
                                                   ticktext: ["0.050", "0.320"] });
  for (const [zmin, zmax, room] of [[0.05, 0.32, 2], [-23, 34, 3], [0, 1e-3, 5], [7, 7.5, 9],
                                    [-3.8, 3.8, 3], [-3.8, 3.8, 2.35], [-1, 9, 4.5]]) {
    const { tickvals } = /** @type {{tickvals: number[]}} */ (colorbarTicks(zmin, zmax, room));
    assert.ok(tickvals.length >= 2 && tickvals.length <= room, `${zmin}-${zmax}: ${tickvals}`);
    assert.ok(tickvals.every((v) => v >= zmin - 1e-12 && v <= zmax + 1e-12));
    // Neighbours at least a pitch apart: 1 / room of the bar.
    assert.ok((tickvals[1] - tickvals[0]) * room >= zmax - zmin - 1e-9,
              `${zmin}-${zmax}: ${tickvals}`);
  }
  assert.equal(colorbarTicks(1, 1, 4), null);
  assert.equal(colorbarTicks(0, Infinity, 4), null);
});

test("a short colour bar's numbers lie a line and 6 px apart on the bar Plotly draws", () => {
  // The multi-head page's Q (6×32) in two heads: a plot 74 px tall, numbers from −3.8 to
  // 3.8. Its bar is 0.9 of 74 px less 10 px of padding at each end, 47 px: room for
  // 47 / (14 + 6) = 2.35 numbers. −2, 0 and 2 lay 12.3 px apart, 14-px lines overlapping.
  const lineHeight = () => 14;
  const colorbar = { thickness: 10, len: 0.9, y: 0, yanchor: "bottom", outlinewidth: 0 };
  assert.equal(colorbarRoom(colorbar, 74, lineHeight), 47 / 20);
  assert.equal(colorbarRoom({ ...colorbar, ypad: 0 }, 74, lineHeight), 67 / 20);
  assert.equal(colorbarRoom({ lenmode: "pixels", len: 30 }, 74, lineHeight), 2); // at least 2
  const spec = { ...SPEC, showscale: true, zmin: -3.8, zmax: 3.8, colorbar,
                 matrix: { ...SPEC.matrix, rows: 6, cols: 32 } };
  const values = [Float32Array.from({ length: 6 * 32 }, (_, i) => 3.8 * Math.sin(i))];
  const { trace } = traceWithMatrix(spec, values, { width: 178, height: 74 }, 1, measure,
                                    lineHeight);
  assert.deepEqual(trace.colorbar.ticktext, ["−3.80", "3.80"]);
  assert.equal(trace.colorbar.len, 0.9); // the figure's own colour bar, with its numbers
  // Twice as tall (113 px of bar, room for 5.65): 2 apart is 113 × 2 / 7.6 = 29.7 px.
  const tall = traceWithMatrix(spec, values, { width: 178, height: 148 }, 1, measure, lineHeight);
  assert.deepEqual(tall.trace.colorbar.ticktext, ["−2", "0", "2"]);
});

test("numbers chosen for a guessed plot area are drawn again for the real one", () => {
  // The multi-head page's W_value (3×32): first drawn for a guess of its plot, 100 px
  // tall, then measured at 74. No cell text, the same axes; only the colour bar's
  // numbers change (−2, 0, 2 to its two ends), and that alone must draw it again.
  const lineHeight = () => 14;
  const spec = { ...SPEC, showscale: true, zmin: -2.61, zmax: 2.61, colorbar: { len: 0.9 },
                 matrix: { ...SPEC.matrix, rows: 3, cols: 32 } };
  const values = [Float32Array.from({ length: 3 * 32 }, (_, i) => 2.61 * Math.cos(i))];
  const picture = (/** @type {number} */ height) => ({ layout: {}, traces: [traceWithMatrix(
    spec, values, { width: 178, height }, 1, measure, lineHeight).trace] });
  const [guessed, drawn] = [picture(100), picture(74)];
  assert.deepEqual(guessed.traces[0].colorbar.tickvals, [-2, 0, 2]);
  assert.deepEqual(drawn.traces[0].colorbar.tickvals, [-2.61, 2.61]);
  assert.equal(guessed.traces[0].texttemplate, drawn.traces[0].texttemplate);
  assert.notEqual(textKey(guessed), textKey(drawn));
  assert.equal(textKey(picture(74)), textKey(drawn));
});

test("a causal mask's −∞ reads masked in the hover, not only as a grey gap", () => {
  const masked = [Float32Array.from([0.5, -Infinity, 1, 2])];
  const { trace } = traceWithMatrix(SPEC, masked, { width: 200, height: 100 }, 1, measure);
  assert.deepEqual(trace.customdata, [["0.5000", "masked (−∞)"], ["1.0000", "2.0000"]]);
  assert.ok(Number.isNaN(trace.z[0][1])); // drawn as a gap
});
