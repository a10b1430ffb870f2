"""The Frontier attention page as a visitor uses it (AppTest): every part's every
step drawn with its checks, a clicked cell explained, a bad link value or a part
that cannot compute shown as a message, the link carrying every setting, and the
JSON holding every part. Generic over `explorer.modern.frontier.parts.PARTS`:
it holds for whichever parts are registered."""

from __future__ import annotations

import json

import numpy as np
import pytest

from explorer.core.config import AttentionConfig, ConfigError
from explorer.core.trace import compute_trace
from explorer.lessons.pages import FRONTIER_PAGE
from explorer.modern.frontier import FrontierConfig
from explorer.modern.frontier import parts as frontier_parts
from explorer.modern.frontier.parts import PARTS, compute_parts, step_matrix
from explorer.render import frontier as rf
from explorer.ui import cache
from explorer.ui.navigation import PAGES
from explorer.ui.state.entries import FRONTIER_FIELDS
from tests.support.apptest import all_charts, errors, open_link, page_link
from tests.ui.test_state import query_of

PAGE = PAGES[FRONTIER_PAGE][0]


def expected_trace(seed: int = AttentionConfig().seed, **sizes):
    x_config = AttentionConfig(seed=seed)
    x = compute_trace(x_config)["embeddings"]
    return x_config, compute_parts(x, FrontierConfig(**sizes), seed)


def headers(at) -> list[str]:
    return [h.value for h in at.header]


def test_the_page_opens_at_its_defaults_with_every_part_every_step_and_every_check():
    at = open_link(PAGE)
    assert not at.exception and errors(at) == []
    x_config, trace = expected_trace()
    assert trace.errors == {}
    titles = [f"{n}. {trace.parts[key].title}" for n, key in enumerate(PARTS, start=1)]
    assert [h for h in headers(at) if h[0].isdigit()] == titles
    drawn = all_charts(at)
    head = 0
    for key, part in trace.parts.items():
        for step in part.steps:
            figure = drawn[f"frontier-{key}-{step.name}"]
            expected = step_matrix(step, head).double().numpy()
            np.testing.assert_allclose(np.asarray(figure["data"][0]["z"], dtype=float),
                                       expected.astype(np.float32), rtol=0, atol=0)
    assert len(drawn) == sum(len(p.steps) for p in trace.parts.values())
    lines = [s.value for s in at.success] + errors(at)
    for part in trace.parts.values():
        for check in part.checks:
            assert sum(line.startswith(f"{check.symbol} {check.name}:") and check.reference in line
                       and f"{check.max_abs_diff:.1e}" in line for line in lines) == 1, check


def test_the_head_picked_is_the_head_every_three_d_step_shows():
    x_config, trace = expected_trace(n_heads=3)
    at = open_link(PAGE, {"frontier_heads": "3", "head": "2"})
    assert not at.exception and errors(at) == []
    drawn = all_charts(at)
    three_d = [(key, step) for key, part in trace.parts.items() for step in part.steps
               if step.values.dim() == 3]
    assert three_d, "no part has a per-head step"
    for key, step in three_d:
        np.testing.assert_array_equal(
            np.asarray(drawn[f"frontier-{key}-{step.name}"]["data"][0]["z"], dtype=np.float32),
            step_matrix(step, 2).numpy().astype(np.float32))
        assert f"head {min(2, step.values.shape[0] - 1)} of" in \
            drawn[f"frontier-{key}-{step.name}"]["layout"]["title"]["text"]


def test_a_clicked_cell_of_each_part_is_explained_with_its_labels_and_value():
    x_config, trace = expected_trace()
    for key, part in trace.parts.items():
        for step in {part.steps[0].name: part.steps[0], part.steps[-1].name: part.steps[-1]
                     }.values():  # each part's first and last step: one page run each
            row, col = (s - 1 for s in step_matrix(step, 0).shape)
            at = open_link(PAGE, {"frontier_cell": f"{key}.{step.name}:{row},{col}"})
            assert not at.exception and errors(at) == []
            box = "\n".join(m.value for m in at.main.markdown)
            assert f"{step.name}[{row}, {col}]" in box.replace("\\", ""), (key, step.name)
            shapes = all_charts(at)[f"frontier-{key}-{step.name}"]["layout"]["shapes"]
            assert any(s.get("name") == "cell" and s["x0"] == col - 0.5 and s["y0"] == row - 0.5
                       for s in shapes)


