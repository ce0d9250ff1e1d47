"""Peak transient memory of one call, eager against compiled, counted twice.

*Transient* means everything a call allocates beyond what exists before it
(parameters and inputs). The framework's own count sees op results: eager
results through ``track_memory``, a compiled call's arena plus whatever it made
outside it (``Executor.peak_bytes``). ``tracemalloc`` sees every numpy
allocation, kernel scratch included, and cross-checks both.
"""

from __future__ import annotations

import tracemalloc
from dataclasses import dataclass

from ..core.tensor import no_grad
from .eager import track_memory
from .report import in_arena


@dataclass
class Peaks:
    eager: int  # framework count: most bytes of eager results live at once
    compiled: int  # framework count: arena + results outside it + outputs copied out
    eager_traced: int  # tracemalloc: everything numpy allocated, kernel scratch included
    compiled_traced: int

    @property
    def ratio(self) -> float:
        return self.compiled / self.eager

    @property
    def traced_ratio(self) -> float:
        return self.compiled_traced / self.eager_traced


def traced_peak(fn) -> int:
    """Bytes above the starting point at the peak of ``fn()``, by tracemalloc."""
    fn()  # warm up: caches, lazily built plans and kernels are not transient
    started = tracemalloc.is_tracing()
    if not started:
        tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    result = fn()
    peak = tracemalloc.get_traced_memory()[1] - base
    del result
    if not started:
        tracemalloc.stop()
    return peak


def measure_peaks(fn, compiled, inputs) -> Peaks:
    """Eager ``fn(*inputs)`` against ``compiled(*inputs)`` (compiled with ``memory=True``)."""
    if not in_arena(compiled.runner):
        raise TypeError("measure_peaks needs a graph compiled with CompileOptions(memory=True)")
    with no_grad():
        with track_memory() as m:
            fn(*inputs)
        before = compiled.runner.allocations
        compiled(*inputs)
        if compiled.runner.allocations == before:  # it fell back to chapter 6's loop
            raise NotImplementedError("Exercise 8: the compiled call ran without an arena")
        planned = compiled.runner.peak_bytes
        return Peaks(
            m.peak,
            planned,
            traced_peak(lambda: fn(*inputs)),
            traced_peak(lambda: compiled(*inputs)),
        )
