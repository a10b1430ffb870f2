"""The backward pass's script (`explorer.render.backward_script`), run for real
(``python -I``, torch only, in a temporary folder): its hand-derived gradients
equal the backend's (`explorer.lessons.backward.gradients.backward`), its
printed loss is the page's, its check against ``loss.backward()`` passes, and
a broken rule makes it fail."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from explorer import AttentionConfig, compute_trace
from explorer.lessons.backward.gradients import backward
from explorer.lessons.backward.loss import compute_loss
from explorer.lessons.backward.settings import TARGET, LossConfig
from explorer.render.backward_script import LOSS_LINE, backward_script

TIMEOUT_S = 120
CASES = {
    "page-default": (AttentionConfig(causal=True, n_heads=2, d_k=4), LossConfig()),
    "one-head-target": (AttentionConfig(), LossConfig(TARGET)),
    "dropout-sum-unscaled": (AttentionConfig(causal=True, dropout=0.3, n_heads=2,
                                             normalization="sum", scale=False), LossConfig()),
    "naive-table-linear-out-proj": (
        AttentionConfig(normalization="naive_softmax", weight_init="linear", embedding="table",
                        out_proj=True, seed=5), LossConfig(TARGET, 7)),
    "given-two-tokens": (AttentionConfig(sentence="a b", d_in=2, d_k=2, d_v=2, embedding="given",
                                         embeddings=((0.1, -2.5), (1e-7, 3.0))), LossConfig()),
}


def run(source: str, folder: Path) -> tuple[subprocess.CompletedProcess, dict | None]:
    script = folder / "backward.py"
    script.write_text(source, encoding="utf-8")
    done = subprocess.run([sys.executable, "-I", "-X", "utf8", str(script), "--save", "g.pt"],
                          cwd=folder, capture_output=True, text=True, encoding="utf-8",
                          timeout=TIMEOUT_S, check=False)
    saved = folder / "g.pt"
    return done, torch.load(saved, weights_only=True) if saved.exists() else None


@pytest.mark.parametrize("case", CASES)
def test_the_script_derives_every_gradient_as_the_backend_and_autograd_agree(case, tmp_path):
    config, loss_config = CASES[case]
    done, saved = run(backward_script(config, loss_config, link="http://localhost/?seed=1"),
                      tmp_path)
    assert done.returncode == 0, done.stderr
    trace = compute_trace(config)
    grads = backward(trace, compute_loss(trace, loss_config))
    assert list(saved["gradients"]) == list(grads)
    for name, expected in grads.items():
        got = saved["gradients"][name]
        assert got.shape == expected.shape, name
        torch.testing.assert_close(got, expected, atol=2e-6, rtol=1e-5, msg=name)
    assert LOSS_LINE.format(value=grads.loss.value) in done.stdout.splitlines()
    verdicts = [line.split() for line in done.stdout.splitlines() if "hand - autograd" in line]
    assert [(v[0], v[-1]) for v in verdicts] == [(n, "ok") for n in ("loss", *grads)]
    assert set(saved["differences"]) == {"loss", *grads}
    assert max(saved["differences"].values()) < 1e-4


BROKEN = {
    "the softmax backward without its rowsum term":
        ("d_scores = alpha * (d_weights - row_sum)", "d_scores = alpha * d_weights"),
    "dQ without the 1/√d_k":
        ("d_scores = d_scores / heads(steps[\"keys\"]).shape[-1] ** 0.5", "pass"),
    "gradient leaking into masked positions":
        ('d_scores = d_scores.masked_fill(steps["causal_mask"], 0.0)', "d_scores = d_scores + 1e-3"),
}


@pytest.mark.parametrize("broken", BROKEN)
def test_a_broken_rule_is_caught_by_the_scripts_own_check(broken, tmp_path):
    right, wrong = BROKEN[broken]
    # head_dim 2, so that ÷√head_dim changes the numbers
    source = backward_script(AttentionConfig(causal=True, n_heads=2, d_k=4, d_v=4), LossConfig())
    assert right in source
    done, _ = run(source.replace(right, wrong), tmp_path)
    assert done.returncode == 1
    assert "DIFFERENT" in done.stdout and "differ from autograd" in done.stderr


def test_visitor_text_stays_a_literal_or_a_comment(tmp_path):
    hostile = 'x"""\nopen("PWNED", "w")\n#'
    config = AttentionConfig(sentence=f"{hostile} is here")
    done, saved = run(backward_script(config, LossConfig(), link=f"http://h/?q={hostile}"),
                      tmp_path)
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "PWNED").exists()
    assert list(saved["gradients"]) == list(backward(compute_trace(config),
                                                     compute_loss(compute_trace(config))))
