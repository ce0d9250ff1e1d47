"""A tiny decoder-only language model in ``minitorch.nn`` style, and its key/value-cache decode step.

Activations have the layout ``(batch, 1, time, features)``. Attention projects with one
fused ``(C, 3C)`` weight (one large matmul instead of one small one per head and
per q/k/v) and views the result as ``(B, 3H, T, D)``: the heads are a batch dim
of the score matmuls. A reshape stores its target shape, sizes included, as an
attribute; chapter 9's dynamic dims turn an entry that follows a symbol (``B`` and
``T`` in ``(B, T, 3H, D)``) into a template, so the model compiles once for every
length. Positions are an input: ``arange(T)`` built inside the model would be a
constant of one size, and a constant keeps ``T`` static.
"""

from __future__ import annotations

import math

import numpy as np

from ..core import creation
from ..core.registry import dispatch
from ..core.tensor import Tensor
from ..nn.module import Module, Parameter, device_of
from .attention import attention
from .gpt import gpt_forward, lm_loss, merge_heads, project_qkv

__all__ = ["TinyGPT", "decode_step", "empty_cache", "lm_loss"]


def _normal(rng, shape, std) -> Parameter:
    return Parameter(rng.normal(0.0, std, shape).astype(np.float32))


class Embedding(Module):
    def __init__(self, num: int, dim: int, rng):
        super().__init__()
        self.weight = _normal(rng, (num, dim), 0.02)

    def forward(self, ids: Tensor) -> Tensor:
        return dispatch("embedding", self.weight, ids)


class LayerNorm(Module):
    def __init__(self, dim: int, eps: float = 1e-5):
        super().__init__()
        self.weight = Parameter(np.ones(dim, np.float32))
        self.bias = Parameter(np.zeros(dim, np.float32))
        self.eps = eps

    def forward(self, x: Tensor) -> Tensor:
        return dispatch("layer_norm", x, self.weight, self.bias, eps=self.eps)


class SelfAttention(Module):
    """Multi-head causal self-attention: a fused ``(C, 3C)`` projection (columns ``[q | k | v]``,
    each head-major) and a ``(C, C)`` projection back to the width."""

    def __init__(self, width: int, heads: int, rng, layers: int):
        super().__init__()
        self.heads = heads
        self.w_qkv = _normal(rng, (width, 3 * width), 1 / math.sqrt(width))
        self.wo = _normal(rng, (width, width), 0.02 / math.sqrt(2 * layers))
        self.bo = Parameter(np.zeros(width, np.float32))

    def project(self, h: Tensor):
        return project_qkv(h, self.w_qkv, self.heads)  # (B, 1, T, C) -> 3 x (B, H, T, D)

    def merge(self, o: Tensor) -> Tensor:
        return merge_heads(o, self.wo, self.bo)  # (B, H, T, D) -> (B, 1, T, C)

    def forward(self, h: Tensor) -> Tensor:
        return self.merge(attention(*self.project(h), causal=True))


class MLP(Module):
    def __init__(self, width: int, rng, layers: int):
        super().__init__()
        self.w1 = _normal(rng, (width, 4 * width), 1 / math.sqrt(width))
        self.b1 = Parameter(np.zeros(4 * width, np.float32))
        self.w2 = _normal(rng, (4 * width, width), 0.02 / math.sqrt(2 * layers))
        self.b2 = Parameter(np.zeros(width, np.float32))

    def forward(self, h: Tensor) -> Tensor:
        return dispatch("gelu", h @ self.w1 + self.b1) @ self.w2 + self.b2


class Block(Module):
    def __init__(self, width: int, heads: int, rng, layers: int):
        super().__init__()
        self.ln1, self.ln2 = LayerNorm(width), LayerNorm(width)
        self.attn = SelfAttention(width, heads, rng, layers)
        self.mlp = MLP(width, rng, layers)


class TinyGPT(Module):
    """``TinyGPT(vocab)(ids, pos)``: ids ``(B, 1, T)`` and positions ``(1, 1, T)`` (int64) to
    logits ``(B, 1, T, vocab)``."""

    def __init__(self, vocab: int, context=64, width=64, heads=4, layers=2, seed=0):
        super().__init__()
        rng = np.random.default_rng(seed)
        self.vocab, self.context, self.width, self.heads = vocab, context, width, heads
        self.tok = Embedding(vocab, width, rng)
        self.pos = Embedding(context, width, rng)
        self.blocks = [Block(width, heads, rng, layers) for _ in range(layers)]
        self.ln_f = LayerNorm(width)
        self.w_out = _normal(rng, (width, vocab), 1 / math.sqrt(width))
        self.b_out = Parameter(np.zeros(vocab, np.float32))

    def head(self, x: Tensor) -> Tensor:
        return self.ln_f(x) @ self.w_out + self.b_out

    def forward(self, ids: Tensor, pos: Tensor) -> Tensor:
        return gpt_forward(self, ids, pos)


# ---------------------------------------------------------------- generation with a cache


def empty_cache(model: TinyGPT, batch: int = 1) -> list[Tensor]:
    """Zeroed keys and values, ``(B, H, context, D)`` per layer: [K0, V0, K1, V1, ...]."""
    d = model.width // model.heads
    shape = (batch, model.heads, model.context, d)
    device = device_of(model)
    return [creation.zeros(*shape, device=device) for _ in range(2 * len(model.blocks))]


def decode_step(model: TinyGPT, token: Tensor, pos: Tensor, *cache: Tensor):
    """One token through the model with a key/value cache of fixed size (static shapes).

    ``token`` is ``(B, 1, 1)`` int64 and ``pos`` ``(1, 1, 1)`` int64, the position it
    takes. Each layer writes this token's key and value into slot ``pos`` of its
    cache (a ``where`` over the slots, so the shapes never change and the
    position is data, not a Python number: one trace serves every step) and
    attends over the slots ``<= pos``. Returns ``(logits (B, 1, 1, vocab), *new_cache)``.
    """
    slots = creation.arange(model.context, device=pos.device)
    write = slots.reshape(1, 1, model.context, 1) == pos
    seen = slots.reshape(1, 1, 1, model.context) <= pos
    x = model.tok(token) + model.pos(pos)
    new = []
    for block, kc, vc in zip(model.blocks, cache[0::2], cache[1::2]):
        q, k, v = block.attn.project(block.ln1(x))
        kc, vc = creation.where(write, k, kc), creation.where(write, v, vc)
        x = x + block.attn.merge(attention(q, kc, vc, causal=False, key_mask=seen))
        x = x + block.mlp(block.ln2(x))
        new += [kc, vc]
    return (model.head(x), *new)
