"""The Real model page's PyTorch script of a Llama-family layer
(`explorer.render.decoder_script`), run for real: ``python -I`` in a
subprocess, offline (``HF_HUB_OFFLINE=1``), on tiny random Llama, Qwen3
(QK-norm), Mistral (a sliding window of 3, one K/V head) and bfloat16 Qwen3
checkpoints saved to folders (`tests.support.tiny_decoders`).

Each script exits 0, and the weights it prints for the page's head equal the
page's trace (`explorer.models.compute_decoder_trace`); the tokens it generates
with the KV cache, each one's row of weights and the cache's bytes equal the
page's generation (`explorer.models.generate`), and its table of where every
head's weight goes equals `explorer.models.head_overview`'s. Broken variants of
its hand-written attention (the K/V head of each query head, RoPE, QK-norm, the
window) and of its generation (the row read without the cache, the wrong row of
the full pass) make its own check fail, exit status 1. A hostile sentence, link
and folder path stay data.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from explorer.models import (
    EVERY_ARCHITECTURE,
    compute_decoder_trace,
    generate,
    head_overview,
    head_slice,
    load_folder,
)
from explorer.models.errors import ModelError
from explorer.models.generation import MAX_NEW_TOKENS, ROW_TOLERANCE
from explorer.render.decoder_script import (
    CACHE_LINE,
    GENERATED_LINE,
    ROW_LINE,
    SHARES_HEADER,
    WEIGHTS_LINE,
    decoder_script,
)
from tests.support.tiny_decoders import save_tiny_decoder

TIMEOUT_S = 300
SENTENCE = "the cat sat on the mat"  # 6 tokens: past Mistral's window of 3
NEW_TOKENS = 5  # not the default 8: the page's count reaches the script
LINK = "http://localhost:8501/Real_model?layer=1"
CASES = {  # name: (architecture, dtype, layer, head)
    "llama": ("llama", torch.float32, 1, 1),
    "qwen3-qk-norm": ("qwen3", torch.float32, 0, 3),
    "mistral-sliding-window": ("mistral", torch.float32, 0, 2),
    "qwen3-bfloat16": ("qwen3", torch.bfloat16, 1, 2),
}


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("decoders")
    return {case: save_tiny_decoder(root / case, arch, dtype=dtype)
            for case, (arch, dtype, _, _) in CASES.items()}


def page_trace(folder: Path, layer: int, text: str = SENTENCE):
    """What the page computes: the model opened as its folder option does, the layer's trace."""
    model = load_folder(folder, architectures=EVERY_ARCHITECTURE)
    return model, compute_decoder_trace(model, text, layer=layer)


def run(source: str, folder: Path) -> subprocess.CompletedProcess:
    script = folder / "decoder_layer.py"
    script.write_text(source, encoding="utf-8")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error"}
    return subprocess.run([sys.executable, "-I", "-X", "utf8", str(script)], cwd=folder,
                          env=env, capture_output=True, text=True, encoding="utf-8",
                          timeout=TIMEOUT_S, check=False)


def printed_weights(stdout: str, head: int) -> list[float]:
    """The weights the script prints for the last query of ``head`` (`WEIGHTS_LINE`)."""
    start = WEIGHTS_LINE.format(head=head, values="")
    line = next(line for line in stdout.splitlines() if line.startswith(start))
    return [float(v) for v in line.removeprefix(start).split(", ")]


def check_lines(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if "max |difference|" in line]


@pytest.fixture(scope="module")
def scripts(folders, tmp_path_factory):
    """Each case's script as the page writes it, run once: ``scripts(case)`` is
    (the model, the page's trace, the source, the finished run)."""
    done = {}

    def script(case: str):
        if case not in done:
            _, _, layer, head = CASES[case]
            model, trace = page_trace(folders[case], layer)
            source = decoder_script(trace.config, model.location, head, text=SENTENCE,
                                    link=LINK, new_tokens=NEW_TOKENS)
            done[case] = model, trace, source, run(source, tmp_path_factory.mktemp(case))
        return done[case]
    return script


