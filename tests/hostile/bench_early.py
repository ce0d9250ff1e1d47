# ruff: noqa: F821  (slow_map: tests/hostile/_slow_map.py, planted with the fixture)
"""Slow but correct map_contiguous that tells the grader its sample is over before it starts
(a made-up 'sampled' record on the grader's own channel), then does the work."""

import os
import sys

EXERCISE = "1.12"
VOIDS = True  # a record out of turn voids the child's results, its tests' too


def attack(fn, out, a):
    wire = sys.modules.get("autograder.wire")
    timed = "bench_" in os.environ.get("PYTEST_CURRENT_TEST", "")  # outside one it voids the tests
    if wire is not None and wire.attached() and timed:
        wire.emit(event="sampled", side="fast")
    slow_map(fn, out, a)
