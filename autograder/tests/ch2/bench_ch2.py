"""Chapter 2 benchmarks: backward costs a small multiple of forward; toposort is linear."""

import numpy as np
from threadpoolctl import threadpool_limits

import minitorch
from autograder.harness import benchmark, measure
from minitorch.autograd import tape_bytes, toposort
from minitorch.nn import functional as F
from minitorch.nn import mlp


@benchmark("2.8", points=2, metric="backward_over_forward", higher_is_better=False,
           bands=[(5.0, 1.0), (10.0, 0.5), (20.0, 0.25)])
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

    # One BLAS thread: on a busy 2-core machine threaded BLAS only adds noise.
    with threadpool_limits(limits=1):
        fwd = measure(forward, repeat=9)
        both = measure(forward_backward, repeat=9)
    loss = forward()
    params = sum(p.size * p.dtype.itemsize for p in model.parameters())
    report(
        backward_over_forward=max(both - fwd, 0.0) / fwd,
        forward_ms=fwd * 1e3,
        backward_ms=max(both - fwd, 0.0) * 1e3,
        tape_kib=tape_bytes(loss) / 1024,
        parameter_kib=params / 1024,
    )


def _chain(n):
    x = minitorch.tensor([1.0], requires_grad=True)
    y = x
    for _ in range(n):
        y = y + x
    return y


@benchmark("2.7", points=1, metric="per_node_growth", higher_is_better=False,
           bands=[(2.0, 1.0), (4.0, 0.5)])
def bench_toposort_is_linear(report):
    small, big = _chain(500), _chain(4000)
    t_small = measure(lambda: toposort(small), repeat=5)
    t_big = measure(lambda: toposort(big), repeat=5)
    # Per-node time of the big graph over the small one: ~1 when linear, ~8 when quadratic.
    report(per_node_growth=(t_big / 4000) / (t_small / 500), us_per_node=t_big / 4000 * 1e6)
