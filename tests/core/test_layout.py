"""The tree is the architecture: each folder of ``explorer`` imports only the
folders below it, the compute folders load no figure or UI library, and no
module imports one that imports it back."""

from __future__ import annotations

import ast
import graphlib
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "explorer"

LAYERS = ("core", "server", "lessons", "modern", ("checker", "models"), "render", "ui")
"""The folders from the bottom up; a folder may import any folder of a lower layer
(those of one layer, in a tuple, not each other): today's attention (`modern`)
builds on the book's and its lessons, and real models on today's attention (a Llama
layer's RoPE is `explorer.modern`'s). ``explorer/__init__.py`` and ``__main__.py``
(the re-exports and the CLI) sit above them all."""

COMPUTE = ("core", "server", "lessons", "checker", "modern", "models")
"""The folders that compute: torch (and transformers for real models), no figures, no UI."""

FORBIDDEN = {**dict.fromkeys(COMPUTE, {"streamlit", "plotly", "pandas", "cachetools"}),
             "render": {"streamlit", "cachetools"}}
"""Third-party packages a folder must not import, even lazily."""

ONLY_THIRD_PARTY = {"core": {"torch", "numpy"}, "server": set(), "lessons": {"torch"}}
"""The folders whose third-party imports are listed outright (the rest: anything
but `FORBIDDEN`)."""

UPWARD = {("explorer.checker.report", "explorer.render.check_view")}
"""The one import that runs upward, lazily: `CheckReport._repr_html_` draws a
report in a notebook only when the notebook displays it (plotly then, never on
import)."""


def _rank() -> dict[str, int]:
    ranks = {}
    for rank, layer in enumerate(LAYERS):
        for folder in (layer if isinstance(layer, tuple) else (layer,)):
            ranks[folder] = rank
    return ranks


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Every module ``path`` imports when it runs, at its top and inside its
    functions, not under ``if TYPE_CHECKING:`` (annotations only); for ``from
    a import b`` both ``a`` and ``a.b`` (a name from ``explorer`` is narrowed to
    the module that holds it by `_existing`)."""
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING":
            node.body = []
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found |= {node.module, *(f"{node.module}.{alias.name}" for alias in node.names)}
    return {_existing(name) for name in found}


def _existing(module: str) -> str:
    """``module`` if it is a module of ``explorer``, else its longest existing prefix
    (a class or function imported from a module is that module); other packages
    by their top-level name."""
    if not module.startswith("explorer."):
        return module.split(".")[0]
    while module.startswith("explorer.") and not (
            (ROOT / (module.replace(".", "/") + ".py")).exists()
            or (ROOT / module.replace(".", "/") / "__init__.py").exists()):
        module = module.rpartition(".")[0]
    return module


def _modules():
    """(module name, its folder or "" for the top, the path) of every module."""
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).parts
        yield _module_name(path), (parts[0] if len(parts) > 1 else ""), path


def test_the_folders_are_the_layers():
    """Every folder of ``explorer`` is in `LAYERS`, and every folder in it exists."""
    folders = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    assert folders == set(_rank())


def test_each_folder_imports_only_the_folders_below_it():
    ranks = _rank()
    upward = []
    for name, folder, path in _modules():
        if not folder:
            continue
        for module in _imports(path):
            if not module.startswith("explorer."):
                continue
            other = module.split(".")[1]
            if other != folder and ranks[other] >= ranks[folder] and (name, module) not in UPWARD:
                upward.append(f"{name} imports {module}")
    assert not upward, "\n".join(upward)


def test_the_one_upward_import_is_still_there_and_still_lazy():
    """`UPWARD` lists no import that has gone, and its import sits in a function."""
    for importer, imported in UPWARD:
        tree = ast.parse((ROOT / (importer.replace(".", "/") + ".py")).read_text())
        top = {node.module for node in tree.body if isinstance(node, ast.ImportFrom)}
        assert imported not in top, f"{importer} imports {imported} at its top"
        assert imported in _imports(ROOT / (importer.replace(".", "/") + ".py"))


def test_the_compute_folders_import_no_figure_or_ui_library():
    found = []
    for name, folder, path in _modules():
        third_party = {m for m in _imports(path)
                       if not m.startswith("explorer") and m not in sys.stdlib_module_names}
        if folder in ONLY_THIRD_PARTY:
            found += [f"{name} imports {m}" for m in third_party - ONLY_THIRD_PARTY[folder]]
        found += [f"{name} imports {m}" for m in third_party & FORBIDDEN.get(folder, set())]
    assert not found, "\n".join(found)


def test_importing_every_compute_module_loads_no_figure_or_ui_library():
    """What is imported at run time, through everything the compute modules pull in
    (the static check above sees only their own lines); with a trace computed."""
    names = [name for name, folder, path in _modules()
             if folder in COMPUTE and path.name != "__main__.py"]
    code = ("import importlib, sys\n"
            f"for name in {names!r}: importlib.import_module(name)\n"
            "from explorer import compute_trace, AttentionConfig\n"
            "compute_trace(AttentionConfig(causal=True, n_heads=2, d_k=4, d_v=4))\n"
            "print([m for m in ('streamlit', 'plotly', 'pandas') if m in sys.modules])\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=180, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_the_explorer_package_has_no_import_cycle():
    """No module of ``explorer`` imports, even lazily inside a function, one
    that imports it back (directly or through others). A module's import of a
    package it lies in (``explorer.ui`` from ``explorer.ui.render``) is left out:
    that package is loaded before the module anyway."""
    graph = {name: {m for m in _imports(path)
                    if m.startswith("explorer.") and m != name and not name.startswith(m + ".")}
             for name, _, path in _modules()}
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as error:
        pytest.fail(f"an import cycle: {' -> '.join(error.args[1])}")


def test_imports_are_sorted():
    """Every import block in the standard library, third-party, then our own order
    (ruff's isort rule, pyproject.toml's [tool.ruff]); `ruff check --fix .` mends it."""
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "."],
                            cwd=ROOT, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout[-3000:]


def _parts(package: Path) -> list[str]:
    """A package's modules and sub-packages, by name (``__main__`` is its command)."""
    modules = {p.stem for p in package.glob("*.py") if p.stem not in ("__init__", "__main__")}
    folders = {p.name for p in package.iterdir() if (p / "__init__.py").is_file()}
    return sorted(modules | folders)


@pytest.mark.parametrize("package", sorted(p.parent.relative_to(ROOT).as_posix() for p in
                                           (ROOT / "explorer").rglob("__init__.py")))
def test_every_folder_docstring_names_each_of_its_modules(package):
    """A newcomer finds every part from its folder's docstring: each module is
    named in it as ```name``` (a sub-package as ```name``` or ```name/```)."""
    folder = ROOT / package
    doc = ast.get_docstring(ast.parse((folder / "__init__.py").read_text("utf-8"))) or ""
    missing = [name for name in _parts(folder)
               if f"`{name}`" not in doc and f"`{name}/`" not in doc]
    assert not missing, f"{package}/__init__.py's docstring does not name {missing}"
