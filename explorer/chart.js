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
//   - report a clicked cell back to Python;
//   - follow the page's view at once, before the server confirms it: the query
//     token's row and the explained cell are outlined in every chart, the head
//     picked is shown by every per-head chart that carries every head's matrix
//     (`header.heads`): each keeps the other heads drawn off-screen once the
//     page's charts are drawn (`predrawHeads`), so that a switch only swaps
//     which plot is on screen; and the weights are drawn as lines below their
//     heatmap (`header.lines`). The view is one object for the page
//     (`PAGE.view`): a click, a picker (`mountPicker`) or a payload from the
//     server changes it, and every chart redraws only what the change touches
//     (`follow`).
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
const MARK_NAMES = ["query", "cell"]; // the shapes that follow the view (explorer.figures)

// The page's view, shared by its charts and pickers: the query token (a row
// index or null), the explained cell ([step, row, col, head] or null), the head
// shown and whether the weights are drawn as lines. `known` turns true once a
// payload from the server has said what the view is (the standalone report
// never does: its charts keep the outlines they were built with).
const PAGE = (window.__explorerPage ??= {
  view: { query: null, cell: null, head: 0, lines: false }, known: false, charts: new Set(),
  pickers: new Set(),
});

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

// The outlines of the page's view in a chart with `marks` (explorer.figures.
// heatmap_chart): the query token's row where the rows are tokens, and the
// explained cell where it lies (its step; its head for a per-head step; its
// column among those the chart shows).
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

// The head this chart shows for `view`: the view's head where the chart carries
// that head's variant, else the head it was built for; null for a chart whose
// picture is the same for every head.
function headShown(header, view) {
  const heads = header.heads;
  if (heads && view.head < heads.length) return view.head;
  return header.marks?.perHead || heads ? header.marks.head : null;
}

// `header.figure` as the page's view wants it: the variant of the head shown
// (its matrix, title, colour range, frame and first column) and the view's
// outlines in place of those it was built with.
function figureFor(header, view) {
  const head = headShown(header, view);
  const variant = header.heads?.[head];
  let { data, layout } = header.figure;
  let marks = header.marks;
  if (variant && head !== header.marks.head) {
    const [first, ...rest] = data;
    const trace = { ...first, matrix: { ...first.matrix, block: variant.block },
                    zmin: variant.zmin, zmax: variant.zmax, colorscale: variant.colorscale };
    if (variant.x) trace.x = variant.x;
    data = [trace, ...rest];
    layout = { ...layout, title: { ...layout.title, text: variant.title },
               shapes: (layout.shapes ?? []).map((s) => (s.name === "frame"
                 ? { ...s, line: { ...s.line, color: variant.frame } } : s)) };
    marks = { ...marks, head, colOffset: variant.colOffset };
  }
  if (marks && PAGE.known) {
    const others = (layout.shapes ?? []).filter((s) => !MARK_NAMES.includes(s.name));
    layout = { ...layout, shapes: [...markShapes(marks, view, head), ...others] };
  }
  return { figure: { data, layout }, marks, head,
           filename: variant?.filename ?? header.filename };
}

// A chart's height for its width: cells as square as the width allows (less
// the toolbar's extra margin, which `width` leaves out), within the limits of
// its `size` (explorer.figures).
function heightFor(size, width) {
  const cell = Math.min(size.max_cell, Math.max(1, (width - size.chrome) / size.cols));
  return Math.round(Math.min(size.max_height,
    Math.max(size.min_height, size.rows * cell + size.vertical)));
}

