# ruff: noqa: F821  (quadratic, burn_while_timed: tests/hostile/_quadratic_planner.py)
"""A correct but quadratic planner that burns 0.3 s of CPU in every call while a benchmark
runs: 8.4's figure was its own 8000-buffer time over its own 1000-buffer time, which a
constant added to both brings towards 1."""

EXERCISE = "8.4"


def attack(buffers, alignment):
    burn_while_timed(0.3)
    return quadratic(buffers, alignment)
