"""TensorData: a flat storage and the (shape, strides, offset) that give it a shape.

Every backend reads tensors in this form. CPU storage is a 1-D numpy array;
chapter 4 adds device storage with the same interface (``__getitem__`` is not
needed there: only kernels touch device storage).
"""

from __future__ import annotations

import math
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
    def wrap(array: np.ndarray) -> TensorData:
        """Adopt a freshly computed array as contiguous storage (copies only if it must)."""
        shape = tuple(np.shape(array))  # before: ascontiguousarray turns 0-d into (1,)
        array = np.ascontiguousarray(array)
        return TensorData.contiguous(array.reshape(-1), shape)

    @staticmethod
    def empty(shape: Shape, dtype) -> TensorData:
        return TensorData.contiguous(np.empty(math.prod(shape), dtype=dtype), tuple(shape))

    @property
    def dtype(self) -> np.dtype:
        return self.storage.dtype

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def is_contiguous(self) -> bool:
        """True when the elements sit row-major with no gaps (size-1 dims may have any stride)."""
        # A loop here rather than comparing with ``strides_from_shape``: this runs for
        # every kernel argument, and the exercise's dispatch cost more than the check.
        run = 1
        for n, s in zip(reversed(self.shape), reversed(self.strides)):
            if s != run and n != 1:
                return False
            run *= n
        return True

    def as_numpy_view(self) -> np.ndarray:
        """A zero-copy numpy view of these elements (CPU only)."""
        storage, size = self.storage, self.size
        if size == 0:
            return np.empty(self.shape, dtype=self.dtype)
        if self.offset == 0 and size == storage.size and self.is_contiguous():
            return storage.reshape(self.shape)  # the common case, and the cheapest
        item = storage.itemsize
        strides = tuple(s * item for s in self.strides)
        try:  # a third of ``as_strided``'s cost, which a plan pays per strided argument
            view = np.ndarray(self.shape, storage.dtype, storage, self.offset * item, strides)
        except (TypeError, ValueError):  # storage numpy cannot take as a buffer
            return np.lib.stride_tricks.as_strided(
                storage[self.offset :], shape=self.shape, strides=strides, writeable=False
            )
        view.flags.writeable = False
        return view

    def to_numpy(self) -> np.ndarray:
        return np.array(self.as_numpy_view(), copy=True)