@pytest.mark.parametrize("query, message", [
    ({"rope_dim": "3"}, "rope_dim must be even"),
    ({"top_k": "0"}, "top_k"),
    ({"frontier_heads": "many"}, "frontier_heads"),
    ({"frontier_cell": "nowhere"}, "frontier_cell must name a part's step"),
])
def test_a_bad_link_value_gives_a_message_not_a_crash(query, message):
    at = open_link(PAGE, query)
    assert not at.exception
    shown = errors(at) + errors(at, "warning")
    assert any(message in text for text in shown), shown


def test_a_part_that_raises_a_config_error_shows_it_in_that_part_alone(monkeypatch):
    def refuses(x, config, generator):
        raise ConfigError("window", "window must be at most 2 here (got 3)")

    broken = list(PARTS)[3]
    monkeypatch.setitem(frontier_parts.PARTS, broken, refuses)
    cache.clear()
    try:
        at = open_link(PAGE)
    finally:
        cache.clear()
    assert not at.exception
    assert errors(at) == ["window must be at most 2 here (got 3). The other parts are drawn; "
                          "this one is not."]
    numbered = [h for h in headers(at) if h[0].isdigit()]
    assert numbered[3] == f"4. {frontier_parts.NAMES[broken]}"
    drawn = all_charts(at)
    assert not any(key.startswith(f"frontier-{broken}-") for key in drawn)
    others = [key for key in PARTS if key != broken]
    assert all(any(k.startswith(f"frontier-{key}-") for k in drawn) for key in others)


def test_every_setting_is_in_the_link_and_the_link_gives_the_same_page():
    sizes = {"frontier_heads": "3", "frontier_head_dim": "6", "rope_dim": "4",
             "kv_lora_rank": "5", "q_lora_rank": "7", "top_k": "2", "index_heads": "3",
             "index_dim": "6", "frontier_window": "2", "chunk": "3", "seed": "7", "d_in": "5"}
    assert set(sizes) >= set(FRONTIER_FIELDS)
    at = open_link(PAGE, sizes)
    assert not at.exception and errors(at) == []
    link = query_of(page_link(at))
    assert {name: link.get(name) for name in sizes} == sizes
    again = open_link(PAGE, link)
    first, second = all_charts(at), all_charts(again)
    assert first.keys() == second.keys()
    for key in first:
        np.testing.assert_array_equal(np.asarray(first[key]["data"][0]["z"], dtype=float),
                                      np.asarray(second[key]["data"][0]["z"], dtype=float))


def test_the_json_holds_every_part_its_steps_checks_and_the_settings():
    x_config, trace = expected_trace()
    settings = {"sentence": x_config.sentence, "seed": str(x_config.seed)}
    data = json.loads(rf.frontier_json(trace, ["a"], settings, "http://x/?seed=1"))
    assert list(data["parts"]) == list(PARTS)
    assert data["settings"] == settings and data["link"] == "http://x/?seed=1"
    for key, part in trace.parts.items():
        saved = data["parts"][key]
        assert list(saved["steps"]) == [step.name for step in part.steps]
        for step in part.steps:
            values = np.asarray(saved["steps"][step.name]["values"], dtype=object)
            finite = step.values.isfinite().numpy()
            np.testing.assert_allclose(values[finite].astype(float),
                                       step.values.double().numpy()[finite])
            assert (values[~finite] == "-Infinity").all() or not (~finite).any()
        assert [c["max_abs_diff"] for c in saved["checks"]] == [
            c.max_abs_diff for c in part.checks]


def test_the_json_and_script_downloads_are_offered():
    at = open_link(PAGE)
    labels = [b.proto.label for b in at.get("download_button")]
    assert labels == ["Every part (JSON)", "Reproduce in PyTorch (script)"]


def test_the_script_button_builds_the_pages_script_on_click():
    from explorer.core.tokenizer import token_labels
    from explorer.render.frontier_script import frontier_script
    from explorer.ui import frontier as frontier_ui
    x_config, trace = expected_trace()
    x_trace = compute_trace(x_config)
    expected = frontier_script(trace, list(token_labels(x_trace.tokens)),
                               x_trace["embeddings"], trace.config, x_config.seed,
                               "http://x/?seed=1")
    built = frontier_ui._script(x_config, trace.config, "http://x/?seed=1")
    assert built == expected and "# The page: http://x/?seed=1" in built


def test_a_page_too_large_for_the_browser_tab_says_so_and_draws_nothing(monkeypatch):
    from explorer.server import budget
    monkeypatch.setattr(budget, "BROWSER_BUDGET_BYTES", budget.LESSON_TAB.base + 1)
    at = open_link(PAGE)
    assert not at.exception
    assert not all_charts(at)
    assert len(errors(at)) == 1 and "of your browser's memory to draw" in errors(at)[0]
