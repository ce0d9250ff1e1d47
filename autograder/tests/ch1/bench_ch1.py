"""Chapter 1 benchmarks: views cost nothing, and the contiguous fast path pays.

Both time the learner's code against grader-owned baselines (numpy,
``autograder.baselines``: chapter 1's general path in plain Python), run on
the course's own code (``baseline=``): a slow ``contiguous`` or ``tensor_map``
cannot raise a score. The parent times both in interleaved rounds of CPU time
and compares what each timed call returned with the course's own result.
"""

import numpy as np

import minitorch as mt
from autograder.baselines import general_map
from autograder.harness import assert_close, benchmark, check, compare, perturb
from minitorch.tensor import loops
from minitorch.tensor.data import TensorData


@benchmark(
    "1.6",
    points=2,
    metric="copy_over_view",
    bands=[(20, 1.0), (5, 0.5)],
    formula="copy / view",
    baseline=("copy",),
)
def bench_view_is_free(report):
    xn = np.random.default_rng(0).random((1000, 1000), dtype=np.float32)  # 4 MB
    x = mt.tensor(xn)

    def verify(name, result):
        if name == "view":
            check(
                np.may_share_memory(result._data.storage, x._data.storage),
                "1.6",
                "permute copied the elements: a view shares its input's storage",
            )
            assert_close(result.numpy(), x.numpy().T, "1.6")

    # x changes before every sample: a copy kept from an earlier call is wrong, a view is not
    t = compare(
        {"view": lambda: x.permute(1, 0), "copy": lambda: np.ascontiguousarray(xn.T)},
        rounds=5,
        verify=verify,
        vary=perturb(x._data.storage),
    )
    report(view_us=t.best["view"] * 1e6, numpy_copy_us=t.best["copy"] * 1e6)


@benchmark(
    "1.12",
    points=2,
    metric="speedup",
    bands=[(12, 1.0), (4, 0.5)],
    formula="strided / fast",
    baseline=("strided",),
)
def bench_contiguous_fast_path(report):
    n = 4096
    values = np.random.default_rng(0).random(n)
    a = TensorData.from_numpy(values)
    out = TensorData.empty((n,), np.float64)
    storage, slow_out = a.storage, np.empty(n)
    want = values * 0.5 + 1.0

    def fn(x):
        return x * 0.5 + 1.0

    def fast():
        loops.map_contiguous(fn, out, a)
        return out

    assert_close(fast().storage[:n], want, "1.12")

    def verify(name, result):
        out.storage[:] = np.nan  # the next sample must write every element again

    out.storage[:] = np.nan
    t = compare(
        {
            "fast": fast,
            "strided": lambda: general_map(fn, slow_out, (n,), (1,), storage, (n,), (1,)),
        },
        rounds=5,
        verify=verify,
        output=lambda out: np.array(out.storage[:n]),
        vary=perturb(a.storage),
    )
    report(
        strided_us_per_elem=t.best["strided"] / n * 1e6, fast_us_per_elem=t.best["fast"] / n * 1e6
    )
