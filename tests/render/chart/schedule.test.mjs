import assert from "node:assert/strict";
import { test } from "node:test";

import { drawnAtOnce, drawSoon, isStale, nearest, NEAR_SCREENS } from "../../../explorer/render/chart/schedule.js";

// A page of fake plots, a window 1000 px high, and an IntersectionObserver and
// animation frames we trigger.
const plots = [];
const order = [];
let observer = null;
const frames = [];
const frame = () => frames.splice(0).forEach((f) => f());
globalThis.requestAnimationFrame = (f) => frames.push(f);
globalThis.window = { innerHeight: 1000 };
globalThis.document = { querySelectorAll: () => plots.filter((p) => "drawing" in p.dataset) };
globalThis.IntersectionObserver = class {
  constructor(callback) { observer = { callback, watched: new Set() }; }
  observe(el) { observer.watched.add(el); }
  unobserve(el) { observer.watched.delete(el); }
};

// `top` a number, or a function of the page (a plot below others lies lower once they
// reserve their heights).
function plot(name, top) {
  const at = () => (typeof top === "function" ? top() : top);
  const p = { name, dataset: {}, style: {}, isConnected: true, querySelector: () => null,
              getBoundingClientRect: () => ({ top: at(), bottom: at() + 400 }) };
  plots.push(p);
  return p;
}

const job = (p) => ({ plot: () => p,
                      redraw: async () => { order.push(p.name); delete p.dataset.drawing; } });

async function until(done) {
  for (let i = 0; i < 200 && !done(); i++) await new Promise((r) => setTimeout(r, 5));
}

test("only a chart in the window is drawn at once; the observer watches one screen beyond", () => {
  assert.equal(NEAR_SCREENS, 1);
  assert.equal(drawnAtOnce(0), true);
  assert.equal(drawnAtOnce(1), false);
  assert.equal(drawnAtOnce(1000), false);
});

test("the idle drawing takes the stale chart nearest the window first", () => {
  const far = { d: 3000 }, near = { d: 1200 }, farther = { d: 9000 };
  assert.equal(nearest([far, near, farther], (j) => j.d), near);
  assert.equal(nearest([], (j) => j.d), null);
});

test("charts in the window are drawn at once, the others after them, nearest first", async () => {
  const inView = plot("in view", 100), next = plot("next screen", 1800);
  const far = plot("far", 4000), farther = plot("farther", 9000);
  for (const p of [inView, farther, far, next]) drawSoon(job(p), () => 300);
  assert.deepEqual(order, []); // new charts: placed at the next frame
  frame();
  assert.deepEqual(order, ["in view"]);
  assert.equal(isStale(next), true); // its turn comes first: the observer reports it near
  // The others are stale (tests and spares wait for them) and keep their height.
  assert.equal(far.dataset.drawing, "1");
  assert.equal(isStale(far), true);
  assert.equal(isStale(inView), false);
  assert.equal(farther.style.minHeight, "300px");
  observer.callback([{ isIntersecting: true, target: next }]);
  assert.deepEqual(order, ["in view", "next screen"]);
  await until(() => order.length === 4);
  assert.deepEqual(order, ["in view", "next screen", "far", "farther"]);
  assert.equal(farther.style.minHeight, "");
  assert.equal("drawing" in farther.dataset, false);
  assert.equal(isStale(far), false);
});

test("new charts are placed once those mounted with them have reserved their heights", async () => {
  order.length = 0;
  // A page's charts mount together, in any order: the lower chart mounts while the
  // upper one has no height yet, so that read at once, it lies in the window.
  const upper = plot("upper", 300);
  const lower = plot("lower", () => 300 + (parseFloat(upper.style.minHeight) || 0) + 100);
  drawSoon(job(lower), () => 1200);
  assert.equal(lower.getBoundingClientRect().top, 400); // in the window, for now
  drawSoon(job(upper), () => 1200);
  frame();
  assert.deepEqual(order, ["upper"]); // not the lower one: it lies at 1600 px now
  assert.equal(isStale(lower), true);
  await until(() => order.length === 2);
  assert.deepEqual(order, ["upper", "lower"]);
});

test("a chart with a picture is drawn at once when its new payload comes in view", () => {
  order.length = 0;
  const shown = plot("shown", 200);
  shown.querySelector = () => ({}); // it has a picture: its place is known
  drawSoon(job(shown), () => 300);
  assert.deepEqual(order, ["shown"]);
  assert.equal(frames.length, 0);
});

test("a stale chart that comes near is drawn before the idle drawing reaches it", async () => {
  order.length = 0;
  const far = plot("far", 5000), coming = plot("coming near", 8000);
  drawSoon(job(far), () => 300);
  drawSoon(job(coming), () => 300);
  assert.deepEqual(order, []);
  observer.callback([{ isIntersecting: true, target: coming }]);
  assert.deepEqual(order, ["coming near"]);
  await until(() => order.length === 2);
  assert.deepEqual(order, ["coming near", "far"]); // drawn once each
});

test("a chart reported near while another draws waits for it, then comes first", async () => {
  order.length = 0;
  const drawing = plot("drawing now", 0);
  drawing.dataset.drawing = "1"; // the window's chart, still drawing (not stale)
  let idleTurns = 0; // the idle drawing's turns, each asked for when the last one is done
  window.requestIdleCallback = (f) => { idleTurns += 1; setTimeout(f, 0); };
  const far = plot("far", 9000), near = plot("near", 1500);
  drawSoon(job(far), () => 300);
  drawSoon(job(near), () => 300);
  observer.callback([{ isIntersecting: true, target: near }]);
  assert.deepEqual(order, []); // not while the window's chart draws
  await until(() => idleTurns >= 3);
  assert.ok(idleTurns >= 3);
  assert.deepEqual(order, []); // the idle drawing came by, and waits for it too
  delete drawing.dataset.drawing;
  await until(() => order.length === 2);
  assert.deepEqual(order, ["near", "far"]);
  delete window.requestIdleCallback;
});
