"""The Llama family (`explorer.models.llama`, `explorer.models.generation`) against
the models' own numbers, offline.

Tiny random Llama, Mistral (sliding window, one K/V head), Qwen2 (Q/K/V biases),
Qwen3 (QK-norm) and Gemma 3 (QK-norm, a sliding and a full layer, linear RoPE
scaling) are built from their configs (`tests.support.tiny_decoders`), saved to
a temporary folder and opened with ``load_model(folder,
architectures=EVERY_ARCHITECTURE)``. Every reference number comes from the
transformers model itself: forward hooks registered here on its own modules,
``output_attentions``, its own ``apply_rotary_pos_emb``, ``generate`` and full
forward passes, never from the code under test. Each check is also shown to
fail on a broken variant: RoPE with another θ, QK-norm left out, K/V heads
mapped to the wrong query heads, the sliding window left out, a decoded row
that ignores the cache.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch
import transformers

from explorer.core.config import ConfigError, shown
from explorer.models import (
    CLASSIC,
    DECODER_CHOICES,
    EVERY_ARCHITECTURE,
    DecoderConfig,
    FolderUnusable,
    ModelError,
    against_full_pass,
    against_model,
    against_model_steps,
    compute_decoder_trace,
    decoder_trace_bytes,
    generate,
    head_overview,
    head_slice,
    llama,
    load_folder,
    load_model,
    model_sizes,
)
from explorer.models.catalogue import PUBLISHED_CONFIGS
from explorer.models.generation import (
    BEYOND,
    MAX_NEW_TOKENS,
    OWN_ROWS,
    ROWS,
    greedy_token,
    rows_summary,
)
from explorer.modern import attention as modern
from explorer.render.decoder import cache_table
from explorer.server.budget import BudgetError
from tests.support.tiny_decoders import TINY_DECODERS, save_tiny_decoder

ATOL = 1e-5
IDS = [5, 17, 42, 8, 17, 93, 0, 64, 31]  # a repeat (17); 9 tokens: past Mistral's window of 3
ARCHS = tuple(TINY_DECODERS)
QK_NORM = ("qwen3", "gemma3_text")
GROUPED = ("llama", "qwen2", "qwen3", "gemma3_text")  # 4 query heads on 2 K/V heads


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("decoders")
    return {arch: save_tiny_decoder(root / arch, arch) for arch in ARCHS}


@pytest.fixture(scope="module")
def models(folders):
    return {arch: load_model(folder, architectures=EVERY_ARCHITECTURE)
            for arch, folder in folders.items()}


def _diff(a: torch.Tensor, b: torch.Tensor) -> float:
    assert a.shape == b.shape, (a.shape, b.shape)
    return float((a.double() - b.double()).abs().max())


def model_tensors(model, ids, layer) -> dict[str, torch.Tensor]:
    """The model's own tensors of one layer's attention, caught here by hooks on
    its modules in one forward pass with output_attentions."""
    block = model.module.model.layers[layer]
    attn = block.self_attn
    seen: dict[str, object] = {}

    def keep(name):
        def hook(module, args, output):
            seen[name] = output
            seen[name + ".in"] = args[0]
        return hook

    modules = {"x": block.input_layernorm, "q": attn.q_proj, "k": attn.k_proj, "v": attn.v_proj,
               "o": attn.o_proj}
    modules.update({name: getattr(attn, name) for name in ("q_norm", "k_norm")
                    if hasattr(attn, name)})
    handles = [m.register_forward_hook(keep(name)) for name, m in modules.items()]
    handles.append(attn.register_forward_pre_hook(
        lambda m, a, kw: seen.update(rope=kw["position_embeddings"]), with_kwargs=True))
    try:
        with torch.no_grad():
            out = model.module(input_ids=torch.tensor([ids]), output_attentions=True)
    finally:
        for h in handles:
            h.remove()
    n, e = len(ids), model.head_dim

    def heads(flat):  # (1, n, heads·e) -> (heads, n, e)
        return flat[0].reshape(n, -1, e).transpose(0, 1)

    got = {"embeddings": seen["x"][0], "queries": heads(seen["q"]), "keys": heads(seen["k"]),
           "values": heads(seen["v"]), "context": seen["o.in"][0], "output": seen["o"][0],
           "attn_weights": out.attentions[layer][0]}
    q, k = got["queries"], got["keys"]
    if "q_norm" in seen:  # Qwen3 normalises (1, n, h, e), Gemma 3 (1, h, n, e)
        gemma = model.architecture == "gemma3_text"
        got["queries_normed"] = seen["q_norm"][0] if gemma else seen["q_norm"][0].transpose(0, 1)
        got["keys_normed"] = seen["k_norm"][0] if gemma else seen["k_norm"][0].transpose(0, 1)
        q, k = got["queries_normed"], got["keys_normed"]
    cos, sin = seen["rope"]
    rope = sys.modules[type(attn).__module__].apply_rotary_pos_emb
    got["rope_cos"], got["rope_sin"] = cos[0], sin[0]
    got["queries_rope"] = rope(q[None], q[None], cos, sin)[0][0]
    got["keys_rope"] = rope(k[None], k[None], cos, sin)[1][0]
    return got


# ---------------------------------------------------------------------------
# Every step of a layer against the model's own modules
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("layer", [0, 1])
def test_every_step_equals_the_models_own_tensors(models, arch, layer):
    model = models[arch]
    trace = compute_decoder_trace(model, input_ids=IDS, layer=layer, head=1)
    theirs = model_tensors(model, IDS, layer)
    for step, tensor in theirs.items():
        assert _diff(trace[step], tensor) < ATOL, (arch, layer, step)
    c = trace.config
    assert isinstance(c, DecoderConfig)
    assert ("queries_normed" in trace) == (arch in QK_NORM)
    # the mask: causal, and on a sliding layer the window (i - w < j <= i)
    i, j = torch.arange(len(IDS))[:, None], torch.arange(len(IDS))[None, :]
    window = TINY_DECODERS[arch].get("sliding_window")
    sliding = window is not None and (arch == "mistral" or layer == 0)
    expected = (j <= i) & ((j > i - window) if sliding else True)
    assert torch.equal(trace["causal_mask"], ~expected) and c.window == (window if sliding
                                                                         else None)
    assert against_model(trace, model).ok and against_model_steps(trace, model).ok
    assert decoder_trace_bytes(model, len(IDS), layer) == trace.nbytes


def test_the_layer_reads_the_models_own_theta_scale_and_norm(models):
    gemma = compute_decoder_trace(models["gemma3_text"], input_ids=IDS, layer=1)
    # Gemma 3's full layer: θ = 800, linear scaling by 2; scores × 12^(-1/2); RMSNorm · (1 + w)
    e = gemma.config.head_dim
    theta = 800.0 ** (-torch.arange(0, e, 2, dtype=torch.float32) / e) / 2.0
    assert torch.allclose(gemma["rope_frequencies"], theta, rtol=1e-6)
    assert gemma.config.scaling == pytest.approx(12 ** -0.5)
    assert torch.allclose(gemma["scaled_scores"], gemma["attn_scores"] * 12 ** -0.5)
    sliding = compute_decoder_trace(models["gemma3_text"], input_ids=IDS, layer=0)
    assert sliding.config.rope_theta == 200.0 and sliding.config.rope_type == "default"
    smol = compute_decoder_trace(models["qwen3"], input_ids=IDS)
    assert smol.config.rope_theta == 900.0 and smol.config.scaling == pytest.approx(16 ** -0.5)
    llama3 = DecoderConfig(
        model="m", architecture="llama", layer=0, head=0, n_layers=1, n_heads=1, d_model=128,
        causal=True, input_ids=(1,), token_pieces=("a",), n_kv_heads=1, head_width=128,
        rope_type="llama3", rope_theta=500000.0, rope_scaling=(
            ("factor", 8.0), ("high_freq_factor", 4.0), ("low_freq_factor", 1.0),
            ("original_max_position_embeddings", 8192.0)))
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    reference = transformers.LlamaConfig(
        hidden_size=128, num_attention_heads=1, rope_parameters={
            "rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
            "high_freq_factor": 4.0, "low_freq_factor": 1.0,
            "original_max_position_embeddings": 8192})
    inv, _ = ROPE_INIT_FUNCTIONS["llama3"](reference, None)
    assert torch.allclose(llama.rope_frequencies(llama3), inv, rtol=1e-6)


@pytest.mark.parametrize("arch", ARCHS)
def test_a_heads_slice_and_the_heads_sharing_its_keys(models, arch):
    model = models[arch]
    trace = compute_decoder_trace(model, input_ids=IDS, layer=1, head=3)
    c, e = trace.config, model.head_dim
    groups = {"mistral": (0, 0, 0, 0)}.get(arch, (0, 0, 1, 1))  # repeat_kv's layout
    assert c.kv_head_of == groups
    part = head_slice(trace)
    assert (part.head, part.kv_head) == (3, groups[3])
    assert part.sharing == tuple(h for h in range(4) if groups[h] == groups[3])
    block = model.module.model.layers[1].self_attn
    assert torch.equal(part.steps["W_query"], block.q_proj.weight[3 * e:4 * e].T)
    assert torch.equal(part.steps["W_key"], block.k_proj.weight[groups[3] * e:
                                                                (groups[3] + 1) * e].T)
    assert torch.equal(part.steps["keys_rope"], trace["keys_rope"][groups[3]])
    # the heads' shares of o_proj add up to its output
    shares = sum(head_slice(trace, h).steps["head_output"] for h in range(4))
    bias = trace["b_out"] if "b_out" in trace else 0.0
    assert _diff(shares + bias, trace["output"]) < ATOL
    with pytest.raises(ModelError, match="head must be between 0 and 3"):
        head_slice(trace, 4)


# ---------------------------------------------------------------------------
# Broken variants fail
# ---------------------------------------------------------------------------
def _checks_fail(model, *steps_that_differ, layer=1):
    trace = compute_decoder_trace(model, input_ids=IDS, layer=layer)
    steps = against_model_steps(trace, model)
    assert not against_model(trace, model).ok
    assert not steps.ok and set(steps_that_differ) <= set(steps.failed), steps.failed
    return steps


@pytest.mark.parametrize("arch", ARCHS)
def test_rope_with_another_theta_fails(models, arch, monkeypatch):
    right = llama.decoder_config
    monkeypatch.setattr(llama, "decoder_config", lambda *a, **k: right(*a, **k).replace(
        rope_theta=right(*a, **k).rope_theta * 2))
    steps = _checks_fail(models[arch], "queries_rope", "keys_rope", "attn_weights")
    assert "queries" not in steps.failed  # what comes before RoPE still agrees


@pytest.mark.parametrize("arch", QK_NORM)
def test_leaving_out_qk_norm_fails(models, arch, monkeypatch):
    monkeypatch.setattr(llama, "qk_norm", lambda x, weight, config: x)
    _checks_fail(models[arch], "queries_normed", "keys_normed", "attn_weights")


@pytest.mark.parametrize("arch", GROUPED)
def test_kv_heads_mapped_to_the_wrong_query_heads_fail(models, arch, monkeypatch):
    # (0, 1, 0, 1) instead of repeat_kv's (0, 0, 1, 1): neighbours share, not every other
    monkeypatch.setattr(DecoderConfig, "kv_head_of", property(
        lambda self: tuple(h % self.n_kv_heads for h in range(self.n_heads))))
    steps = _checks_fail(models[arch], "attn_weights", "context", "output")
    assert "queries_rope" not in steps.failed and "keys_rope" not in steps.failed


def test_leaving_out_the_sliding_window_fails(models, monkeypatch):
    right = llama.decoder_config
    monkeypatch.setattr(llama, "decoder_config",
                        lambda *a, **k: right(*a, **k).replace(window=None))
    _checks_fail(models["mistral"], "causal_mask", "attn_weights")


# ---------------------------------------------------------------------------
# Generation
# ---------------------------------------------------------------------------
def full_pass_rows(model, ids, layer) -> torch.Tensor:
    """The model's own attention weights over the whole sequence, no cache."""
    with torch.no_grad():
        out = model.module(input_ids=torch.tensor([list(ids)]), output_attentions=True,
                           use_cache=False)
    return out.attentions[layer][0]


