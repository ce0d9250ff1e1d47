"""Course kernels for contiguous elementwise work on a real GPU (framework code, not exercises).

Exercises 4.1 and 4.2 turn every output ordinal into a multi-index and back into a
position for each input: a dozen integer divisions per element, which bound them far below
the memory's bandwidth. Most elementwise work needs none of that: the output is contiguous,
and each input is either laid out like it or is a contiguous block repeated by broadcasting
(a scalar, a row such as a bias, a column, a channel vector). For those the position of
output element ``i`` in an input is ``(i // inner) % count``, or simply ``i`` or 0
(:func:`layout`). These kernels read it that way in a grid-stride loop that keeps four
elements per thread in flight (all loads before the stores), with launch sizes from the
device's properties (:func:`launch_shape`). No element pays an index division: a row,
column or channel operand keeps a cursor that the loop advances with adds.

The backend uses them only under ``backend.TUNED`` (default on a real GPU): on the
simulator the learners' kernels must serve every case, since grading measures those.
Anything they do not cover (strided views, broadcasts that are not one block) returns None
and falls back to the exercises.
"""

from __future__ import annotations

import ast
import functools
import inspect
import math
import textwrap

import numba
import numpy as np
from numba import cuda

from ..core.instrument import launch
from ..tensor.data import TensorData
from . import backend as cb

# How an input's element for output ordinal i is found (compile-time constants of a kernel).
SAME, SCALAR, PERIOD, STRETCH, BLOCK = range(5)
MIN_PER_THREAD = 4  # fewer blocks for small arrays: each thread does at least this many


