// @ts-check
// Pickers of the page's view: the query token (a drop-down) and the head (a
// row of buttons). A choice changes the page's view at once, so every chart
// follows within a frame, and then tells the server (which confirms it).
// Spec (explorer/ui/component.py `picker`): {name, label, help, options: [labels],
// value: index or null, none: label of "no choice" or null, buttons: bool}.

import { setView } from "./page.js";
import { PAGE } from "./state.js";
import { addStyle } from "./style.js";

/** One picker on the page: its element, the view value it picks, how it shows a value. */
class Picker {
  /** @param {HTMLElement} box @param {string} name */
  constructor(box, name) {
    this.box = box;
    this.name = name;
    /** @type {(value: number | null) => void} */
    this.choose = () => {};
  }

  /** Show `value` (an index, or null for no choice) as chosen. @param {any} value */
  show(value) {
    const select = this.box.querySelector("select");
    if (select) select.value = value === null || value === undefined ? "" : String(value);
    this.box.querySelectorAll("button").forEach((button, i) => {
      button.setAttribute("aria-checked", String(i === value));
    });
  }
}

/** @type {WeakMap<Element, Picker>} a picker's element -> the picker */
const PICKERS = new WeakMap();

/**
 * The `<select>` options of a drop-down: [value, text], with "" for `none`.
 * @param {string[]} options @param {string | null | undefined} none
 * @returns {[string, string][]}
 */
export function selectOptions(options, none) {
  const picks = options.map((text, i) => /** @type {[string, string]} */ ([String(i), text]));
  return none !== null && none !== undefined ? [["", none], ...picks] : picks;
}

/**
 * Build a picker's element from its spec.
 * @param {any} spec @param {(value: number | null) => void} choose
 */
function buildPicker(spec, choose) {
  const box = document.createElement("div");
  box.className = "explorer-picker";
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
    spec.options.forEach((/** @type {string} */ text, /** @type {number} */ i) => {
      const button = document.createElement("button");
      button.type = "button";
      button.setAttribute("role", "radio");
      button.textContent = text;
      button.addEventListener("click", () => choose(i));
      group.appendChild(button);
    });
    box.appendChild(group);
  } else {
    const select = document.createElement("select");
    select.id = id;
    label.htmlFor = id;
    for (const [value, text] of selectOptions(spec.options, spec.none)) {
      const option = document.createElement("option");
      option.value = value;
      option.textContent = text;
      select.appendChild(option);
    }
    select.addEventListener("change", () => choose(
      select.value === "" ? null : Number(select.value)));
    box.appendChild(select);
  }
  return box;
}

/**
 * The Streamlit component of a picker (explorer/ui/component.py `picker`).
 * @param {{data: any, parentElement: HTMLElement, setTriggerValue: (name: string, value: any) => void}} component
 */
export function mountPicker(component) {
  const { data, parentElement, setTriggerValue } = component;
  if (!data) return;
  const spec = typeof data === "string" ? JSON.parse(data) : data;
  addStyle();
  let box = /** @type {HTMLElement | null} */ (parentElement.querySelector(":scope > .explorer-picker"));
  const shape = JSON.stringify([spec.name, spec.label, spec.options, spec.none, spec.buttons]);
  let picker = box && PICKERS.get(box);
  if (!box || !picker || box.dataset.shape !== shape) {
    box?.remove();
    const made = buildPicker(spec, (value) => PICKERS.get(made)?.choose(value));
    made.dataset.shape = shape;
    parentElement.appendChild(made);
    picker = new Picker(made, spec.name);
    PICKERS.set(made, picker);
    PAGE.pickers.add(picker);
  }
  picker.choose = (value) => {
    if (value === PAGE.view[/** @type {keyof import("./view.js").View} */ (spec.name)]) return;
    setTriggerValue("pick", value === null ? -1 : value);
    setView({ [spec.name]: value });
  };
  /** @type {any} */ (PAGE.view)[spec.name] = spec.value; // the server's choice wins when it speaks
  PAGE.known = true;
  picker.show(spec.value);
}