@pytest.mark.parametrize("arch", ARCHS)
def test_every_generated_row_equals_a_full_forward_pass(models, arch):
    model = models[arch]
    run = generate(model, "The cat sat on the", max_new_tokens=6, layer=1, seed=3)
    # the tokens are the model's own greedy choice (transformers' generate)
    prompt = torch.tensor([list(run.prompt_ids)])
    with torch.no_grad():
        theirs = model.module.generate(prompt, max_new_tokens=6, do_sample=False,
                                       pad_token_id=0)[0, len(run.prompt_ids):].tolist()
    ours = [t.token_id for t in run.generated]
    assert ours == theirs[:len(ours)] and run.stopped in ("tokens", "eos")
    full = full_pass_rows(model, run.ids, 1)
    for token in run.generated:
        p = token.position
        assert token.attn_weights.shape == (4, p + 1) and token.cache_tokens == p + 1
        assert _diff(token.attn_weights, full[:, p, :p + 1]) < ATOL, (arch, p)
    check = against_full_pass(run, model)
    assert check.ok and check.part(ROWS).max_abs_diff < ATOL, check.line()
    assert check.part(BEYOND).max_abs_diff == 0.0  # causal: nothing right of a row's end


def test_the_cache_grows_by_its_kv_heads_not_its_query_heads(models):
    model = models["llama"]  # 2 layers, 2 K/V heads of 8 for 4 query heads, float32
    run = generate(model, input_ids=IDS[:4], max_new_tokens=3)
    per_token = 2 * 2 * 2 * 8 * 4  # keys and values, layers, K/V heads, head_dim, bytes
    assert run.prompt_cache_bytes == 4 * per_token
    assert [t.cache_bytes for t in run.generated] == [5 * per_token, 6 * per_token,
                                                      7 * per_token]
    assert all(t.mha_cache_bytes == 2 * t.cache_bytes for t in run.generated)
    assert run.prompt_cache_kept == 4
    assert [t.cache_kept for t in run.generated] == [5, 6, 7]
    window = generate(models["mistral"], input_ids=IDS[:4], max_new_tokens=3)
    assert len({t.cache_bytes for t in window.generated}) == 1  # a sliding layer keeps its window


