"""TinyGPT's row of chapter 9's table on the cuda device (``compile/capstone_cuda.py``)."""

from __future__ import annotations

import numpy as np

from ..compile.capstone import GPU_ROWS
from .data import make_batch
from .measure import make_step
from .model import TinyGPT


def tinygpt_row(quick: bool) -> tuple:
    """TinyGPT at the book's size (width 64, two layers, 16 sequences of 64), or tiny."""
    if quick:  # the simulator runs every CUDA thread in Python
        vocab, sizes, lengths, padded = 7, dict(context=4, width=8, heads=2, layers=1), (5, 4), 4
    else:
        vocab, sizes = 65, dict(context=64, width=64, heads=4, layers=2)
        lengths, padded = (65,) * 16, 64
    rng = np.random.default_rng(0)
    batch = make_batch([rng.integers(0, vocab, n) for n in lengths], padded)
    return (
        lambda: TinyGPT(vocab, seed=0, **sizes),
        make_step,
        tuple(t.numpy() for t in batch),
        None,  # no PyTorch twin of TinyGPT here
    )


GPU_ROWS["TinyGPT"] = tinygpt_row
