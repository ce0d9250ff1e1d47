"""Reference solutions, Chapter 11, the model (11.8-11.10). Same names and signatures as the stubs."""

from __future__ import annotations

import numpy as np

from minitorch.core import creation
from minitorch.core.errors import OpError
from minitorch.core.registry import dispatch
from minitorch.transformer.attention import attention

__all__ = ["gpt_forward", "lm_loss", "project_qkv"]

# ---------------------------------------------------------------- 11.8


def project_qkv(h, w_qkv, heads):
    if h.ndim != 4 or h.shape[1] != 1:
        raise OpError("project_qkv", f"h has shape {h.shape}", hint="h is (B, 1, T, C)")
    if heads < 1:
        raise OpError("project_qkv", f"heads is {heads}", hint="at least one head")
    if w_qkv.ndim != 2 or w_qkv.shape[0] != h.shape[-1] or w_qkv.shape[1] % (3 * heads):
        raise OpError(
            "project_qkv",
            f"w_qkv has shape {w_qkv.shape} for h of width {h.shape[-1]} and {heads} heads",
            hint=f"w_qkv is ({h.shape[-1]}, 3 * heads * D): q, k, v side by side",
        )
    b, _, t, _ = h.shape
    d = w_qkv.shape[1] // (3 * heads)
    # (B, 1, T, 3E) viewed as (B, T, 3H, D), blocks before time: q, k, v are slices
    y = (h @ w_qkv).reshape(b, t, 3 * heads, d).permute(0, 2, 1, 3)
    return y[:, :heads], y[:, heads : 2 * heads], y[:, 2 * heads :]


# ---------------------------------------------------------------- 11.9


def gpt_forward(model, ids, pos):
    if ids.ndim != 3 or ids.shape[1] != 1:
        raise OpError("TinyGPT", f"ids has shape {ids.shape}", hint="ids is (B, 1, T)")
    if pos.ndim != 3 or pos.shape[:2] != (1, 1) or pos.shape[2] != ids.shape[2]:
        raise OpError(
            "TinyGPT",
            f"pos has shape {pos.shape} for ids {ids.shape}",
            hint=f"pos is (1, 1, {ids.shape[2]}): one position per token",
        )
    pos = dispatch("index_check", pos, size=model.context, caller="TinyGPT", what="pos",
                   hint=f"the context holds {model.context} positions, so a sequence is at "
                   f"most {model.context} tokens: feed the last {model.context}")  # fmt: skip
    x = model.tok(ids) + model.pos(pos)
    for block in model.blocks:
        q, k, v = block.attn.project(block.ln1(x))
        x = x + block.attn.merge(attention(q, k, v, causal=True))
        x = x + block.mlp(block.ln2(x))
    return model.head(x)


# ---------------------------------------------------------------- 11.10


def lm_loss(logits, targets, mask):
    want = tuple(logits.shape[:-1]) + (1,)
    for name, t in (("targets", targets), ("mask", mask)):
        if tuple(t.shape) != want:
            raise OpError(
                "lm_loss",
                f"{name} has shape {t.shape} for logits {logits.shape}",
                hint=f"{name} is logits.shape[:-1] + (1,) = {want}",
            )
    if not np.issubdtype(np.dtype(targets.dtype), np.integer):
        raise OpError(
            "lm_loss", f"targets has dtype {np.dtype(targets.dtype).name}", hint="token ids: int64"
        )
    vocab = logits.shape[-1]
    targets = dispatch("index_check", targets, size=vocab, caller="lm_loss", what="targets",
                       hint=f"targets are token ids of the {vocab}-token vocabulary")  # fmt: skip
    logp = logits - dispatch("logsumexp", logits, axis=-1, keepdims=True)
    # a one-hot pick by where: 0 * -inf would be NaN for a token with logit -inf
    hit = targets == creation.arange(vocab, device=logits.device)
    nll = -creation.where(hit, logp, 0.0).sum(axis=-1, keepdims=True)
    return (nll * mask).sum() / mask.sum()