def test_a_sliding_layers_cache_is_counted_from_the_cache_itself(models):
    """Issue 46: the page counted 9 ... 12 tokens where Mistral's sliding layer
    (window 3) keeps 2 between tokens; the count is now read from the model's
    cache, and the row's explanation counts the keys its mask lets it see."""
    model = models["mistral"]
    run = generate(model, input_ids=IDS[:6], max_new_tokens=4)
    window = run.config.window
    assert window == 3
    assert [t.cache_kept for t in run.generated] == [window - 1] * 4
    layers = model.module.config.num_hidden_layers
    per_token = 2 * layers * run.config.n_kv_heads * run.config.head_dim * 4
    assert all(t.cache_bytes == t.cache_kept * per_token for t in run.generated)
    assert all(int(t.mask.sum()) == window for t in run.generated)
    table = cache_table(run)
    assert list(table[f"tokens kept (layer {run.config.layer})"]) == [window - 1] * 5


def test_a_decoded_row_that_ignores_the_cache_fails(models, monkeypatch):
    model = models["qwen3"]
    good = generate(model, input_ids=IDS[:5], max_new_tokens=3)
    monkeypatch.setattr(modern.KVCache, "read", lambda self: (self.keys[:, -1:],
                                                              self.values[:, -1:]))
    broken = generate(model, input_ids=IDS[:5], max_new_tokens=3)
    assert [t.token_id for t in broken.generated] == [t.token_id for t in good.generated]
    check = against_full_pass(broken, model)
    assert check.failed == [ROWS] and check.line().startswith("✗ The 3 generated rows")