@pytest.mark.parametrize("case", CASES)
def test_the_script_recomputes_the_pages_layer_and_matches_the_model(case, scripts):
    _, _, layer, head = CASES[case]
    _, trace, source, done = scripts(case)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    page = head_slice(trace, head).steps["attn_weights"][-1].tolist()
    assert printed_weights(done.stdout, head) == pytest.approx(page, abs=1e-6)
    lines = check_lines(done.stdout)
    assert len(lines) == 3 and all(line.startswith("✓") for line in lines), lines
    assert f"LAYER, HEAD = {layer}, {head}" in source
    assert f"NEW_TOKENS, SEED = {NEW_TOKENS}, 0" in source
    assert ("QK-norm" in source) == case.startswith("qwen3")
    assert (f"WINDOW = 3" in source) == (case == "mistral-sliding-window")


def _pattern(line_format: str, **fields: str) -> re.Pattern:
    """A `str.format` line as a regular expression, each field by its own pattern."""
    pattern = re.escape(line_format)
    for name, field in fields.items():
        pattern = pattern.replace(re.escape("{" + name + "}"), field)
    return re.compile(pattern)


GENERATED = _pattern(GENERATED_LINE, index=r"\d+", token_id=r"(\d+)", text=".*",
                     position=r"(\d+)")


def printed_generation(stdout: str) -> list[tuple[int, int]]:
    """(token id, position) of each generated token (`GENERATED_LINE`), in order."""
    found = [GENERATED.fullmatch(line) for line in stdout.splitlines()]
    return [(int(m[1]), int(m[2])) for m in found if m]


def printed_row(stdout: str, head: int, position: int) -> list[float]:
    """The generated token's row at ``position`` in ``head`` (`ROW_LINE`)."""
    start = ROW_LINE.format(head=head, position=position, values="")
    line = next(line for line in stdout.splitlines() if line.startswith(start))
    return [float(v) for v in line.removeprefix(start).split(", ")]


# The script's rows come from the model's own output_attentions, the page's from
# its float32 recomputation: equal to 1e-6 in float32, within the page's own
# bound from the full pass in bfloat16.
ROW_ABS = {"float32": 1e-6, "bfloat16": ROW_TOLERANCE["bfloat16"]}


@pytest.mark.parametrize("case", CASES)
def test_the_script_generates_the_pages_tokens_and_rows(case, scripts):
    arch, dtype, layer, head = CASES[case]
    model, trace, _, done = scripts(case)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    page = generate(model, input_ids=list(trace.config.input_ids), max_new_tokens=NEW_TOKENS,
                    layer=layer, seed=0)
    printed = printed_generation(done.stdout)
    assert printed and printed == [(t.token_id, t.position) for t in page.generated]
    window = trace.config.window
    for token in page.generated:
        row = printed_row(done.stdout, head, token.position)
        assert row == pytest.approx(token.attn_weights[head].tolist(),
                                    abs=ROW_ABS[str(dtype).removeprefix("torch.")])
        cached = token.cache_tokens if window is None else min(token.cache_tokens, window)
        assert CACHE_LINE.format(tokens=cached, layer=layer, nbytes=token.cache_bytes,
                                 mha_bytes=token.mha_cache_bytes) in done.stdout
    dtype_name = str(dtype).removeprefix("torch.")
    assert any("generated rows" in line and line.startswith("✓")
               and f"both {dtype_name}" in line  # says in which dtype (issue 51, point 3)
               for line in check_lines(done.stdout))


def printed_shares(stdout: str) -> dict[tuple[int, int], tuple[float, float, float]]:
    """(layer, head): (first, previous, itself) from the table under `SHARES_HEADER`."""
    lines = stdout.splitlines()
    rows = lines[lines.index(SHARES_HEADER) + 1:]
    table = {}
    for line in rows:
        fields = line.split()
        if len(fields) != 5 or not fields[0].isdigit():
            break
        table[int(fields[0]), int(fields[1])] = tuple(map(float, fields[2:]))
    return table


