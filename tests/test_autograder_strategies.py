"""The shared graded-test strategies (autograder/strategies.py) draw what they promise."""

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from autograder import strategies as S


@settings(max_examples=60, derandomize=True, database=None, deadline=None)
@given(st.data())
def test_laid_out_views_equal_the_array(data):
    shape = data.draw(S.shapes())
    array = np.arange(math.prod(shape), dtype=np.float64).reshape(shape) + 0.5
    view, base = data.draw(S.laid_out(array))
    assert view.shape == array.shape and np.array_equal(view, array)
    assert np.shares_memory(view, base) or view.size == 0
    td = S.tensor_data(view, base)
    assert np.array_equal(td.to_numpy(), array)


def test_laid_out_draws_every_layout_and_extremes():
    layouts, seen = set(), set()

    @settings(max_examples=200, derandomize=True, database=None, deadline=None)
    @given(st.data())
    def draw(data):
        array = data.draw(S.values((2, 3)))
        view, base = data.draw(S.laid_out(array))
        layouts.add((view.flags.c_contiguous, view.strides, view.base is not None))
        seen.update({"inf" for v in array.flat if v == math.inf})
        seen.update({"nan" for v in array.flat if math.isnan(v)})
        seen.update({"neg" for v in array.flat if -1e30 <= v <= -1e29})
        seen.update({"spread" for v in array.flat if 1e8 - 3 < v < 1e8 + 3})
        seen.update({"denormal" for v in array.flat if 0 < abs(v) < 1e-300})

    draw()
    assert seen == {"inf", "nan", "neg", "spread", "denormal"}
    assert len({strides for _, strides, _ in layouts}) >= 4
    assert any(not c for c, _, _ in layouts)


@settings(max_examples=30, derandomize=True, database=None, deadline=None)
@given(st.data())
def test_dynamic_family_varies_every_axis(data):
    ndim = data.draw(st.integers(1, 4))
    family = data.draw(S.dynamic_family(ndim))
    assert all(len(s) == ndim for s in family)
    assert all(len({s[d] for s in family}) >= 2 for d in range(ndim))
