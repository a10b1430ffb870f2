// @ts-check
// The page's own CSS for pickers, the line view's switch and the plots kept
// off-screen (spares, a hidden line view): added once.

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
.explorer-lines-toggle input { accent-color: #ff4b4b; width: 1rem; height: 1rem; }
.explorer-picker button[aria-checked=true] { color: #ff4b4b; border-color: #ff4b4b;
  background: rgba(255, 75, 75, 0.08); position: relative; }
`;

/** Add the page's CSS, once. */
export function addStyle() {
  if (document.getElementById("explorer-picker-style")) return;
  const style = document.createElement("style");
  style.id = "explorer-picker-style";
  style.textContent = STYLE;
  document.head.appendChild(style);
}
