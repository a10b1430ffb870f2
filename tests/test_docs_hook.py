"""docs/hooks/crossrefs.py: a name in a docstring's backticks becomes a link on the
API pages; a name that is unknown or ambiguous stays code. (`make docs`, run by
`make test`, builds the site with it, strictly.)"""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _hook():
    spec = importlib.util.spec_from_file_location("crossrefs", ROOT / "docs/hooks/crossrefs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_full_paths_and_unique_names_link_and_the_rest_stays_code():
    hook = _hook()
    assert hook.identifier("explorer.core.trace.compute_trace") == "explorer.core.trace.compute_trace"
    assert hook.identifier("compute_trace") == "explorer.core.trace.compute_trace"
    assert hook.identifier("agreement.Agreement") == "explorer.core.agreement.Agreement"
    assert hook.identifier("d_k") is None  # a field of several configs: ambiguous
    assert hook.identifier("no_such_name") is None
    html = "<p><code>compute_trace</code> and <code>x @ W</code> and <code>no_such_name</code></p>"
    assert hook.link_names(html) == (
        '<p><autoref identifier="explorer.core.trace.compute_trace" optional>'
        "<code>compute_trace</code></autoref> and <code>x @ W</code> and "
        "<code>no_such_name</code></p>")
