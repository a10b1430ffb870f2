// Draws one Plotly figure (an explorer.charts.Chart payload) in the browser.
//
// Python builds the whole figure (explorer/figures.py); this file only does
// what needs the browser:
//   - attach the matrices, which arrive as raw float32 bytes, not JSON;
//   - keep matrices the page already has (Python then sends a hash only);
//   - size the chart to its column and choose the cell text (4 decimals, 2, or
//     none) from the real size of a cell, so that numbers never overlap;
//   - take a narrower layout where the figure offers one (fewer columns of
//     small multiples on a phone), and shrink or wrap a title wider than the chart;
//   - report a clicked cell back to Python.
// The same `draw` serves the Streamlit component and the standalone report
// (both through the default export, `mountChart`) and the benchmark's floor page.
//
// Payload: uint32 header length (little-endian), the header as UTF-8 JSON,
// zero padding to a multiple of 4, then one float32 block per entry of
// header.blocks that is not marked `cached`.

const MATRICES = (window.__explorerMatrices ??= new Map()); // hash -> Float32Array
const MATRIX_CACHE_BYTES = 128 * 2 ** 20;
const CELL_FONT = '"Open Sans", verdana, arial, sans-serif'; // Plotly's own default
const CELL_PAD_PX = 4; // air beside a cell's number, in all
const MIN_TEXT_HEIGHT_PX = 14;
const TOOLBAR_PX = 36; // the upright Plotly toolbar's width and a little air
const MIN_TITLE_PX = 12; // a long title is drawn down to this size, then wrapped
let plotlyLoading = null;

export function loadPlotly(url) {
  if (window.Plotly) return Promise.resolve(window.Plotly);
  plotlyLoading ??= new Promise((resolve, reject) => {
    const script = document.createElement("script");
    script.src = url;
    script.onload = () => resolve(window.Plotly);
    script.onerror = () => reject(new Error(`could not load ${url}`));
    document.head.appendChild(script);
  });
  return plotlyLoading;
}

function remember(hash, values) {
  MATRICES.delete(hash);
  MATRICES.set(hash, values);
  let bytes = 0;
  for (const v of MATRICES.values()) bytes += v.byteLength;
  for (const [key, v] of MATRICES) {
    if (bytes <= MATRIX_CACHE_BYTES) break;
    MATRICES.delete(key);
    bytes -= v.byteLength;
  }
}

// The header and the matrices of a payload; `missing` lists the hashes of
// matrices sent earlier that this page no longer holds.
export function decode(bytes) {
  const u8 = bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes);
  const view = new DataView(u8.buffer, u8.byteOffset, u8.byteLength);
  const headerLength = view.getUint32(0, true);
  const header = JSON.parse(new TextDecoder().decode(u8.subarray(4, 4 + headerLength)));
  let offset = 4 + headerLength + ((4 - (headerLength % 4)) % 4);
  const matrices = [];
  const missing = [];
  for (const block of header.blocks) {
    if (block.cached) {
      const known = MATRICES.get(block.hash);
      if (!known) missing.push(block.hash);
      matrices.push(known);
      continue;
    }
    const n = block.rows * block.cols;
    const values = new Float32Array(u8.buffer.slice(u8.byteOffset + offset,
                                                    u8.byteOffset + offset + 4 * n));
    offset += 4 * n;
    remember(block.hash, values);
    matrices.push(values);
  }
  return { header, matrices, missing };
}

// A number as the explanations write it (explorer.explain.number): the minus
// sign U+2212, and no "−0.00" for a value that rounds to zero.
function formatted(v, decimals) {
  if (Number.isNaN(v)) return "NaN";
  if (v === Infinity) return "+∞";
  if (v === -Infinity) return "−∞";
  const text = v.toFixed(decimals);
  if (!text.startsWith("-")) return text;
  return /[1-9]/.test(text) ? `−${text.slice(1)}` : text.slice(1);
}

