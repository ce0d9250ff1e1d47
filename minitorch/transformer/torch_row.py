"""TinyGPT's rows of ``python -m minitorch.compile.vs_torch``: minitorch against a PyTorch
transformer written the usual way (``nn.Linear`` with fused q/k/v, heads by ``view`` and
``transpose``, ``scaled_dot_product_attention``), with the same weights.

Two sizes: the book's (width 64, 2 layers, 4 heads) and width 128 with 4 layers, each on
32 sequences of 64 tokens. The step is an Adam step of the masked next-token loss; the
"forward" column is greedy decoding of ``DECODE`` tokens with a key/value cache (minitorch's
fixed-size cache of ``decode_step``; PyTorch's grows by ``cat``, as is usual there).
PyTorch is imported only when its side runs.
"""

from __future__ import annotations

import time

import numpy as np

from ..compile.capstone import TORCH_ROWS
from ..core.tensor import Tensor, no_grad
from .data import make_batch
from .measure import make_step
from .model import TinyGPT, decode_step, empty_cache

SIZES = {
    "TinyGPT w64 L2 b32x64": dict(width=64, heads=4, layers=2),
    "TinyGPT w128 L4 b32x64": dict(width=128, heads=4, layers=4),
}
VOCAB, CONTEXT, BATCH, LR, DECODE = 60, 64, 32, 3e-3, 32


def _model(name):
    return TinyGPT(VOCAB, context=CONTEXT, seed=0, **SIZES[name])


def _batch():
    rng = np.random.default_rng(0)
    return make_batch([rng.integers(0, VOCAB, CONTEXT + 1) for _ in range(BATCH)], CONTEXT)


def _greedy_minitorch(model, step):
    cache = empty_cache(model)
    token = Tensor(np.zeros((1, 1, 1), np.int64))
    out = []
    for p in range(DECODE):
        logits, *cache = step(token, Tensor(np.full((1, 1, 1), p, np.int64)), *cache)
        token = Tensor(np.asarray(logits.numpy().argmax(-1), np.int64).reshape(1, 1, 1))
        out.append(int(token.item()))
    return out


def minitorch_sides(name: str) -> tuple[dict, dict, dict]:
    import minitorch

    from ..compile.vs_torch import BEST_OF
    from ..nn.optim import Adam

    batch = _batch()
    steps, forwards, extra = {}, {}, {}
    for label in ("eager", *BEST_OF):
        model = _model(name)
        step = make_step(model, Adam(model, lr=LR))

        def dstep(token, pos, *cache, model=model):
            return decode_step(model, token, pos, *cache)

        if label == "eager":
            extra["first loss"] = float(step(*batch).item())
            steps[label] = lambda s=step: s(*batch)
        else:
            f = minitorch.compile(step, mode=label)
            t0 = time.perf_counter()
            f(*batch)
            extra[f"{label} first call s"] = time.perf_counter() - t0
            steps[label] = lambda f=f: f(*batch)
            dstep = minitorch.compile(dstep, mode=label)

        def greedy(model=model, dstep=dstep):
            with no_grad():
                return _greedy_minitorch(model, dstep)

        extra[f"{label} greedy"] = greedy()
        forwards[label] = greedy
    return steps, forwards, extra


