"""Gated DeltaNet (Qwen3-Next's linear-attention layers): a state S of
head_dim × head_dim per head, updated token by token with a decay gate and
the delta rule, and the same numbers computed chunk by chunk.

The gated delta rule (Yang, Kautz, Hatamizadeh, "Gated Delta Networks:
Improving Mamba2 with Delta Rule", ICLR 2025 / arXiv 2412.06464v3, §3.1
"Formulation: Gated Delta Rule", eq. 10), with S laid out
(d_k, d_v) as transformers keeps it (the paper's Sᵀ):

    S_t = α_t (I − β_t k_t k_tᵀ) S_{t−1} + β_t k_t v_tᵀ,    o_t = S_tᵀ q_t

α_t = exp(g_t) in (0, 1] forgets everything a little; β_t in (0, 1) is how far
the value stored under k_t moves towards v_t (the delta rule: it first reads
what S already holds for k_t, S_{t−1}ᵀ k_t, and writes only the difference).

The chunked form (§3.3, the chunkwise algorithm, WY / UT representation):
inside a chunk of C tokens, with Γ_i = α_1 ⋯ α_i the decay since the chunk's
start, the state is S_i = Γ_i S_0 + Σ_{j≤i} (Γ_i/Γ_j) k_j u_jᵀ, and the
pseudo-values u solve a lower-triangular system, (I + A) U = β ⊙ (V − Γ ⊙ K S_0) with
A_ij = β_i (Γ_i/Γ_j) k_iᵀ k_j for j < i: the C sequential steps become a few
matrix products and one triangular solve per chunk.

q, k, v, g and β come from x as Qwen3-Next's ``Qwen3NextGatedDeltaNet`` makes
them (transformers' modeling_qwen3_next.py), less its short causal convolution,
its gated RMSNorm and its out_proj: q and k l2-normalised (``l2norm``, eps
1e-6), q scaled by head_dim^−½, g = −exp(A_log) · softplus(x W_a + dt_bias),
β = σ(x W_b).
"""

from __future__ import annotations

import inspect
import math

import torch
from torch import Tensor

from explorer.core.agreement import Agreement, largest_abs, max_abs_diff, of_all, relative_tolerance
from explorer.core.config import ConfigError
from explorer.modern import attention as modern
from explorer.modern.frontier import FrontierConfig, Part, Step

KEY = "deltanet"
L2_EPS = 1e-6
"""transformers' (and the FLA library's) ``l2norm`` eps: x / √(Σx² + eps)."""
BYTES_PER_VALUE = modern.BYTES_PER_VALUE["float32"]
LENGTHS = (1_000, 100_000)
"""The sequence lengths the state's size is compared with a KV cache at, beside the sentence's."""
SOURCE = ("Yang, Kautz, Hatamizadeh, \"Gated Delta Networks: Improving Mamba2 with Delta Rule\" "
          "(ICLR 2025, arXiv 2412.06464v3): §3.1 eq. 10 (the gated delta rule), §3.3 (the "
          "chunkwise form); Qwen3-Next: "
          "transformers' Qwen3NextGatedDeltaNet, torch_recurrent_gated_delta_rule and "
          "torch_chunk_gated_delta_rule (models/qwen3_next/modeling_qwen3_next.py).")


def l2norm(x: Tensor) -> Tensor:
    """x / √(Σ x² + 1e-6) over the last dimension (transformers' ``l2norm``)."""
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True) + L2_EPS)


def draw_weights(d_in: int, config: FrontierConfig,
                 generator: torch.Generator) -> dict[str, Tensor]:
    """W_q, W_k, W_v (d_in, n_heads · head_dim), W_a and W_b (d_in, n_heads),
    and per head ``A_log`` = log A with A uniform in [0.05, 1) (Qwen3-Next draws
    A in [0, 16); smaller here so the decay stays visible over a sentence) and
    ``dt_bias`` = 1 (its initial value), drawn with ``generator`` in that order."""
    h, d = config.n_heads, config.head_dim
    draw = (lambda cols: torch.randn(d_in, cols, generator=generator) / math.sqrt(d_in))
    weights = {"q": draw(h * d), "k": draw(h * d), "v": draw(h * d), "a": draw(h), "b": draw(h)}
    weights["A_log"] = torch.log(0.05 + 0.95 * torch.rand(h, generator=generator))
    weights["dt_bias"] = torch.ones(h)
    return weights


