"""mimic the plugin's records with the grader's own sender: every check the test makes, made-up values."""

import sys


def attack(shape):
    wire = sys.modules["autograder.wire"]
    np = sys.modules["numpy"]
    node = "autograder/tests/ch1/test_indexing.py::test_strides_from_shape"
    for _ in range(25 * 4):  # 25 hypothesis examples, four check() calls each
        wire.send_check("truth", ok=True, value=np.zeros(len(shape), np.int64))
    wire.emit(event="result", nodeid=node, outcome="passed", duration=0.1, figures={})
    import os

    os._exit(0)