// Draw (or update in place) the figure in `div` as the page's view wants it.
// `onClick({trace, row, col})` is called with the clicked cell of a heatmap.
export async function draw(div, header, matrices, onClick) {
  const Plotly = await loadPlotly(header.plotly);
  discardSpares(div.parentElement);
  const shown = figureFor(header, PAGE.view);
  const figure = shown.figure;
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
    layout.height = heightFor(size, (div.clientWidth || 600)
                                    - ((layout.margin?.r ?? 0) - marginRight));
  }
  const config = {
    displaylogo: false,
    responsive: true,
    displayModeBar: touch ? false : "hover",
    toImageButtonOptions: { format: "png", filename: shown.filename, scale: 2 },
    modeBarButtonsToAdd: [svgButton(Plotly, shown.filename)],
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
  div.__explorerDrawn = { head: shown.head, marks: JSON.stringify(layout.shapes ?? []),
                          layout, config };
  listenForClicks(div);
  div.__explorerOnClick = onClick;
  div.__explorerMarks = shown.marks;
  div.dataset.drawn = String(Number(div.dataset.drawn ?? 0) + 1); // for tests and benchmarks
  painted(div);
  if (div.__explorerState) {
    await followLines(div);
    predrawHeads(div);
  }
}

// Report a click on a cell of `gd`'s heatmap to the chart's `__explorerOnClick`
// (which moves with the chart when a head switch swaps its plot).
function listenForClicks(gd) {
  if (gd.__explorerClick) return;
  gd.__explorerClick = true;
  gd.on("plotly_click", (event) => {
    const point = event.points?.[0];
    if (!point || !Array.isArray(point.pointIndex)) return;
    const [row, col] = cellUnderPointer(gd, event.event) ?? point.pointIndex;
    gd.__explorerOnClick?.({ trace: point.curveNumber, row, col });
  });
}

// ---------------------------------------------------------------------------
// Every head at hand. A per-head chart that carries every head's matrix draws
// the heads it does not show into plots of their own, off-screen, one per task
// once the page's charts are drawn (a new heatmap costs Plotly ~15-25 ms; a
// page shows several). A head switch then swaps the plot on screen for the spare of the
// new head (a frame), moving outlines if the view changed since. A redraw (new
// numbers, new width) discards the spares; a switch before they are ready
// redraws in place, as before. Charts with more than PREDRAW_CELLS cells over
// all their heads keep no spares (their memory would outgrow what they save).
// ---------------------------------------------------------------------------
const PREDRAW_CELLS = 2 ** 16;
const CARRIED = ["__explorerState", "__explorerDrawn", "__explorerOnClick", "__explorerMarks",
                 "__explorerPicture", "__explorerRedraw", "__explorerCause"];

function sparesOf(parent) {
  return (parent.__explorerSpares ??= { generation: 0, byHead: new Map() });
}

function discardSpares(parent) {
  if (!parent) return;
  const spares = sparesOf(parent);
  spares.generation += 1;
  for (const gd of spares.byHead.values()) {
    window.Plotly?.purge(gd);
    gd.remove();
  }
  spares.byHead.clear();
}

// The charts (by their Streamlit element) that still lack a spare head, and the
// timer of the next spare's drawing. Spares are drawn one per task, the chart
// nearest the window first, once the page is not busy (`pageBusy`) for
// SPARE_DELAY_MS: so that they never hold up the charts of a run still
// arriving, and are ready soon after (idle callbacks came too rarely on a
// Streamlit page: 21 spares took > 5 s).
const SPARE_JOBS = new Set();
const SPARE_DELAY_MS = 50;
let spareTimer = null;

function predrawHeads(div) {
  const { header } = div.__explorerState;
  const heads = header.heads;
  const m = header.figure.data[0]?.matrix;
  if (!heads || heads.length < 2 || !m || m.rows * m.cols * heads.length > PREDRAW_CELLS) return;
  addPickerStyle(); // .explorer-spare
  SPARE_JOBS.add(div.parentElement);
  clearTimeout(spareTimer);
  spareTimer = setTimeout(drawOneSpare, SPARE_DELAY_MS);
}

// The first head `main` shows no spare of yet, or -1.
function missingHead(main) {
  const heads = main.__explorerState?.header.heads ?? [];
  const { byHead } = sparesOf(main.parentElement);
  return heads.findIndex((_, h) => h !== main.__explorerDrawn.head && !byHead.has(h));
}

// Whether the page is still at work on a run: Streamlit's script running or a
// chart drawing. Spares wait for it, so that they never delay a run's charts.
function pageBusy() {
  const app = document.querySelector("[data-testid='stApp']");
  return app?.dataset.testScriptState === "running"
    || [...PAGE.charts].some((div) => div.dataset.drawing);
}