def sizes_for(sms: int, max_threads: int, warp: int, per_sm: int) -> tuple[int, int]:
    """(threads per block, most blocks) for a device with ``sms`` multiprocessors.

    256 threads (8 warps) per block lets several blocks share a multiprocessor; the grid
    fills every multiprocessor with as many blocks as it holds at once, twice over so one
    finishing early leaves no multiprocessor idle. The grid-stride loop covers the rest."""
    threads = max(warp, min(256, max_threads) // warp * warp)
    return threads, 2 * sms * max(1, per_sm // threads)


@functools.cache
def launch_shape() -> tuple[int, int]:
    """The device's :func:`sizes_for`, read once; the backend's tiny sizes on the simulator."""
    if cb.SIMULATOR:
        return cb.THREADS, cb.MAX_BLOCKS
    dev = cuda.get_current_device()
    return sizes_for(dev.MULTIPROCESSOR_COUNT, dev.MAX_THREADS_PER_BLOCK, dev.WARP_SIZE,
                     dev.MAX_THREADS_PER_MULTIPROCESSOR)  # fmt: skip


def grid(n: int) -> tuple[int, int]:
    """(blocks, threads) for ``n`` elements."""
    threads, most = launch_shape()
    return max(1, min(most, math.ceil(n / (threads * MIN_PER_THREAD)))), threads


def layout(x: TensorData, shape) -> tuple[int, int, int] | None:
    """(kind, inner, count) locating ``x``'s element for each ordinal of the contiguous
    ``shape`` it broadcasts to, or None when ``x`` is not one contiguous block so repeated.

    ``x``'s dims that are not broadcast must be consecutive dims of ``shape``: their
    ``count`` elements repeat over the ``inner`` elements of the dims after them."""
    if not x.is_contiguous():
        return None
    lead = len(shape) - x.ndim
    kept = [d for d, n in enumerate(shape) if n != 1 and d >= lead and x.shape[d - lead] == n]
    if not kept:
        return SCALAR, 1, 1
    if kept[-1] - kept[0] + 1 != len(kept):
        return None
    count = math.prod(shape[kept[0] : kept[-1] + 1])
    inner = math.prod(shape[kept[-1] + 1 :])
    outer = math.prod(shape[: kept[0]])
    if inner == 1:
        return (SAME if outer == 1 else PERIOD), 1, count
    return (STRETCH if outer == 1 else BLOCK), inner, count


# An operand repeated by broadcasting keeps a cursor instead of dividing per element: its
# position q = (i // inner) % count and r = i % inner, advanced by the grid's stride with
# adds and one compare each (the stride's own quotient and remainder are found once).
@cuda.jit(device=True)
def _cursor_start(i, step, inner, count):
    return (i // inner) % count, i % inner, (step // inner) % count, step % inner


@cuda.jit(device=True)
def _cursor_step(q, r, dq, dr, inner, count):
    r += dr
    q += dq
    if r >= inner:
        r -= inner
        q += 1
    if q >= count:
        q -= count
    return q, r


@cuda.jit(device=True)
def _no_cursor(i, step, inner, count):
    return 0, 0, 0, 0


@cuda.jit(device=True)
def _no_step(q, r, dq, dr, inner, count):
    return q, r


# Positions as unsigned integers: Numba wraps a negative signed index around, a compare and
# a select for every access, which these never need (``python -m minitorch.cuda.lowering --sass``).
_U = numba.uint64
_same = cuda.jit(device=True)(lambda x, off, i, q: x[_U(off + i)])
_scalar = cuda.jit(device=True)(lambda x, off, i, q: x[_U(off)])
_repeated = cuda.jit(device=True)(lambda x, off, i, q: x[_U(off + q)])


def _operand_fns(kind):
    """(start, step, read) device functions for an operand of layout ``kind``."""
    if kind == SAME:
        return _no_cursor, _no_step, _same
    if kind == SCALAR:
        return _no_cursor, _no_step, _scalar
    return _cursor_start, _cursor_step, _repeated


def map_body(fn, kind):
    """``out[i] = fn(a[i's element])`` over the contiguous ``out`` of ``n`` elements."""
    start, step_, rd = _operand_fns(kind)

    def kernel(out, n, a, ao, ai, ac):
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        q, r, dq, dr = start(i, step, ai, ac)
        while i + 3 * step < n:  # four elements a trip: the four loads issue before any store
            j, k, m = i + step, i + 2 * step, i + 3 * step
            q1, r1 = step_(q, r, dq, dr, ai, ac)
            q2, r2 = step_(q1, r1, dq, dr, ai, ac)
            q3, r3 = step_(q2, r2, dq, dr, ai, ac)
            x0, x1, x2, x3 = rd(a, ao, i, q), rd(a, ao, j, q1), rd(a, ao, k, q2), rd(a, ao, m, q3)
            out[_U(i)], out[_U(j)], out[_U(k)], out[_U(m)] = fn(x0), fn(x1), fn(x2), fn(x3)
            q, r = step_(q3, r3, dq, dr, ai, ac)
            i += 4 * step
        while i < n:
            out[_U(i)] = fn(rd(a, ao, i, q))
            q, r = step_(q, r, dq, dr, ai, ac)
            i += step

    return kernel


def zip_body(fn, kind_a, kind_b):
    """``out[i] = fn(a[i's element], b[i's element])`` over the contiguous ``out``."""
    sa, na, ra = _operand_fns(kind_a)
    sb, nb, rb = _operand_fns(kind_b)

    def kernel(out, n, a, ao, ai, ac, b, bo, bi, bc):
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        qa, pa, dqa, dpa = sa(i, step, ai, ac)
        qb, pb, dqb, dpb = sb(i, step, bi, bc)
        while i + 3 * step < n:
            j, k, m = i + step, i + 2 * step, i + 3 * step
            qa1, pa1 = na(qa, pa, dqa, dpa, ai, ac)
            qa2, pa2 = na(qa1, pa1, dqa, dpa, ai, ac)
            qa3, pa3 = na(qa2, pa2, dqa, dpa, ai, ac)
            qb1, pb1 = nb(qb, pb, dqb, dpb, bi, bc)
            qb2, pb2 = nb(qb1, pb1, dqb, dpb, bi, bc)
            qb3, pb3 = nb(qb2, pb2, dqb, dpb, bi, bc)
            x0, x1, x2, x3 = (
                ra(a, ao, i, qa),
                ra(a, ao, j, qa1),
                ra(a, ao, k, qa2),
                ra(a, ao, m, qa3),
            )
            y0, y1, y2, y3 = (
                rb(b, bo, i, qb),
                rb(b, bo, j, qb1),
                rb(b, bo, k, qb2),
                rb(b, bo, m, qb3),
            )
            out[_U(i)], out[_U(j)], out[_U(k)], out[_U(m)] = (
                fn(x0, y0),
                fn(x1, y1),
                fn(x2, y2),
                fn(x3, y3),
            )
            qa, pa = na(qa3, pa3, dqa, dpa, ai, ac)
            qb, pb = nb(qb3, pb3, dqb, dpb, bi, bc)
            i += 4 * step
        while i < n:
            out[_U(i)] = fn(ra(a, ao, i, qa), rb(b, bo, i, qb))
            qa, pa = na(qa, pa, dqa, dpa, ai, ac)
            qb, pb = nb(qb, pb, dqb, dpb, bi, bc)
            i += step

    return kernel


class _TypeLiterals(ast.NodeTransformer):
    """Wraps every float constant (a literal, ``math.inf``, a module-level float) in ``_T_``."""

    def __init__(self, env):
        self.env, self.changed = env, False

    def _typed(self, node):
        self.changed = True
        return ast.Call(ast.Name("_T_", ast.Load()), [node], [])

    def visit_Constant(self, node):
        return self._typed(node) if type(node.value) is float else node

    def visit_Attribute(self, node):
        if isinstance(node.value, ast.Name) and node.value.id == "math" and node.attr in (
            "inf", "nan", "pi", "e"):  # fmt: skip
            return self._typed(node)
        return self.generic_visit(node)

    def visit_Call(self, node):  # math.copysign(1, x): an int argument of math's is a float
        f = node.func
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "math":
            node.args = [self._typed(a) if isinstance(a, ast.Constant) and type(a.value) is int
                         else a for a in node.args]  # fmt: skip
        return self.generic_visit(node)

    def visit_Name(self, node):
        is_float = type(self.env.get(node.id)) is float and isinstance(node.ctx, ast.Load)
        return self._typed(node) if is_float else node


@functools.cache
def typed(fn, dtype):
    """The device function ``fn`` with its float constants and arguments in ``dtype``.

    A scalar formula written for Python (``x if x > 0 else 0.0``) computes in float64 on
    the device, since Numba types a float literal as float64: a float32 map pays for
    float64 arithmetic and conversions (``python -m minitorch.cuda.lowering`` counts them).
    Rewritten with ``_T_(0.0)`` (``_T_`` the dtype's Numba type, which folds at compile
    time) it stays in float32. Only float32 results are rewritten, and only formulas whose
    source is a ``def``; anything else is returned as it is."""
    py = getattr(fn, "py_func", None)
    if np.dtype(dtype) != np.float32 or not inspect.isfunction(py) or py.__name__ == "<lambda>":
        return fn
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(py)))
    except (OSError, SyntaxError):
        return fn
    env = dict(py.__globals__, **inspect.getclosurevars(py).nonlocals, _T_=numba.float32)
    rewrite = _TypeLiterals(env)
    func = rewrite.visit(tree).body[0]
    if not rewrite.changed:
        return fn
    func.decorator_list = []
    args = [a.arg for a in func.args.args]  # an int argument of a float op is cast first
    func.body[:0] = ast.parse(f"{', '.join(args)}, = {', '.join(f'_T_({a})' for a in args)},").body
    code = compile(ast.fix_missing_locations(tree), f"<typed {py.__qualname__}>", "exec")
    exec(code, env)
    return cuda.jit(device=True)(env[func.name])


def _operand(x: TensorData, shape):
    found = layout(x, shape)
    if found is None:
        return None
    kind, inner, count = found
    return kind, (x.storage, x.offset, inner, count)


def map_tuned(fn, a: TensorData, shape, dtype) -> TensorData | None:
    """The map of ``fn`` over ``a`` broadcast to ``shape``, or None when ``a``'s layout is not
    covered (the backend then runs exercise 4.1)."""
    op = _operand(a, shape)
    if op is None:
        return None
    out = cb._empty(shape, dtype)
    if out.size:
        kernel = cb.own_kernel(map_body, typed(fn, dtype), op[0])
        launch(kernel, *grid(out.size), out.storage, out.size, *op[1], name="map")
    return out


def zip_tuned(fn, a: TensorData, b: TensorData, shape, dtype) -> TensorData | None:
    """``fn`` of ``a`` and ``b`` broadcast to ``shape``, or None (the backend runs 4.2)."""
    op_a, op_b = _operand(a, shape), _operand(b, shape)
    if op_a is None or op_b is None:
        return None
    out = cb._empty(shape, dtype)
    if out.size:
        kernel = cb.own_kernel(zip_body, typed(fn, dtype), op_a[0], op_b[0])
        launch(kernel, *grid(out.size), out.storage, out.size, *op_a[1], *op_b[1], name="zip")
    return out


# What the tuned kernels compute in on a GPU (``python -m minitorch.cuda.lowering``): each
# compiles for the device, and a float32 one keeps no float64 (its formula typed).
def _lowered(name, unary):
    from ..core.registry import get_op
    from . import lowering

    i64 = numba.int64

    @lowering.register(f"tuned {'map' if unary else 'zip'}: {name}", ("float32",))
    def _(t):
        fn, view = typed(cb.device_fn(get_op(name)), str(t)), (t[::1], i64, i64, i64)
        if unary:
            return map_body(fn, SAME), (t[::1], i64) + view
        return zip_body(fn, SAME, BLOCK), (t[::1], i64) + view * 2


LOWERED = {"add": 0, "mul": 0, "div": 0, "neg": 1, "relu": 1, "exp": 1, "log": 1, "sqrt": 1,
           "recip": 1, "sigmoid": 1, "gelu": 1}  # fmt: skip
for _name, _unary in LOWERED.items():
    _lowered(_name, _unary)