def test_generation_is_bounded_and_ties_are_seeded(models, tmp_path):
    model = models["llama"]
    for bad in (0, MAX_NEW_TOKENS + 1, 2.5, True):
        with pytest.raises(ModelError, match=f"max_new_tokens must be a whole number from 1 "
                                             f"to {MAX_NEW_TOKENS}"):
            generate(model, input_ids=IDS, max_new_tokens=bad)
    with pytest.raises(ModelError, match="time_limit must be more than 0"):
        generate(model, input_ids=IDS, time_limit=0)
    run = generate(model, input_ids=IDS, max_new_tokens=5, time_limit=1e-9)
    assert run.stopped == "time" and len(run.generated) == 1
    tied = torch.tensor([0.5, 2.0, 2.0, -1.0, 2.0])
    picks = {greedy_token(tied, torch.Generator().manual_seed(s)) for s in range(20)}
    assert picks == {1, 2, 4}  # only the best, each reachable
    assert greedy_token(tied, torch.Generator().manual_seed(7)) == greedy_token(
        tied, torch.Generator().manual_seed(7))
    from tests.support.tiny_models import save_tiny_gpt2
    gpt2 = load_model(save_tiny_gpt2(tmp_path / "gpt2"))
    for call in (compute_decoder_trace, generate):
        with pytest.raises(ModelError, match="is a GPT-2 model, not of the Llama family"):
            call(gpt2, input_ids=[1, 2])


