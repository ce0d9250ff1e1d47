"""Chapter 1: the Tensor API on the python backend (views and errors use your exercises)."""

import numpy as np

import minitorch as mt
from autograder.harness import assert_close, check, graded


@graded("1.6", points=1)
def test_tensor_transpose_and_permute():
    a = np.arange(24.0).reshape(2, 3, 4)
    t = mt.tensor(a)
    assert_close(t.permute(2, 0, 1).numpy(), a.transpose(2, 0, 1), "1.6", a_shape=a.shape)
    check(t.T.shape == (4, 3, 2), "1.6", f"x.T of (2, 3, 4) has shape {t.T.shape}")
    try:
        t.permute(0, 1)
    except mt.OpError as e:
        check("permute" in str(e), "1.6", f"the error should name the op: {e}")
    else:
        check(False, "1.6", "permute(0, 1) of a 3-d tensor must raise OpError")


@graded("1.7", points=1)
def test_tensor_reshape_views_and_copies():
    a = np.arange(12.0).reshape(3, 4)
    t = mt.tensor(a)
    r = t.reshape(2, 6)
    check(
        r._data.storage is t._data.storage, "1.7", "reshape of a contiguous tensor must be a view"
    )
    assert_close(t.T.reshape(12).numpy(), a.T.reshape(12), "1.7", a=a)
    try:
        t.reshape(5, 3)
    except mt.OpError as e:
        check("(3, 4)" in str(e) and "(5, 3)" in str(e), "1.7", f"name both shapes: {e}")
    else:
        check(False, "1.7", "reshape to the wrong size must raise OpError")


@graded("1.8", points=1)
def test_tensor_getitem():
    a = np.arange(60.0).reshape(3, 4, 5)
    t = mt.tensor(a)
    for key in [
        1,
        (slice(None), 2),
        (-1, slice(None, None, -2)),
        (..., 3),
        (slice(1, 3), 0, slice(4, 0, -1)),
    ]:
        assert_close(t[key].numpy(), a[key], "1.8", key=key)
    check(t[1:, ::2]._data.storage is t._data.storage, "1.8", "slicing must not copy")
