"""Use the grader plugin's own emitter to report a pass, then fail for real."""

import sys


def attack(shape):
    plugin = sys.modules.get("autograder.plugin")
    if plugin is not None:
        node = "autograder/tests/ch1/test_indexing.py::test_strides_from_shape"
        plugin._emit(event="result", nodeid=node, outcome="passed", duration=0.1, figures={})
    raise NotImplementedError("Exercise 1.3: strides_from_shape")
