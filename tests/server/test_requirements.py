"""A fresh install gets torch's CPU build, never the CUDA one (issue 40).

`requirements.txt` is resolved by pip itself for Linux x86_64 (CPython 3.11,
``--platform manylinux_2_28_x86_64 --only-binary=:all:``, ``--dry-run --report``),
with no download of torch: the indexes it names are stood in for by local ones
that hold what the real ones publish for torch 2.13.0, as small wheels with the
same name, version, tags and dependencies. PyPI's (the default index)
``torch-2.13.0`` needs ``nvidia-cudnn-cu13`` and more on Linux; the PyTorch CPU
index's ``torch-2.13.0+cpu`` needs none. Resolving a requirements.txt that does
not name the CPU index, or pins a torch the CPU index does not hold as the CPU
build, brings an ``nvidia-*`` package or fails here.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.support.server import ROOT

CPU_INDEX = "https://download.pytorch.org/whl/cpu"
"""PyTorch's CPU wheel index, as its install instructions name it."""
LINUX = "manylinux_2_28_x86_64"
TAG = f"cp311-cp311-{LINUX}"
CUDA_DEPENDENCIES = ('nvidia-cudnn-cu13==9.20.0.48; platform_system == "Linux"',
                     'nvidia-cublas==13.1.0.3; platform_system == "Linux"', "filelock")
"""What PyPI's torch 2.13.0 for Linux x86_64 requires (the first two of its
nvidia-* packages; its METADATA's Requires-Dist), and one dependency of both builds."""


def _digest(text: str) -> str:
    """A RECORD line's hash: urlsafe base64 of the sha256, unpadded."""
    return base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()


def _wheel(folder: Path, name: str, version: str, tag: str, requires: tuple[str, ...]) -> Path:
    """A minimal wheel of ``name`` ``version`` whose METADATA requires ``requires``."""
    info = f"{name.replace('-', '_')}-{version}.dist-info"
    files = {
        f"{name.replace('-', '_')}/__init__.py": "",
        f"{info}/METADATA": "Metadata-Version: 2.1\n"
                            f"Name: {name}\nVersion: {version}\n"
                            + "".join(f"Requires-Dist: {r}\n" for r in requires),
        f"{info}/WHEEL": f"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\nTag: {tag}\n",
    }
    record = "".join(f"{path},sha256={_digest(text)},{len(text.encode())}\n"
                     for path, text in files.items()) + f"{info}/RECORD,,\n"
    path = folder / f"{name.replace('-', '_')}-{version}-{tag}.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for name_in, text in {**files, f"{info}/RECORD": record}.items():
            archive.writestr(name_in, text)
    return path


def _index(root: Path, wheels: list[tuple[str, str, str, tuple[str, ...]]]) -> str:
    """A PEP 503 simple index in ``root`` holding ``wheels``; its file:// URL."""
    files = root / "files"
    files.mkdir(parents=True)
    projects: dict[str, list[Path]] = {}
    for name, version, tag, requires in wheels:
        projects.setdefault(name, []).append(_wheel(files, name, version, tag, requires))
    for name, paths in projects.items():
        page = root / "simple" / name
        page.mkdir(parents=True)
        links = "".join(f'<a href="../../files/{p.name}">{p.name}</a>\n' for p in paths)
        (page / "index.html").write_text(f"<!DOCTYPE html><html><body>\n{links}</body></html>")
    return (root / "simple").as_uri()


def _torch_lines(text: str) -> tuple[list[str], list[str]]:
    """requirements.txt's index options and its torch requirements."""
    options, torch_lines = [], []
    for line in text.splitlines():
        line = line.split(" #")[0].strip()
        if line.startswith(("--index-url", "--extra-index-url", "-i ")):
            options.append(line)
        elif re.match(r"torch\s*(==|>=|~=|<|;|$)", line):
            torch_lines.append(line)
    return options, torch_lines


def resolve_for_linux(requirements: str, tmp_path: Path) -> tuple[int, str, list[dict]]:
    """pip's resolution of ``requirements``' torch lines for Linux x86_64, with the
    indexes it names stood in for (`CPU_INDEX` by an index holding the CPU
    build, PyPI by one holding the CUDA build, any other by an empty one):
    (pip's exit code, its output, the report's packages to install)."""
    options, torch_lines = _torch_lines(requirements)
    assert torch_lines, "requirements.txt names no torch"
    pypi = _index(tmp_path / "pypi", [
        ("torch", "2.13.0", TAG, CUDA_DEPENDENCIES),
        ("nvidia-cudnn-cu13", "9.20.0.48", "py3-none-manylinux_2_28_x86_64", ()),
        ("nvidia-cublas", "13.1.0.3", "py3-none-manylinux_2_28_x86_64", ()),
        ("filelock", "3.20.0", "py3-none-any", ())])
    cpu = _index(tmp_path / "cpu", [("torch", "2.13.0+cpu", TAG, ("filelock",)),
                                    ("filelock", "3.20.0", "py3-none-any", ())])
    stand_in = []
    for option in options:
        flag, url = option.replace("=", " ").split()[:2]
        url = cpu if url.rstrip("/") == CPU_INDEX else _index(tmp_path / f"other{len(stand_in)}",
                                                             [])
        stand_in.append(f"{'--index-url' if flag in ('-i', '--index-url') else flag} {url}")
    if not any(o.startswith("--index-url") for o in stand_in):
        stand_in.insert(0, f"--index-url {pypi}")  # PyPI, the default index
    file = tmp_path / "requirements.txt"
    file.write_text("\n".join([*stand_in, *torch_lines]) + "\n")
    report = tmp_path / "report.json"
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--isolated", "--dry-run", "--ignore-installed",
         "--disable-pip-version-check", "--no-cache-dir", "--retries", "0",
         "--target", str(tmp_path / "target"), "--platform", LINUX, "--python-version", "3.11",
         "--implementation", "cp", "--only-binary=:all:", "--report", str(report),
         "-r", str(file)], capture_output=True, text=True, timeout=120)
    installed = json.loads(report.read_text())["install"] if report.exists() else []
    return done.returncode, done.stdout + done.stderr, installed


def _nvidia(returncode: int, output: str, installed: list[dict]) -> list[str]:
    names = [p["metadata"]["name"] for p in installed]
    return [n for n in names if n.startswith("nvidia")] or (
        re.findall(r"nvidia-[\w-]+", output) if returncode else [])


def test_resolving_requirements_for_linux_brings_the_cpu_build_and_no_nvidia_package(tmp_path):
    code, output, installed = resolve_for_linux((ROOT / "requirements.txt").read_text(),
                                                tmp_path)
    assert code == 0, output
    assert _nvidia(code, output, installed) == []
    torch = next(p for p in installed if p["metadata"]["name"] == "torch")
    assert torch["metadata"]["version"] == "2.13.0+cpu"
    assert "/cpu/" in torch["download_info"]["url"]


@pytest.mark.parametrize("requirements", [
    "torch==2.13.0\n",  # no index: PyPI's Linux wheel, the CUDA build
    "--extra-index-url https://example.org/simple\ntorch==2.13.0+cpu\n",  # not the CPU index
])
def test_a_requirements_file_without_the_cpu_index_fails_the_same_check(requirements, tmp_path):
    code, output, installed = resolve_for_linux(requirements, tmp_path)
    assert code != 0 or _nvidia(code, output, installed), output