class _TorchGPT:
    """Built on first use so that importing this module never imports torch."""

    @staticmethod
    def build(model: TinyGPT):
        import torch
        import torch.nn.functional as F
        from torch import nn

        class Block(nn.Module):
            def __init__(self, c, heads):
                super().__init__()
                self.heads = heads
                self.ln1, self.ln2 = nn.LayerNorm(c), nn.LayerNorm(c)
                self.qkv = nn.Linear(c, 3 * c, bias=False)
                self.proj = nn.Linear(c, c)
                self.fc, self.out = nn.Linear(c, 4 * c), nn.Linear(4 * c, c)

            def attend(self, x, past=None):
                b, t, c = x.shape
                q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
                q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2)
                           for z in (q, k, v))  # fmt: skip
                if past is not None:
                    k, v = torch.cat([past[0], k], 2), torch.cat([past[1], v], 2)
                o = F.scaled_dot_product_attention(q, k, v, is_causal=past is None)
                return self.proj(o.transpose(1, 2).reshape(b, t, c)), (k, v)

            def forward(self, x, past=None):
                a, kv = self.attend(x, past)
                x = x + a
                x = x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))
                return x, kv

        class GPT(nn.Module):
            def __init__(self):
                super().__init__()
                c = model.width
                self.tok = nn.Embedding(model.vocab, c)
                self.pos = nn.Embedding(model.context, c)
                self.blocks = nn.ModuleList(Block(c, model.heads) for _ in model.blocks)
                self.ln_f = nn.LayerNorm(c)
                self.head = nn.Linear(c, model.vocab)

            def forward(self, ids, start=0, past=None):
                pos = torch.arange(start, start + ids.shape[1])
                x = self.tok(ids) + self.pos(pos)
                cache = []
                for k, blk in enumerate(self.blocks):
                    x, kv = blk(x, None if past is None else past[k])
                    cache.append(kv)
                return self.head(self.ln_f(x)), cache

        net = GPT()
        pairs = [(net.tok.weight, model.tok.weight), (net.pos.weight, model.pos.weight),
                 (net.ln_f.weight, model.ln_f.weight), (net.ln_f.bias, model.ln_f.bias),
                 (net.head.weight, model.w_out.T), (net.head.bias, model.b_out)]  # fmt: skip
        for tb, mb in zip(net.blocks, model.blocks):
            pairs += [(tb.ln1.weight, mb.ln1.weight), (tb.ln1.bias, mb.ln1.bias),
                      (tb.ln2.weight, mb.ln2.weight), (tb.ln2.bias, mb.ln2.bias),
                      (tb.qkv.weight, mb.attn.w_qkv.T), (tb.proj.weight, mb.attn.wo.T),
                      (tb.proj.bias, mb.attn.bo), (tb.fc.weight, mb.mlp.w1.T),
                      (tb.fc.bias, mb.mlp.b1), (tb.out.weight, mb.mlp.w2.T),
                      (tb.out.bias, mb.mlp.b2)]  # fmt: skip
        with torch.no_grad():
            for tp, mp in pairs:
                tp.copy_(torch.from_numpy(np.ascontiguousarray(mp.numpy())))
        return net


def torch_sides(name: str, use_compile: bool) -> tuple[dict, dict]:
    import torch

    net = _TorchGPT.build(_model(name))
    ids, _, targets, mask = (torch.from_numpy(t.numpy()) for t in _batch())
    ids, targets, mask = ids[:, 0], targets[:, 0, :, 0], mask[:, 0, :, 0]
    opt = torch.optim.Adam(net.parameters(), lr=LR)

    def loss_fn():
        logits, _ = net(ids)
        nll = torch.nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten(),
                                                reduction="none")  # fmt: skip
        return (nll * mask.flatten()).sum() / mask.sum()

    def step():
        opt.zero_grad()
        loss = loss_fn()
        loss.backward()
        opt.step()
        return loss

    def greedy():
        with torch.no_grad():
            token, past, out = torch.zeros((1, 1), dtype=torch.long), None, []
            for p in range(DECODE):
                logits, past = net(token, p, past)
                token = logits[:, -1].argmax(-1, keepdim=True)
                out.append(int(token))
            return out

    first = float(step().detach())
    steps, forwards = {"torch eager": step}, {"torch eager": greedy}
    step.first_loss, step.greedy = first, greedy()
    if use_compile:
        cstep = torch.compile(step)
        cstep()
        steps["torch.compile"] = cstep  # decoding is a Python loop: no compiled twin
    return steps, forwards


for _name in SIZES:
    TORCH_ROWS[_name] = (minitorch_sides, torch_sides)
