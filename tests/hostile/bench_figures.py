# ruff: noqa: F821  (slow_map: tests/hostile/_slow_map.py, planted with the fixture)
"""Slow but correct map_contiguous; rebind the plugin's report fixture so every benchmark
reports a speedup of a billion."""

import sys

EXERCISE = "1.12"


def attack(fn, out, a):
    plugin = sys.modules.get("autograder.plugin")
    if plugin is not None:
        plugin.Figures.__call__ = lambda self, **f: self.update(speedup=1e9, copy_over_view=1e9)
    slow_map(fn, out, a)