async function drawOneSpare() {
  spareTimer = null;
  if (pageBusy()) {
    spareTimer = setTimeout(drawOneSpare, SPARE_DELAY_MS);
    return;
  }
  let best = null;
  for (const parent of SPARE_JOBS) {
    const main = parent.querySelector(":scope > .explorer-chart");
    if (!parent.isConnected || !main?.__explorerDrawn || missingHead(main) < 0) {
      SPARE_JOBS.delete(parent);
    } else if (!main.dataset.drawing) {
      const distance = distanceFromView(main);
      if (!best || distance < best.distance) best = { main, distance };
    }
  }
  if (best) {
    const { main } = best;
    const head = missingHead(main);
    const gd = document.createElement("div");
    gd.className = "explorer-spare";
    gd.setAttribute("aria-hidden", "true");
    gd.style.width = `${main.clientWidth}px`;
    main.parentElement.insertBefore(gd, main);
    sparesOf(main.parentElement).byHead.set(head, gd);
    await drawHead(gd, main, head).catch(() => gd.remove());
  }
  if (SPARE_JOBS.size && spareTimer === null) {
    spareTimer = setTimeout(drawOneSpare, best ? 0 : SPARE_DELAY_MS); // else: wait for draws
  }
}

// Draw into `gd` the chart `main` shows, as it looks for `head` (the layout
// `main` has measured, the variant's matrix, title and outlines for the view).
async function drawHead(gd, main, head) {
  const { header } = main.__explorerState;
  const shown = figureFor(header, { ...PAGE.view, head });
  const { traces, layout, config } = headPicture(main, shown);
  const Plotly = await loadPlotly(header.plotly);
  await Plotly.react(gd, traces, layout, config);
  gd.__explorerHead = { head, layout, config, marks: JSON.stringify(layout.shapes ?? []),
                        chartMarks: shown.marks };
  listenForClicks(gd);
}

// The traces, layout and config of `shown` (figureFor a view) drawn in the
// layout `main` has measured (its size, margins and title font), with the
// shown head's matrix, title, outlines and download name: the picture of a
// spare, or of a head switch drawn in place. Every head's matrix has the same
// shape, so nothing needs measuring again.
function headPicture(main, shown) {
  const { header, matrices } = main.__explorerState;
  const drawn = main.__explorerDrawn;
  const layout = { ...drawn.layout, shapes: shown.figure.layout.shapes,
                   title: { ...drawn.layout.title, text: shown.figure.layout.title.text } };
  const area = plotArea(main, layout);
  const traces = shown.figure.data.map((spec) => (spec.matrix
    ? traceWithMatrix(spec, matrices, area, header.columns ?? 1).trace : spec));
  const config = { ...drawn.config, toImageButtonOptions: {
    ...drawn.config.toImageButtonOptions, filename: shown.filename } };
  return { traces, layout, config };
}

// Put the spare of `head` on screen in place of `div`, which becomes the spare
// of the head it showed; the chart's state, data attributes and place in the
// page move with it. Returns the plot now on screen, or null without a spare.
function swapIn(div, head) {
  const parent = div.parentElement;
  const spares = sparesOf(parent);
  const spare = spares.byHead.get(head);
  if (!spare?.__explorerHead) return null;
  const drawn = div.__explorerDrawn;
  const width = div._fullLayout?.width ?? div.clientWidth; // no forced layout
  const { layout, config, marks, chartMarks } = spare.__explorerHead;
  div.__explorerHead = { head: drawn.head, layout: drawn.layout, config: drawn.config,
                         marks: drawn.marks, chartMarks: div.__explorerMarks };
  for (const key of CARRIED) {
    spare[key] = div[key];
    delete div[key];
  }
  Object.assign(spare.dataset, div.dataset);
  spare.__explorerMarks = chartMarks;
  Object.assign(drawn, { head, layout, config, marks });
  // No node moves, no visibility change: only the two plots' own classes and
  // positions change, so the browser restyles two elements, not two subtrees
  // (moving them cost ~90 ms of style recalculation for 7 charts). classList,
  // not className: Plotly's own class (js-plotly-plot) scopes its CSS.
  spare.classList.replace("explorer-spare", "explorer-chart");
  spare.removeAttribute("aria-hidden");
  spare.style.width = "";
  div.classList.replace("explorer-chart", "explorer-spare");
  div.setAttribute("aria-hidden", "true");
  div.style.width = `${width}px`;
  spares.byHead.delete(head);
  spares.byHead.set(div.__explorerHead.head, div);
  PAGE.charts.delete(div);
  PAGE.charts.add(spare);
  return spare;
}

