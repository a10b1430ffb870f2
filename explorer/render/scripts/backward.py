# The template of backward.py, the Backward pass page's script
# (`explorer.render.backward_script.backward_script`): named blocks ("#@ name" lines)
# with __NAME__ slots (`explorer.render.script_templates`). backward_script writes the
# header, the forward script attention.py for the same settings (the template
# attention.py), then the blocks the settings need, in this order.
#
# What the forward script defines and these blocks use:
from attention import args, sentence_int, steps, torch, vocab

#@ header
# The backward pass of scaled dot-product attention: every gradient by hand,
# in plain PyTorch, checked against loss.backward(). Written by the
# self-attention explorer's Backward pass page.
#
#   python backward.py                  prints the forward pass, the loss, every
#                                       gradient and its check against autograd
#   python backward.py --save grads.pt  also saves them: torch.load('grads.pt') is a
#                                       dict: steps, gradients, loss, differences
#
# The forward pass below is the explorer's attention.py for the same settings.

#@ loss
# ---------------------------------------------------------------------------
# The loss, and where the backward pass starts: dL/dO
# ---------------------------------------------------------------------------
torch.set_grad_enabled(False)  # every gradient below is computed by hand
rows = steps["__ROWS__"]  # O: the rows the loss reads
n_rows, width = rows.shape

#@ loss_next_token
# Next-token prediction: a fixed unembedding U, drawn as the book's out_head
# (Listing 4.7) after torch.manual_seed(seed), logits over the vocabulary, and the
# cross-entropy of each position's next token (the last one has none: -100)
torch.manual_seed(__SEED__)
U = torch.nn.Linear(width, len(vocab), bias=False).weight.detach().T  # (d, V)
targets = torch.full_like(sentence_int, __IGNORE_INDEX__)
targets[:-1] = sentence_int[1:]
kept = targets != __IGNORE_INDEX__
logits = rows @ U  # (n, V)
log_p = torch.log_softmax(logits, dim=-1)
loss = -log_p[kept].gather(1, targets[kept, None]).mean()
# dL/dlogits = (softmax(logits) - onehot(target)) / N, 0 for the last position
onehot = torch.zeros_like(logits)
onehot[kept, targets[kept]] = 1.0
d_logits = (log_p.exp() - onehot) * kept[:, None] / kept.sum()
d_rows = d_logits @ U.T  # dL/dO = dL/dlogits U^T

#@ loss_target
# The squared distance to a target context T from its own generator
T = torch.randn(n_rows, width, generator=torch.Generator().manual_seed(__TARGET_SEED__))
loss = ((rows - T) ** 2).mean()
d_rows = 2 * (rows - T) / rows.numel()  # dL/dO

#@ loss_print
print("\n__LOSS_LINE__".format(value=float(loss)))

#@ by_hand
# ---------------------------------------------------------------------------
# Every gradient by hand, backwards (each step: Y = A B gives dA = dY B^T, dB = A^T dY)
# ---------------------------------------------------------------------------
H = __N_HEADS__  # heads
grads = {}  # step name -> dL/d(step), shaped as the step


def heads(t):
    """A per-head step with its head axis (H, n, .), also for one head."""
    return t if t.dim() == 3 else t[None]


def side_by_side(t):
    """(H, n, w) -> (n, H*w): the heads side by side, as the context is."""
    return t.transpose(0, 1).reshape(t.shape[1], -1)


def split(t):
    """(n, H*w) -> (H, n, w): each head its columns."""
    return t.view(t.shape[0], H, -1).transpose(0, 1)


d = d_rows

#@ by_hand_out_proj
# Output projection O = Z W_out + b_out
grads["output"] = d
grads["W_out"] = steps["context"].T @ d  # Z^T dO
grads["b_out"] = d.sum(dim=0)  # b_out is added to every row
d = d @ steps["W_out"].T  # dZ = dO W_out^T

#@ by_hand_context
grads["context"] = d
# Context Z = alpha V, per head
d_context = split(d)
grads["values"] = heads(steps["__MIXING__"]).transpose(-2, -1) @ d_context  # alpha^T dZ
d_weights = d_context @ heads(steps["values"]).transpose(-2, -1)  # dZ V^T

#@ by_hand_dropout
# Dropout: a dropped weight gets no gradient, a kept one is scaled by 1/(1-p)
grads["dropped_weights"] = d_weights
d_weights = d_weights * heads(steps["dropout_mask"]) / (1 - __P__)

#@ by_hand_weights
grads["attn_weights"] = d_weights
alpha = heads(steps["attn_weights"])
row_sum = (alpha * d_weights).sum(dim=-1, keepdim=True)  # rowsum(alpha * dalpha)

#@ by_hand_sum
# alpha = w / rowsum(w): dL/dw = (dalpha - rowsum(alpha * dalpha)) / rowsum(w)
w = heads(steps["__SOURCE__"])
masked = w == float("-inf")
total = w.masked_fill(masked, 0.0).sum(dim=-1, keepdim=True)
d_scores = ((d_weights - row_sum) / total).masked_fill(masked, 0.0)

#@ by_hand_softmax
# Softmax: dL/dw = alpha * (dalpha - rowsum(alpha * dalpha)), the Jacobian
# diag(alpha) - alpha alpha^T of each row applied to its dalpha
d_scores = alpha * (d_weights - row_sum)

#@ by_hand_scores
grads["__SOURCE__"] = d_scores

#@ by_hand_causal
# The causal mask: a masked score (-inf) has no effect, so no gradient
d_scores = d_scores.masked_fill(steps["causal_mask"], 0.0)
grads["scaled_scores"] = d_scores

