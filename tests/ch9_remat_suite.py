"""Writes ``autograder/tests/ch9/remat_suite.py``: the training-step graphs exercise 9.11 is
graded on, frozen as literal nodes so that grading runs none of the learner's code but the
function under test (tracing a step runs the learner's 9.2-9.4 in a learner's process).

    .venv/bin/python -m tests.ch9_remat_suite   # a few seconds: it traces eight steps

Each step is traced by the course's code in reference mode (``CompiledStep`` with the plain
passes-only options; only the traced graph is kept) from a fixed seed. The batches are large
next to the layers (512 rows, widths 64), as in real training, where the saved activations,
not the parameters, make the peak.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parent.parent / "autograder" / "tests" / "ch9" / "remat_suite.py"


def _models():
    import minitorch as mt
    from minitorch import nn
    from minitorch.nn import functional as F

    class Gelu(nn.Module):  # the sigmoid approximation: a chain of cheap ops
        def forward(self, x):
            return x * F.sigmoid(x * 1.702)

    class Norm(nn.Module):  # layer norm without its affine part, written with primitives
        def forward(self, x):
            m = x.mean(axis=-1, keepdims=True)
            d = x - m
            v = (d * d).mean(axis=-1, keepdims=True)
            return d / (v + 1e-5).sqrt()

    class Glu(nn.Module):
        def __init__(self, n, m, seed):
            super().__init__()
            self.a = nn.Linear(n, m, seed=seed)
            self.g = nn.Linear(n, m, seed=seed + 7)

        def forward(self, x):
            return self.a(x) * F.sigmoid(self.g(x))

    class Attn(nn.Module):  # one head over the batch's rows, softmax written out
        def __init__(self, d, seed):
            super().__init__()
            self.q = nn.Linear(d, d, seed=seed)
            self.k = nn.Linear(d, d, seed=seed + 1)
            self.v = nn.Linear(d, d, seed=seed + 2)
            self.d = d

        def forward(self, x):
            q, k, v = self.q(x), self.k(x), self.v(x)
            s = q @ k.permute(1, 0) * (1.0 / self.d**0.5)
            e = (s - s.max(axis=-1, keepdims=True).detach()).exp()
            return (e / e.sum(axis=-1, keepdims=True)) @ v

    def data(batch, features, classes, seed=0):
        rng = np.random.default_rng(seed)
        x = mt.tensor(rng.standard_normal((batch, features)).astype(np.float32))
        return x, mt.tensor(rng.integers(0, classes, batch))

    L, S = nn.Linear, nn.Sequential
    x, y = data(512, 16, 10)
    xa, ya = data(128, 16, 10, seed=3)
    xr = data(512, 16, 10, seed=1)[0]
    yr = mt.tensor(np.random.default_rng(2).standard_normal((512, 4)).astype(np.float32))
    ce, mse = F.cross_entropy, F.mse_loss
    sgd = lambda m: nn.SGD(m, lr=0.1)  # noqa: E731
    momentum = lambda m: nn.SGD(m, lr=0.1, momentum=0.9)  # noqa: E731
    m = nn.mlp([16, 64, 64, 10], seed=0)
    yield "mlp_relu", m, momentum(m), ce, x, y
    m = S(L(16, 64, seed=1), nn.Tanh(), L(64, 64, seed=2), nn.Tanh(), L(64, 10, seed=3))
    yield "mlp_tanh", m, sgd(m), ce, x, y
    m = S(L(16, 64, seed=1), Gelu(), L(64, 64, seed=2), Gelu(), L(64, 10, seed=3))
    yield "mlp_gelu", m, momentum(m), ce, x, y
    m = S(
        L(16, 64, seed=1),
        Norm(),
        nn.ReLU(),
        L(64, 64, seed=2),
        Norm(),
        nn.ReLU(),
        L(64, 10, seed=3),
    )
    yield "mlp_norm", m, sgd(m), ce, x, y
    m = S(Glu(16, 64, 1), Glu(64, 64, 3), L(64, 10, seed=5))
    yield "glu", m, sgd(m), ce, x, y
    m = S(L(16, 32, seed=1), Attn(32, 2), nn.ReLU(), L(32, 10, seed=6))
    yield "attention", m, sgd(m), ce, xa, ya
    m = nn.mlp([16, 64, 64, 64, 10], seed=3)
    yield "mlp_adam", m, nn.Adam(m, lr=0.01), ce, x, y
    m = S(L(16, 64, seed=1), nn.Sigmoid(), L(64, 64, seed=2), nn.Sigmoid(), L(64, 4, seed=3))
    yield "regression", m, sgd(m), mse, xr, yr


def trace(model, opt, loss_fn, x, y):
    """The traced step graph of one SGD/Adam step of ``model`` and where its backward starts."""
    from minitorch.compile.remat import split_step
    from minitorch.compile.step import CompiledStep
    from minitorch.passes.options import CompileOptions

    def step(x, y):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

    s = CompiledStep(step, CompileOptions())
    s(x, y)
    return split_step(list(s.entries.values())[-1])


def _attr(v):
    if isinstance(v, np.dtype):
        return f"D[{str(v)!r}]"
    return repr(v)


def frozen(graph, backward_start: int) -> str:
    """One program as literal rows: ``(op, [input rows], {attrs}, shape, dtype, value)``."""
    index = {n: i for i, n in enumerate(graph.nodes)}
    rows = []
    for n in graph.nodes:
        value = None
        if n.op == "const":
            a = n.value.numpy()
            value = a.tolist() if a.size <= 64 else None  # a big constant: filled with 0.5
        attrs = "{" + ", ".join(f"{k!r}: {_attr(v)}" for k, v in n.attrs.items()) + "}"
        ins = [index[i] for i in n.inputs]
        rows.append(
            f"        ({n.op!r}, {ins}, {attrs}, {tuple(n.spec.shape)!r}, "
            f"{str(n.spec.dtype)!r}, {value!r}),"
        )
    outs = [index[o] for o in graph.outputs]
    return "\n".join(
        ["    {", f'        "backward_start": {backward_start},', '        "nodes": [']
        + rows
        + ["        ],", f'        "outputs": {outs},', "    },"]
    )


HEADER = '''"""The training steps exercise 9.11 is graded on, frozen: ``{name: program}``.

