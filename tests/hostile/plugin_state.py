"""Use the grader plugin's own emitter to report a pass, then fail for real."""

import sys


def attack(shape):
    wire = sys.modules.get("autograder.wire")
    if wire is not None:
        node = "autograder/tests/ch1/test_indexing.py::test_strides_from_shape"
        wire.emit(event="result", nodeid=node, outcome="passed", duration=0.1, figures={})
    raise NotImplementedError("Exercise 1.3: strides_from_shape")
