"""The language model's own code, written by the learner (exercises 11.8-11.10).

``model.py`` holds the parameters (modules) and calls these: the fused q/k/v
projection into heads (11.8), the model's forward (11.9) and the language-model
loss (11.10). ``merge_heads`` is given: it is the layout 11.8 must produce, read
backwards.
"""

from __future__ import annotations

from ..core import creation  # noqa: F401  (the exercises use arange, where)
from ..core.errors import OpError  # noqa: F401  (what the exercises raise)
from ..core.registry import dispatch  # noqa: F401  (index_check, logsumexp)
from ..core.tensor import Tensor
from ..exercises import exercise
from .attention import attention  # noqa: F401  (the block's attention, exercise 11.3)


def merge_heads(o: Tensor, w_o: Tensor, b_o: Tensor) -> Tensor:
    """Heads ``(B, H, T, D)`` back to the width: ``(B, 1, T, H*D) @ w_o + b_o``, feature
    ``j*D + d`` being head ``j``'s feature ``d`` (the order ``project_qkv`` splits in)."""
    b, heads, t, d = o.shape
    return o.permute(0, 2, 1, 3).reshape(b, 1, t, heads * d) @ w_o + b_o


@exercise("11.8")
def project_qkv(h: Tensor, w_qkv: Tensor, heads: int) -> tuple[Tensor, Tensor, Tensor]:
    """Queries, keys and values of every head from ONE matmul ``h @ w_qkv``.

    ``h`` is ``(B, 1, T, C)`` and ``w_qkv`` is ``(C, 3*E)`` with ``E = heads * D``:
    its columns are ``[q | k | v]``, each part head-major (column ``s*E + j*D + d``
    is part ``s``'s head ``j``, feature ``d``). Returns ``(q, k, v)``, each
    ``(B, heads, T, D)`` of ``h``'s dtype, so that ``q[b, j, t, d]`` equals
    ``(h @ w_qkv)[b, 0, t, j*D + d]`` (``k`` and ``v`` likewise from columns ``E + ...``
    and ``2*E + ...``). Every result equals the per-head computation
    ``h @ w_qkv[:, s*E + j*D : s*E + (j+1)*D]`` within float rounding, yet the
    traced program holds only one ``matmul``, and it keeps ``B`` and ``T`` free:
    under ``mark_dynamic`` one trace serves every batch size and length.

    Raise ``OpError("project_qkv", problem, hint)`` naming the argument when ``h``
    is not 4-D with a 1 in dim 1, when ``w_qkv``'s rows are not ``h``'s width ``C``,
    when its columns are not a multiple of ``3 * heads``, or when ``heads < 1``.

    Hints:
        1. Draw the columns of one row of ``h @ w_qkv`` as ``3 * heads`` blocks of ``D``.
           Which view of the row makes block number the outer index?
        2. A view that needs ``B`` and ``T`` can take them from ``h.shape``: chapter 9
           turns a size that follows an input's dim into a template.
        3. After the view, the blocks must sit before time: which dims trade places?
           Then the three parts are slices of the block dim, no copy needed.

    Example:
        >>> h = minitorch.tensor(np.ones((2, 1, 5, 8), np.float32))
        >>> q, k, v = project_qkv(h, minitorch.tensor(np.ones((8, 24), np.float32)), 2)
        >>> q.shape
        (2, 2, 5, 4)
    """
    raise NotImplementedError("Exercise 11.8: project_qkv")


@exercise("11.9")
def gpt_forward(model, ids: Tensor, pos: Tensor) -> Tensor:
    """``TinyGPT``'s forward: token ids ``(B, 1, T)`` and positions ``(1, 1, T)`` (int64)
    to logits ``(B, 1, T, vocab)`` of the parameters' dtype.

    The parts are ``model``'s modules: ``model.tok(ids) + model.pos(pos)``; then for
    each block of ``model.blocks`` a pre-norm attention sub-block (``block.ln1``, then
    ``block.attn.project``, causal ``attention``, ``block.attn.merge``) added to its
    input, and a pre-norm MLP sub-block (``block.ln2``, ``block.mlp``) added to its
    input; then ``model.head`` (final norm, linear head). The logits must equal the
    reference's on the same parameters (float rounding aside), and a position's
    logits depend only on the tokens at or before it.

    Raise ``OpError("TinyGPT", problem, hint)`` naming ``ids`` when it is not
    ``(B, 1, T)``, naming ``pos`` when it is not ``(1, 1, T)`` with the same ``T``,
    and, through ``dispatch("index_check", pos, size=model.context, caller="TinyGPT",
    what="pos", hint=...)``, when a position is outside ``[0, model.context)`` (a
    check of values, not of ``T``: it keeps ``T`` dynamic).

    Hints:
        1. Which of a block's two sub-blocks sees the other's output?
        2. "Pre-norm": the norm sits on the branch, not on the residual stream.
           What does the stream carry past the last block that the head still needs?
    """
    raise NotImplementedError("Exercise 11.9: gpt_forward")


@exercise("11.10")
def lm_loss(logits: Tensor, targets: Tensor, mask: Tensor) -> Tensor:
    """Mean next-token cross-entropy over the positions where ``mask`` is 1 (padding is 0).

    ``logits`` is ``(..., V)``; ``targets`` (integer ids) and ``mask`` (0/1 of ``logits``'
    dtype) are ``logits.shape[:-1] + (1,)``. Returns a 0-d tensor equal to
    ``sum(mask * -log softmax(logits)[target]) / sum(mask)``: a masked position adds
    nothing, a position's loss stays finite when other tokens' logits are ``-inf``
    (as after top-k), and the loss has no size of ``B`` or ``T`` baked in (one trace
    serves every length under ``mark_dynamic``).

    Raise ``OpError("lm_loss", problem, hint)`` naming ``targets`` or ``mask`` when its
    shape is not ``logits.shape[:-1] + (1,)`` and naming ``targets`` when it is not of
    an integer dtype; a target outside ``[0, V)`` raises through
    ``dispatch("index_check", targets, size=V, caller="lm_loss", what="targets", hint=...)``.

    Hints:
        1. ``log softmax = logits - logsumexp(logits)`` (the registry has ``logsumexp``).
        2. Picking one entry per row without a gather op: compare the targets with
           every token id at once. What does ``0 * -inf`` give, and which op avoids it?
    """
    raise NotImplementedError("Exercise 11.10: lm_loss")
