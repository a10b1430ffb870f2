"""The Frontier attention page taken home as a standalone script
(`frontier_script`): torch and transformers only.

The script holds the page's X (the sentence's float32 embeddings), its sizes
and seed, and the page's own numbers of each part's output step (`PAGE_STEPS`).
It draws each part's weights as `explorer.modern.frontier.parts.compute_parts`
does (a fresh ``torch.Generator().manual_seed(seed)`` per part, the same draws
in the same order), recomputes the part's output, and checks it against the
page's numbers and against transformers' module, as the part's own check does.
It prints one line per check and exits 0 only when every check agrees. A
sparse part the page could not compute (index_dim < rope_dim) is left out
with a printed line saying why.
"""

from __future__ import annotations

from collections.abc import Sequence

from torch import Tensor

from explorer.core import literal
from explorer.modern.frontier import FrontierConfig
from explorer.modern.frontier.parts import FrontierTrace
from explorer.render.export import tensor_literal
from explorer.render.script_templates import template

SCRIPT_FILE = "frontier_attention.py"
PAGE_STEPS = {"mla": "output", "sparse": "output", "sinks": "output", "ring": "context",
              "gated": "output", "deltanet": "outputs"}
"""The step of each part in the script whose page numbers it embeds and reproduces:
part key -> step name (`explorer.modern.frontier.Step.name`); every part of the page."""
OPTIONAL = ("sparse",)
"""The parts a valid `FrontierConfig` may still leave uncomputed (sparse attention
needs index_dim ≥ rope_dim): the script says so and checks the others."""


def _nested(values: object) -> str:
    """A nested list of floats as Python text, every float32 in its shortest digits."""
    if isinstance(values, list):
        return "[" + ", ".join(_nested(v) for v in values) + "]"
    return literal.float32_text(float(values))  # type: ignore[arg-type]


def page_numbers(trace: FrontierTrace) -> str:
    """``{"mla": torch.tensor([...]), ...}``: the page's values of each `PAGE_STEPS`
    step, one part a line (``None`` for an `OPTIONAL` part the page could not
    compute). Raises ``ValueError`` when another part could not be computed (its
    `FrontierTrace.errors` message)."""
    lines = ["{"]
    for key, step in PAGE_STEPS.items():
        if key in OPTIONAL and key not in trace.parts:
            lines.append(f"    {key!r}: None,  # not computed for these sizes")
            continue
        if key not in trace.parts:
            raise ValueError(f"the part {key!r} could not be computed: "
                             f"{trace.errors.get(key, 'not in the trace')}")
        values = trace.parts[key].step(step).values
        lines.append(f"    {key!r}: torch.tensor({_nested(values.tolist())}),  "
                     f"# {step} {tuple(values.shape)}")
    lines.append("}")
    return "\n".join(lines)


def frontier_script(trace: FrontierTrace, tokens: Sequence[str], x: Tensor,
                    config: FrontierConfig, seed: int, link: str | None = None) -> str:
    """The standalone script (torch and transformers only) for the page's X
    ``x`` (n_tokens, d_in), one label per row in ``tokens``, sizes ``config`` and
    ``seed``, with ``trace``'s numbers of `PAGE_STEPS` embedded (and the message
    of an `OPTIONAL` part the page could not compute). The text is the
    template ``explorer/render/scripts/frontier_attention.py``
    (`explorer.render.script_templates`). Recipes: the parts' modules
    (`explorer.modern.frontier.mla`, ``sparse``, ``sinks``, ``ring``, ``gated``,
    ``deltanet``).
    Raises ``ValueError`` when a part of `PAGE_STEPS` is missing from ``trace``."""
    c = config
    embeddings = tensor_literal(x.tolist(), list(tokens),
                                f"X: the page's embeddings {tuple(x.shape)}")
    return template("frontier_attention")["script"].fill(
        page=literal.comment(link or "the Frontier attention page", 300), seed=seed,
        n_heads=c.n_heads, head_dim=c.head_dim, rope_dim=c.rope_dim,
        kv_lora_rank=c.kv_lora_rank, q_lora_rank=c.q_lora_rank, top_k=c.top_k,
        index_heads=c.index_heads, index_dim=c.index_dim, window=c.window, chunk=c.chunk,
        embeddings=embeddings, page_numbers=page_numbers(trace),
        sparse_error=repr(trace.errors.get("sparse"))) + "\n"
