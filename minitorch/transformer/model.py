"""A tiny decoder-only language model in ``minitorch.nn`` style, and its key/value-cache decode step.

Every activation has the layout ``(batch, 1, time, features)``: heads come
from broadcasting a ``(B, 1, T, C)`` activation against ``(H, C, D)`` weights
(``matmul`` broadcasts batch dims), and they merge by a matmul with ``(H, D, C)``
and a sum over the head dim. That is the usual split-and-concatenate, without a
single ``reshape``. A reshape stores its target shape, sizes included, as an
attribute; chapter 9's dynamic dims turn an entry that follows a symbol (``B`` and
``T`` in ``(B, T, H, D)``) into a template, so either form compiles once for every
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
    """Multi-head causal self-attention with per-head weights ``(H, C, D)``."""

    def __init__(self, width: int, heads: int, rng, layers: int):
        super().__init__()
        d = width // heads
        std = 1 / math.sqrt(width)
        self.wq, self.wk, self.wv = (_normal(rng, (heads, width, d), std) for _ in "qkv")
        self.wo = _normal(rng, (heads, d, width), 0.02 / math.sqrt(2 * layers))
        self.bo = Parameter(np.zeros(width, np.float32))

    def project(self, h: Tensor):
        return h @ self.wq, h @ self.wk, h @ self.wv  # (B, 1, T, C) @ (H, C, D) -> (B, H, T, D)

    def merge(self, o: Tensor) -> Tensor:
        return (o @ self.wo).sum(axis=1, keepdims=True) + self.bo  # (B, H, T, D) -> (B, 1, T, C)

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

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


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
        # A check of the values, not of T: a Python test of the length would keep T static
        # in compiled forwards, and a plan made for a dynamic T runs this step at every length.
        pos = dispatch("index_check", pos, size=self.context, caller="TinyGPT", what="pos",
                       hint=f"the context holds {self.context} positions, so a sequence is at "
                       f"most {self.context} tokens: feed the last {self.context}")  # fmt: skip
        x = self.tok(ids) + self.pos(pos)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def lm_loss(logits: Tensor, targets: Tensor, mask: Tensor) -> Tensor:
    """Mean next-token cross-entropy over the positions where ``mask`` is 1 (padding is 0).

    ``targets`` and ``mask`` are ``(B, 1, T, 1)``; the target's log-probability is
    picked by a one-hot comparison with ``arange(vocab)`` (a constant of the vocabulary's
    size, which never changes), so the loss has no size of ``B`` or ``T`` baked in.
    """
    vocab = logits.shape[-1]
    targets = dispatch("index_check", targets, size=vocab, caller="lm_loss", what="targets",
                       hint=f"targets are token ids of the {vocab}-token vocabulary")  # fmt: skip
    logp = logits - dispatch("logsumexp", logits, axis=-1, keepdims=True)
    onehot = (targets == creation.arange(vocab, device=logits.device)).astype(logits.dtype)
    nll = -(logp * onehot).sum(axis=-1, keepdims=True)
    return (nll * mask).sum() / mask.sum()


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