// Tell whoever measures (tests, `make bench`) that `div`'s pixels changed: the
// time of the next frame, after the change is painted, and why it changed:
// "view" (the page followed a click or a pick, `setView`) or "server" (a payload).
function painted(div) {
  const by = div.__explorerCause ?? "server";
  requestAnimationFrame(() => {
    div.dataset.painted = String(performance.now());
    div.dataset.paintedBy = by;
    div.dispatchEvent(new CustomEvent("explorer:painted", { bubbles: true, detail: { by } }));
  });
}

// ---------------------------------------------------------------------------
// The weights as lines (BertViz's head view), drawn from the matrix the chart
// holds, for the head and the query token the page shows. The spec (bins,
// threshold, colours, labels, words) comes from explorer.figures.lines_spec.
// ---------------------------------------------------------------------------
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

// The line view under a weights chart: its switch and, while the page's view
// says so, the lines for the head and query the chart shows. While it is off,
// the lines are drawn off-screen in idle time, so that turning it on only
// reveals them. Resolves to whether anything changed on screen.
async function followLines(div) {
  const state = div.__explorerState;
  if (!state?.header.lines || !PAGE.known) return false;
  const { toggle, box } = state.lines;
  box.__explorerCause = div.__explorerCause;
  const on = Boolean(PAGE.view.lines);
  toggle.checked = on;
  const wasOn = !box.classList.contains("explorer-offscreen");
  if (!on) {
    box.classList.add("explorer-offscreen");
    box.style.width = `${div.clientWidth}px`;
    (window.requestIdleCallback ?? setTimeout)(() => drawLines(div), { timeout: 3000 });
    return wasOn;
  }
  box.classList.remove("explorer-offscreen");
  box.style.width = "";
  const drew = await drawLines(div);
  if (!drew && !wasOn) painted(box);
  return drew || !wasOn;
}

// Draw the lines of `div`'s weights for the page's view into its line box,
// unless they are drawn already. Resolves to whether it drew.
async function drawLines(div) {
  const state = div.__explorerState;
  const { box } = state.lines;
  const spec = state.header.lines;
  const shown = figureFor(state.header, PAGE.view);
  const block = shown.figure.data[0].matrix.block;
  const key = JSON.stringify([state.header.blocks[block].hash, shown.head, PAGE.view.query,
                              box.clientWidth]);
  if (key === box.dataset.key || !box.isConnected) return false;
  box.dataset.key = key;
  const Plotly = await loadPlotly(state.header.plotly);
  const { data, layout } = linesFigure(state.matrices[block], spec.labels.length, spec,
                                       PAGE.view.query, shown.head);
  await Plotly.react(box, data, layout, {
    displaylogo: false, responsive: true,
    displayModeBar: window.matchMedia?.("(hover: none)").matches ? false : "hover",
    toImageButtonOptions: { format: "png", filename: spec.filename, scale: 2 } });
  box.dataset.drawn = String(Number(box.dataset.drawn ?? 0) + 1);
  if (!box.classList.contains("explorer-offscreen")) painted(box);
  return true;
}

