"""Chapter 1, exercises 1.1-1.5: from a multi-index to a place in storage, and broadcasting.

A tensor's elements live in a flat ``storage``. Its ``shape`` says how many
indices each dimension has; its ``strides`` say how many storage slots one step
along each dimension moves; its ``offset`` is where element ``(0, 0, ...)`` sits.
"""

from __future__ import annotations

from ..core.errors import OpError
from ..exercises import exercise

Index = tuple[int, ...]
Shape = tuple[int, ...]
Strides = tuple[int, ...]


@exercise("1.1")
def index_to_position(index: Index, strides: Strides, offset: int = 0) -> int:
    """Return the storage position of the element at multi-index ``index``.

    The position is ``offset + sum(index[i] * strides[i])``.

    Example:
        >>> index_to_position((1, 2), (3, 1))
        5
        >>> index_to_position((1, 2), (1, 2), offset=4)   # a transposed view
        9

    Hint: one loop (or ``zip``) over the dimensions; no bounds checks needed.
    """
    raise NotImplementedError("Exercise 1.1: index_to_position")


@exercise("1.2")
def to_index(ordinal: int, shape: Shape) -> Index:
    """Return the multi-index of the ``ordinal``-th element in row-major order.

    Row-major means the last dimension moves fastest, so for shape ``(2, 3)``
    the ordinals 0..5 visit ``(0,0) (0,1) (0,2) (1,0) (1,1) (1,2)``.
    This is how a kernel turns "I am element k of the output" into an index.

    Example:
        >>> to_index(4, (2, 3))
        (1, 1)
        >>> to_index(0, ())
        ()

    Hint: walk the dimensions from last to first with ``divmod``.
    """
    raise NotImplementedError("Exercise 1.2: to_index")


@exercise("1.3")
def strides_from_shape(shape: Shape) -> Strides:
    """Return the strides of a contiguous row-major tensor of ``shape``.

    The last dimension has stride 1; each earlier stride is the product of
    all later sizes.

    Example:
        >>> strides_from_shape((2, 3, 4))
        (12, 4, 1)
        >>> strides_from_shape(())
        ()

    Hint: build the list from the back with a running product.
    """
    raise NotImplementedError("Exercise 1.3: strides_from_shape")


@exercise("1.4")
def broadcast_shape(shape_a: Shape, shape_b: Shape) -> Shape:
    """Return the shape two operands broadcast to (numpy's rule).

    Align the shapes at their last dimension; missing leading dimensions count
    as 1. Two sizes are compatible when they are equal or one of them is 1;
    the result takes the larger.

    Raise ``OpError("broadcast", ...)`` naming both shapes when they are not
    compatible (the message is what a learner sees on ``a + b``).

    Example:
        >>> broadcast_shape((4, 1, 3), (5, 1))
        (4, 5, 3)
        >>> broadcast_shape((2, 3), (4,))
        Traceback (most recent call last):
        OpError: broadcast: shapes (2, 3) and (4,) are not compatible ...

    Hint: pad the shorter shape with 1s on the left, then compare pairwise.
    """
    raise NotImplementedError("Exercise 1.4: broadcast_shape")


@exercise("1.5")
def broadcast_index(big_index: Index, big_shape: Shape, shape: Shape) -> Index:
    """Map an index into the broadcast ``big_shape`` back to an index into ``shape``.

    ``shape`` broadcasts to ``big_shape`` (it may have fewer dimensions).
    Dimensions missing from ``shape`` are dropped; a dimension of size 1 in
    ``shape`` always reads index 0.

    Example:
        >>> broadcast_index((3, 2, 1), (4, 5, 3), (5, 1))
        (2, 0)

    Hint: align from the right, like :func:`broadcast_shape`.
    """
    raise NotImplementedError("Exercise 1.5: broadcast_index")


def shape_error(op: str, a: Shape, b: Shape) -> OpError:
    """The error every broadcasting op raises (stubs and references share it)."""
    return OpError(
        op,
        f"shapes {tuple(a)} and {tuple(b)} are not compatible",
        hint="aligned from the right, each pair of sizes must be equal or contain a 1; "
        "reshape one operand, e.g. x.reshape(..., 1)",
    )
