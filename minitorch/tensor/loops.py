"""Chapter 1, exercises 1.9-1.12: the three shapes of kernel, as pure-Python strided loops.

Every elementwise op is a *map* (one input) or a *zip* (two inputs), every
reduction is a *reduce*. The ``python`` backend runs all of them through these
four functions, with the op's scalar formula as ``fn``.

All of them write into ``out`` (already allocated, any strides) and return nothing.
"""

from __future__ import annotations

from typing import Callable

from ..exercises import exercise
from .data import TensorData


@exercise("1.9")
def tensor_map(fn: Callable[[float], float], out: TensorData, a: TensorData) -> None:
    """For every index of ``out``: ``out[i] = fn(a[broadcast(i)])``.

    ``a.shape`` broadcasts to ``out.shape``; both may be any strided view
    (use their ``strides`` and ``offset``, never assume contiguity).

    Hint: loop ``k`` over ``out.size``; ``to_index`` gives the out index,
    ``broadcast_index`` the index into ``a``, ``index_to_position`` both places.

    Example:
        >>> out = TensorData.empty((2, 2), "float64")
        >>> tensor_map(lambda x: -x, out, TensorData.from_numpy(np.array([1.0, 2.0])))
        >>> out.to_numpy()
        array([[-1., -2.], [-1., -2.]])
    """
    raise NotImplementedError("Exercise 1.9: tensor_map")


@exercise("1.10")
def tensor_zip(
    fn: Callable[[float, float], float], out: TensorData, a: TensorData, b: TensorData
) -> None:
    """For every index of ``out``: ``out[i] = fn(a[broadcast(i)], b[broadcast(i)])``.

    Both ``a`` and ``b`` broadcast to ``out.shape`` (the caller computed it
    with :func:`broadcast_shape`).

    Example: ``a`` of shape (3, 1) and ``b`` of shape (4,) zip into an
    ``out`` of shape (3, 4).
    """
    raise NotImplementedError("Exercise 1.10: tensor_zip")


@exercise("1.11")
def tensor_reduce(
    fn: Callable[[float, float], float], start: float, out: TensorData, a: TensorData, axis: int
) -> None:
    """Fold dimension ``axis`` of ``a`` with ``fn``, starting from ``start``.

    ``out`` has the shape of ``a`` with size 1 at ``axis``. For every index
    ``i`` of ``out``: ``out[i] = fn(...fn(fn(start, a[i with axis=0]), a[i with axis=1])...)``.

    Example: summing shape (2, 3) over axis 1 uses ``fn=operator.add``,
    ``start=0.0`` and an ``out`` of shape (2, 1).

    Hint: for each out position, step through ``a`` along ``axis`` by adding
    ``a.strides[axis]`` to the position; no index arithmetic in the inner loop.
    """
    raise NotImplementedError("Exercise 1.11: tensor_reduce")


@exercise("1.12")
def map_contiguous(fn: Callable[[float], float], out: TensorData, a: TensorData) -> None:
    """The fast path of :func:`tensor_map` when ``out`` and ``a`` are contiguous and of one shape.

    Then element ``k`` of both sits at ``offset + k``: no index arithmetic at
    all. Do the whole loop in one pass over a slice of the storage.

    Hint: read ``a.storage[a.offset : a.offset + n]`` once (``.tolist()`` makes
    Python-side loops much faster than indexing a numpy array), apply ``fn``,
    and assign the results back into ``out.storage`` in one slice assignment.
    """
    raise NotImplementedError("Exercise 1.12: map_contiguous")
