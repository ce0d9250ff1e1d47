"""Chapter 2 benchmark: backward costs a small multiple of forward, and what the tape holds."""

import statistics

import numpy as np
from threadpoolctl import threadpool_limits

import minitorch
from autograder.harness import benchmark, measure
from minitorch.autograd import tape_bytes
from minitorch.nn import functional as F
from minitorch.nn import mlp


@benchmark(
    "2.8",
    points=2,
    metric="backward_over_forward",
    higher_is_better=False,
    bands=[(8.0, 1.0), (16.0, 0.5), (32.0, 0.25)],
)
def bench_backward_over_forward(report):
    model = mlp([64, 128, 128, 10], seed=0)
    rng = np.random.default_rng(0)
    x = minitorch.tensor(rng.random((64, 64)), dtype="float32")
    y = minitorch.tensor(rng.integers(0, 10, 64))

    def forward():
        return F.cross_entropy(model(x), y)

    def forward_backward():
        model.zero_grad()
        forward().backward()

    # One BLAS thread: on a busy 2-core machine threaded BLAS only adds noise. Forward and
    # forward+backward are timed in alternation and the median ratio kept, so a burst of
    # load on the machine hits both sides of the ratio.
    ratios, fwds, bwds = [], [], []
    with threadpool_limits(limits=1):
        for _ in range(5):
            fwd = measure(forward, repeat=3)
            bwd = max(measure(forward_backward, repeat=3) - fwd, 0.0)
            ratios.append(bwd / fwd)
            fwds.append(fwd)
            bwds.append(bwd)
    loss = forward()
    params = sum(p.size * p.dtype.itemsize for p in model.parameters())
    report(
        backward_over_forward=statistics.median(ratios),
        forward_ms=statistics.median(fwds) * 1e3,
        backward_ms=statistics.median(bwds) * 1e3,
        tape_kib=tape_bytes(loss) / 1024,
        parameter_kib=params / 1024,
    )