@pytest.mark.parametrize("case", ["llama", "qwen3-qk-norm", "qwen3-bfloat16"])
def test_the_scripts_head_table_equals_head_overview(case, scripts):
    model, trace, _, done = scripts(case)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    overview = head_overview(model, input_ids=list(trace.config.input_ids))
    table = printed_shares(done.stdout)
    assert len(table) == model.n_layers * model.n_heads
    for (layer, head), shares in table.items():
        page = (overview.to_first[layer, head], overview.to_previous[layer, head],
                overview.to_self[layer, head])
        assert shares == pytest.approx([float(v) for v in page], abs=1e-6)


BROKEN = {  # name: (case, the right line, the wrong one)
    "each query head reads K/V head h mod k, not h // (h/k)":
        ("llama", "kv_head = head // (n_heads // n_kv_heads)", "kv_head = head % n_kv_heads"),
    "the keys not turned by RoPE":
        ("llama", 'keys = steps["keys_rope"] = keys * cos + rotate_half(keys) * sin',
         'keys = steps["keys_rope"] = keys'),
    "RoPE turning the other way":
        ("qwen3-qk-norm",
         'queries = steps["queries_rope"] = queries * cos + rotate_half(queries) * sin',
         'queries = steps["queries_rope"] = queries * cos - rotate_half(queries) * sin'),
    "QK-norm left out":
        ("qwen3-qk-norm",
         'queries = steps["queries_normed"] = rms_norm(queries, attn.q_norm.weight)',
         'steps["queries_normed"] = queries'),
    "the sliding window left out":
        ("mistral-sliding-window", "WINDOW = 3", "WINDOW = None"),
    "each new token's row read without the cache":
        ("llama", "past_key_values=cache, use_cache=True", "past_key_values=None, use_cache=True"),
    "a generated row compared with the full pass's row before it":
        ("qwen3-qk-norm", "full_weights[:, position, :position + 1]",
         "full_weights[:, position - 1, :position + 1]"),
}


@pytest.mark.parametrize("broken", BROKEN)
def test_a_broken_line_makes_the_scripts_check_fail(broken, folders, tmp_path):
    case, right, wrong = BROKEN[broken]
    _, _, layer, head = CASES[case]
    model, trace = page_trace(folders[case], layer)
    source = decoder_script(trace.config, model.location, head)
    assert source.count(right) == 1
    done = run(source.replace(right, wrong), tmp_path)
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    assert any(line.startswith("✗") for line in check_lines(done.stdout))


HOSTILE = 'it\'s """; import os; os.system("touch pwned") #\\ back\\slash\n\r\u2028 \'\'\' end'
HOSTILE_LINK = 'http://h/?x=1\nimport os; os.system("touch pwned")\n"""'


def test_hostile_text_link_and_folder_stay_literals(tmp_path):
    folder = save_tiny_decoder(tmp_path / 'x\'"; import os #\\', "llama")
    model, trace = page_trace(folder, 0, HOSTILE)
    source = decoder_script(trace.config, model.location, 1, text=HOSTILE, link=HOSTILE_LINK)
    assigned = {node.targets[0].id: ast.literal_eval(node.value)
                for node in ast.parse(source).body
                if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id in ("MODEL", "TEXT", "TOKEN_IDS")}
    assert assigned == {"MODEL": model.location, "TEXT": HOSTILE,
                        "TOKEN_IDS": list(trace.config.input_ids)}
    work = tmp_path / "run"
    work.mkdir()
    done = run(source, work)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert not (work / "pwned").exists() and not Path("pwned").exists()
    assert f"TEXT = {HOSTILE!r}" in done.stdout
    page = head_slice(trace, 1).steps["attn_weights"][-1].tolist()
    assert printed_weights(done.stdout, 1) == pytest.approx(page, abs=1e-6)


@pytest.mark.parametrize("new_tokens", [0, MAX_NEW_TOKENS + 1, 2.0, True, "8"])
def test_a_count_of_tokens_outside_the_pages_range_is_refused(new_tokens, folders):
    model, trace = page_trace(folders["llama"], 0)
    with pytest.raises(ModelError, match=f"new_tokens must be a whole number from 1 to "
                                         f"{MAX_NEW_TOKENS}"):
        decoder_script(trace.config, model.location, new_tokens=new_tokens)
