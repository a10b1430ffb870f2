"""The Frontier attention page's script (`explorer.render.frontier_script`): written
for the page's defaults and for other sizes, it runs with the project's python
(torch and transformers only), prints every check of every part and exits 0 (a
sparse part the page could not compute is said to be left out); with the page's
embedded numbers edited it says which check disagrees and exits 1."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from explorer.core.config import AttentionConfig
from explorer.core.tokenizer import token_labels
from explorer.core.trace import compute_trace
from explorer.modern.frontier import FrontierConfig
from explorer.modern.frontier.parts import FrontierTrace, compute_parts
from explorer.render.frontier_script import PAGE_STEPS, frontier_script

CHECKS = [
    "MLA absorbed output vs the expanded output",
    "MLA output vs the page's numbers",
    "MLA attn_weights vs transformers' DeepseekV3Attention",
    "MLA output vs transformers' DeepseekV3Attention",
    "sparse output vs the page's numbers",
    "sparse top-k keys vs transformers' DeepseekV32Indexer",
    "sparse attn_weights vs transformers' DeepseekV32Attention",
    "sparse output vs transformers' DeepseekV32Attention",
    "sinks output vs the page's numbers",
    "sinks attn_weights vs transformers' GptOssAttention",
    "sinks output vs transformers' GptOssAttention",
    "ring-buffer context vs the full pass with the window's mask",
    "ring-buffer context vs the page's numbers",
    "ring-buffer context vs transformers' MistralAttention + DynamicCache",
    "gated output vs the page's numbers",
    "gated attn_weights vs transformers' Qwen3NextAttention",
    "gated output vs transformers' Qwen3NextAttention",
    "DeltaNet outputs vs the page's numbers",
    "DeltaNet outputs vs transformers' torch_recurrent_gated_delta_rule",
    "DeltaNet final state vs transformers' torch_recurrent_gated_delta_rule",
    "DeltaNet outputs vs transformers' torch_chunk_gated_delta_rule",
]
"""Every check the script prints, in its order."""
SPARSE = [check for check in CHECKS if check.startswith("sparse ")]
LINE = re.compile(r"^(?P<mark>[✓✗]) (?P<what>.+): max \|difference\| = (?P<diff>\S+) "
                  r"\(tolerance (?P<tol>\S+)\)$")
CASES = {
    "defaults": (AttentionConfig(), FrontierConfig()),
    # head_dim 12: partial RoPE's frequencies over int(12 · 0.25) = 3, not 4; window 2 wraps
    "other sizes": (AttentionConfig(sentence="one two three four five six seven", d_in=6, seed=7),
                    FrontierConfig(n_heads=3, head_dim=12, rope_dim=4, kv_lora_rank=5,
                                   q_lora_rank=3, top_k=2, index_heads=3, index_dim=5,
                                   window=2, chunk=3)),
    # index_dim < rope_dim: the page cannot compute sparse attention, the script says so
    "no sparse part": (AttentionConfig(), FrontierConfig(rope_dim=6, index_dim=4)),
}


def script_of(x_config: AttentionConfig, config: FrontierConfig) -> str:
    x_trace = compute_trace(x_config)
    x = x_trace["embeddings"]
    trace = compute_parts(x, config, x_config.seed)
    return frontier_script(trace, list(token_labels(x_trace.tokens)), x, config,
                           x_config.seed, "http://x/?seed=1")


def run(source: str, tmp_path) -> subprocess.CompletedProcess:
    path = tmp_path / "frontier_attention.py"
    path.write_text(source, encoding="utf-8")
    return subprocess.run([sys.executable, str(path)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=600, check=False)


def check_lines(stdout: str) -> list[re.Match]:
    return [m for m in map(LINE.match, stdout.splitlines()) if m]


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_the_script_runs_prints_every_check_and_exits_0(case, tmp_path):
    done = run(script_of(*CASES[case]), tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = check_lines(done.stdout)
    expected = [c for c in CHECKS if c not in SPARSE] if case == "no sparse part" else CHECKS
    assert [m["what"] for m in lines] == expected
    for m in lines:
        assert m["mark"] == "✓" and float(m["diff"]) <= float(m["tol"]), m.string
    assert f"{len(expected)} of {len(expected)} checks agree" in done.stdout
    skipped = "- DeepSeek sparse attention: not computed for these sizes: "
    assert (skipped in done.stdout) == (case == "no sparse part")


def test_edited_page_numbers_make_it_exit_1_naming_the_check(tmp_path):
    source = script_of(*CASES["defaults"])
    start = source.index("    'gated': torch.tensor([[")
    number = re.compile(r"-?\d+\.\d+(?:e-?\d+)?").search(source, start)
    broken = source[:number.start()] + f"{float(number[0]) + 0.5!r}" + source[number.end():]
    done = run(broken, tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    failed = [m["what"] for m in check_lines(done.stdout) if m["mark"] == "✗"]
    assert failed == ["gated output vs the page's numbers"]
    assert f"{len(CHECKS) - 1} of {len(CHECKS)} checks agree" in done.stdout


def test_the_script_holds_x_the_sizes_the_seed_and_the_page_numbers():
    x_config, config = CASES["other sizes"]
    source = script_of(x_config, config)
    assert "SEED = 7\n" in source and "N_HEADS, HEAD_DIM, ROPE_DIM = 3, 12, 4\n" in source
    assert "WINDOW, CHUNK = 2, 3\n" in source and "TOP_K, INDEX_HEADS, INDEX_DIM = 2, 3, 5\n" in source
    assert "# X: the page's embeddings (7, 6)" in source
    for key, step in PAGE_STEPS.items():
        assert f"    {key!r}: torch.tensor([" in source and f"# {step} (" in source
    assert "import transformers" not in source  # its modules only, imported by name
    imports = {line.split()[1] for line in source.splitlines()
               if line.startswith(("import ", "from "))}
    assert imports <= {"inspect", "math", "sys", "torch", "transformers",
                       "transformers.models.deepseek_v3.modeling_deepseek_v3",
                       "transformers.models.deepseek_v32.modeling_deepseek_v32",
                       "transformers.models.gpt_oss.modeling_gpt_oss",
                       "transformers.models.mistral.modeling_mistral",
                       "transformers.models.qwen3_next.modeling_qwen3_next"}


def test_a_part_that_could_not_be_computed_is_an_error_not_a_script():
    x_config, config = CASES["defaults"]
    x = compute_trace(x_config)["embeddings"]
    trace = compute_parts(x, config, x_config.seed)
    parts = {key: part for key, part in trace.parts.items() if key != "ring"}
    broken = FrontierTrace(config, trace.n_tokens, parts, {"ring": "window too small"})
    with pytest.raises(ValueError, match="'ring' could not be computed: window too small"):
        frontier_script(broken, ["a"] * trace.n_tokens, x, config, x_config.seed)
