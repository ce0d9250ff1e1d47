"""Chapter 1, exercises 1.1-1.5: positions, indices, strides and broadcasting."""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from autograder.harness import check, graded
from minitorch.core.errors import OpError
from minitorch.tensor import indexing as ix

from .strategies import broadcast_shapes, index_in, shapes, strided_views


@graded("1.1", points=1)
def test_index_to_position_examples():
    got = ix.index_to_position((1, 2), (3, 1))
    check(got == 5, "1.1", "wrong position", value=got, index=(1, 2), strides=(3, 1))
    got = ix.index_to_position((), ())
    check(got == 0, "1.1", "a 0-d tensor sits at position 0", value=got)
    got = ix.index_to_position((1, 2), (1, 2), 4)
    check(got == 9, "1.1", f"offset is ignored? got {got}", value=got, index=(1, 2), strides=(1, 2),
          offset=4)  # fmt: skip


@graded("1.1", points=2)
@given(st.data())
def test_index_to_position_matches_numpy(data):
    """
    contract: Return the storage position of the element at multi-index ``index``.
    """
    view, td = data.draw(strided_views())
    idx = data.draw(index_in(view.shape))
    position = ix.index_to_position(idx, td.strides, td.offset)
    got = td.storage[position]
    check(
        got == view[idx],
        "1.1",
        "position does not hold the element numpy finds",
        value=position,
        index=idx,
        shape=td.shape,
        strides=td.strides,
        offset=td.offset,
    )


@graded("1.2", points=2)
@given(shapes, st.data())
def test_to_index_is_row_major(shape, data):
    """
    contract: Return the multi-index of the ``ordinal``-th element in row-major order.
    """
    k = data.draw(st.integers(0, int(np.prod(shape)) - 1))
    got = tuple(ix.to_index(k, shape))
    want = tuple(int(i) for i in np.unravel_index(k, shape)) if shape else ()
    check(got == want, "1.2", f"got {got}, expected {want}", value=got, ordinal=k, shape=shape)


@graded("1.3", points=2)
@given(shapes)
def test_strides_from_shape(shape):
    """
    contract: Return the strides of a contiguous row-major tensor of ``shape``.
    """
    got = tuple(ix.strides_from_shape(shape))
    want = tuple(s // 8 for s in np.empty(shape).strides)
    check(got == want, "1.3", f"got {got}, expected {want}", value=got, shape=shape)
    for shape, want in [((2, 3, 4), (12, 4, 1)), ((3, 1, 2), (2, 2, 1)), ((), ())]:
        got = tuple(ix.strides_from_shape(shape))
        check(got == want, "1.3", f"got {got}, expected {want}", value=got, shape=shape)


@graded("1.4", points=2)
@given(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=4, min_side=0, max_side=4))
def test_broadcast_shape_matches_numpy(bs):
    """
    contract: Return the shape two operands broadcast to
    contract: Two sizes are compatible when they are equal or one of them is 1; the result takes the larger.
    """
    a, b = bs.input_shapes
    got = tuple(ix.broadcast_shape(a, b))
    check(got == bs.result_shape, "1.4", f"got {got}, expected {bs.result_shape}", value=got,
          a=a, b=b)  # fmt: skip


@graded("1.4", points=1)
def test_broadcast_shape_error_names_shapes():
    """
    contract: Raise ``OpError("broadcast", ...)`` naming both shapes when they are not compatible
    """
    for a, b, want in [((2, 1), (0,), (2, 0)), ((1,), (3, 0, 1), (3, 0, 1)), ((), (2,), (2,))]:
        got = tuple(ix.broadcast_shape(a, b))
        check(got == want, "1.4", f"got {got}, expected {want}", value=got, a=a, b=b)
    for a, b in [((2, 3), (4,)), ((2, 1, 3), (2, 2)), ((0,), (2,))]:
        try:
            ix.broadcast_shape(a, b)
        except OpError as e:
            check(
                str(a) in str(e) and str(b) in str(e),
                "1.4",
                f"the error should show both shapes, got: {e}",
                a=a,
                b=b,
            )
            check(str(e).startswith("broadcast: "), "1.4", "raise OpError(\"broadcast\", ...): the "
                  f"error names the op first, got: {e}", a=a, b=b)  # fmt: skip
        else:
            check(False, "1.4", "incompatible shapes must raise OpError", a=a, b=b)


@graded("1.5", points=2)
@given(broadcast_shapes(n=1, max_dims=4, max_side=4), st.data())
def test_broadcast_index_reads_numpy_element(bs, data):
    """
    contract: Dimensions missing from ``shape`` are dropped; a dimension of size 1 in ``shape`` always reads index 0.
    """
    big, (shape,) = bs
    for case, want in [
        (((1, 2, 3), (2, 3, 4), (3, 1)), (2, 0)),
        (((1, 2), (2, 3), ()), ()),
        (((0, 1, 2), (2, 3, 4), (2, 3, 4)), (0, 1, 2)),  # same rank: every index kept
        (((1, 0, 2, 1), (2, 2, 3, 2), (2, 3, 1)), (0, 2, 0)),  # aligned from the right
    ]:
        got = tuple(ix.broadcast_index(*case))
        check(got == want, "1.5", f"got {got}, expected {want}", value=got, args=case)
    a = np.arange(int(np.prod(shape))).reshape(shape)
    idx = data.draw(index_in(big))
    small = tuple(ix.broadcast_index(idx, big, shape))
    check(
        a[small] == np.broadcast_to(a, big)[idx],
        "1.5",
        f"index {small} reads the wrong element",
        value=small,
        big_index=idx,
        big_shape=big,
        shape=shape,
    )