def project(x: Tensor, weights: dict[str, Tensor], n_heads: int) -> dict[str, Tensor]:
    """q, k, v (n_heads, n, head_dim) with q and k l2-normalised and q scaled by
    head_dim^−½; g (n_heads, n) = −exp(A_log) · softplus(x W_a + dt_bias), the
    log of the decay α; beta (n_heads, n) = σ(x W_b); and ``q_raw``, ``k_raw``
    (n_heads, n, head_dim): x W_q and x W_k before their norm (what transformers'
    functions take)."""
    q_raw = modern.split_heads(x @ weights["q"], n_heads)
    k_raw = modern.split_heads(x @ weights["k"], n_heads)
    q, k = l2norm(q_raw), l2norm(k_raw)
    v = modern.split_heads(x @ weights["v"], n_heads)
    dt = torch.nn.functional.softplus(x @ weights["a"] + weights["dt_bias"])  # (n, h)
    g = -weights["A_log"].exp() * dt
    beta = torch.sigmoid(x @ weights["b"])
    return {"q": q / math.sqrt(q.shape[-1]), "k": k, "v": v, "g": g.T, "beta": beta.T,
            "q_raw": q_raw, "k_raw": k_raw}


def recurrent(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor,
              decay: bool = True) -> tuple[Tensor, Tensor]:
    """The gated delta rule token by token: for t = 1 … n,
    S ← α_t S; S ← S + k_t (β_t (v_t − Sᵀ k_t))ᵀ; o_t = Sᵀ q_t.

    q, k (h, n, d_k), v (h, n, d_v), g and beta (h, n). ``decay=False`` is the
    broken variant: the delta rule without α. Returns the outputs (h, n, d_v)
    and the state after every token (h, n, d_k, d_v)."""
    h, n, d_k = k.shape
    state = torch.zeros(h, d_k, v.shape[-1])
    outputs, states = torch.zeros(h, n, v.shape[-1]), torch.zeros(h, n, d_k, v.shape[-1])
    for t in range(n):
        if decay:
            state = state * g[:, t].exp()[:, None, None]                 # α_t S
        read = (state * k[:, t, :, None]).sum(-2)                        # Sᵀ k_t: (h, d_v)
        delta = (v[:, t] - read) * beta[:, t, None]                      # β_t (v_t − Sᵀ k_t)
        state = state + k[:, t, :, None] * delta[:, None, :]             # + k_t deltaᵀ
        outputs[:, t] = (state * q[:, t, :, None]).sum(-2)               # Sᵀ q_t
        states[:, t] = state
    return outputs, states


def chunked(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor,
            chunk: int) -> tuple[Tensor, Tensor, Tensor]:
    """The same outputs chunk by chunk (the UT / WY form, see the module's
    docstring), ``chunk`` tokens at a time (the last chunk may be shorter).

    Returns the outputs (h, n, d_v), the pseudo-values u (h, n, d_v) and the
    state after every chunk (h, n_chunks, d_k, d_v). Raises `ConfigError` for
    a chunk below 1."""
    if chunk < 1:
        raise ConfigError("chunk", f"chunk must be at least 1 token (got {chunk})")
    h, n, d_k = k.shape
    state = torch.zeros(h, d_k, v.shape[-1])
    outputs, pseudo, states = torch.zeros(h, n, v.shape[-1]), torch.zeros(h, n, v.shape[-1]), []
    for s in range(0, n, chunk):
        e = min(s + chunk, n)
        qc, kc, vc, bc = q[:, s:e], k[:, s:e], v[:, s:e], beta[:, s:e, None]
        log_gamma = g[:, s:e].cumsum(-1)                                 # log Γ_i: (h, C)
        ratio = (log_gamma[:, :, None] - log_gamma[:, None, :])         # log Γ_i/Γ_j: (h, C, C)
        below = torch.ones(e - s, e - s, dtype=torch.bool).tril(-1)
        on_or_below = torch.ones(e - s, e - s, dtype=torch.bool).tril()
        decay_ij = ratio.masked_fill(~on_or_below, float("-inf")).exp()  # 0 above the diagonal
        gamma = log_gamma.exp()[..., None]                               # (h, C, 1)
        a = (bc * (kc @ kc.transpose(-1, -2)) * decay_ij).masked_fill(~below, 0.0)
        rhs = bc * (vc - gamma * (kc @ state))                           # β ⊙ (V − Γ K S_0)
        eye = torch.eye(e - s).expand_as(a)
        u = torch.linalg.solve_triangular(eye + a, rhs, upper=False, unitriangular=True)
        scores = (qc @ kc.transpose(-1, -2)) * decay_ij                  # (Γ_i/Γ_j) q_iᵀ k_j
        outputs[:, s:e] = gamma * (qc @ state) + scores @ u
        last = log_gamma[:, -1:]                                         # log Γ_C
        to_end = (last - log_gamma).exp()[..., None]                     # Γ_C / Γ_j
        state = last.exp()[..., None] * state + (kc * to_end).transpose(-1, -2) @ u
        pseudo[:, s:e] = u
        states.append(state)
    return outputs, pseudo, torch.stack(states, dim=1)