let measurer = null;
// The width in px of `text` drawn at `size` px in the cells' font.
function textWidth(text, size) {
  measurer ??= document.createElement("canvas").getContext("2d");
  measurer.font = `${size}px ${CELL_FONT}`;
  return measurer.measureText(text).width;
}

// Rows of a matrix for Plotly, with −∞, +∞ and NaN drawn as gaps; and the
// smallest and largest finite value, whose texts are the longest.
function rowsOf(values, rows, cols) {
  let finite = true;
  let low = Infinity;
  let high = -Infinity;
  for (const v of values) {
    if (!Number.isFinite(v)) {
      finite = false;
      continue;
    }
    if (v < low) low = v;
    if (v > high) high = v;
  }
  const shown = finite ? values : values.map((v) => (Number.isFinite(v) ? v : NaN));
  const out = [];
  for (let r = 0; r < rows; r++) out.push(shown.subarray(r * cols, (r + 1) * cols));
  return { rows: out, finite, range: Number.isFinite(low) ? [low, high] : [] };
}

function labelsOf(values, rows, cols, label) {
  const out = [];
  for (let r = 0; r < rows; r++) {
    const row = new Array(cols);
    for (let c = 0; c < cols; c++) row[c] = label(values[r * cols + c]);
    out.push(row);
  }
  return out;
}

// The decimals and font size a cell of this size shows its numbers with: the
// most decimals of `allowed` (4, 2) whose widest text, that of the smallest or
// the largest value (`range`), fits the cell at one of `sizes`; null for none.
function textFor(cellWidth, cellHeight, allowed, range, sizes) {
  if (cellHeight < MIN_TEXT_HEIGHT_PX) return null;
  for (const decimals of allowed) {
    for (const size of sizes) {
      const widest = Math.max(0, ...range.map((v) => textWidth(formatted(v, decimals), size)));
      if (widest + CELL_PAD_PX <= cellWidth) return { decimals, size };
    }
  }
  return null;
}

function plotArea(div, layout) {
  const full = div._fullLayout;
  if (full && full.xaxis && full.xaxis._length) {
    return { width: full.xaxis._length, height: full.yaxis._length };
  }
  const width = (layout.width ?? div.clientWidth ?? 600) - (layout.margin?.l ?? 80)
    - (layout.margin?.r ?? 80) - 60;
  return { width: Math.max(width, 50), height: (layout.height ?? 300) - 100 };
}

function traceWithMatrix(spec, matrices, area, nCharts) {
  const m = spec.matrix;
  const values = matrices[m.block];
  const { rows, finite, range } = rowsOf(values, m.rows, m.cols);
  const trace = { ...spec, z: rows };
  delete trace.matrix;
  const cellWidth = area.width / m.cols;
  const cellHeight = area.height / m.rows;
  const sizes = cellWidth >= 56 && nCharts === 1 ? [12, 10] : [10];
  const text = m.words ? (cellWidth >= 44 && cellHeight >= MIN_TEXT_HEIGHT_PX
    ? { decimals: 0, size: sizes[0] } : null)
    : textFor(cellWidth, cellHeight, m.decimals ?? [4, 2], range, sizes);
  const decimals = text ? text.decimals : null;
  const word = (v) => (v > 0.5 ? m.words[1] : m.words[0]);
  if (m.words || !finite || decimals !== null) {
    const exact = m.words ? word : (v) => formatted(v, 4);
    trace.customdata = labelsOf(values, m.rows, m.cols, exact);
    trace.hovertemplate = `${m.hover}value: %{customdata}<extra></extra>`;
  } else {
    trace.hovertemplate = `${m.hover}value: %{z:.4f}<extra></extra>`;
  }
  if (decimals !== null) {
    trace.text = m.words ? trace.customdata
      : labelsOf(values, m.rows, m.cols, (v) => formatted(v, decimals));
    trace.texttemplate = "%{text}";
    trace.textfont = { size: text.size };
  } else {
    trace.texttemplate = "";
  }
  return { trace, decimals };
}

