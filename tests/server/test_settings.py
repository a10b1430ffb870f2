"""`explorer.server.settings`: every ``EXPLORER_*`` variable by one rule, and the modules
that act on them read it from there."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys

import pytest

from explorer.server import settings
from tests.support.server import ROOT

SWITCHES = {"EXPLORER_MODEL_FOLDERS": "MODEL_FOLDERS", "EXPLORER_RUN_CODE": "RUN_CODE"}
OFF = [None, "", "0", "no", "false", "2", "off", "enabled"]
ON = ["1", " 1 ", "true", "YES", "on", "Yes"]


@pytest.fixture
def environment(monkeypatch):
    """Set (or unset, None) a variable and read the settings again; afterwards,
    the settings of this process's own environment."""
    def read(name: str, value: str | None):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
        return importlib.reload(settings)
    yield read
    monkeypatch.undo()
    importlib.reload(settings)


@pytest.mark.parametrize("name", SWITCHES)
def test_every_switch_is_on_for_1_true_yes_on_and_off_otherwise(environment, name):
    for value in OFF + ON:
        assert getattr(environment(name, value), SWITCHES[name]) is (value in ON), value


def test_the_memory_budget_is_a_positive_number_of_mib(environment):
    assert environment("EXPLORER_MEMORY_BUDGET_MB", None).MEMORY_BUDGET_MB == 1024
    assert environment("EXPLORER_MEMORY_BUDGET_MB", " 512.5 ").MEMORY_BUDGET_MB == 512.5
    for bad in ("abc", "0", "-5", "inf", "nan"):
        with pytest.raises(ValueError, match=f"EXPLORER_MEMORY_BUDGET_MB must be a positive "
                                             f"number \\(got '{bad}'\\)"):
            environment("EXPLORER_MEMORY_BUDGET_MB", bad)


def test_the_server_acts_on_the_settings():
    # A fresh interpreter: budget and sandbox read the settings once, at import.
    env = {**os.environ, "EXPLORER_RUN_CODE": "yes", "EXPLORER_MODEL_FOLDERS": "On",
           "EXPLORER_MEMORY_BUDGET_MB": "512"}
    code = ("from explorer.server import budget; from explorer.checker import sandbox; "
            "print(sandbox.ENABLED, budget.MODEL_FOLDERS, budget.MEMORY_BUDGET_BYTES)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                         text=True, check=True).stdout
    assert out.split() == ["True", "True", str(512 * 2**20)]
