"""Shared helpers for the chapter 8 graded tests: buffers, random programs, the chapter's models."""

from __future__ import annotations

import copy

import numpy as np
from hypothesis import strategies as st

import minitorch
from minitorch import CompileOptions, Spec
from minitorch.memory import Buffer
from minitorch.tracing.tracer import trace_function

F32 = np.dtype("float32")
UNIT = 64  # the textbook example counts in 64-byte units, so alignment changes nothing

# Lives (start, end) and sizes in units of the textbook example: greedy-by-size meets
# the lower bound (124), first-fit in execution order needs 160, no reuse 234.
TEXTBOOK = [(0, 2, 17), (3, 5, 15), (5, 5, 24), (5, 8, 35), (1, 3, 34), (4, 4, 60), (1, 4, 49)]


def textbook() -> list:
    return [Buffer(k, n * UNIT, F32, a, b, [k]) for k, (a, b, n) in enumerate(TEXTBOOK)]


def fresh(buffers) -> list:
    return [copy.copy(b) for b in buffers]


@st.composite
def buffer_sets(draw, max_n: int = 12, max_step: int = 10):
    """Random buffers: lives in [0, max_step], sizes 0..700 bytes (not multiples of 64)."""
    n = draw(st.integers(0, max_n))
    out = []
    for k in range(n):
        a = draw(st.integers(0, max_step))
        b = draw(st.integers(a, max_step))
        out.append(Buffer(k + 1, draw(st.integers(0, 700)), F32, a, b, [k + 1]))
    return out


def overlaps(buffers) -> list:
    """The grader's own checker: live-overlapping buffers whose bytes overlap."""
    bad = []
    for i, a in enumerate(buffers):
        for b in buffers[i + 1 :]:
            if a.start <= b.end and b.start <= a.end and a.nbytes and b.nbytes:
                if a.offset < b.offset + b.nbytes and b.offset < a.offset + a.nbytes:
                    bad.append((a.slot, b.slot))
    return bad


# ---------------------------------------------------------------- random programs


UNARY = ["exp", "neg", "tanh", "relu", "sigmoid"]
BINARY = ["add", "sub", "mul", "maximum"]


@st.composite
def programs(draw, max_len: int = 9):
    """(n, inputs, steps, outputs): straight-line code over (n, n) float32 values that reuses
    values, transposes them (real views with another layout) and returns inputs and views."""
    n = draw(st.integers(2, 4))
    n_in = draw(st.integers(1, 3))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    inputs = [rng.standard_normal((n, n)).astype(np.float32) for _ in range(n_in)]
    steps, count = [], n_in
    for _ in range(draw(st.integers(1, max_len))):
        kind = draw(st.sampled_from(["unary", "binary", "binary", "view", "matmul", "reduce"]))
        i, j = draw(st.integers(0, count - 1)), draw(st.integers(0, count - 1))
        name = {
            "unary": st.sampled_from(UNARY),
            "binary": st.sampled_from(BINARY),
            "view": st.sampled_from(["T", "reshape"]),
        }.get(kind, st.just(kind))
        steps.append((kind, draw(name), i, j))
        count += 1
    outs = draw(st.lists(st.integers(0, count - 1), min_size=1, max_size=3))
    return n, inputs, steps, outs


def run_program(steps, outs, *xs):
    vals = list(xs)
    for kind, name, i, j in steps:
        a, b = vals[i], vals[j]
        if kind == "unary":
            r = minitorch.dispatch(name, a)
        elif kind == "binary":
            r = minitorch.dispatch(name, a, b)
        elif kind == "view":
            r = a.T if name == "T" else a.reshape(-1).reshape(a.shape)
        elif kind == "matmul":
            r = a @ b
        else:
            r = a.sum(axis=0, keepdims=True) + b
        vals.append(r)
    return tuple(vals[k] for k in outs)


