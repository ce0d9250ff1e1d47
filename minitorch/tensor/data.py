"""TensorData: a flat storage and the (shape, strides, offset) that give it a shape.

Every backend reads tensors in this form. CPU storage is a 1-D numpy array;
chapter 4 adds device storage with the same interface (``__getitem__`` is not
needed there: only kernels touch device storage).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .indexing import Shape, Strides, strides_from_shape


@dataclass
class TensorData:
    storage: object  # 1-D array (numpy on the CPU)
    shape: Shape
    strides: Strides
    offset: int = 0

    @staticmethod
    def contiguous(storage, shape: Shape) -> TensorData:
        return TensorData(storage, tuple(shape), tuple(strides_from_shape(tuple(shape))), 0)

    @staticmethod
    def from_numpy(array: np.ndarray) -> TensorData:
        """Copy ``array`` into fresh contiguous storage."""
        flat = np.array(array, copy=True, order="C").reshape(-1)
        return TensorData.contiguous(flat, tuple(array.shape))

    @staticmethod
    def empty(shape: Shape, dtype) -> TensorData:
        size = int(np.prod(shape, dtype=np.int64))
        return TensorData.contiguous(np.empty(size, dtype=dtype), tuple(shape))

    @property
    def dtype(self) -> np.dtype:
        return self.storage.dtype

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def is_contiguous(self) -> bool:
        """True when the elements sit row-major with no gaps (size-1 dims may have any stride)."""
        expected = strides_from_shape(self.shape)
        return all(s == e or n == 1 for s, e, n in zip(self.strides, expected, self.shape))

    def as_numpy_view(self) -> np.ndarray:
        """A zero-copy numpy view of these elements (CPU only)."""
        item = self.storage.itemsize
        base = self.storage[self.offset :] if self.size else self.storage[:0]
        if self.size == 0:
            return np.empty(self.shape, dtype=self.dtype)
        return np.lib.stride_tricks.as_strided(
            base, shape=self.shape, strides=tuple(s * item for s in self.strides), writeable=False
        )

    def to_numpy(self) -> np.ndarray:
        return np.array(self.as_numpy_view(), copy=True)
