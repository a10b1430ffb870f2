"""Issue 36's four causes of a wrong verdict on code written elsewhere, each with a module
written here (each of these tests fails on the checker before the issue's change):

1. intent guessed from names (causal only with a buffer named ``mask``);
2. inputs that cannot show a mistake (the same sentence twice, context_length equal
   to the sentence, head_dim equal to num_heads);
3. the first ✗ on the wrong step (one order of mask and scale, steps never computed
   on their own shown as right);
4. a misreading answered with confidence (``n_head``, ``to_out``, Conv1D, ``self.linears``).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from explorer.checker.check import check_module
from explorer.checker.sandbox import check_code
from explorer.checker.verdicts import NOT_SEEN, UNSURE
from tests.support import learner_modules as L


def built(cls, *args, **kwargs) -> nn.Module:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(123)
        return cls(*args, **kwargs).eval()


class Heads(nn.Module):
    """Listing 3.5's arithmetic and names with other parts (a base for the modules here):
    the scores scaled before they are masked, a lower-triangular ``bias`` buffer."""

    def __init__(self, d_in=3, d_out=10, num_heads=2, causal=True, context_length=9):
        super().__init__()
        self.W_query, self.W_key, self.W_value = (nn.Linear(d_in, d_out) for _ in range(3))
        self.out_proj = nn.Linear(d_out, d_out)
        self.num_heads = num_heads
        if causal:
            self.register_buffer("bias", torch.tril(torch.ones(context_length, context_length)))

    def split(self, t):
        b, n, d = t.shape
        return t.view(b, n, self.num_heads, d // self.num_heads).transpose(1, 2)

    def scores(self, q, k):
        return q @ k.transpose(-2, -1) / math.sqrt(k.shape[-1])

    def masked(self, s):
        n = s.shape[-1]
        return s.masked_fill(self.bias[:n, :n] == 0, float("-inf")) if hasattr(self, "bias") else s

    def forward(self, x):
        q, k, v = (self.split(layer(x)) for layer in (self.W_query, self.W_key, self.W_value))
        w = torch.softmax(self.masked(self.scores(q, k)), dim=-1)
        b, h, n, hd = v.shape
        return self.out_proj((w @ v).transpose(1, 2).reshape(b, n, h * hd))


# ---------------------------------------------------------------------------
# 1. Intent stated, not guessed from names
# ---------------------------------------------------------------------------
def test_a_causal_mask_is_read_whatever_its_name_or_where_it_is_made():
    report = check_module(built(Heads))  # a `bias` buffer, lower-triangular
    assert report.ok, report.text()
    assert report.settings[0] == ("assumed: causal (the buffer `bias` (9, 9) is lower-triangular "
                                  "(what each token may see)), declared; 2 heads (its num_heads "
                                  "= 2), declared; dropout p = 0, none declared")

    class MaskInForward(Heads):
        def masked(self, s):
            n = s.shape[-1]
            return s.masked_fill(torch.tril(torch.ones(n, n)) == 0, float("-inf"))

    report = check_module(built(MaskInForward, causal=False))
    assert report.ok, report.text()
    assert report.settings[0].startswith("assumed: causal (forward makes a triangular mask, (6, 6))")


def test_a_buffer_named_mask_that_is_no_mask_does_not_make_it_causal():
    class WithUnusedMask(Heads):
        def __init__(self):
            super().__init__(causal=False)
            self.register_buffer("mask", torch.ones(9, 9))  # kept for later, never used

    assert check_module(built(WithUnusedMask)).ok


def test_causal_can_be_stated_and_the_statement_wins():
    module = built(Heads)
    report = check_module(module, causal=False)  # stated: the bias buffer is not a mask
    assert not report.ok and report.mistake is None
    assert report.settings[0].startswith("assumed: not causal (as you said (causal=False))")


# ---------------------------------------------------------------------------
# 2. Inputs that show every mistake
# ---------------------------------------------------------------------------
def test_attention_that_mixes_the_batch_items_differs():
    class FirstItemsKeys(Heads):
        def scores(self, q, k):
            return q @ k[:1].transpose(-2, -1) / math.sqrt(k.shape[-1])

    report = check_module(built(FirstItemsKeys))
    assert not report.ok
    assert (report.first_difference.step, report.first_difference.batch) == ("attn_scores", 1)


def test_a_mask_not_cut_to_the_sentence_is_named_at_the_default_context_length():
    source = '''import torch, torch.nn as nn
class CausalAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        self.num_heads = num_heads
        self.W_query, self.W_key, self.W_value = (nn.Linear(d_in, d_out) for _ in range(3))
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), 1))
    def forward(self, x):
        b, n, _ = x.shape
        q, k, v = (w(x).view(b, n, self.num_heads, -1).transpose(1, 2)
                   for w in (self.W_query, self.W_key, self.W_value))
        s = (q @ k.transpose(2, 3)).masked_fill(self.mask.bool(), -torch.inf)
        w = torch.softmax(s / k.shape[-1] ** 0.5, dim=-1)
        return (w @ v).transpose(1, 2).reshape(b, n, -1)
'''
    report = check_code(source, "CausalAttention")  # context_length = 6 tokens + 3
    assert (report.ok, report.mistake) == (False, "mask_not_sliced")
    assert report.summary().startswith("✗ Raises on a sentence of 6 tokens, shorter than its "
                                       "mask (9 × 9)")
    assert "self.mask.bool()[:num_tokens, :num_tokens]" in report.diagnosis


def test_dividing_by_the_number_of_heads_shows_at_the_default_sizes():
    class ByHeads(Heads):  # keys.shape[1] is num_heads once transposed
        def scores(self, q, k):
            return q @ k.transpose(-2, -1) / math.sqrt(k.shape[1])

    report = check_module(built(ByHeads))
    assert (report.ok, report.first_step, report.mistake) == (
        False, "scaled_scores", "scaled_by_num_heads")
    assert report.warnings == []  # at these sizes, no classic mistake is hidden


def test_what_the_sizes_cannot_show_is_cannot_tell_not_a_pass():
    """Issue 45, part 3: at head_dim 2 = num_heads, √num_heads is √head_dim whatever X,
    so a pass would be a guess: "? Cannot tell at these sizes", with sizes that would."""
    report = check_module(built(Heads, d_out=4))
    assert (report.ok, report.mistake) == (False, None)
    assert report.summary() == (
        "? Cannot tell at these sizes (d_in 3, d_out 4, num_heads 2, head_dim 2) these "
        "mistakes give the reference's own numbers: scaled_by_num_heads; sizes that would "
        "tell: d_in 3, d_out 10, num_heads 2 (head_dim 5), where d_in, d_out, head_dim and "
        "num_heads all differ.")
    assert report.warnings == [
        "at these sizes and inputs, these mistakes give the reference's own numbers, so this "
        "check cannot show them: scaled_by_num_heads"]


def test_weights_too_small_for_a_mistake_to_show_get_a_scaled_x():
    """Issue 45, part 3: at std 0.02 (GPT-2's initial weights) the scores span
    thousandths and a missing ÷ √head_dim hides below the tolerance; X is scaled so
    that the scores span a few units, and the report says by how much."""
    class Unscaled(Heads):
        def scores(self, q, k):
            return q @ k.transpose(-2, -1)

    module = built(Unscaled)
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.02)
    report = check_module(module)
    assert (report.ok, report.mistake) == (False, "no_scaling")
    assert "so that each row's scaled scores span about 4 (at your weights' scale they span " \
        in report.text()


# ---------------------------------------------------------------------------
# 3. The step named is where the code went wrong
# ---------------------------------------------------------------------------
def test_a_wrong_mask_in_the_books_order_is_caught_at_the_mask():
    class TrilForTriu(L.Tweakable):  # the book masks, then scales
        def mask_scores(self, attn_scores, num_tokens):
            wrong = torch.tril(torch.ones(num_tokens, num_tokens), diagonal=-1).bool()
            return attn_scores.masked_fill(wrong, -torch.inf)

    report = check_module(built(TrilForTriu, 3, 10, 9, 0.0, num_heads=2))
    assert (report.first_step, report.mistake) == ("masked_scores", "mask_reversed")
    assert [r.step for r in report.steps][3:6] == ["attn_scores", "masked_scores",
                                                   "scaled_scores"]


def test_keys_computed_with_the_query_layer_are_caught_at_the_keys():
    class KeysFromQuery(L.Tweakable):
        def forward(self, x):
            self.W_key = self.W_query
            return super().forward(x)

    module = built(L.MultiHeadAttention, 3, 10, 9, 0.0, num_heads=2)
    broken = KeysFromQuery(3, 10, 9, 0.0, num_heads=2).eval()
    broken.load_state_dict(module.state_dict())
    report = check_module(broken)
    assert (report.first_step, report.mistake) == ("keys", "projection_mixed_up")
    assert report.diagnosis == "the keys are computed with W_query, not W_key: keys = self.W_key(x)"


def test_dropout_on_the_values_is_named_between_the_steps_it_sits_between():
    class DropoutOnValues(L.Tweakable):
        def forward(self, x):
            b, n, _ = x.shape
            keys, queries, values = (self.split(layer(x), b, n)
                                     for layer in (self.W_key, self.W_query, self.W_value))
            values = self.dropout(values)
            weights = torch.softmax(self.mask_scores(queries @ keys.transpose(2, 3), n)
                                    / keys.shape[-1] ** 0.5, dim=-1)
            return self.out_proj(self.combine(weights @ values, b, n))

    module = built(DropoutOnValues, 3, 10, 9, 0.5, num_heads=2).train()
    report = check_module(module, dropout_seed=1)
    assert (report.ok, report.mistake) == (False, "dropout_elsewhere")
    assert report.first_difference.since == "dropped_weights"
    assert report.summary() == ("✗ Differs from the reference computed from your weights "
                                "between dropped_weights and context.")
    assert report.step("dropped_weights").status == NOT_SEEN
    assert report.diagnosis.startswith("dropout is applied to a tensor of shape (2, 2, 6, 5), "
                                       "not to the attention weights")


def test_a_fused_layer_in_another_layout_is_followed_to_its_real_bug():
    class Interleaved(nn.Module):  # columns (heads, head_dim, 3); softmax, then scaling
        def __init__(self):
            super().__init__()
            self.num_heads, self.qkv, self.proj = 2, nn.Linear(3, 30), nn.Linear(10, 10)

        def forward(self, x):
            b, n, _ = x.shape
            q, k, v = self.qkv(x).reshape(b, n, 2, 5, 3).permute(4, 0, 2, 1, 3).unbind(0)
            w = (q @ k.transpose(-2, -1)).softmax(dim=-1) / math.sqrt(5)
            return self.proj((w @ v).transpose(1, 2).reshape(b, n, 10))

    report = check_module(built(Interleaved))
    assert report.step("queries").status == "match"
    assert (report.first_step, report.mistake) == ("scaled_scores", "softmax_before_scaling")
    assert "laid out (num_heads, head_dim, 3)" in report.settings[2]


# ---------------------------------------------------------------------------
# 4. Read it, or say it cannot
# ---------------------------------------------------------------------------
def test_n_head_is_the_number_of_heads():
    class NHead(Heads):  # nanoGPT's name
        def __init__(self):
            super().__init__(causal=False)
            self.n_head = self.__dict__.pop("num_heads")

        def split(self, t):
            b, n, d = t.shape
            return t.view(b, n, self.n_head, d // self.n_head).transpose(1, 2)

    report = check_module(built(NHead))
    assert report.ok and "2 heads (its n_head = 2)" in report.settings[0]


def test_an_out_projection_inside_a_sequential_is_read():
    class ToOut(Heads):
        def __init__(self):
            super().__init__(causal=False)
            self.out_proj = nn.Sequential(nn.Linear(10, 3), nn.Dropout(0.0))

    report = check_module(built(ToOut))
    assert report.ok and report.settings[2].endswith("; out_proj")


def test_gpt2s_conv1d_and_the_annotated_transformers_linears_are_read():
    class Conv1D(nn.Module):
        def __init__(self, nf, nx):
            super().__init__()
            self.nf = nf
            self.weight, self.bias = nn.Parameter(torch.randn(nx, nf)), nn.Parameter(torch.randn(nf))

        def forward(self, x):
            return (x.reshape(-1, x.shape[-1]) @ self.weight + self.bias).reshape(
                *x.shape[:-1], self.nf)

    class GPT2Like(Heads):
        def __init__(self):
            super().__init__()
            self.c_attn, self.c_proj, self.n_embd = Conv1D(30, 3), Conv1D(10, 10), 10
            del self.W_query, self.W_key, self.W_value, self.out_proj

        def forward(self, x):
            q, k, v = (self.split(t) for t in self.c_attn(x).split(self.n_embd, dim=2))
            w = torch.softmax(self.masked(self.scores(q, k)), dim=-1)
            b, h, n, hd = v.shape
            return self.c_proj((w @ v).transpose(1, 2).reshape(b, n, h * hd))

    report = check_module(built(GPT2Like))
    assert report.ok, report.text()
    assert "the columns of the fused c_attn = Conv1D (3, 30, bias)" in report.settings[2]

    class Linears(Heads):
        def __init__(self):
            super().__init__(causal=False)
            self.linears = nn.ModuleList([self.W_query, self.W_key, self.W_value, self.out_proj])
            del self.W_query, self.W_key, self.W_value, self.out_proj

        def forward(self, query, key, value, mask=None):
            q, k, v = (self.split(layer(t)) for layer, t in zip(self.linears, (query, key, value)))
            w = torch.softmax(self.scores(q, k), dim=-1)
            b, h, n, hd = v.shape
            return self.linears[-1]((w @ v).transpose(1, 2).reshape(b, n, h * hd))

    report = check_module(built(Linears))
    assert report.ok and "linears[3] as out_proj" in report.settings[2]


def test_a_guessed_head_count_gives_no_cross():
    class NoHeadCount(nn.Module):  # two heads, counted nowhere the check reads, inside SDPA
        def __init__(self):
            super().__init__()
            self.groups, self.qkv, self.out = 2, nn.Linear(3, 30), nn.Linear(10, 10)

        def forward(self, x):
            b, n, _ = x.shape
            q, k, v = (t.view(b, n, self.groups, 5).transpose(1, 2)
                       for t in self.qkv(x).split(10, dim=-1))
            y = F.scaled_dot_product_attention(q, k, v)
            return self.out(y.transpose(1, 2).reshape(b, n, 10))

    report = check_module(built(NoHeadCount))
    assert not report.ok and report.uncertain.startswith("no head count was found")
    assert report.summary().startswith("? Cannot tell whether it matches: no head count was found")
    assert "✗" not in report.text() and report.step("output").status == UNSURE
    assert "Diagnosis" not in report.text()
    assert check_module(built(NoHeadCount), n_heads=2).ok  # stated: it matches


NO_HEAD_COUNT = """import torch, torch.nn as nn, torch.nn.functional as F
class NoHeadCount(nn.Module):
    def __init__(self, d_in, d_out, num_heads):
        super().__init__()
        self.groups, self.qkv, self.out = num_heads, nn.Linear(d_in, 3 * d_out), nn.Linear(d_out, d_out)
    def forward(self, x):
        b, n, _ = x.shape
        q, k, v = (t.view(b, n, self.groups, -1).transpose(1, 2)
                   for t in self.qkv(x).split(self.out.in_features, dim=-1))
        y = F.scaled_dot_product_attention(q, k, v)
        return self.out(y.transpose(1, 2).reshape(b, n, -1))
"""


def test_the_command_line_exits_2_on_a_guess_and_0_once_told(tmp_path, capsys):
    from explorer.__main__ import CANNOT_CHECK, OK, main

    (tmp_path / "mine.py").write_text(NO_HEAD_COUNT)
    assert main(["check", f"{tmp_path / 'mine.py'}:NoHeadCount"]) == CANNOT_CHECK
    out = capsys.readouterr().out
    assert "? Cannot tell whether it matches: no head count was found" in out
    assert "say how many with --n_heads N" in out
    assert main(["check", f"{tmp_path / 'mine.py'}:NoHeadCount", "--n_heads", "2"]) == OK


# ---------------------------------------------------------------------------
# Issue 45, part 1: intent read from what the module declares, under the field's names
# ---------------------------------------------------------------------------
class BertAsDecoder(nn.Module):
    """Hugging Face BERT's self-attention used as a decoder: ``num_attention_heads``,
    causal only through the "extended attention mask" (1 − m) · finfo.min that forward
    builds from a (b, n, n) tensor of ones."""

    def __init__(self, d_in=3, d_out=10, num_heads=5):
        super().__init__()
        self.num_attention_heads, self.attention_head_size = num_heads, d_out // num_heads
        self.query, self.key, self.value = (nn.Linear(d_in, d_out) for _ in range(3))

    def count(self):
        return self.num_attention_heads

    def forward(self, hidden_states):
        b, n, _ = hidden_states.shape
        m = torch.tril(torch.ones(b, n, n))  # (b, n, n): no head axis in it
        extended = (1.0 - m[:, None]) * torch.finfo(hidden_states.dtype).min

        def split(t):
            return t.view(b, n, self.count(), -1).permute(0, 2, 1, 3)

        q, k, v = (split(layer(hidden_states)) for layer in (self.query, self.key, self.value))
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.attention_head_size) + extended
        context = torch.softmax(scores, dim=-1) @ v
        return context.permute(0, 2, 1, 3).reshape(b, n, -1)


def test_bert_as_a_decoder_is_read_with_its_num_attention_heads():
    module = built(BertAsDecoder)
    x = torch.rand((2, 6, 3), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():  # its truth, independently: PyTorch's SDPA, causal, 5 heads
        q, k, v = (layer(x).view(2, 6, 5, 2).transpose(1, 2)
                   for layer in (module.query, module.key, module.value))
        sdpa = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        assert torch.allclose(module(x), sdpa.transpose(1, 2).reshape(2, 6, 10), atol=1e-6)
    report = check_module(module)
    assert report.ok, report.text()
    assert "5 heads (its num_attention_heads = 5)" in report.text()


def test_a_head_count_in_a_config_object_is_read():
    class WithConfig(BertAsDecoder):  # the count only in self.config
        def __init__(self):
            super().__init__()
            self.config = type("Config", (), {"num_attention_heads": 5})()
            del self.num_attention_heads

        def count(self):
            return self.config.num_attention_heads

    report = check_module(built(WithConfig))
    assert report.ok, report.text()
    assert "5 heads (its config's num_attention_heads = 5)" in report.text()


def test_dropout_p_passed_to_f_dropout_as_self_dropout_p_is_read():
    """Hugging Face's newer eager attention: ``F.dropout(w, p=self.dropout_p,
    training=self.training)``, no nn.Dropout: p is read from ``dropout_p``, so the check
    with a dropout seed draws the same masks and the right module passes."""
    from tests.checker.corpus_cases import CLASSES

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(123)
        module = CLASSES["GPT2EagerDropoutP"](3, 10, 9, 0.1, 2).train()
    report = check_module(module, dropout_seed=1)
    assert report.ok, report.text()
    assert report.step("dropped_weights").status == "match"


def _book_with_mask(mask: torch.Tensor, hides: bool) -> nn.Module:
    """Listing 3.5 (d_in 3, d_out 10, 2 heads, context 9) holding ``mask`` as its
    ``mask`` buffer, used by masked_fill: where it is 1 when ``hides``, else where it is 0."""
    class Slipped(L.Tweakable):
        def mask_scores(self, attn_scores, num_tokens):
            m = self.mask.bool()[:num_tokens, :num_tokens]
            return attn_scores.masked_fill(m if hides else ~m, -torch.inf)

    module = built(Slipped, 3, 10, 9, 0.0, num_heads=2)
    module.mask = mask
    return module


def test_a_mask_one_diagonal_off_is_still_meant_causal():
    """Issue 45, part 1: Listing 3.5 with triu(..., diagonal=-1), and a module whose
    mask is tril(ones, diagonal=1): both hold a ``mask`` buffer used by masked_fill, so
    both mean causal; the report says so, and where the slip is, not "not causal"."""
    for mask, hides, built_as in ((torch.triu(torch.ones(9, 9), diagonal=-1), True,
                                   "triu(ones, diagonal=-1) where the causal mask is "
                                   "triu(ones, diagonal=1)"),
                                  (torch.tril(torch.ones(9, 9), diagonal=1), False,
                                   "tril(ones, diagonal=1) where the causal mask is "
                                   "tril(ones, diagonal=0)")):
        module = _book_with_mask(mask, hides)
        report = check_module(module)
        first_line = report.text().splitlines()[0]
        assert "assumed: causal (the buffer `mask` (9, 9) is" in first_line, first_line
        assert f"but built as {built_as}: the module means causal, the slip is in the " \
               "mask" in first_line
        assert not report.ok and report.first_difference.step == "masked_scores", report.text()


# ---------------------------------------------------------------------------
# Issue 45, part 2: a diagnosis the steps agree with
# ---------------------------------------------------------------------------
def test_the_context_from_the_keys_is_named_at_the_context_not_at_the_values():
    """Listing 3.2 with ``attn_weights @ keys``: "values = self.W_key(x)" gives the same
    output, but the learner's values are right (✓), so only the context's story agrees
    with the steps: the first ✗ is the context, and the diagnosis names that line."""
    class WeightsTimesKeys(L.SelfAttention_v2):
        def forward(self, x):
            keys, queries, values = self.W_key(x), self.W_query(x), self.W_value(x)
            attn_weights = torch.softmax(queries @ keys.T / keys.shape[-1]**0.5, dim=-1)
            return attn_weights @ keys

    module = built(WeightsTimesKeys, 3, 2)
    x = torch.rand((6, 3), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():  # the truth: its values are W_value's, its output uses the keys
        k = module.W_key(x)
        w = torch.softmax(module.W_query(x) @ k.T / 2**0.5, dim=-1)
        assert torch.allclose(module(x), w @ k) and not torch.allclose(module(x), w @ module.W_value(x))
    report = check_module(module)
    statuses_ = {r.step: r.status for r in report.steps}
    assert statuses_["values"] == "match" and statuses_["attn_weights"] == "match"
    assert (report.ok, report.first_step, report.mistake) == (False, "context",
                                                              "context_from_keys"), report.text()
    assert report.diagnosis.startswith("the context is computed from the keys, not the values")
    assert "W_key, not W_value" not in report.diagnosis


def test_causal_attention_with_no_mask_at_all_is_measured_causal():
    """Issue 45, part 1: attention computed prefix by prefix (no mask anywhere, no
    "causal" in its name) is causal by what it does: the check changes the last token
    and sees no earlier row move, and says that it measured it."""
    class PrefixByPrefix(nn.Module):
        def __init__(self):
            super().__init__()
            self.W_query, self.W_key, self.W_value = (nn.Linear(3, 10) for _ in range(3))
            self.num_heads = 2

        def forward(self, x):
            b, n, _ = x.shape
            q, k, v = (w(x).view(b, n, 2, 5).transpose(1, 2)
                       for w in (self.W_query, self.W_key, self.W_value))
            rows = []
            for i in range(n):  # token i attends to tokens 0 ... i
                s = q[:, :, i:i + 1] @ k[:, :, :i + 1].transpose(-2, -1) / math.sqrt(5)
                rows.append(torch.softmax(s, dim=-1) @ v[:, :, :i + 1])
            return torch.cat(rows, dim=2).transpose(1, 2).reshape(b, n, 10)

    module = built(PrefixByPrefix)
    x = torch.rand((2, 6, 3), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():  # its truth, independently: PyTorch's SDPA with is_causal=True
        q, k, v = (w(x).view(2, 6, 2, 5).transpose(1, 2)
                   for w in (module.W_query, module.W_key, module.W_value))
        sdpa = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        assert torch.allclose(module(x), sdpa.transpose(1, 2).reshape(2, 6, 10), atol=1e-6)
    report = check_module(module)
    assert report.ok, report.text()
    assert report.settings[0].startswith(
        "assumed: causal (forward, measured: a new last token changes its own row of the "
        "output and no earlier one), measured; 2 heads")


def test_keys_and_values_swapped_put_the_first_cross_at_the_keys():
    """Keys and values swapped (``keys = self.W_value(x)``, ``values = self.W_key(x)``):
    their keys tensor holds the reference's values and theirs values the keys, so
    neither is a match; the first ✗ is the keys, and the diagnosis names the swap."""
    class Swapped(L.Tweakable):
        def forward(self, x):
            b, n, _ = x.shape
            keys = self.split(self.W_value(x), b, n)
            queries = self.split(self.W_query(x), b, n)
            values = self.split(self.W_key(x), b, n)
            attn_scores = self.mask_scores(queries @ keys.transpose(2, 3), n)
            attn_weights = self.dropout(self.normalise(self.scale(attn_scores, keys), n))
            return self.project_out(self.combine(attn_weights @ values, b, n))

    module = built(Swapped, 3, 10, 9, 0.0, num_heads=2)
    twin = built(L.MultiHeadAttention, 3, 10, 9, 0.0, num_heads=2)
    twin.load_state_dict(module.state_dict())
    x = torch.rand((2, 6, 3), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():  # the truth: the book's class with W_key and W_value exchanged
        twin.W_key.weight.copy_(module.W_value.weight)
        twin.W_value.weight.copy_(module.W_key.weight)
        assert torch.allclose(module(x), twin(x), atol=1e-6)
    report = check_module(module)
    statuses_ = {r.step: r.status for r in report.steps}
    assert (report.ok, report.first_step, report.mistake) == (False, "keys",
                                                              "projection_mixed_up"), report.text()
    assert statuses_["queries"] == "match" and statuses_["keys"] == statuses_["values"] == "differs"
    assert report.diagnosis.startswith("the keys and the values are swapped")
