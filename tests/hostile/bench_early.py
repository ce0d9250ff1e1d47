# ruff: noqa: F821  (slow_map: tests/hostile/_slow_map.py, planted with the fixture)
"""Slow but correct map_contiguous that tells the grader its sample is over before it starts
(a made-up 'sampled' record on the grader's own channel), then does the work."""

import sys

EXERCISE = "1.12"


def attack(fn, out, a):
    wire = sys.modules.get("autograder.wire")
    if wire is not None and wire.attached():
        wire.emit(event="sampled", side="fast")
    slow_map(fn, out, a)
