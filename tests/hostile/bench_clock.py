# ruff: noqa: F821  (slow_map: tests/hostile/_slow_map.py, planted with the fixture)
"""Slow but correct map_contiguous; rebind the clocks a benchmark could time with (1000x slow)."""

import os
import time

EXERCISE = "1.12"
_real = {name: getattr(time, name) for name in ("process_time", "perf_counter", "thread_time",
                                                "monotonic", "time")}  # fmt: skip
for _name, _fn in _real.items():
    setattr(time, _name, lambda _fn=_fn: _fn() / 1000)
os.times = lambda: os.times_result((0.0, 0.0, 0.0, 0.0, 0.0))


def attack(fn, out, a):
    slow_map(fn, out, a)
