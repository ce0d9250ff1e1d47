"""``where`` as one compiled pass over the result, its three operands broadcast in place.

numpy's ``where`` (or a copy of ``b`` and a masked copy of ``a``, its no-temporary form)
walks broadcast operands element by element: 3-4 us for a decode step's 4096-float
key/value cache write, 0.8 ms for a training batch's attention mask. Here each row of the
result is chosen whole when the condition is constant along it (the cache write, a key
mask) and each element otherwise. It is a selection, so the bits are ``np.where``'s.
"""

from __future__ import annotations

import numba
import numpy as np
from numba import prange

from ..backends.numpy_backend import prepared_kernel
from ..backends.numpy_backend import where as numpy_where
from ..core.registry import register_kernel
from ..tensor.data import TensorData

NDIM = 4  # operands are viewed with leading axes of 1 up to this many; more: numpy's kernel


@numba.njit(parallel=True)
def _where4(t, c, a, b):
    # ``min(i, n - 1)`` is ``i`` along a full axis and 0 along a broadcast one
    cs, as_, bs = c.shape[3] > 1, int(a.shape[3] > 1), int(b.shape[3] > 1)
    for p in prange(t.shape[0]):
        i = np.int64(p)  # prange's index is unsigned: ``min`` with a signed one is a float
        ci, ai, bi = min(i, c.shape[0] - 1), min(i, a.shape[0] - 1), min(i, b.shape[0] - 1)
        for j in range(t.shape[1]):
            cj, aj, bj = min(j, c.shape[1] - 1), min(j, a.shape[1] - 1), min(j, b.shape[1] - 1)
            for k in range(t.shape[2]):
                ck, ak, bk = min(k, c.shape[2] - 1), min(k, a.shape[2] - 1), min(k, b.shape[2] - 1)
                if cs:
                    for m in range(t.shape[3]):
                        t[i, j, k, m] = (
                            a[ai, aj, ak, m * as_] if c[ci, cj, ck, m] else b[bi, bj, bk, m * bs]
                        )
                elif c[ci, cj, ck, 0]:
                    for m in range(t.shape[3]):
                        t[i, j, k, m] = a[ai, aj, ak, m * as_]
                else:
                    for m in range(t.shape[3]):
                        t[i, j, k, m] = b[bi, bj, bk, m * bs]


def _fits(out, c, a, b) -> bool:
    """Same-dtype operands and a boolean condition (else numpy's promotion decides)."""
    return c == np.bool_ and a == b == out.dtype and 0 < out.size and len(out.shape) <= NDIM


def _runner(size: int):
    from .backend import runner  # the backend imports this module

    return runner(_where4, size)


def _shape4(shape: tuple) -> tuple:
    return (1,) * (NDIM - len(shape)) + tuple(shape)


def prepare_where(out, inputs):
    if not _fits(out, *(s.dtype for s in inputs)):
        return numpy_where.prepare(out, inputs)
    shapes, run, lead = [_shape4(s.shape) for s in inputs], _runner(out.size), _shape4(out.shape)

    def call(t, c, a, b):
        run(t.reshape(lead), c, a, b)

    return prepared_kernel("where", out, inputs, call, shapes, contiguous=False)


@register_kernel("where", "numba")
def where(c, a, b, out):
    if not _fits(out, *(x.storage.dtype for x in (c, a, b))):
        return numpy_where(c, a, b, out=out)
    t = np.empty(_shape4(out.shape), out.dtype)
    views = [x.as_numpy_view().reshape(_shape4(x.shape)) for x in (c, a, b)]
    _runner(t.size)(t, *views)
    return TensorData.contiguous(t.reshape(-1), out.shape)


where.prepare = prepare_where