function svgButton(Plotly, filename) {
  return {
    name: "Download as SVG (for print)",
    icon: Plotly.Icons.disk,
    click: (gd) => Plotly.downloadImage(gd, { format: "svg", filename }),
  };
}

// Words of `text` in lines of at most `perLine` characters (a longer word alone).
function wrapWords(text, perLine) {
  const lines = [];
  let line = "";
  for (const word of text.split(" ")) {
    if (line && line.length + 1 + word.length > perLine) {
      lines.push(line);
      line = word;
    } else {
      line = line ? `${line} ${word}` : word;
    }
  }
  return [...lines, line];
}

// A title wider than the room beside it (a long one on a phone; Plotly neither
// wraps nor clips it) is drawn smaller, down to MIN_TITLE_PX, then wrapped at
// spaces, the top margin and the height growing by the added lines. Changes
// `layout`; returns whether it did.
function fitTitle(div, layout, right) {
  const drawn = div.querySelector(".g-gtitle .gtitle");
  const svg = div.querySelector(".main-svg");
  const text = layout.title?.text;
  if (!drawn || !svg || !text) return false;
  const box = drawn.getBoundingClientRect();
  const room = svg.getBoundingClientRect().right - right - box.left;
  if (box.width <= room || room <= 0) return false;
  const font = layout.title.font?.size ?? 17;
  const size = Math.max(MIN_TITLE_PX, Math.floor((font * room) / box.width));
  const perLine = Math.floor((text.length * room * font) / (box.width * size));
  const lines = size * box.width <= room * font ? [text] : wrapWords(text, perLine);
  const extra = Math.ceil((lines.length - 1) * size * 1.3);
  layout.title = { ...layout.title, text: lines.join("<br>"),
                   font: { ...layout.title.font, size } };
  layout.margin = { ...layout.margin, t: (layout.margin?.t ?? 100) + extra };
  if (layout.height) layout.height += extra;
  return true;
}

// Draw (or update in place) the figure in `div`. `onClick({trace, row, col})`
// is called with the clicked cell of a heatmap.
export async function draw(div, header, matrices, onClick) {
  const Plotly = await loadPlotly(header.plotly);
  const figure = header.figure;
  const layout = { ...figure.layout, width: undefined, autosize: true };
  const columns = header.columns ?? 1;
  let size = header.size;
  // Fewer columns of small multiples where the chart is narrower than they need:
  // the last of the figure's narrower layouts whose `below` the width is under.
  for (const narrower of size?.narrower ?? []) {
    if ((div.clientWidth || 600) < narrower.below) {
      Object.assign(layout, narrower.layout);
      size = { ...size, ...narrower.size };
    }
  }
  const touch = window.matchMedia?.("(hover: none)").matches;
  const marginRight = layout.margin?.r ?? 0;
  if (!touch) {
    // Every chart's toolbar shows on hover, upright at the figure's top right, so
    // it never covers the title; and in the right margin, off the cells (a short
    // chart would lose its top-right cells).
    layout.modebar = { ...layout.modebar, orientation: "v" };
    layout.margin = { ...layout.margin, r: Math.max(marginRight, TOOLBAR_PX) };
  }
  if (size) {
    // Cells as square as the column allows (less the toolbar's extra margin),
    // within the height limits.
    const width = (div.clientWidth || 600) - ((layout.margin?.r ?? 0) - marginRight);
    const cell = Math.min(size.max_cell, Math.max(1, (width - size.chrome) / size.cols));
    layout.height = Math.round(Math.min(size.max_height,
      Math.max(size.min_height, size.rows * cell + size.vertical)));
  }
  const config = {
    displaylogo: false,
    responsive: true,
    displayModeBar: touch ? false : "hover",
    toImageButtonOptions: { format: "png", filename: header.filename, scale: 2 },
    modeBarButtonsToAdd: [svgButton(Plotly, header.filename)],
    // Five buttons (PNG, SVG, zoom, pan, reset) stay one upright column, even on
    // the shortest chart, so the toolbar fits its margin.
    modeBarButtonsToRemove: ["select2d", "lasso2d", "autoScale2d", "zoomIn2d", "zoomOut2d",
      "toggleSpikelines", "hoverClosestCartesian", "hoverCompareCartesian"],
  };
  const build = (area) => figure.data.map((spec) =>
    (spec.matrix ? traceWithMatrix(spec, matrices, area, columns).trace : spec));
  await Plotly.react(div, build(plotArea(div, layout)), layout, config);
  if (fitTitle(div, layout, touch ? 0 : TOOLBAR_PX)) {
    await Plotly.react(div, build(plotArea(div, layout)), layout, config);
  }
  // The first drawing fixes the real plot area: redraw if the text choice was off.
  const area = plotArea(div, layout);
  const again = build(area);
  const changed = again.some((t, i) => t.texttemplate !== div.data[i].texttemplate);
  if (changed) await Plotly.react(div, again, layout, config);
  if (!div.__explorerClick) {
    div.__explorerClick = true;
    div.on("plotly_click", (event) => {
      const point = event.points?.[0];
      if (!point || !Array.isArray(point.pointIndex)) return;
      const [row, col] = cellUnderPointer(div, event.event) ?? point.pointIndex;
      div.__explorerOnClick?.({ trace: point.curveNumber, row, col });
    });
  }
  div.__explorerOnClick = onClick;
  div.dataset.drawn = String(Number(div.dataset.drawn ?? 0) + 1); // for tests and benchmarks
}