def compile_program(prog, memory=True, inplace=True, keep=False):
    n, inputs, steps, outs = prog
    specs = [Spec((n, n), F32)] * len(inputs)
    g = trace_function(lambda *xs: run_program(steps, outs, *xs), specs, name="prog")
    mode = "reduce-overhead" if keep else "default"
    opts = CompileOptions(memory=memory, inplace=inplace, mode=mode)
    return g.compile(passes=[], options=opts)


def as_list(result) -> list:
    return [r.numpy() for r in (result if isinstance(result, (tuple, list)) else [result])]


# ---------------------------------------------------------------- the chapter's models


def _params(rng, *shapes):
    return [minitorch.tensor((rng.standard_normal(s) * 0.1).astype(np.float32)) for s in shapes]


def gelu(h):
    """GPT-2's GELU (tanh approximation), written as a formula: eager makes a temporary per op."""
    return 0.5 * h * (1.0 + (0.7978845608 * (h + 0.044715 * h * h * h)).tanh())


def mlp_model(batch=64, width=256, depth=3, seed=0):
    """An MLP with GELU activations: matmul, bias, GELU, three layers and a linear head."""
    rng = np.random.default_rng(seed)
    ws = _params(rng, (64, width), *[(width, width)] * (depth - 1), (width, 10))
    bs = _params(rng, *[(width,)] * depth, (10,))

    def mlp(x):
        h = x
        for w, b in zip(ws[:-1], bs[:-1]):
            h = gelu(h @ w + b)
        return h @ ws[-1] + bs[-1]

    x = (rng.standard_normal((batch, 64))).astype(np.float32)
    return mlp, [minitorch.tensor(x)], ws + bs


def cnn_model(batch=16, channels=8, size=16, seed=0):
    """conv, bias, GELU, conv, bias, GELU, max-pool, linear (ConvNeXt-style activations)."""
    rng = np.random.default_rng(seed)
    w1, w2 = _params(rng, (channels, 3, 3, 3), (channels, channels, 3, 3))
    b1, b2 = _params(rng, (channels, 1, 1), (channels, 1, 1))
    (wl,) = _params(rng, (channels * (size // 2) ** 2, 10))

    def cnn(x):
        h = gelu(minitorch.dispatch("conv2d", x, w1, stride=1, padding=1) + b1)
        h = gelu(minitorch.dispatch("conv2d", h, w2, stride=1, padding=1) + b2)
        h = minitorch.dispatch("max_pool2d", h, kernel_size=2, stride=2)
        return h.reshape((h.shape[0], -1)) @ wl

    x = rng.standard_normal((batch, 3, size, size)).astype(np.float32)
    return cnn, [minitorch.tensor(x)], [w1, w2, b1, b2, wl]


def attention_model(batch=4, seq=32, dim=32, seed=0):
    """One self-attention block with a residual and an MLP."""
    rng = np.random.default_rng(seed)
    wq, wk, wv, wo, w1, w2 = _params(
        rng, (dim, dim), (dim, dim), (dim, dim), (dim, dim), (dim, 4 * dim), (4 * dim, dim)
    )
    scale = 1.0 / float(np.sqrt(dim))

    def attention(x):
        q, k, v = x @ wq, x @ wk, x @ wv
        s = (q @ k.permute((0, 2, 1))) * scale
        s = s - s.max(axis=-1, keepdims=True)
        p = s.exp()
        p = p / p.sum(axis=-1, keepdims=True)
        h = x + (p @ v) @ wo
        return h + (h @ w1).relu() @ w2

    x = rng.standard_normal((batch, seq, dim)).astype(np.float32)
    return attention, [minitorch.tensor(x)], [wq, wk, wv, wo, w1, w2]


MODELS = {"mlp": mlp_model, "cnn": cnn_model, "attention": attention_model}


def compiled_model(name, memory=True, **kw):
    fn, inputs, _ = MODELS[name](**kw)
    g = trace_function(fn, [x.spec for x in inputs], name=name)
    return fn, inputs, g.compile(options=CompileOptions(memory=memory))
