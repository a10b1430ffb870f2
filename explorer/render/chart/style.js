// @ts-check
// The page's own CSS for pickers, the line view's switch, the plots kept
// off-screen (spares, a hidden line view) and a heatmap's cursor and table: added once.

const STYLE = `
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
.explorer-lines-toggle input { accent-color: #b3303d; width: 1rem; height: 1rem; }
.explorer-picker button[aria-checked=true] { color: #b3303d; border-color: #b3303d;
  background: rgba(255, 75, 75, 0.08); position: relative; }
/* Keyboard and screen reader (access.js): the cursor's element over the plot area while
   focused, a cursor ringed black and white (3:1 or more against any cell colour). */
.explorer-host { position: relative; }
.explorer-visually-hidden { position: absolute !important; width: 1px; height: 1px;
  overflow: hidden; clip-path: inset(50%); white-space: nowrap; }
.explorer-keys { position: absolute; left: 0; top: 0;
  pointer-events: none; outline: none; z-index: 1; }
.explorer-keys:focus-visible { outline: 3px solid #161514; outline-offset: 3px; }
.explorer-cursor { position: absolute; display: none; box-sizing: border-box;
  border: 3px solid #000; box-shadow: 0 0 0 2px #fff, inset 0 0 0 2px #fff; }
.explorer-keys:focus .explorer-cursor { display: block; }
.explorer-table { font-size: 14px; margin: 0.25rem 0 0.5rem; }
.explorer-table summary { cursor: pointer; min-height: 24px; color: rgb(49, 51, 63); }
.explorer-table table { border-collapse: collapse; margin-top: 0.25rem; display: block;
  overflow-x: auto; max-width: 100%; }
.explorer-table th, .explorer-table td { border: 1px solid #ccc; padding: 2px 6px;
  text-align: right; font-variant-numeric: tabular-nums; }
`;

/** Add the page's CSS, once. */
export function addStyle() {
  if (document.getElementById("explorer-picker-style")) return;
  const style = document.createElement("style");
  style.id = "explorer-picker-style";
  style.textContent = STYLE;
  document.head.appendChild(style);
}