// The switch and the box of the line view, once per chart (under its div).
function addLines(parentElement, spec, setTriggerValue) {
  let toggle = parentElement.querySelector(":scope > .explorer-lines-toggle input");
  let box = parentElement.querySelector(":scope > .explorer-lines");
  if (!toggle) {
    addPickerStyle();
    const label = document.createElement("label");
    label.className = "explorer-lines-toggle";
    label.title = spec.help;
    toggle = document.createElement("input");
    toggle.type = "checkbox";
    toggle.setAttribute("role", "switch");
    label.append(toggle, ` ${spec.toggle}`);
    box = document.createElement("div");
    box.className = "explorer-lines explorer-offscreen";
    parentElement.append(label, box);
  }
  toggle.onchange = () => {
    setTriggerValue("lines", toggle.checked);
    setView({ lines: toggle.checked });
  };
  return { toggle, box };
}

// Follow the page's view in one chart: show the head it wants now (one redraw
// with the layout already measured: every head's matrix has the same shape),
// else move its outlines (a cheap relayout of its shapes) if they changed.
// Resolves to whether anything was drawn.
async function follow(div) {
  const { drew, main } = await followChart(div);
  return (await followLines(main)) || drew;
}

// Resolves to {drew: whether it drew, main: the plot on screen afterwards}.
async function followChart(div) {
  const state = div.__explorerState;
  const drawn = div.__explorerDrawn;
  if (!state || !drawn || div.dataset.drawing) return { drew: false, main: div };
  const { header } = state;
  const Plotly = await loadPlotly(header.plotly);
  const shown = figureFor(header, PAGE.view);
  const swapped = shown.head !== drawn.head && swapIn(div, shown.head);
  if (swapped) {
    await moveMarks(swapped, shown);
    painted(swapped);
    return { drew: true, main: swapped };
  }
  if (shown.head !== drawn.head) {
    const { traces, layout, config } = headPicture(div, shown);
    await Plotly.react(div, traces, layout, config);
    Object.assign(drawn, { head: shown.head, layout, config,
                           marks: JSON.stringify(layout.shapes) });
    div.__explorerMarks = shown.marks;
    painted(div);
    return { drew: true, main: div };
  }
  const moved = await moveMarks(div, shown);
  if (moved) painted(div);
  return { drew: moved, main: div };
}

// Move `div`'s outlines to those of `shown` (figureFor the view) if they differ
// (a cheap relayout of its shapes). Resolves to whether it moved them.
async function moveMarks(div, shown) {
  const { header } = div.__explorerState;
  const drawn = div.__explorerDrawn;
  if (!header.marks || !PAGE.known) return false;
  const shapes = shown.figure.layout.shapes ?? [];
  const text = JSON.stringify(shapes);
  if (text === drawn.marks) return false;
  drawn.marks = text;
  drawn.layout = { ...drawn.layout, shapes };
  const Plotly = await loadPlotly(header.plotly);
  await Plotly.relayout(div, { shapes });
  return true;
}

function nextFrame() {
  return new Promise((resolve) => requestAnimationFrame(() => resolve()));
}

// How far a chart lies from the window: 0 when it is in view.
function distanceFromView(div) {
  const box = div.getBoundingClientRect();
  if (box.bottom >= 0 && box.top <= window.innerHeight) return 0;
  return box.top > window.innerHeight ? box.top - window.innerHeight : -box.bottom;
}

// Change the page's view (a click, a picker) and let every chart follow it:
// the charts in view all in the next frame, then the others nearest first, a
// frame whenever one has taken FRAME_BUDGET_MS, so that the page stays
// responsive. A later change starts over (each chart compares with what it
// shows). The server hears of the change separately and confirms it with its
// payloads. (Streamlit sends a trigger value from a timer task, so the charts in
// view are drawn before its message leaves: following them in a later task
// sent it 30-90 ms sooner, but put the outlines past 100 ms.)
const FRAME_BUDGET_MS = 12;

