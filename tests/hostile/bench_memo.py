# ruff: noqa: F821  (slow_map: tests/hostile/_slow_map.py, planted with the fixture)
"""Slow but correct map_contiguous that keeps its results while a benchmark runs (known from
PYTEST_CURRENT_TEST) and copies them back on the next call with the same input."""

import os

EXERCISE = "1.12"
_memo = {}


def attack(fn, out, a):
    n = out.size
    timing = "bench_" in os.environ.get("PYTEST_CURRENT_TEST", "")
    key = (id(a), id(fn), n)
    if timing and key in _memo:
        out.storage[out.offset : out.offset + n] = _memo[key]
        return
    slow_map(fn, out, a)
    if timing:
        _memo[key] = out.storage[out.offset : out.offset + n].copy()