# ---------------------------------------------------------------------------
# Every head at a glance: the sink
# ---------------------------------------------------------------------------
def test_the_head_grid_gives_each_heads_share_on_the_first_token(models):
    model = models["gemma3_text"]
    overview = head_overview(model, input_ids=IDS)
    with torch.no_grad():
        maps = model.module(input_ids=torch.tensor([IDS]), output_attentions=True).attentions
    for layer, weights in enumerate(maps):
        rows = torch.arange(1, len(IDS))
        assert torch.allclose(overview.to_first[layer], weights[0][:, rows, 0].mean(-1))
        assert torch.allclose(overview.to_self[layer], weights[0][:, rows, rows].mean(-1))
    assert overview.to_first.shape == (2, 4)


# ---------------------------------------------------------------------------
# Loading: dtype, budget, messages
# ---------------------------------------------------------------------------
def test_bfloat16_weights_stay_bfloat16_and_the_layer_is_computed_in_float32(tmp_path):
    folder = save_tiny_decoder(tmp_path / "bf16", "qwen3", dtype=torch.bfloat16)
    model = load_model(folder, architectures=EVERY_ARCHITECTURE)
    assert model.dtype == "bfloat16"
    assert {p.dtype for p in model.module.parameters()} == {torch.bfloat16}
    assert model.memory_bytes == model_sizes("qwen3", model.module.config).nbytes
    trace = compute_decoder_trace(model, "The cat sat", layer=1)
    assert {trace[s].dtype for s in trace if s not in ("token_ids", "causal_mask")} == {
        torch.float32}
    steps = against_model_steps(trace, model)
    assert steps.ok and "float32 copies" in steps.reference, steps.failed
    run = generate(model, "The cat", max_new_tokens=3, layer=1)
    assert against_full_pass(run, model).ok