Written by ``python -m tests.ch9_remat_suite`` (do not edit): each program is one SGD or Adam
step traced by the course's code, as rows ``(op, input rows, attrs, shape, dtype, value)`` in
program order; rows before ``backward_start`` are the forward. :func:`build` makes a Graph.
"""

from __future__ import annotations

import numpy as np

import minitorch
from minitorch.core.dtypes import DTYPES as D
from minitorch.tracing.graph import Graph


def build(name: str, values: bool = False):
    """``(graph, backward_start)`` for program ``name`` of :data:`SUITE`.

    Constants carry no tensor unless ``values`` (making one runs the learner's chapter 1 in a
    learner's process; the graded tests only read specs): then the graph can run."""
    prog = SUITE[name]
    g = Graph(name)
    nodes = []
    for k, (op, ins, attrs, shape, dtype, value) in enumerate(prog["nodes"]):
        spec = minitorch.Spec(tuple(shape), D[dtype])
        if op == "input":
            nodes.append(g.add_input(spec, f"i{k}"))
        elif op == "const" and not values:
            nodes.append(g._new("const", [], {}, spec, prefix="c"))
        elif op == "const":
            a = np.full(shape, 0.5) if value is None else np.array(value)
            nodes.append(g.add_const(minitorch.tensor(a.astype(D[dtype]))))
        else:
            nodes.append(g.add_node(op, [nodes[i] for i in ins], attrs, spec, ""))
    g.set_outputs([nodes[i] for i in prog["outputs"]])
    return g, prog["backward_start"]


SUITE = {
'''


def main() -> None:
    os.environ["MINITORCH_MODE"] = "reference"
    parts = [HEADER]
    for name, model, opt, loss_fn, x, y in _models():
        graph, k = trace(model, opt, loss_fn, x, y)
        parts.append(f"    {name!r}: " + frozen(graph, k)[4:] + "\n")
    parts.append("}\n")
    OUT.write_text("".join(parts))
    ruff = Path(sys.executable).parent / "ruff"  # the repository's style, as `make format`
    subprocess.run([str(ruff), "format", "-q", str(OUT)], check=True)
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
