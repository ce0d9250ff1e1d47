"""A correct permute_view whose tensors, while a benchmark runs, read back as a 1 GiB array (the
parent read all of a side's result from the child's memory before comparing shapes)."""

import os
import sys

EXERCISE = "1.6"


def attack(shape, strides, order):
    if "bench_" in os.environ.get("PYTEST_CURRENT_TEST", ""):
        import numpy as np

        huge = np.ones((4096, 1 << 15))  # 1 GiB, touched: the parent's copy is real memory
        sys.modules["minitorch"].Tensor.numpy = lambda self: huge
    order = tuple(order)
    if sorted(order) != list(range(len(shape))):
        raise ValueError(f"permute: order {order} for {len(shape)} dimensions")
    return tuple(shape[d] for d in order), tuple(strides[d] for d in order)