// The (row, col) under a click on a one-heatmap chart, from the pointer's
// pixel centre: Plotly reads the pointer's whole-pixel position, which lands
// in the previous row or column once cells are about a pixel wide.
function cellUnderPointer(div, mouse) {
  const trace = div.data;
  const area = div.querySelector(".nsewdrag")?.getBoundingClientRect();
  if (!mouse || !area || trace.length !== 1 || !Array.isArray(trace[0].z)) return null;
  const rows = trace[0].z.length;
  const cols = trace[0].z[0].length;
  const row = Math.floor(((mouse.clientY + 0.5 - area.top) / area.height) * rows);
  const col = Math.floor(((mouse.clientX + 0.5 - area.left) / area.width) * cols);
  if (row < 0 || row >= rows || col < 0 || col >= cols) return null;
  return [row, col];
}

// The Streamlit component: one instance per chart, kept across reruns. The
// standalone report (explorer/export.py) mounts its charts with it too, passing
// { data, parentElement, setTriggerValue } itself.
export default function mountChart(component) {
  const { data, parentElement, setTriggerValue } = component;
  if (!data) return;
  const { header, matrices, missing } = decode(data);
  if (missing.length) {
    setTriggerValue("missing", missing); // Python sends them again
    return;
  }
  let div = parentElement.querySelector(":scope > .explorer-chart");
  if (!div) {
    div = document.createElement("div");
    div.className = "explorer-chart";
    parentElement.appendChild(div);
    new ResizeObserver(() => div.__explorerRedraw?.()).observe(parentElement);
  }
  const onClick = header.clickable ? (cell) => setTriggerValue("click", cell) : null;
  div.__explorerOnClick = onClick;
  // The same picture as last time (a rerun that changed other charts, or one
  // that sent only the hashes of matrices this page holds): nothing to draw.
  const picture = JSON.stringify([header.figure, header.size, header.columns,
                                  header.blocks.map((b) => b.hash)]);
  if (picture === div.__explorerPicture) return;
  div.__explorerPicture = picture;
  let lastWidth = parentElement.clientWidth;
  div.__explorerRedraw = () => {
    if (Math.abs(parentElement.clientWidth - lastWidth) < 8) return;
    lastWidth = parentElement.clientWidth;
    draw(div, header, matrices, onClick);
  };
  div.dataset.drawing = "1"; // until the picture is on the page (tests wait for it)
  draw(div, header, matrices, onClick).catch((error) => {
    div.textContent = `This chart could not be drawn: ${error.message}`;
  }).finally(() => delete div.dataset.drawing);
}
