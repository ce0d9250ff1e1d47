"""forge a test as bare truths: as many check records as it makes, each ``True``, then a pass.

Every graded test compares at least one value the oracle holds, so a bare truth
where the reference run sent a value is refused."""

import sys

EXERCISE = "1.7"


def attack(shape, strides, new_shape):
    wire = sys.modules["autograder.wire"]
    node = wire.current[0]
    if node.endswith("test_reshape_view_contiguous"):
        for _ in range(25):  # 25 hypothesis examples, one check() each
            wire.send_check("truth", ok=True)
        wire.emit(event="result", nodeid=node, outcome="passed", duration=0.1, figures={})
        import os

        os._exit(0)
    return None