def test_bfloat16_rows_say_what_was_compared_and_give_the_models_own_difference(tmp_path):
    """Issue 51, point 3: the float32 rows were said to be checked against
    output_attentions with "float32 rounding"; they were checked against float32
    copies of the layer. Now each comparison names its dtype, and the model's own
    bfloat16 rows (its output_attentions, taken here from its own full pass) are
    compared too."""
    folder = save_tiny_decoder(tmp_path / "bf16", "qwen3", dtype=torch.bfloat16,
                               hidden_size=256, intermediate_size=512)
    model = load_model(folder, architectures=EVERY_ARCHITECTURE)
    run = generate(model, "The cat sat on the mat and the dog", max_new_tokens=4, layer=1)
    check = against_full_pass(run, model)
    assert [p.name for p in check.parts] == [ROWS, BEYOND, OWN_ROWS] and check.ok
    own = full_pass_rows(model, run.ids, 1).to(torch.float32)  # bfloat16, upcast
    expected = max(float((t.attn_weights - own[:, t.position, :t.position + 1]).abs().max())
                   for t in run.generated)
    assert check.part(OWN_ROWS).max_abs_diff == pytest.approx(expected, rel=1e-6)
    assert check.part(OWN_ROWS).max_abs_diff > 10 * check.part(ROWS).max_abs_diff
    assert "float32 copies of the layer's modules" in check.part(ROWS).reference
    assert "own bfloat16 rows" in check.part(OWN_ROWS).reference
    text = rows_summary(check, "bfloat16")
    assert text.startswith("✓ The 4 generated rows, computed in float32")
    assert f"by at most {check.part(OWN_ROWS).max_abs_diff:.1e} (bfloat16 keeps 8 bits" in text
    assert "float32 rounding" not in text
    # A float32 model: its own rows are the reference, and the text says float32.
    f32 = against_full_pass(generate(model_f32 := load_model(
        save_tiny_decoder(tmp_path / "f32", "qwen3"), architectures=EVERY_ARCHITECTURE),
        "The cat", max_new_tokens=2, layer=1), model_f32)
    assert [p.name for p in f32.parts] == [ROWS, BEYOND]
    assert "(output_attentions, float32)" in rows_summary(f32, "float32")


def test_what_a_folder_cannot_give_gets_one_clear_message(tmp_path, folders):
    coded = tmp_path / "coded"
    coded.mkdir()
    (coded / "config.json").write_text(json.dumps({"model_type": "phi_custom", "auto_map": {
        "AutoModelForCausalLM": "modeling_custom.Model"}}))
    with pytest.raises(ModelError, match="comes with its own code .* never runs") as err:
        load_model(coded, architectures=EVERY_ARCHITECTURE)
    # The folder as typed (cut when long, `shown`), and nothing else of the server's paths.
    assert str(tmp_path) not in str(err.value).replace(shown(str(coded)), "")
    unknown = tmp_path / "falcon"
    unknown.mkdir()
    (unknown / "config.json").write_text(json.dumps({"model_type": "falcon"}))
    with pytest.raises(ModelError, match="is a 'falcon' model; the explorer opens models of "
                                         "type 'gpt2', 'bert', 'llama', 'mistral', 'qwen2', "
                                         "'qwen3', 'gemma3_text' only"):
        load_model(unknown, architectures=EVERY_ARCHITECTURE)
    gemma = tmp_path / "gemma-vision"
    gemma.mkdir()
    (gemma / "config.json").write_text(json.dumps({"model_type": "gemma3"}))
    with pytest.raises(ModelError, match="multimodal Gemma 3"):
        load_model(gemma, architectures=EVERY_ARCHITECTURE)
    weightless = tmp_path / "weightless"
    weightless.mkdir()
    (weightless / "config.json").write_text((folders["llama"] / "config.json").read_text())
    with pytest.raises(FolderUnusable) as err:
        load_model(weightless, architectures=EVERY_ARCHITECTURE)
    assert "model.safetensors" in err.value.reason and err.value.reason not in str(err.value)
    yarn = tmp_path / "yarn"
    yarn.mkdir()
    config = json.loads((folders["llama"] / "config.json").read_text())
    config["rope_parameters"] = {"rope_type": "yarn", "rope_theta": 500.0, "factor": 4.0,
                                 "original_max_position_embeddings": 64}
    (yarn / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelError, match="its RoPE is scaled by 'yarn'"):
        load_model(yarn, architectures=EVERY_ARCHITECTURE)
    # a caller that asks for GPT-2 and BERT only gets that answer
    with pytest.raises(ModelError, match="the explorer opens models of type 'gpt2', 'bert' "
                                         "only"):
        load_model(folders["llama"], architectures=CLASSIC)