def transformers_reference(parts: dict[str, Tensor], chunk: int) -> dict[str, Tensor]:
    """transformers' pure-torch ``torch_recurrent_gated_delta_rule`` and
    ``torch_chunk_gated_delta_rule`` (chunk_size = ``chunk``) on the same q, k,
    v, g, β. They take q and k before their l2-norm and scaling and apply both
    themselves (``use_qk_l2norm_in_kernel=True``, as Qwen3NextGatedDeltaNet
    calls them), so they are given the raw projections (``parts`` as `project`
    returns them). The functions are unwrapped (``inspect.unwrap``) so that
    the pure-torch reference runs even where the flash-linear-attention
    package is installed (transformers would dispatch to its kernel). Returns
    ``recurrent`` and ``chunked`` outputs (h, n, d_v) and their final states
    (h, d_k, d_v)."""
    from transformers.models.qwen3_next.modeling_qwen3_next import (
        torch_chunk_gated_delta_rule,
        torch_recurrent_gated_delta_rule,
    )
    recurrent_rule = inspect.unwrap(torch_recurrent_gated_delta_rule)
    chunk_rule = inspect.unwrap(torch_chunk_gated_delta_rule)
    lay = (lambda t: t.transpose(0, 1)[None])  # (h, n, ...) -> (1, n, h, ...)
    args = (lay(parts["q_raw"]), lay(parts["k_raw"]), lay(parts["v"]), lay(parts["g"]),
            lay(parts["beta"]))
    with torch.no_grad():
        rec, rec_state = recurrent_rule(
            *args, output_final_state=True, use_qk_l2norm_in_kernel=True)
        chu, chu_state = chunk_rule(
            *args, chunk_size=chunk, output_final_state=True, use_qk_l2norm_in_kernel=True)
    unlay = (lambda t: t[0].transpose(0, 1))
    return {"recurrent": unlay(rec), "recurrent_state": rec_state[0],
            "chunked": unlay(chu), "chunked_state": chu_state[0]}


def _agree(name: str, compared: str, reference: str, ours: Tensor, theirs: Tensor) -> Agreement:
    scale = largest_abs(theirs)
    return Agreement(name, compared, reference, max_abs_diff(ours, theirs),
                     relative_tolerance(scale), exact=torch.equal(ours, theirs),
                     n_values=theirs.numel(), scale=scale)


def check_recurrent(outputs: Tensor, final_state: Tensor, theirs: dict[str, Tensor],
                    name: str = "recurrent form") -> Agreement:
    """Our token-by-token outputs and final state against transformers'
    ``torch_recurrent_gated_delta_rule``."""
    ref = "transformers' torch_recurrent_gated_delta_rule"
    return of_all(name, "outputs and final state S", ref, [
        _agree(f"{name}: outputs", "outputs", ref, outputs, theirs["recurrent"]),
        _agree(f"{name}: state", "final state S", ref, final_state, theirs["recurrent_state"])])


def size_facts(n_tokens: int, config: FrontierConfig) -> dict[str, str]:
    """The state's bytes per layer (n_heads · head_dim² float32 values, whatever
    the length) and a KV cache's for the same heads (2 · n_heads · head_dim
    float32 values per token), at the sentence's length and at `LENGTHS`."""
    h, d = config.n_heads, config.head_dim
    per_token = modern.kv_cache_bytes_per_token(1, h, d, BYTES_PER_VALUE)
    facts = {"state bytes per layer (float32, any length)": f"{h * d * d * BYTES_PER_VALUE:,}",
             f"KV cache bytes per layer, {n_tokens:,} tokens (the sentence)":
                 f"{per_token * n_tokens:,}"}
    for n in LENGTHS:
        facts[f"KV cache bytes per layer, {n:,} tokens"] = f"{per_token * n:,}"
    return facts


