"""Graded tests, chapter 7: generated CUDA kernels, run on Numba's simulator (tiny shapes).

A fused chain gives eager's answer on strided and broadcast inputs, and the
chapter 4 traffic counter sees it read each input element once and write each
output element once, where eager writes one array per op.
"""

from __future__ import annotations

import numpy as np

import minitorch
from autograder.harness import assert_close, check, graded
from minitorch.cuda.traffic import count_traffic

from ..ch4.util import rerun_on_simulator

FUSE = minitorch.CompileOptions(fuse=True)


def chain(x, y):
    return ((x * y + 1.0).relu() - y / 3.0) * 0.5 - x


def flipped_chain(x, y):
    return minitorch.dispatch("maximum", x - 2.0 * y, y.abs()) + 0.25


@graded("7.7", points=2)
def test_cuda_fused_chain_reads_each_input_once(request):
    if rerun_on_simulator(request) is not None:
        return
    rng = np.random.default_rng(0)
    for fn, (xs, ys) in [(chain, ((7, 5), (5,))), (flipped_chain, ((4, 6), (4, 6)))]:
        xn, yn = rng.standard_normal(xs[::-1]).T, rng.standard_normal(ys)
        x = minitorch.tensor(np.ascontiguousarray(xn.T)).to("cuda").T  # a transposed view
        y = minitorch.tensor(yn).to("cuda")
        want = fn(minitorch.tensor(xn), minitorch.tensor(yn)).numpy()
        compiled = minitorch.jit(fn, options=FUSE)
        compiled(x, y)  # trace, compile, launch once
        with count_traffic() as traffic:
            out = compiled(x, y)
        assert_close(out.numpy(), want, "7.7", fn=fn.__name__)
        size = out.numpy().size
        check(
            traffic.reads(x) == x.numpy().size * (size // x.numpy().size)
            and traffic.max_reads_per_element(x) == size // x.numpy().size,
            "7.7",
            "the fused kernel reads each input element once per output element that needs it",
            value=(traffic.reads(x), traffic.max_reads_per_element(x)),
            reads=traffic.reads(x),
        )
        check(traffic.writes(out) == size, "7.7", "write each output element once",
              value=traffic.writes(out), writes=traffic.writes(out))  # fmt: skip
        check(traffic.summary()["global_writes"] < 2 * size, "7.7",
              "one kernel, one output: no intermediate array (eager writes one per op)", summary=traffic.summary())  # fmt: skip
