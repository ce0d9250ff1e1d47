"""Writes ``autograder/tests/ch12/bucket_suite.py``: the models exercise 12.8 is graded on,
frozen as numbers (each gradient's bytes and the time it is ready during the backward).

    .venv/bin/python -m tests.ch12_bucket_suite   # a few seconds: it traces three steps

Each model's SGD step is traced by the course's code in reference mode (chapter 9's
``CompiledStep``); the gradient of each parameter is the step's write to its ``.grad``. Its
ready time is the work of the backward up to and including the node that computes it (a
matmul or convolution m*n*k, another op its largest operand), at :data:`RATE` operations a
second: a frozen stand-in for a measured backward, the same on every machine.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "autograder" / "tests" / "ch12" / "bucket_suite.py"
RATE = 2e9  # operations a second: about one core of numpy on these shapes

# Networks scaled to each model, so that communication matters as it does for large models:
# (name, ranks, latency as a share of the backward, a whole-gradient ring's bandwidth term
# as a share of the backward)
LINKS = [("bandwidth", 4, 1e-3, 0.6), ("latency", 4, 2e-2, 0.1), ("balanced", 2, 5e-3, 0.3)]


def _models():
    import numpy as np

    import minitorch as mt
    from minitorch import nn
    from minitorch.fast.cnn import DigitsCNN, cross_entropy
    from minitorch.transformer.model import TinyGPT, lm_loss

    rng = np.random.default_rng(0)
    x = mt.tensor(rng.standard_normal((256, 64)).astype(np.float32))
    y = mt.tensor(rng.integers(0, 10, 256))
    m = nn.mlp([64, 256, 256, 256, 10], seed=0)
    yield "mlp", m, lambda m=m: nn.functional.cross_entropy(m(x), y)
    c = DigitsCNN(seed=0)
    xi = mt.tensor(rng.standard_normal((128, 1, 8, 8)).astype(np.float32))
    yi = mt.tensor(rng.integers(0, 10, 128))
    yield "cnn", c, lambda c=c: cross_entropy(c(xi), yi)
    g = TinyGPT(40, context=32, width=64, heads=4, layers=2, seed=0)
    ids = mt.tensor(rng.integers(0, 40, (8, 1, 32)))
    pos = mt.tensor(np.arange(32).reshape(1, 1, 32))
    tgt = mt.tensor(rng.integers(0, 40, (8, 1, 32, 1)))
    mask = mt.ones((8, 1, 32, 1))
    yield "tinygpt", g, lambda g=g: lm_loss(g(ids, pos), tgt, mask)


def _work(n) -> int:
    from minitorch.core.registry import OPS, OpKind

    op = OPS.get(n.op)
    if n.op in ("input", "const") or (op is not None and op.kind is OpKind.VIEW):
        return 0
    if n.op == "matmul":
        return n.spec.size * n.inputs[0].spec.shape[-1]
    if n.op.startswith("conv"):
        w = n.inputs[1].spec.shape
        return n.spec.size * (w[1] * w[2] * w[3] if len(w) == 4 else 1)
    return max([n.spec.size] + [i.spec.size for i in n.inputs])


def gradients(model, loss):
    """[(bytes, ready seconds)] of ``model``'s gradients, in the order they are ready."""
    from minitorch import nn
    from minitorch.compile.remat import split_step
    from minitorch.compile.step import CompiledStep
    from minitorch.passes.options import CompileOptions

    opt = nn.SGD(model, lr=0.1)

    def step():
        opt.zero_grad()
        out = loss()
        out.backward()
        opt.step()
        return out

    s = CompiledStep(step, CompileOptions())
    s()
    entry = list(s.entries.values())[-1]
    graph, start = split_step(entry)
    outs = graph.outputs
    done = 0.0
    at = {n: i for i, n in enumerate(graph.nodes)}
    clock = []
    for n in graph.nodes:
        if at[n] >= start:
            done += _work(n)
        clock.append(done)
    grads = []
    for (kind, _, _), j in entry.writes:
        if kind == "grad" and j is not None:
            node = outs[j]
            grads.append((node.spec.size * node.spec.dtype.itemsize, clock[at[node]] / RATE,
                          at[node]))  # fmt: skip
    grads.sort(key=lambda g: (g[1], g[2]))
    return [(b, t) for b, t, _ in grads]


def main() -> None:
    from minitorch.distributed.cost import LinkModel, choose_buckets, step_time

    rows = []
    for name, model, loss in _models():
        grads = gradients(model, loss)
        sizes = [b for b, _ in grads]
        times = [float(f"{t:.6g}") for _, t in grads]
        backward, total = times[-1], sum(sizes)
        for link, p, lat, share in LINKS:
            latency = float(f"{lat * backward:.3g}")
            bandwidth = float(f"{2 * (p - 1) / p * total / (share * backward):.3g}")
            model = LinkModel(p, latency, bandwidth)
            best = step_time(choose_buckets(sizes, times, model), sizes, times, model)
            rows.append(f"    {name + '_' + link!r}: {{\n        \"sizes\": {sizes},\n"
                        f"        \"ready\": {times},\n        \"p\": {p}, \"latency\": "
                        f"{latency!r}, \"bandwidth\": {bandwidth!r},\n        \"reference\": "
                        f"{best!r},\n    }},")  # fmt: skip
    OUT.write_text(HEADER + "SUITE = {\n" + "\n".join(rows) + "\n}\n")
    ruff = Path(sys.executable).parent / "ruff"  # the repository's style, as `make format`
    subprocess.run([str(ruff), "format", "-q", str(OUT)], check=True)
    print(f"wrote {OUT}")


HEADER = '''"""The models exercise 12.8 is graded on, frozen: ``{name: case}``.

Written by ``python -m tests.ch12_bucket_suite`` (do not edit). ``sizes`` are the bytes of
each gradient in the order the backward makes them ready, ``ready`` the seconds since the
backward started when each one is ready (the last one ends the backward); ``p``, ``latency``
(seconds a message) and ``bandwidth`` (bytes a second) describe the ring the buckets are
reduced on. Three models of the course (an MLP, chapter 9's digits CNN, chapter 11's TinyGPT),
each on three networks scaled to its backward: bandwidth-bound (4 ranks), latency-bound
(4 ranks) and balanced (2 ranks). ``reference`` is the step time of the reference's buckets
(``step_time``, a ring), the figure the tiers are set against.
"""

'''

if __name__ == "__main__":
    if os.environ.get("MINITORCH_MODE") != "reference":  # trace with the course's code
        env = dict(os.environ, MINITORCH_MODE="reference")
        sys.exit(subprocess.call([sys.executable, "-m", "tests.ch12_bucket_suite"], env=env))
    main()
