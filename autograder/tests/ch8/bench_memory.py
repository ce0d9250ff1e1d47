"""Graded benchmarks, chapter 8: the compiled forward's transient peak against eager's (8.6),
and the planner's cost growing like n log n in the number of buffers (8.4).

Memory is deterministic: the peaks are counted by the framework (eager results
through ``track_memory``, the compiled call's arena plus what it makes outside it)
and cross-checked with ``tracemalloc``; no timing is involved, and the figure is
the one the benchmark reports (counted in the learner's process). The planning
cost is a ratio of CPU times the grader measures (``harness.compare``).
"""

from __future__ import annotations

import numpy as np

from autograder.harness import benchmark, check, compare
from minitorch.memory import Buffer, measure_peaks

from .util import F32, as_list, compiled_model, overlaps

# Reference: 0.61 (MLP), 0.60 (CNN); planning without in-place reuse lands at 0.81 / 0.80
# (half marks), no planning at all above 1.
# Batch sizes where activations dominate: the MLP's activations (256 x 256 floats, 256 KiB
# each) and the CNN's (16 x 8 x 16 x 16 floats, 128 KiB each) outweigh its inputs.
SIZES = {"mlp": dict(batch=256), "cnn": dict(batch=16)}


@benchmark(
    "8.6", points=4, metric="peak_ratio", bands=[(0.65, 1.0), (0.85, 0.5)], higher_is_better=False
)
def bench_transient_peak_vs_eager(report):
    figures, worst = {}, 0.0
    for name, kw in SIZES.items():
        fn, inputs, c = compiled_model(name, **kw)
        got, want = as_list(c(*inputs)), as_list(fn(*inputs))
        check(
            all(np.allclose(a, b, rtol=1e-4, atol=1e-5) for a, b in zip(got, want)),
            "8.6",
            f"{name}: compiled answer differs from eager",
        )
        p = measure_peaks(fn, c, inputs)
        figures.update(
            {
                f"{name}_eager_kib": p.eager / 1024,
                f"{name}_compiled_kib": p.compiled / 1024,
                f"{name}_ratio": p.ratio,
                f"{name}_tracemalloc_ratio": p.traced_ratio,
            }
        )
        worst = max(worst, p.ratio)
    report(peak_ratio=worst, **figures)


def _buffers(n: int, seed: int = 0) -> list:
    """A long chain of buffers, each read a few steps after it is written (a deep network)."""
    rng = np.random.default_rng(seed)
    ends = rng.integers(1, 9, n)
    sizes = rng.integers(1, 64, n) * 256
    return [Buffer(k, int(sizes[k]), F32, k, k + int(ends[k]), [k]) for k in range(n)]


# n log n gives 8000 / 1000 buffers a cost ratio of 10.4, n^1.5 22.6, n^2 64; the reference
# measured 11.6, and 13-16.4 in CI (load slows the 8000-buffer plan most). The figure divides
# by the course's own 1000-buffer plan, not the learner's: a planner that wasted time in its
# 1000-buffer call once lowered its own ratio to full credit. So it also asks for a constant
# near the course's: full credit up to about 2.5x the course's time, half up to 5x. Measured:
# the reference 11.6; a quadratic planner 395 (1.37 s at 8000, the course's 3.5 ms at 1000).
@benchmark(
    "8.4",
    points=3,
    metric="cost_8000_vs_courses_1000",
    bands=[(30.0, 1.0), (60.0, 0.5)],
    higher_is_better=False,
    formula="n8000 / course_n1000",
    baseline=("course_n1000",),
)
def bench_planning_cost_is_n_log_n(report):
    from minitorch.memory import greedy_by_size

    small, large = _buffers(1000), _buffers(8000)

    def verify(name, size):
        bs = large if name == "n8000" else small
        top = max(b.offset + -(-b.nbytes // 64) * 64 for b in bs)
        check(size == top, "8.4", "greedy_by_size must return the arena size", got=size)

    # A quadratic planner takes seconds at 8000 buffers: its figure is in the hundreds.
    t = compare(
        {
            "n1000": lambda: greedy_by_size(small),
            "n8000": lambda: greedy_by_size(large),
            "course_n1000": lambda: greedy_by_size(small),  # the course's, in its own process
        },
        rounds=3,
        warmup=1,
        verify=verify,
        output=None,  # the right size depends on the plan, which verify checks
    )
    check(not overlaps(small[:400]), "8.4", "live buffers overlap")
    report(**t.figures_ms())
