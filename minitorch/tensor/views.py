"""Chapter 1, exercises 1.6-1.8: views share storage and only change (shape, strides, offset)."""

from __future__ import annotations

from ..core.errors import OpError
from ..exercises import exercise
from .indexing import Shape, Strides


@exercise("1.6")
def permute_view(shape: Shape, strides: Strides, order: tuple[int, ...]) -> tuple[Shape, Strides]:
    """Return the (shape, strides) of the view with dimensions reordered by ``order``.

    Dimension ``i`` of the result is dimension ``order[i]`` of the input; no
    element moves. A transpose of a matrix is ``order=(1, 0)``.

    ``order`` must be a permutation of ``range(len(shape))``; otherwise raise
    ``OpError("permute", ...)`` that shows the order and the number of dimensions.

    Example:
        >>> permute_view((2, 3, 4), (12, 4, 1), (2, 0, 1))
        ((4, 2, 3), (1, 12, 4))
    """
    raise NotImplementedError("Exercise 1.6: permute_view")


@exercise("1.7")
def reshape_view(shape: Shape, strides: Strides, new_shape: Shape) -> Strides | None:
    """Return strides that show the same elements in ``new_shape``, or ``None``.

    The caller has checked that ``new_shape`` holds as many elements as
    ``shape``. A reshape is a view when the elements, read in row-major order,
    are evenly spaced within each group of dimensions being merged or split.
    The simplest sufficient rule, and the one to implement: if the tensor is
    contiguous (``strides == strides_from_shape(shape)``) return the contiguous
    strides of ``new_shape``; otherwise return ``None`` and the caller copies.

    Dimensions of size 1 may have any stride; treat them as contiguous.

    Example:
        >>> reshape_view((2, 6), (6, 1), (3, 4))
        (4, 1)
        >>> reshape_view((2, 3), (1, 2), (6,)) is None    # a transposed view
        True
    """
    raise NotImplementedError("Exercise 1.7: reshape_view")


@exercise("1.8")
def slice_view(
    shape: Shape, strides: Strides, offset: int, key: tuple
) -> tuple[Shape, Strides, int]:
    """Return the (shape, strides, offset) of ``tensor[key]`` as a view.

    ``key`` holds one entry per leading dimension (it may be shorter than the
    shape; the rest are kept whole). An ``int`` entry (possibly negative)
    selects one index and drops the dimension; a ``slice`` keeps it, with
    ``start, stop, step = s.indices(size)`` and a new size of
    ``len(range(start, stop, step))``. Negative steps give negative strides.

    Raise ``OpError("getitem", ...)`` for an int out of range, naming the
    index, the dimension and its size.

    Example:
        >>> slice_view((4, 5), (5, 1), 0, (1, slice(None, None, 2)))
        ((3,), (2,), 5)
    """
    raise NotImplementedError("Exercise 1.8: slice_view")


def permute_error(order, ndim: int) -> OpError:
    return OpError(
        "permute",
        f"order {tuple(order)} is not a permutation of the {ndim} dimensions",
        hint=f"give each of 0..{ndim - 1} exactly once, e.g. {tuple(reversed(range(ndim)))}",
    )


def index_error(index: int, dim: int, size: int) -> OpError:
    return OpError(
        "getitem",
        f"index {index} is out of range for dimension {dim} of size {size}",
        hint=f"use an index in [-{size}, {size - 1}]",
    )