def deltanet(x: Tensor, config: FrontierConfig, generator: torch.Generator) -> Part:
    """The Gated DeltaNet part: X (n_tokens, d_in) through the gated delta rule,
    token by token and chunk by chunk (chunk = ``config.chunk``).

    Steps: ``keys`` (n_heads, n, head_dim) l2-normalised; ``decay`` α and
    ``beta`` β (n_heads, n, 1); ``states`` (n_heads, n, head_dim²): the state
    after each token, flattened row by row; ``state`` (n_heads, head_dim,
    head_dim): the final S; ``outputs`` (n_heads, n, head_dim) token by token;
    ``pseudo_values`` u and ``outputs_chunked`` (n_heads, n, head_dim). Checks:
    the chunked form against the recurrent one, each against transformers'
    pure-torch function. Raises `ConfigError` for a chunk below 1."""
    if config.chunk < 1:
        raise ConfigError("chunk", f"chunk must be at least 1 token (got {config.chunk})")
    h, d = config.n_heads, config.head_dim
    weights = draw_weights(x.shape[1], config, generator)
    p = project(x, weights, h)
    out, states = recurrent(p["q"], p["k"], p["v"], p["g"], p["beta"])
    out_c, pseudo, chunk_states = chunked(p["q"], p["k"], p["v"], p["g"], p["beta"], config.chunk)
    theirs = transformers_reference(p, config.chunk)
    final = states[:, -1]
    ref_chunk = "transformers' torch_chunk_gated_delta_rule"
    checks = (
        of_all("chunked = recurrent", "outputs and final state S", "our recurrent form", [
            _agree("chunked: outputs", "outputs", "our recurrent form", out_c, out),
            _agree("chunked: state", "final state S", "our recurrent form",
                   chunk_states[:, -1], final)]),
        check_recurrent(out, final, theirs),
        of_all("chunked form", "outputs and final state S", ref_chunk, [
            _agree("chunked form: outputs", "outputs", ref_chunk, out_c, theirs["chunked"]),
            _agree("chunked form: state", "final state S", ref_chunk, chunk_states[:, -1],
                   theirs["chunked_state"])]),
    )
    n = x.shape[0]
    steps = (
        Step("keys", "keys, l2-normalised", r"k_t = \frac{x_t W_k}{\lVert x_t W_k \rVert}",
             p["k"], "tokens", "dims", "The key this token writes under: length 1."),
        Step("decay", "decay α_t = exp(g_t)",
             r"\alpha_t = e^{-e^{A_{\log}}\,\mathrm{softplus}(x_t W_a + b_{dt})}",
             p["g"].exp()[..., None], "tokens", "dims",
             "How much of the whole state this token keeps (1 = all).", signed=False),
        Step("beta", "writing strength β_t = σ(x_t W_b)", r"\beta_t = \sigma(x_t W_b)",
             p["beta"][..., None], "tokens", "dims",
             "How far the value stored under k_t moves towards v_t (1 = replaced).",
             signed=False),
        Step("states", "The state S after each token (flattened)",
             r"S_t = \alpha_t (I - \beta_t k_t k_t^\top) S_{t-1} + \beta_t k_t v_t^\top",
             states.reshape(h, n, d * d), "tokens", "dims",
             f"S after this token, its {d}×{d} entries row by row: the same size at "
             "every token."),
        Step("state", "The final state S", r"S_n \in \mathbb{R}^{d_k \times d_v}", final,
             "dims", "dims", "Row i, column j: how much key dimension i maps to value "
             "dimension j after the whole sentence."),
        Step("outputs", "outputs, token by token", r"o_t = S_t^\top q_t", out, "tokens", "dims",
             "Token t's output: the state read with its query."),
        Step("pseudo_values", "pseudo-values u (chunked form)",
             r"(I + A)\,U = \beta \odot (V - \Gamma \odot K S_0)", pseudo, "tokens", "dims",
             f"What each token really writes, solved {config.chunk} tokens at a time."),
        Step("outputs_chunked", "outputs, chunk by chunk",
             r"o_i = \Gamma_i S_0^\top q_i + \sum_{j \le i} \tfrac{\Gamma_i}{\Gamma_j} "
             r"(q_i^\top k_j)\, u_j", out_c, "tokens", "dims",
             "The same outputs from the chunked form."),
    )
    summary = (
        f"Gated DeltaNet keeps no keys: each head carries one {d}×{d} state S. Each token "
        "first shrinks S by its decay α_t, then reads what S stores under its key and writes "
        "only the difference to its value, scaled by β_t (the delta rule). The chunked form "
        f"computes the same numbers {config.chunk} tokens at a time with matrix products. "
        "The state does not grow with the sequence; a KV cache grows by one key and value per "
        "token. Qwen3-Next's short convolution, gated RMSNorm and out_proj are left out.")
    return Part(KEY, "Gated DeltaNet", summary, SOURCE, steps, checks, size_facts(n, config))
