// @ts-check
// The weights as lines (BertViz's head view), as a Plotly figure built from the
// matrix a chart holds, for the head and the query token the page shows. The
// spec (bins, threshold, colours, labels, words) comes from
// explorer.render.figures.lines_spec. Pure.

import { formatted } from "./cells.js";

/**
 * The line view's figure of an (n, n) weights matrix: one line per weight of
 * at least `spec.threshold`, in bins of width and opacity, the query's lines
 * highlighted; invisible markers carry the hover text; the tokens at both ends.
 * @param {Float32Array} values row-major (n, n) @param {number} n
 * @param {any} spec @param {number | null | undefined} query @param {number | null} head
 * @returns {{data: any[], layout: any}}
 */
export function linesFigure(values, n, spec, query, head) {
  const data = [];
  const hover = { x: [], y: [], text: [] };
  const hasQuery = query !== null && query !== undefined && query < n;
  let dropped = false;
  for (const v of values) if (!Number.isFinite(v) || v < 0) dropped = true;
  for (const [low, high, width, opacity] of spec.bins) {
    for (const highlighted of [false, true]) {
      if (highlighted && !hasQuery) continue;
      const xs = [];
      const ys = [];
      for (let i = 0; i < n; i++) {
        if (hasQuery && (i === query) !== highlighted) continue;
        for (let j = 0; j < n; j++) {
          const v = values[i * n + j];
          if (!Number.isFinite(v) || !(v > low) || (high !== null && v > high)
              || v < spec.threshold) continue;
          xs.push(0, 1, null);
          ys.push(i, j, null);
          hover.x.push(0.85);
          hover.y.push(i + 0.85 * (j - i));
          hover.text.push(`${spec.labels[i]} → ${spec.labels[j]}: α = ${formatted(v, 4)}`);
        }
      }
      if (!xs.length) continue;
      const legend = high !== null ? `α in (${low}, ${high}]` : `α > ${low}`;
      data.push({ type: "scatter", mode: "lines", x: xs, y: ys, name: legend,
                  showlegend: !highlighted, hoverinfo: "skip", legendgroup: legend, opacity,
                  line: { width, color: highlighted ? spec.highlight : spec.colour } });
    }
  }
  if (hover.x.length) {
    data.push({ type: "scatter", mode: "markers", x: hover.x, y: hover.y,
                hovertext: hover.text, hoverinfo: "text", showlegend: false,
                marker: { size: 8, color: "rgba(0,0,0,0)" } });
  }
  const rows = [...Array(n).keys()];
  for (const [x, side, what] of [[0, "middle left", "query"], [1, "middle right", "key"]]) {
    data.push({ type: "scatter", mode: spec.showLabels ? "text" : "markers", x: rows.map(() => x),
                y: rows, showlegend: false, text: spec.labels, textposition: side,
                hovertext: spec.labels.map((label, i) => `${what} ${i}: ${label}`),
                hoverinfo: "text", marker: { size: 3, color: "#555555" },
                textfont: { size: spec.fontSize } });
  }
  const notes = [];
  if (spec.threshold > 0) notes.push(`weights ≥ ${spec.threshold} only (${n} tokens)`);
  if (dropped) notes.push("negative and non-finite weights not drawn");
  const title = `${spec.label}${spec.perHead ? `, head ${head}` : ""}: query → key`
    + (notes.length ? `; ${notes.join(", ")}` : "");
  const width = spec.showLabels ? spec.labelWidth : 10;
  const layout = {
    title: { text: title, x: 0, xanchor: "left", font: { size: 15 } },
    xaxis: { visible: false, range: [-0.6, 1.6], fixedrange: true },
    yaxis: { visible: false, autorange: "reversed", fixedrange: true },
    margin: { l: 10 + Math.floor(width / 2), r: 10 + Math.floor(width / 2), t: 50, b: 10 },
    legend: { orientation: "h", y: -0.02, yanchor: "top", x: 0, title: { text: "weight" } },
    dragmode: false, hovermode: "closest", plot_bgcolor: "#ffffff", showlegend: true,
    height: Math.round(Math.min(2400, Math.max(260, n * 24 + 140))), autosize: true,
  };
  return { data, layout };
}
