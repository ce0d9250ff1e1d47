"""Chapter 1, exercises 1.6-1.8: permute, reshape and slice as views."""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from autograder.harness import check, graded, text
from minitorch.core.errors import OpError
from minitorch.tensor import views

from .strategies import data_of, strided_views


def views_strides(shape):
    return tuple(s // 8 for s in np.empty(shape).strides)


def shows(shape, strides, offset, expected, td) -> bool:
    from minitorch.tensor.data import TensorData

    got = TensorData(td.storage, tuple(shape), tuple(strides), offset).to_numpy()
    return got.shape == expected.shape and np.array_equal(got, expected)


@graded("1.6", points=2)
@given(st.data())
def test_permute_view_matches_numpy(data):
    """
    contract: Return the (shape, strides) of the view with dimensions reordered by ``order``.
    """
    view, td = data.draw(strided_views())
    order = tuple(data.draw(st.permutations(range(view.ndim))))
    shape, strides = views.permute_view(td.shape, td.strides, order)
    check(
        shows(shape, strides, td.offset, view.transpose(order), td),
        "1.6",
        "the view does not show numpy's transpose",
        value=tuple(shape) + tuple(strides),
        shape=td.shape,
        strides=td.strides,
        order=order,
    )


@graded("1.6", points=1)
def test_permute_view_rejects_bad_order():
    """
    contract: ``order`` must be a permutation of ``range(len(shape))``; otherwise raise ``OpError("permute", ...)`` that shows the order and the number of dimensions.
    """
    for order in [(0, 0, 1), (0, 1), (0, 1, 3)]:
        try:
            views.permute_view((2, 3, 4), (12, 4, 1), order)
        except OpError as e:
            check(
                str(order) in str(e),
                "1.6",
                f"the error should show the order, got: {e}",
                value=text([e.op, str(order) in str(e)]),
            )
            check(e.op == "permute", "1.6", f'raise OpError("permute", ...), got op {e.op!r}',
                  value=text(e.op), order=order)  # fmt: skip
        else:
            check(False, "1.6", "a bad order must raise OpError", order=order)
    try:  # 5 dimensions, an order of 2: the message shows the 5, which is not in the order
        views.permute_view((2, 1, 2, 1, 2), (4, 4, 2, 2, 1), (1, 0))
    except OpError as e:
        check("5" in str(e), "1.6", f"the error should show the number of dimensions (5): {e}")
    else:
        check(False, "1.6", "a bad order must raise OpError", order=(1, 0))


def _size1_free(shape, strides):
    """Strides with those of size-1 dimensions as 0: any stride is right there."""
    if not isinstance(strides, (tuple, list)) or len(strides) != len(shape):
        return strides if strides is None else str(strides)
    return [0 if n == 1 else s for n, s in zip(shape, strides)]


@graded("1.7", points=2)
@given(st.data())
def test_reshape_view_contiguous(data):
    """
    contract: Return strides that show the same elements in ``new_shape``
    """
    shape = data.draw(st.lists(st.integers(1, 4), min_size=1, max_size=4).map(tuple))
    n = int(np.prod(shape))
    base = np.arange(n + 2, dtype=np.float64)
    view = base[2:].reshape(shape)
    td = data_of(view, base)
    new_shape = data.draw(
        st.sampled_from([(n,), (1, n), (n, 1)] + ([(2, n // 2)] if n % 2 == 0 else []))
    )
    strides = views.reshape_view(td.shape, td.strides, new_shape)
    check(
        strides is not None and shows(new_shape, strides, td.offset, view.reshape(new_shape), td),
        "1.7",
        "a contiguous tensor reshapes as a view",
        value=text(_size1_free(new_shape, strides)),
        shape=shape,
        new_shape=new_shape,
        got=strides,
    )


@graded("1.7", points=1)
def test_reshape_view_refuses_transposed():
    """
    contract: if the tensor is contiguous (``strides == strides_from_shape(shape)``) return the contiguous strides of ``new_shape``; otherwise return ``None`` and the caller copies.
    """
    got = views.reshape_view((2, 3), (1, 2), (6,))
    check(got is None, "1.7", f"a transposed tensor cannot be flattened as a view; got {got}")
    got = views.reshape_view((3, 1), (1, 7), (3,))
    check(got == (1,), "1.7", f"size-1 dims may have any stride; expected (1,), got {got}")
    # Not contiguous, so None, whatever the spacing: every other element, reversed, a row slice
    # (the last stride is 1), and a view of a view.
    base = np.arange(48.0)
    for view in [base[::2][:6], base[::-1][:6], base.reshape(4, 12)[:2, :6],
                 base.reshape(4, 12)[::2, ::2][:, 1:5]]:  # fmt: skip
        td = data_of(view, base)
        got = views.reshape_view(td.shape, td.strides, (view.size,))
        check(got is None, "1.7", f"not contiguous, so return None (the caller copies); got {got}",
              value=text(str(got)), shape=td.shape, strides=td.strides)  # fmt: skip
    for shape, new_shape, want in [((2, 3), (3, 2), (2, 1)), ((2, 2, 3), (3, 2, 2), (4, 2, 1))]:
        got = views.reshape_view(shape, views_strides(shape), new_shape)
        check(got == want, "1.7", f"expected {want}, got {got}", value=got, shape=shape,
              new_shape=new_shape)  # fmt: skip


@st.composite
def keys(draw, shape):
    key = []
    for n in shape[: draw(st.integers(0, len(shape)))]:
        if draw(st.booleans()):
            key.append(draw(st.integers(-n, n - 1)))
        else:
            bound = st.none() | st.integers(-n - 1, n + 1)
            key.append(slice(draw(bound), draw(bound), draw(st.sampled_from([None, 1, 2, -1, -2]))))
    return tuple(key)


@graded("1.8", points=3)
@given(st.data())
def test_slice_view_matches_numpy(data):
    """
    contract: Return the (shape, strides, offset) of ``tensor[key]`` as a view.
    contract: An ``int`` entry (possibly negative) selects one index and drops the dimension; a ``slice`` keeps it
    """
    view, td = data.draw(strided_views())
    key = data.draw(keys(view.shape))
    shape, strides, offset = views.slice_view(td.shape, td.strides, td.offset, key)
    check(
        shows(shape, strides, offset, view[key], td),
        "1.8",
        "the slice does not match numpy",
        value=shape,
        shape=td.shape,
        strides=td.strides,
        offset=td.offset,
        key=key,
    )


@graded("1.8", points=1)
def test_slice_view_index_error():
    """
    contract: Raise ``OpError("getitem", ...)`` for an int out of range, naming the index, the dimension and its size.
    """
    base = np.arange(30.0)
    a = base.reshape(5, 6)
    td = data_of(a, base)
    for key in [(slice(0, 5, 2),), (slice(4, None, -2), 1), (-1, slice(1, 6, 4)), (slice(3, 1),)]:
        shape, strides, offset = views.slice_view(td.shape, td.strides, td.offset, key)
        check(shows(shape, strides, offset, a[key], td), "1.8", "wrong slice", value=shape, key=key)
    try:
        views.slice_view((4, 5), (5, 1), 0, (1, 7))
    except OpError as e:
        check("7" in str(e) and "5" in str(e), "1.8", f"name the index and the size, got: {e}")
    else:
        check(False, "1.8", "an index out of range must raise OpError")
    for key in [(4,), (1, 5), (-5,), (1, -6)]:  # just past either end: index == size, -size - 1
        try:
            views.slice_view((4, 5), (5, 1), 0, key)
        except OpError as e:
            check(e.op == "getitem", "1.8", f"raise OpError(\"getitem\", ...), got {e.op!r}",
                  value=text(e.op), key=key)  # fmt: skip
        else:
            check(False, "1.8", "an index out of range must raise OpError", key=key)
    try:  # the bad index is in dimension 2 (of size 6): the message names that dimension
        views.slice_view((3, 4, 6), (24, 6, 1), 0, (0, 0, 9))
    except OpError as e:
        check("9" in str(e) and "2" in str(e) and "6" in str(e), "1.8",
              f"name the index (9), the dimension (2) and its size (6), got: {e}")  # fmt: skip
    else:
        check(False, "1.8", "an index out of range must raise OpError", key=(0, 0, 9))
