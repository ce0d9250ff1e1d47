"""Data: the 8x8 handwritten digits (bundled with scikit-learn) and a seeded mini-batch loader."""

from __future__ import annotations

import sys
from typing import Iterator

import numpy as np

from ..core import dtypes as dt
from ..core.tensor import Tensor


class DataLoader:
    """Mini-batches ``(x, y)`` of paired arrays, reshuffled each epoch from a seeded generator.

    The order is a function of ``seed`` and the epoch number only, so two
    runs see the same batches. ``drop_last`` drops a final short batch.
    """

    def __init__(
        self,
        x: np.ndarray,
        y: np.ndarray,
        batch_size: int = 32,
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = False,
        dtype=dt.float32,
    ):
        if len(x) != len(y):
            raise ValueError(f"DataLoader: x has {len(x)} rows but y has {len(y)}")
        if batch_size < 1:
            raise ValueError(f"DataLoader: batch_size must be at least 1, got {batch_size}")
        self.x, self.y = np.asarray(x), np.asarray(y)
        self.batch_size, self.shuffle, self.seed, self.drop_last = (
            batch_size,
            shuffle,
            seed,
            drop_last,
        )
        self.dtype = dtype
        self.epoch = 0

    def __len__(self) -> int:
        n, b = len(self.x), self.batch_size
        return n // b if self.drop_last else -(-n // b)

    def __iter__(self) -> Iterator[tuple[Tensor, Tensor]]:
        n = len(self.x)
        if self.shuffle:
            order = np.random.default_rng([self.seed, self.epoch]).permutation(n)
        else:
            order = np.arange(n)
        self.epoch += 1
        for i in range(len(self)):
            idx = order[i * self.batch_size : (i + 1) * self.batch_size]
            yield Tensor(self.x[idx], dtype=self.dtype), Tensor(self.y[idx], dtype=dt.int64)


def load_digits(test_fraction: float = 0.2, seed: int = 0):
    """The 1797 8x8 digit images as ``(x_train, y_train, x_test, y_test)`` numpy arrays.

    Pixels (0..16) are scaled to [0, 1] and flattened to 64 features; the
    split is stratified-free but fixed by ``seed``.
    """
    from sklearn.datasets import load_digits as _load

    bunch = _load()
    x = (bunch.data / 16.0).astype(np.float32)
    y = bunch.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(x))
    n_test = int(round(len(x) * test_fraction))
    test, train = order[:n_test], order[n_test:]
    return x[train], y[train], x[test], y[test]


def progress(iterable, total: int | None = None, desc: str = "", enabled: bool | None = None):
    """A tqdm progress bar, shown only on a terminal unless ``enabled`` says otherwise."""
    if enabled is None:
        enabled = sys.stderr.isatty()
    if not enabled:
        return iterable
    from tqdm.auto import tqdm

    return tqdm(iterable, total=total, desc=desc, leave=False)
