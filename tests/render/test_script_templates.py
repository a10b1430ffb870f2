"""The downloadable scripts' template files (`explorer.render.script_templates`,
``explorer/render/scripts/``): each is Python that ``py_compile`` and ``ruff
check`` accept, every block of ``attention.py`` and ``backward.py`` is written for some setting, a
slot left without a value is an error, and visitor text that looks like a slot
stays text. That the scripts run and recompute the page is the export tests'
(tests/render/test_export.py, test_backward_script.py, tests/ui/test_app_modern.py);
that the move to templates left them byte-identical, `tests.support.script_goldens`'."""

from __future__ import annotations

import ast
import json
import py_compile
import subprocess
import sys
from pathlib import Path

import pytest

from explorer import AttentionConfig
from explorer.lessons.presets import PRESETS
from explorer.render import backward_script, export, script_templates
from explorer.render.script_templates import FOLDER, ScriptTemplate, slots, template
from tests.support.script_goldens import ATTENTION_CASES, BACKWARD_CASES

ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = sorted(FOLDER.glob("*.py"))


def test_the_templates_sit_beside_their_module_and_ship_with_it():
    assert FOLDER == Path(script_templates.__file__).parent / "scripts"
    assert {p.stem for p in TEMPLATES} == {"attention", "modern_attention", "backward",
                                           "decoder_layer", "frontier_attention"}
    assert not (FOLDER / "__init__.py").exists()  # a folder of files, not a package
    docker = (ROOT / ".dockerignore").read_text().splitlines()
    assert "!explorer/" in docker and not [line for line in docker if "scripts" in line]


@pytest.mark.parametrize("path", TEMPLATES, ids=lambda p: p.name)
def test_every_template_compiles(path, tmp_path):
    py_compile.compile(str(path), cfile=str(tmp_path / "t.pyc"), doraise=True)


def test_ruff_checks_every_template():
    """The project's rules, then pyflakes and syntax errors (``E9,F``) with each
    slot known as a name: an unused import or a misspelt variable fails. F541 (an
    f-string with no field) and F522 (``.format`` of a string with no field) are
    left out: ``f"\\n__HEADING__"``, ``"__CHECK_LINE__".format(...)`` get their
    fields from the slot."""
    known = sorted(f"__{slot}__" for path in TEMPLATES for slot in slots(path.stem))
    files = [str(p) for p in TEMPLATES]
    for rules in ([], ["--select", "E9,F", "--ignore", "F541,F522",
                       "--config", f"builtins = {json.dumps(known)}"]):
        done = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache",
                               "--output-format", "concise", *rules, *files], cwd=ROOT,
                              capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stdout + done.stderr


def test_a_slot_without_a_value_is_an_error_and_a_value_is_not_read_for_slots():
    block = ScriptTemplate("d_in = __D_IN__  # __SHAPE__ $x {y} __init__")
    assert block.fill(d_in=2, shape="__D_IN__") == "d_in = 2  # __D_IN__ $x {y} __init__"
    with pytest.raises(KeyError, match="SHAPE"):
        block.fill(d_in=2)


def test_every_block_of_the_attention_template_is_written_for_some_setting():
    used = {"header", "setup", "settings", "num_heads", "seed", "save"}
    for config, _ in ATTENTION_CASES.values():
        used |= {name for step in export._script_steps(config) for name in step}
    assert used == set(template("attention"))


def test_every_block_of_the_backward_template_is_written_for_some_setting():
    used = {"header"}
    for config, loss_config, _ in BACKWARD_CASES.values():
        used |= {name for part in backward_script._blocks(config, loss_config) for name in part}
    assert used == set(template("backward"))


def test_a_sentence_that_looks_like_a_slot_stays_the_sentence():
    sentence = "__SEED__ __SETTINGS__ __D_IN__ $seed"
    source = export.pytorch_script(AttentionConfig(sentence=sentence))
    assigned = {node.targets[0].id: node.value for node in ast.parse(source).body
                if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)}
    assert ast.literal_eval(assigned["sentence"]) == sentence
    assert ast.literal_eval(assigned["d_in"]) == AttentionConfig().d_in
    assert "__" not in source.replace(sentence, "").replace("__init__", "")


def test_the_scripts_are_found_from_another_working_directory(tmp_path):
    code = ("from explorer.render.export import pytorch_script\n"
            "from explorer.lessons.presets import PRESETS\n"
            "print(len(pytorch_script(PRESETS['illustrated'].config)))")
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                          text=True, env={"PYTHONPATH": str(ROOT)}, check=False)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) == len(export.pytorch_script(PRESETS["illustrated"].config))