export function setView(change) {
  Object.assign(PAGE.view, change);
  PAGE.known = true;
  for (const box of PAGE.pickers) {
    if (!box.isConnected) PAGE.pickers.delete(box);
    else box.__show(PAGE.view[box.dataset.name]);
  }
  for (const div of PAGE.charts) if (!div.isConnected) PAGE.charts.delete(div);
  const order = [...PAGE.charts].map((div) => [distanceFromView(div), div])
    .sort((a, b) => a[0] - b[0]);
  const round = (PAGE.round = (PAGE.round ?? 0) + 1);
  (async () => {
    let since = performance.now();
    for (const [distance, div] of order) {
      if (round !== PAGE.round) return; // a newer change took over
      if (distance > 0 && performance.now() - since > FRAME_BUDGET_MS) {
        await nextFrame();
        since = performance.now();
        if (round !== PAGE.round) return;
      }
      div.__explorerCause = "view";
      await follow(div);
    }
  })();
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
  // The plot on screen: a head switch may swap it for a spare (`swapIn`).
  const onScreen = () => parentElement.querySelector(":scope > .explorer-chart");
  if (onScreen()) onScreen().__explorerCause = "server";
  if (missing.length) {
    setTriggerValue("missing", missing); // Python sends them again
    return;
  }
  let div = onScreen();
  if (!div) {
    div = document.createElement("div");
    div.className = "explorer-chart";
    parentElement.appendChild(div);
    new ResizeObserver(() => onScreen()?.__explorerRedraw?.()).observe(parentElement);
  }
  if (header.view) { // the server's view: what its payloads were built for
    Object.assign(PAGE.view, header.view);
    PAGE.known = true;
  }
  const toServer = header.clickable ? (cell) => setTriggerValue("click", cell) : null;
  // A click tells the server and moves the page's view at once (a step chart:
  // its cell, and its row as the query where the rows are tokens).
  const onClick = toServer && ((cell) => {
    toServer(cell);
    const marks = onScreen().__explorerMarks;
    if (header.marks?.pick === "head") setView({ head: cell.trace }); // every head at a glance
    if (marks?.step) {
      const change = { cell: [marks.step, cell.row, cell.col + (marks.colOffset ?? 0),
                              marks.head] };
      if (marks.queryRows) change.query = cell.row;
      setView(change);
    }
  });
  div.__explorerOnClick = onClick;
  PAGE.charts.add(div);
  let lastWidth = parentElement.clientWidth;
  const redraw = (always) => {
    if (!always && Math.abs(parentElement.clientWidth - lastWidth) < 8) return;
    lastWidth = parentElement.clientWidth;
    const main = onScreen();
    main.dataset.drawing = "1"; // until the picture is on the page (tests wait for it)
    return draw(main, header, matrices, onClick).catch((error) => {
      main.textContent = `This chart could not be drawn: ${error.message}`;
    }).finally(() => delete main.dataset.drawing);
  };
  div.__explorerRedraw = () => redraw(false);
  div.__explorerState = { header, matrices, redraw,
                          lines: header.lines && addLines(parentElement, header.lines,
                                                          setTriggerValue) };
  // The same picture as last time (a rerun that changed other charts, or one
  // that sent only the hashes of matrices this page holds, or only the view):
  // nothing to draw but what the view changed.
  // Blocks are named by their hash: payloads built for different heads hold
  // the same matrices in another order.
  const hashes = header.blocks.map((b) => b.hash);
  const picture = JSON.stringify(
    [figureFor(header, { ...PAGE.view, head: 0, query: null, cell: null }).figure,
     header.size, header.columns, header.heads, [...hashes].sort()],
    (key, value) => (key === "block" ? hashes[value] : value));
  if (picture === div.__explorerPicture) {
    follow(div);
    return;
  }
  div.__explorerPicture = picture;
  redraw(true);
}

