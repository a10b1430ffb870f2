// The weights as lines (explorer/render/chart/lines.js), for a 3-token matrix.
import assert from "node:assert/strict";
import { test } from "node:test";
import { linesFigure } from "../../../explorer/render/chart/lines.js";

// explorer.render.figures.lines_spec's shape, with LINE_BINS.
const SPEC = { labels: ["your", "journey", "starts"], label: "Attention weights", perHead: true,
               threshold: 0, bins: [[0, 0.1, 0.75, 0.3], [0.1, 0.25, 1.5, 0.5],
                                    [0.25, 0.5, 3, 0.75], [0.5, null, 5, 0.95]],
               colour: "#08519c", highlight: "#d62728", showLabels: true, labelWidth: 60,
               fontSize: 12 };
// Causal weights: row i spreads over keys 0..i.
const W = Float32Array.from([1, 0, 0, 0.6, 0.4, 0, 0.2, 0.05, 0.75]);

test("one trace per bin, a line from query i to key j for each positive weight", () => {
  const { data, layout } = linesFigure(W, 3, SPEC, null, 1);
  const lines = data.filter((t) => t.mode === "lines");
  assert.deepEqual(lines.map((t) => [t.name, t.line.width, t.y.filter((y) => y !== null)]), [
    ["α in (0, 0.1]", 0.75, [2, 1]],
    ["α in (0.1, 0.25]", 1.5, [2, 0]],
    ["α in (0.25, 0.5]", 3, [1, 1]],
    ["α > 0.5", 5, [0, 0, 1, 0, 2, 2]]]);
  const hover = data.find((t) => t.mode === "markers" && t.hovertext?.length === 6);
  assert.ok(hover.hovertext.includes("journey → your: α = 0.6000"));
  assert.equal(layout.title.text, "Attention weights, head 1: query → key");
  assert.equal(layout.height, 260); // at least 260 px
  assert.equal(layout.margin.l, 40); // 10 + half the label width
});

test("the query's lines are highlighted; the others keep the legend", () => {
  const { data } = linesFigure(W, 3, SPEC, 2, 0);
  const highlighted = data.filter((t) => t.mode === "lines" && t.line.color === "#d62728");
  assert.deepEqual(highlighted.flatMap((t) => t.y.filter((y) => y !== null)),
                   [2, 1, 2, 0, 2, 2]);
  assert.ok(highlighted.every((t) => t.showlegend === false));
});

test("negative weights and weights under the threshold are left out, and the title says so", () => {
  const values = Float32Array.from([0.9, -0.2, 0.01, 0.5, 0.3, 0.2, 0.04, 0.06, 0.9]);
  const { data, layout } = linesFigure(values, 3, { ...SPEC, threshold: 0.05 }, null, 0);
  const drawn = data.filter((t) => t.mode === "lines").reduce((n, t) => n + t.x.length / 3, 0);
  assert.equal(drawn, 6); // 0.9, 0.5, 0.3, 0.2, 0.06, 0.9
  assert.equal(layout.title.text, "Attention weights, head 0: query → key; weights ≥ 0.05 only "
    + "(3 tokens), negative and non-finite weights not drawn");
});