def test_a_model_larger_than_the_budget_is_refused_before_it_is_built(tmp_path, folders):
    big = tmp_path / "big"
    big.mkdir()
    config = json.loads((folders["qwen3"] / "config.json").read_text())
    config.update(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                  num_attention_heads=32, num_key_value_heads=8, head_dim=128,
                  vocab_size=128256, dtype="bfloat16", layer_types=None)
    (big / "config.json").write_text(json.dumps(config))
    sizes = model_sizes("qwen3", transformers.Qwen3Config.from_dict(config))
    assert sizes.dtype == "bfloat16" and sizes.nbytes == 2 * sizes.parameters + sizes.buffer_bytes
    mb = sizes.nbytes / 2**20
    with pytest.raises(BudgetError, match=rf"needs about {mb:,.0f} MB; this server allows"):
        load_folder(big, within_budget=True, architectures=EVERY_ARCHITECTURE)
    with pytest.raises(ModelError, match="num_key_value_heads in the config.json of .* must "
                                         "divide num_attention_heads"):
        model_sizes("qwen3", transformers.Qwen3Config.from_dict({**config,
                                                                 "num_key_value_heads": 5}))


@pytest.mark.parametrize("name", list(DECODER_CHOICES))
def test_the_offered_decoders_parameter_counts_follow_from_their_configs(name):
    raw = PUBLISHED_CONFIGS[name]
    arch = EVERY_ARCHITECTURE[raw["model_type"]]
    config = getattr(transformers, arch.config_class).from_dict(dict(raw))
    with torch.device("meta"):
        built = getattr(transformers, arch.model_class)(config)
    counted = sum(p.numel() for p in built.parameters())
    choice = DECODER_CHOICES[name]
    assert choice.parameters == counted == model_sizes(arch.name, config).parameters
    assert choice.nbytes == 2 * counted and model_sizes(arch.name, config).dtype == "bfloat16"
    assert (config.num_attention_heads, config.num_key_value_heads) == {
        "smollm2-135m": (9, 3), "qwen3-0.6b": (16, 8)}[name]


def test_decoder_errors_are_config_errors():
    assert issubclass(ModelError, ConfigError)


def test_every_step_is_named_and_mapped_to_transformers(models):
    from explorer.models.llama import DECODER_STEPS
    for arch in ("qwen2", "gemma3_text"):
        trace = compute_decoder_trace(models[arch], input_ids=IDS[:4])
        assert set(trace) <= set(DECODER_STEPS)
        assert [s for s in DECODER_STEPS if s in trace] == list(trace)  # pipeline order


@pytest.mark.parametrize("arch", ["qwen2", "qwen3", "gemma3_text", "mistral"])
def test_every_step_has_the_shape_its_table_declares(models, arch):
    """explorer.models.layer_steps gives each step's shape once, in n, d, h, k, e:
    the trace's tensors (and a head's share, ``head_output``) have it."""
    from explorer.models.layer_steps import LAYER_STEPS
    trace = compute_decoder_trace(models[arch], input_ids=IDS[:5], head=1)
    c = trace.config
    sizes = {"n": 5, "d": c.d_model, "h": c.n_heads, "k": c.n_kv_heads, "e": c.head_dim}
    steps = {**trace, "head_output": head_slice(trace).steps["head_output"]}
    for step in LAYER_STEPS:
        if step.name not in steps:
            continue
        declared = tuple(eval(dim.replace("·", "*"), {}, sizes)  # "(h·e, d)" -> (h * e, d)
                         for dim in step.shape.strip("(),").split(",") if dim.strip())
        assert tuple(steps[step.name].shape) == declared, (arch, step.name, step.shape)


