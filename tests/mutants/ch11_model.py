"""Known-wrong implementations of Chapter 11's model (11.8-11.10)."""

from __future__ import annotations

from minitorch.core import creation
from minitorch.core.errors import OpError
from minitorch.core.registry import dispatch
from minitorch.transformer.attention import attention
from solutions.reference import ch11_model as ref

from . import mutant

# ---------------------------------------------------------------- 11.8 project_qkv


@mutant("11.8", "the columns read as (heads, 3, D): q, k, v interleaved within each head")
def project_qkv_interleaved(h, w_qkv, heads):
    b, _, t, _ = h.shape
    d = w_qkv.shape[1] // (3 * heads)
    y = (h @ w_qkv).reshape(b, t, heads, 3, d).permute(3, 0, 2, 1, 4)
    return y[0], y[1], y[2]


@mutant("11.8", "viewed straight as (B, 3H, T, D): time and heads not swapped")
def project_qkv_no_permute(h, w_qkv, heads):
    b, _, t, _ = h.shape
    d = w_qkv.shape[1] // (3 * heads)
    y = (h @ w_qkv).reshape(b, 3 * heads, t, d)
    return y[:, :heads], y[:, heads : 2 * heads], y[:, 2 * heads :]


@mutant("11.8", "one matmul per part (q, k, v): right values, three matmuls")
def project_qkv_per_part(h, w_qkv, heads):
    b, _, t, _ = h.shape
    e = w_qkv.shape[1] // 3
    return tuple((h @ w_qkv[:, s * e : (s + 1) * e]).reshape(b, t, heads, e // heads)
                 .permute(0, 2, 1, 3) for s in range(3))  # fmt: skip


@mutant("11.8", "no check of w_qkv against heads: D rounds down")
def project_qkv_unchecked(h, w_qkv, heads):
    if heads < 1 or h.ndim != 4:
        return ref.project_qkv(h, w_qkv, heads)
    b, _, t, _ = h.shape
    d = w_qkv.shape[1] // (3 * heads)
    y = (h @ w_qkv)[..., : 3 * heads * d].reshape(b, t, 3 * heads, d).permute(0, 2, 1, 3)
    return y[:, :heads], y[:, heads : 2 * heads], y[:, 2 * heads :]


# ---------------------------------------------------------------- 11.9 gpt_forward


def _body(model, ids, pos, post_norm, causal, final_norm, checked):
    if checked:
        pos = dispatch("index_check", pos, size=model.context, caller="TinyGPT", what="pos",
                       hint="positions of the context")  # fmt: skip
    x = model.tok(ids) + model.pos(pos)
    for block in model.blocks:
        attn = block.attn
        if post_norm:
            x = block.ln1(x + attn.merge(attention(*attn.project(x), causal=causal)))
            x = block.ln2(x + block.mlp(x))
        else:
            x = x + attn.merge(attention(*attn.project(block.ln1(x)), causal=causal))
            x = x + block.mlp(block.ln2(x))
    return model.head(x) if final_norm else x @ model.w_out + model.b_out


def _shapes_ok(ids, pos):
    if ids.ndim != 3 or ids.shape[1] != 1:
        raise OpError("TinyGPT", f"ids has shape {ids.shape}", hint="ids is (B, 1, T)")
    if pos.ndim != 3 or pos.shape[2] != ids.shape[2]:
        raise OpError("TinyGPT", f"pos has shape {pos.shape}", hint="pos is (1, 1, T)")


@mutant("11.9", "post-norm: the norm on the residual stream after each sub-block")
def gpt_forward_post_norm(model, ids, pos):
    _shapes_ok(ids, pos)
    return _body(model, ids, pos, True, True, True, checked=True)


@mutant("11.9", "attention not causal: a position sees the tokens after it")
def gpt_forward_not_causal(model, ids, pos):
    _shapes_ok(ids, pos)
    return _body(model, ids, pos, False, False, True, checked=True)


@mutant("11.9", "no final layer norm before the head")
def gpt_forward_no_final_norm(model, ids, pos):
    _shapes_ok(ids, pos)
    return _body(model, ids, pos, False, True, False, checked=True)


@mutant("11.9", "positions not checked: the embedding's own error, not TinyGPT's")
def gpt_forward_unchecked(model, ids, pos):
    return _body(model, ids, pos, False, True, True, checked=False)


# ---------------------------------------------------------------- 11.10 lm_loss


def _nll(logits, targets, pick_by_mul=False):
    vocab = logits.shape[-1]
    logp = logits - dispatch("logsumexp", logits, axis=-1, keepdims=True)
    hit = targets == creation.arange(vocab, device=logits.device)
    if pick_by_mul:
        return -(logp * hit.astype(logits.dtype)).sum(axis=-1, keepdims=True)
    return -creation.where(hit, logp, 0.0).sum(axis=-1, keepdims=True)


@mutant("11.10", "the mean over every position: padding counted in the denominator")
def lm_loss_mean_over_all(logits, targets, mask):
    ref.lm_loss(logits, targets, mask)  # its checks
    return (_nll(logits, targets) * mask).mean()


@mutant("11.10", "the target picked by multiplying with a one-hot: 0 * -inf is NaN")
def lm_loss_onehot_product(logits, targets, mask):
    ref.lm_loss(logits, targets, mask)
    return (_nll(logits, targets, pick_by_mul=True) * mask).sum() / mask.sum()


@mutant("11.10", "shapes not checked: a (B, 1, T) target broadcasts into a (T, T) grid")
def lm_loss_unchecked(logits, targets, mask):
    vocab = logits.shape[-1]
    targets = dispatch("index_check", targets, size=vocab, caller="lm_loss", what="targets",
                       hint="token ids")  # fmt: skip
    return (_nll(logits, targets) * mask).sum() / mask.sum()


@mutant("11.10", "a sum over the masked positions, not a mean")
def lm_loss_sum(logits, targets, mask):
    ref.lm_loss(logits, targets, mask)
    return (_nll(logits, targets) * mask).sum()
