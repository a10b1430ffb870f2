"""The browser half's files: the chart modules served as one, and the vendored
Plotly.js bundle, whose version must be plotly.py's (issue 26)."""

from __future__ import annotations

import graphlib
import hashlib
import json
import re
import shutil
import subprocess

import plotly.offline._plotlyjs_version as plotlyjs
import pytest

from explorer.render import payload as charts
from explorer.render.payload import CHART_DIR, CHART_JS, chart_script
from explorer.ui import component


def bundled_modules() -> list[str]:
    """The modules in the bundle, in its order (each opens with ``// ---- name ----``)."""
    return [line.removeprefix("// ---- ").removesuffix(" ----")
            for line in chart_script().splitlines() if line.startswith("// ---- ")]


def test_the_served_bundle_is_the_modules_as_they_are_now():
    # static/explorer-chart.js is committed: a module edited without rebuilding it fails here.
    assert CHART_JS.read_text(encoding="utf-8") == chart_script(), \
        "run: .venv/bin/python -m explorer.render.payload"
    modules = {path.name for path in CHART_DIR.glob("*.js")}
    assert set(bundled_modules()) == modules


@pytest.mark.skipif(shutil.which("node") is None, reason="needs Node")
def test_the_bundle_is_one_valid_module(tmp_path):
    bundle = tmp_path / "bundle.mjs"
    bundle.write_text(chart_script(), encoding="utf-8")
    subprocess.run(["node", "--check", str(bundle)], check=True)
    assert "\nimport " not in chart_script()
    exports = [line for line in chart_script().splitlines() if line.startswith("export ")]
    assert exports == ["export { draw };", "export { loadPlotly };", "export { mountPicker };",
                       "export { setView };", "export { checkSeam };",
                       "export function decode(bytes) {",
                       "export default function mountChart(component) {"]


IMPORTS = re.compile(r'^(?:import|export)\b[^;]*?\bfrom\s*"\./([^"]+)"', re.M)
"""A module's ``import ... from "./x.js"`` (or re-export), over as many lines as it takes."""


def imports_of(folder) -> dict[str, set[str]]:
    """Each ``*.js`` module of ``folder`` -> the modules of the folder it imports."""
    return {path.name: set(IMPORTS.findall(path.read_text(encoding="utf-8")))
            for path in folder.glob("*.js")}


def test_the_chart_modules_import_each_other_without_a_cycle():
    """The modules form layers: each can be read (and bundled) after the ones it
    imports. A circle (draw.js -> spares.js -> draw.js) has no such order."""
    graph = imports_of(CHART_DIR)
    assert graph["chart.js"] >= {"decode.js", "draw.js", "page.js", "state.js"}  # read
    assert all(imported in graph for imports in graph.values() for imported in imports)
    try:
        order = list(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as error:
        pytest.fail(f"the chart modules import in a circle: {' -> '.join(error.args[1])}")
    assert order[-1] == "chart.js"  # the entry sits on top of every other module
    bundled = bundled_modules()
    for i, name in enumerate(bundled):  # the bundle declares what a module uses before it
        assert graph[name] <= set(bundled[:i]), (name, graph[name] - set(bundled[:i]))


def test_a_circle_of_imports_is_found(tmp_path):
    (tmp_path / "a.js").write_text('import { b } from "./b.js";\nexport function a() {}\n')
    (tmp_path / "b.js").write_text('import {\n  c,\n} from "./c.js";\nexport function b() {}\n')
    (tmp_path / "c.js").write_text('export { a } from "./a.js";\nexport function c() {}\n')
    with pytest.raises(graphlib.CycleError):
        graphlib.TopologicalSorter(imports_of(tmp_path)).prepare()


def test_two_modules_declaring_one_name_cannot_be_bundled(tmp_path, monkeypatch):
    (tmp_path / "a.js").write_text('import { b } from "./b.js";\nexport function same() {}\n')
    (tmp_path / "b.js").write_text("export function b() {}\nconst same = 1;\n")
    monkeypatch.setattr(charts, "CHART_DIR", tmp_path)
    with pytest.raises(ValueError, match="same is declared by both b.js and a.js"):
        chart_script("a.js")


def test_the_vendored_plotly_is_the_version_plotly_py_ships():
    info = component.PLOTLY_JS_INFO
    assert info["version"] == plotlyjs.__plotlyjs_version__, (
        f"plotly.py ships plotly.js {plotlyjs.__plotlyjs_version__}, static/plotly holds "
        f"{info['version']}: build that version (static/plotly/plotly-heatmap.json says how)")
    data = component.PLOTLY_JS.read_bytes()
    assert (len(data), hashlib.sha256(data).hexdigest()) == (info["bytes"], info["sha256"])
    assert data.startswith(b"/**\n* plotly.js (heatmap - minified) v"
                           + info["version"].encode() + b"\n")


def test_the_plotly_bundle_is_built_from_the_version_its_recipe_pins():
    recipe = component.ROOT / "deploy" / "plotly"
    pinned = json.loads((recipe / "package.json").read_text())["dependencies"]["plotly.js"]
    locked = json.loads((recipe / "package-lock.json").read_text())["packages"]
    info = component.PLOTLY_JS_INFO
    assert pinned == locked["node_modules/plotly.js"]["version"] == info["version"]
    assert locked["node_modules/plotly.js"]["integrity"] == info["integrity"]
    assert info["built_with"] == f"esbuild {locked['node_modules/esbuild']['version']}"


def test_the_page_loads_versioned_files_that_exist_before_the_server_starts():
    for url, path in ((component.PLOTLY_URL, component.PLOTLY_JS), (component.CHART_URL, CHART_JS)):
        name, version = url.split("?v=")
        assert name == f"app/static/{path.relative_to(component.STATIC).as_posix()}"
        assert version == hashlib.blake2b(path.read_bytes(), digest_size=6).hexdigest()
    tracked = subprocess.run(["git", "ls-files", "--error-unmatch", str(component.PLOTLY_JS),
                              str(CHART_JS)], cwd=component.ROOT, capture_output=True)
    assert tracked.returncode == 0, tracked.stderr  # committed, not made at run time