// ---------------------------------------------------------------------------
// Pickers of the page's view: the query token (a drop-down) and the head (a
// row of buttons). A choice changes the page's view at once, so every chart
// follows within a frame, and then tells the server (which confirms it).
// Spec (explorer/ui/chart.py `picker`): {name, label, help, options: [labels],
// value: index or null, none: label of "no choice" or null, buttons: bool}.
// ---------------------------------------------------------------------------
const PICKER_STYLE = `
.explorer-picker { font-family: inherit; margin-bottom: 0.5rem; }
.explorer-picker label { display: block; font-size: 14px; margin-bottom: 0.25rem;
  color: rgb(49, 51, 63); }
.explorer-picker select { width: 100%; font: inherit; font-size: 14px; padding: 0.5rem 0.6rem;
  border: 1px solid rgba(49, 51, 63, 0.2); border-radius: 0.5rem; background: #f0f2f6;
  color: rgb(49, 51, 63); }
.explorer-picker [role=radiogroup] { display: flex; flex-wrap: wrap; gap: 0; }
.explorer-picker button { font: inherit; font-size: 14px; padding: 0.25rem 0.75rem;
  border: 1px solid rgba(49, 51, 63, 0.2); background: #fff; color: rgb(49, 51, 63);
  cursor: pointer; margin-left: -1px; }
.explorer-picker button:first-child { border-radius: 0.5rem 0 0 0.5rem; margin-left: 0; }
.explorer-picker button:last-child { border-radius: 0 0.5rem 0.5rem 0; }
.explorer-offscreen { position: absolute !important; left: -100000px; top: 0;
  visibility: hidden; }
.explorer-spare { position: absolute !important; left: -100000px; top: 0; }
.explorer-lines-toggle { display: flex; align-items: center; gap: 0.4rem; font-size: 14px;
  margin: 0.25rem 0 0.5rem; cursor: pointer; color: rgb(49, 51, 63); }
.explorer-lines-toggle input { accent-color: #ff4b4b; width: 1rem; height: 1rem; }
.explorer-picker button[aria-checked=true] { color: #ff4b4b; border-color: #ff4b4b;
  background: rgba(255, 75, 75, 0.08); position: relative; }
`;

function addPickerStyle() {
  if (document.getElementById("explorer-picker-style")) return;
  const style = document.createElement("style");
  style.id = "explorer-picker-style";
  style.textContent = PICKER_STYLE;
  document.head.appendChild(style);
}

export function mountPicker(component) {
  const { data, parentElement, setTriggerValue } = component;
  if (!data) return;
  const spec = typeof data === "string" ? JSON.parse(data) : data;
  addPickerStyle();
  let box = parentElement.querySelector(":scope > .explorer-picker");
  const shape = JSON.stringify([spec.name, spec.label, spec.options, spec.none, spec.buttons]);
  if (!box || box.dataset.shape !== shape) {
    box?.remove();
    box = document.createElement("div");
    box.className = "explorer-picker";
    box.dataset.shape = shape;
    box.dataset.name = spec.name;
    const id = `explorer-picker-${spec.name}`;
    const label = document.createElement("label");
    label.textContent = spec.label;
    if (spec.help) label.title = spec.help;
    box.appendChild(label);
    if (spec.buttons) {
      const group = document.createElement("div");
      group.setAttribute("role", "radiogroup");
      group.setAttribute("aria-label", spec.label);
      spec.options.forEach((text, i) => {
        const button = document.createElement("button");
        button.type = "button";
        button.setAttribute("role", "radio");
        button.textContent = text;
        button.addEventListener("click", () => box.__choose(i));
        group.appendChild(button);
      });
      box.appendChild(group);
    } else {
      const select = document.createElement("select");
      select.id = id;
      label.htmlFor = id;
      const options = spec.none !== null && spec.none !== undefined
        ? [["", spec.none], ...spec.options.map((text, i) => [String(i), text])]
        : spec.options.map((text, i) => [String(i), text]);
      for (const [value, text] of options) {
        const option = document.createElement("option");
        option.value = value;
        option.textContent = text;
        select.appendChild(option);
      }
      select.addEventListener("change", () => box.__choose(
        select.value === "" ? null : Number(select.value)));
      box.appendChild(select);
    }
    parentElement.appendChild(box);
    PAGE.pickers.add(box);
  }
  box.__choose = (value) => {
    if (value === PAGE.view[spec.name]) return;
    setTriggerValue("pick", value === null ? -1 : value);
    setView({ [spec.name]: value });
  };
  box.__show = (value) => {
    const select = box.querySelector("select");
    if (select) select.value = value === null || value === undefined ? "" : String(value);
    box.querySelectorAll("button").forEach((button, i) => {
      button.setAttribute("aria-checked", String(i === value));
    });
  };
  PAGE.view[spec.name] = spec.value; // the server's choice wins when it speaks
  PAGE.known = true;
  box.__show(spec.value);
}
