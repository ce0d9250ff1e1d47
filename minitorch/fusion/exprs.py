"""How one op of a fused group is written in generated source.

The registry stays the only op table. An op's ``scalar`` formula is what the
generated code computes; an op whose formula is one Python expression declares
that expression when it is registered, as ``OpDef.expr`` (a template over the
argument names, ``"({0} + {1})"``, ``core/ops.py``'s ``EXPR``), so the generated
loop reads like hand-written code. Every other op with a Numba-compilable ``scalar`` (``fast/scalars.py``,
the same formulas chapter 3 compiles) is called by name from the generated
module. ``tests/test_ch7_codegen.py`` checks each template against ``scalar``.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from ..core.registry import OpDef, OpKind, get_op
from ..fast.scalars import scalar_for

_compiled: dict[str, object] = {}


def generatable(op: OpDef) -> bool:
    """Can a generated loop compute ``op`` per element?"""
    if op.kind not in (OpKind.ELEMENTWISE, OpKind.BROADCAST):
        return False
    return op.expr is not None or scalar_for(op) is not None


def scalar_fn(name: str):
    """The compiled ``scalar`` of op ``name``, bound as ``_f_<name>`` in generated modules."""
    fn = _compiled.get(name)
    if fn is None:
        fn = _compiled[name] = njit(cache=False, error_model="numpy")(scalar_for(get_op(name)))
    return fn


def dtype_name(dtype) -> str:
    """``np.float32`` etc.: the constructor the generated code casts with."""
    return f"np.{np.dtype(dtype).name}"


def literal(value, dtype) -> str:
    """A scalar constant as typed source: ``np.float32(2.0)``, ``np.float32(math.inf)``."""
    v = np.asarray(value).reshape(-1)[0].item()
    if isinstance(v, float) and not math.isfinite(v):
        text = "math.nan" if v != v else ("math.inf" if v > 0 else "-math.inf")
    else:
        text = repr(v)
    return f"{dtype_name(dtype)}({text})"


def op_expr(node, args: list[str]) -> str:
    """Source computing ``node`` from argument names, cast to the node's dtype.

    Every statement is cast, so a float32 chain stays float32 (as eager computes
    it, and as SIMD wants it) even where a template mentions an int literal.
    """
    op = get_op(node.op)
    if op.expr is not None:
        t = dtype_name(node.spec.dtype)
        body = op.expr.format(*args, zero=f"{t}(0)", one=f"{t}(1)")
    elif scalar_for(op) is not None:
        body = f"_f_{op.name}({', '.join(args)})"
    else:
        raise ValueError(f"op {op.name!r} has no scalar formula a loop can compute")
    return f"{dtype_name(node.spec.dtype)}({body})"


def calls(graph) -> list[str]:
    """Names of the ops ``graph`` calls as functions (no template): bound in the module."""
    seen = []
    for n in graph.ops:
        op = get_op(n.op)
        if op.expr is None and op.name not in seen and generatable(op):
            seen.append(op.name)
    return seen