#@ by_hand_scale
# The scaling omega / sqrt(head_dim)
d_scores = d_scores / heads(steps["keys"]).shape[-1] ** 0.5

#@ by_hand_qkv
grads["attn_scores"] = d_scores
# Scores omega = Q K^T
grads["queries"] = d_scores @ heads(steps["keys"])  # domega K
grads["keys"] = d_scores.transpose(-2, -1) @ heads(steps["queries"])  # domega^T Q
# The weights: head h's gradient lands in the columns it was cut from
X = steps["embeddings"]
d_x = torch.zeros_like(X)
for step, weight, bias in (("queries", "W_query", "b_query"), ("keys", "W_key", "b_key"),
                           ("values", "W_value", "b_value")):
    d_projected = side_by_side(grads[step])
    grads[weight] = X.T @ d_projected  # X^T dQ
    if bias in steps:
        grads[bias] = d_projected.sum(dim=0)
    d_x = d_x + d_projected @ steps[weight].T  # one of X's three paths
grads["embeddings"] = d_x
if H == 1:  # one head is shown without its head axis, as in the forward pass
    grads = {name: g[0] if g.dim() == 3 else g for name, g in grads.items()}
for name, tensor in grads.items():
    print(f"\n__GRADIENT_HEADING__")
    print(tensor)

#@ autograd
# ---------------------------------------------------------------------------
# The same gradients by autograd: the forward pass again, then loss.backward()
# ---------------------------------------------------------------------------
torch.set_grad_enabled(True)
leaves = {name: steps[name].detach().clone().requires_grad_(True) for name in
          ("embeddings", "W_query", "W_key", "W_value", "b_query", "b_key", "b_value",
           "W_out", "b_out") if name in steps}
found = dict(leaves)  # step name -> the tensor whose .grad autograd fills


def keep(name, tensor):
    """Ask autograd to keep the gradient of an intermediate step."""
    tensor.retain_grad()
    found[name] = tensor
    return tensor


x = leaves["embeddings"]
projected = {}
for step, weight, bias in (("queries", "W_query", "b_query"), ("keys", "W_key", "b_key"),
                           ("values", "W_value", "b_value")):
    p = x @ leaves[weight] + (leaves[bias] if bias in leaves else 0)
    projected[step] = keep(step, split(p))
q, k, v = projected["queries"], projected["keys"], projected["values"]
scores = keep("attn_scores", q @ k.transpose(-2, -1))

#@ autograd_scale
scaled = keep("scaled_scores", scores / k.shape[-1] ** 0.5)

#@ autograd_no_scale
scaled = keep("scaled_scores", scores * 1.0)

#@ autograd_causal
masked = keep("masked_scores", scaled.masked_fill(steps["causal_mask"], -torch.inf))

#@ autograd_unmask_causal
unmasked = masked.masked_fill(steps["causal_mask"], 0.0)

#@ autograd_unmask
unmasked = scaled

#@ autograd_softmax
alpha = keep("attn_weights", torch.softmax(__S__, dim=-1))

#@ autograd_naive_softmax
alpha = keep("attn_weights", torch.exp(__S__) / torch.exp(__S__).sum(dim=-1, keepdim=True))

#@ autograd_sum
alpha = keep("attn_weights", unmasked / unmasked.sum(dim=-1, keepdim=True))

#@ autograd_dropout
dropped = keep("dropped_weights", alpha * heads(steps["dropout_mask"]) / (1 - __P__))

#@ autograd_context
context = keep("context", side_by_side(__A__ @ v))

#@ autograd_out_proj
output = keep("output", context @ leaves["W_out"] + leaves["b_out"])

#@ autograd_next_token
reference = torch.nn.functional.cross_entropy(__ROWS__ @ U, targets, ignore_index=__IGNORE_INDEX__)

#@ autograd_target
reference = torch.nn.functional.mse_loss(__ROWS__, T)

#@ check
reference.backward()


def largest_difference(ours, theirs):
    """max |ours - theirs|; equal non-finite values (both nan, both -inf) count as 0."""
    ours, theirs = ours.double(), theirs.double()
    same = (ours == theirs) | (ours.isnan() & theirs.isnan())
    diff = torch.where(same, torch.zeros_like(ours), (ours - theirs).abs())
    return float(torch.nan_to_num(diff, nan=float("inf")).max()) if diff.numel() else 0.0


print("\nThe check: every hand-derived gradient against loss.backward()")
differences = {"loss": abs(float(loss) - float(reference.detach()))}
for name, ours in grads.items():
    theirs = found[name].grad
    if H == 1 and theirs.dim() == 3:
        theirs = theirs[0]
    differences[name] = largest_difference(ours, theirs)
failed = []
for name, diff in differences.items():
    theirs = found[name].grad if name in found else reference.detach()
    finite = theirs[theirs.isfinite()]
    largest = float(finite.abs().max()) if finite.numel() else 0.0
    ok = diff <= __TOLERANCE__ * max(1.0, largest)
    failed += [] if ok else [name]
    print("__CHECK_LINE__".format(name=name, diff=diff, verdict="ok" if ok else "DIFFERENT"))
if args.save:
    torch.save({"steps": steps, "gradients": grads, "loss": float(loss),
                "differences": differences}, args.save)
    print(f"\nsaved the steps, {len(grads)} gradients and the check to {args.save}")
if failed:
    raise SystemExit(f"these gradients differ from autograd: {', '.join(failed)}")