def test_a_generation_reads_back_from_json(models):
    run = generate(models["mistral"], input_ids=IDS[:5], max_new_tokens=3)
    doc = json.loads(run.to_json())
    assert doc["config"]["window"] == 3 and doc["prompt_ids"] == IDS[:5]
    last = doc["generated"][-1]
    assert last["position"] == 7 and len(last["attn_weights"][0]) == 8
    assert last["mask"] == [False] * 5 + [True] * 3  # the window: itself and 2 before
    assert last["scaled_scores"][0][0] != "-Infinity"  # scores are kept before the mask
    assert torch.allclose(torch.tensor(last["attn_weights"]), run.generated[-1].attn_weights)


def test_sentencepiece_tokens_read_as_text():
    from explorer.models.tokens import readable_piece
    assert readable_piece("▁cat", byte_level=False) == "·cat"      # Llama 2, Mistral, Gemma
    assert readable_piece("<0x0A>", byte_level=False) == "↵"        # byte fallback
    assert readable_piece("<0xE2>", byte_level=False) == "\\xe2"    # part of a character
    assert readable_piece("##ing", byte_level=False) == "##ing"     # BERT's unchanged


def test_the_offered_names_open_from_the_local_cache(tmp_path, folders, monkeypatch):
    """`smollm2-135m` is looked up as HuggingFaceTB/SmolLM2-135M in the local cache,
    as `make download-models` leaves it (a tiny Llama planted there, offline)."""
    from huggingface_hub import constants

    from tests.support.tiny_models import plant_in_hub_cache
    hub = DECODER_CHOICES["smollm2-135m"].hub
    monkeypatch.setattr(constants, "HF_HUB_CACHE",
                        str(plant_in_hub_cache(folders["llama"], tmp_path / "cache", hub)))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    model = load_model("smollm2-135m", architectures=EVERY_ARCHITECTURE)
    assert (model.source, model.location, model.architecture) == ("cache", hub, "llama")
    assert model.name == "smollm2-135m" and model.n_kv_heads == 2


def test_causal_mask_means_what_it_means_in_the_books_trace(models):
    """Issue 46: one meaning per name. ``causal_mask`` is True for a hidden key in
    the Llama layer's trace as in the book's (``torch.triu(..., diagonal=1)``), and
    both go out under the same key in the JSON."""
    import json

    from explorer.core.config import AttentionConfig
    from explorer.core.trace import compute_trace

    trace = compute_decoder_trace(models["llama"], input_ids=IDS[:5])
    book = compute_trace(AttentionConfig(sentence="a b c d e", causal=True))
    assert torch.equal(trace["causal_mask"], book["causal_mask"])
    assert torch.equal(book["causal_mask"], torch.triu(torch.ones(5, 5), diagonal=1).bool())
    assert json.loads(trace.to_json())["steps"]["causal_mask"] == \
        json.loads(book.to_json())["steps"]["causal_mask"]
    assert not hasattr(modern, "causal_mask")  # its True = may attend is causal_allowed


def test_load_model_opens_every_architecture_and_the_trace_names_its_call(folders):
    """Issue 46: one way to open a model. ``load_model(folder)`` opens a Llama-family
    folder with no extra argument, and `compute_model_trace` names the call that
    traces it."""
    from explorer.models import compute_model_trace

    model = load_model(folders["mistral"])
    assert model.architecture == "mistral"
    with pytest.raises(ConfigError, match=r"compute_decoder_trace\(model"):
        compute_model_trace(model, input_ids=IDS[:4])
    assert compute_decoder_trace(model, input_ids=IDS[:4]).n_tokens == 4
    with pytest.raises(ConfigError, match="'gpt2', 'bert'"):
        load_model(folders["llama"], architectures=CLASSIC)
