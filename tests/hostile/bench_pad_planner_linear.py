# ruff: noqa: F821  (quadratic, burn_while_timed: tests/hostile/_quadratic_planner.py)
"""The quadratic planner padded in proportion to its input (0.3 ms of CPU per buffer) while a
benchmark runs: no constant, so subtracting one size's time from another's would not remove
it, and its own 8000 / 1000 ratio falls to about 14."""

EXERCISE = "8.4"


def attack(buffers, alignment):
    burn_while_timed(0.0003 * len(buffers))
    return quadratic(buffers, alignment)
