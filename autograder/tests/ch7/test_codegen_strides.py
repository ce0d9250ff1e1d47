"""Graded tests, chapter 7, exercise 7.6: the strides that read an input over the output's loops."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from autograder.harness import check, graded, text
from minitorch.fusion import loop_strides

from .codegen_cases import make_input, shapes


def _positions(d, out_shape, strides):
    """Storage position of every output element, read with ``strides`` (C order)."""
    idx = np.indices(out_shape).reshape(len(out_shape), -1) if out_shape else np.zeros((0, 1), int)
    return d.offset + (np.asarray(strides, dtype=np.int64)[:, None] * idx).sum(axis=0)


@graded("7.6", points=1)
def test_examples():
    """
    contract: Every other axis keeps its stride (negative strides too: a flipped view walks backwards)
    contract: Return one int per axis of ``out_shape``.
    """
    got = loop_strides((3, 1), (1, 1), (2, 3, 4))
    check(got == (0, 1, 0), "7.6", "(3,1) over (2,3,4)", value=got)
    got = loop_strides((4,), (-1,), (2, 4))
    check(got == (0, -1), "7.6", "keep a negative stride", value=got)
    got = loop_strides((2, 3), (1, 2), (2, 3))
    check(got == (1, 2), "7.6", "same shape: strides as they are", value=got)
    got = loop_strides((), (), (5,))
    check(got == (0,), "7.6", "a 0-d input is read everywhere", value=got)
    got = loop_strides((1, 1), (5, 5), (1, 1))
    check(got == (0, 0), "7.6", "size-1 axes read one element", value=got)
    got = loop_strides((1, 3, 1), (3, 1, 1), (2, 2, 3, 4))
    check(got == (0, 0, 1, 0), "7.6", "size-1 axes before the last broadcast too", value=got)
    check(type(got) is tuple and all(type(s) is int for s in got), "7.6",
          "return a tuple of Python ints, one per axis of out_shape (not numpy integers)",
          value=text([type(s).__name__ for s in got]))  # fmt: skip


@graded("7.6", points=2)
@settings(max_examples=40)
@given(
    shapes(min_side=0), st.sampled_from(["contiguous", "permuted", "flipped", "mixed"]), st.data()
)
def test_reads_the_broadcast_element(sh, kind, data):
    out_shape, ins = sh
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    for shape in ins:
        values = rng.standard_normal(shape).astype(np.float32)
        d = make_input(rng, values, kind)
        got = loop_strides(d.shape, d.strides, out_shape)
        check(
            len(got) == len(out_shape), "7.6", "one stride per output axis", value=len(got), got=got
        )
        expected = np.broadcast_to(values, out_shape).reshape(-1)
        pos = _positions(d, out_shape, got)
        ok = all(0 <= p < d.storage.size for p in pos) and np.array_equal(
            d.storage[pos] if pos.size else expected, expected, equal_nan=True
        )
        check(
            ok,
            "7.6",
            "reading with these strides gives the wrong elements",
            value=pos,
            shape=shape,
            strides=d.strides,
            out_shape=out_shape,
            got=got,
        )
