"""Code generation for fused groups (exercises 7.6-7.10).

A fused node's subgraph becomes the source of one Python function that Numba
compiles: one loop nest over the output's iteration space, each input read at
``offset + i0*s0 + i1*s1 + ...`` (its strides in that space, 0 where it is
broadcast, negative for a flipped view), the ops' scalar formulas inlined as
one statement each, one write of the result. Sizes, offsets and strides are
run-time arguments, so one kernel serves every shape of the same rank and layout.

Layout classes, per input (part of the cache key, chosen by the runtime):

* ``"flat"``: C-contiguous over the output's whole shape: read at ``p`` of ``x[o:]``;
* ``"scalar"``: one element broadcast everywhere: read once, before the loop;
* ``"strided"``: anything else: full index arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..exercises import exercise
from ..tracing.graph import Graph

LAYOUTS = ("flat", "scalar", "strided")


@dataclass
class Loop:
    """What the loop-nest generators need to know about one fused elementwise group.

    The generated function is ``def <name>(out, shape, x0, o0, s0, x1, o1, s1, ...)``:
    ``out`` the 1-D C-ordered output, ``shape`` the output's shape (int64 array),
    and per input ``k`` its 1-D storage ``xk``, its offset ``ok`` and its strides
    in the output's iteration space ``sk`` (int64 array of length ``ndim``).
    Input ``k`` must be loaded into the variable ``ak``; ``lines`` (from 7.7)
    compute ``result`` from the ``ak``; ``loop`` is ``"prange"`` (parallel
    outer loop) or ``"range"``.
    """

    name: str
    ndim: int
    layouts: list  # one of LAYOUTS per input
    lines: list  # body statements, e.g. ["v0 = np.float32((a0 + a1))"]
    result: str  # the variable holding the output element
    loop: str = "range"


@dataclass
class ReduceLoop:
    """A reduction with its prologue and epilogue, in one loop nest.

    The iteration space is ``shape = kept dims + reduced dims`` (the runtime
    permutes the axes so the folded ones come last). Generated signature:
    ``def <name>(out, shape, x0, o0, s0, ..., y0, q0, t0, ...)`` where the
    ``x`` inputs (loaded into ``ak``) are read per element of the whole space
    (``sk`` has ``nkeep + nred`` strides) and the ``y`` inputs (loaded into
    ``bk``) once per output element (``tk`` has ``nkeep`` strides).
    ``inner`` lines compute ``inner_result`` from the ``ak``; it is folded with
    ``fold`` (``"sum"``, ``"max"``, ``"min"`` or ``"mean"``) into ``acc``; then
    ``acc`` cast to ``acc_dtype`` (e.g. ``"np.float32"``) goes into variable
    ``reduced`` and the ``outer`` lines compute ``result`` from it and the ``bk``.
    """

    name: str
    nkeep: int
    nred: int
    inner_inputs: int
    outer_inputs: int
    inner: list
    inner_result: str
    fold: str
    acc_init: str  # "0.0", "-math.inf", ...
    acc_dtype: str  # the reduce node's dtype constructor, "np.float32"
    reduced: str
    outer: list
    result: str
    loop: str = "range"
    extra: dict = field(default_factory=dict)


@exercise("7.6")
def loop_strides(shape: tuple, strides: tuple, out_shape: tuple) -> tuple:
    """The strides that read a tensor of ``shape``/``strides`` while looping over ``out_shape``.

    Broadcasting lines the shapes up on the right. An axis of ``out_shape`` that
    the tensor lacks (a missing leading axis) or where the tensor has size 1 is
    read again and again: its stride is 0. Every other axis keeps its stride
    (negative strides too: a flipped view walks backwards). Return one int per
    axis of ``out_shape``.

    Example:
        >>> loop_strides((3, 1), (1, 1), (2, 3, 4))
        (0, 1, 0)
        >>> loop_strides((4,), (-1,), (2, 4))
        (0, -1)

    Hints: book chapter 7, "The exercises".
    """
    raise NotImplementedError("Exercise 7.6: loop_strides")


@exercise("7.7")
def body_lines(graph: Graph, names: dict) -> list:
    """The statements computing ``graph`` one element at a time; fills in ``names``.

    ``names`` maps each input node of ``graph`` (and any constant passed in as
    an input) to the variable holding its element; those nodes keep their names
    and get no statement. Every other ``const`` is inlined: its name is the
    source of its value, ``literal(node.value.numpy(), node.spec.dtype)``. Every
    other node gets, in ``graph.nodes`` order, one statement
    ``f"v<k> = {op_expr(node, args)}"`` (``k`` counts the statements so far,
    ``args`` are its inputs' names in order) and the name ``v<k>``. Return the
    statements; afterwards the output element is ``names[graph.outputs[0]]``.

    Example:
        >>> names = {g.inputs[0]: "a0", g.inputs[1]: "a1"}    # g: (x - y) * 2
        >>> body_lines(g, names)
        ['v0 = np.float32((a0 - a1))', 'v1 = np.float32((v0 * np.float32(2.0)))']

    Hints: book chapter 7, "The exercises" (``op_expr`` and ``literal`` are in
    ``minitorch.fusion.exprs``).
    """
    raise NotImplementedError("Exercise 7.7: body_lines")


@exercise("7.8")
def elementwise_source(loop: Loop) -> str:
    """The source of the function that computes one fused elementwise group.

    Signature and variables as described in :class:`Loop`: the function is
    ``def <loop.name>(out, shape, x0, o0, s0, ...)``; for every output position
    ``p`` (C order over ``shape``) it loads each input ``k`` into ``ak``, runs
    ``loop.lines`` and stores ``out[p] = <loop.result>``. Input ``k``'s element is
    at ``xk[ok + sum(i_d * sk[d])]``; the layouts promise more: a ``"scalar"``
    input is one element, ``xk[ok]``, for every ``p``; a ``"flat"`` input is
    C-contiguous over ``shape``, its element is ``xk[ok + p]``; a
    ``"strided"`` input needs the general index. Any ``ndim`` (0 included) and
    an empty output must work. Only the outermost loop is ``loop.loop``
    (``"prange"`` or ``"range"``); every inner loop is ``range``.

    Performance (graded by a benchmark): the kernel Numba compiles from this source
    is timed on one thread against numpy computing that ten-op float32 chain over
    2**20 contiguous elements; full credit needs 3x numpy's speed (1.8x: half),
    which takes a loop LLVM can vectorise.

    Example (ndim 1, one strided input, ``lines=["v0 = np.float32((-a0))"]``),
    one correct answer:
        def k(out, shape, x0, o0, s0):
            n0 = shape[0]
            s0_0 = s0[0]
            for i0 in range(n0):
                q0 = i0
                c0_0 = o0 + i0 * s0_0
                p = q0
                a0 = x0[np.uint64(c0_0)]
                v0 = np.float32((-a0))
                out[p] = v0

    Hints: book chapter 7, "The exercises".
    """
    raise NotImplementedError("Exercise 7.8: elementwise_source")


@exercise("7.9")
def reduce_source(loop: ReduceLoop) -> str:
    """The source of a reduction with its prologue and epilogue (see :class:`ReduceLoop`).

    For every output position ``p`` (C order over the ``nkeep`` kept axes; with
    ``nkeep == 0`` there is one output element, ``p = 0``): start ``acc`` at
    ``acc_init``; for every element of the ``nred`` folded axes (sizes
    ``shape[nkeep + j]``) load each ``ak = xk[ok + i0*sk[0] + ... +
    j0*sk[nkeep] + ...]``, run the ``inner`` lines and fold ``inner_result``
    into ``acc``: ``sum``/``mean`` add; ``max``/``min`` keep the larger/smaller
    and, as numpy does, a NaN once seen; ``mean`` then divides by the count of
    folded elements. Then ``<reduced> = <acc_dtype>(acc)``, load each
    ``bk = yk[qk + i0*tk[0] + ...]``, run the ``outer`` lines and store
    ``out[p] = <result>``. Only the outermost loop over the kept axes is
    ``loop.loop``; the other loops are ``range``.

    Hints: book chapter 7, "The exercises".
    """
    raise NotImplementedError("Exercise 7.9: reduce_source")


@exercise("7.10")
def structure_key(graph: Graph, layouts: list) -> str:
    """A hash naming the kernel of ``graph``: equal exactly when the generated code is.

    What the generated source depends on goes in: for each node, in order, its
    op, its attributes, its dtype and rank, and the positions (not the names) of
    its inputs in ``graph.nodes``; a size-1 constant's value (it is inlined);
    which node is the output; ``layouts``. What it does not depend on stays
    out: sizes, node names, the values of constants with more than one element
    (passed in, not inlined), where the code was traced. Return
    ``hashlib.sha256(text).hexdigest()[:16]`` of a text holding all of that.

    Example:
        >>> structure_key(trace(f, [float32[2, 3]]), ["flat"]) == \\
        ...     structure_key(trace(f, [float32[7, 9]]), ["flat"])
        True

    Hints: book chapter 7, "The exercises".
    """
    raise NotImplementedError("Exercise 7.10: structure_key")
