"""Structured control flow (``cond``, exercise 5.9) and user-defined ops (``custom_op``)."""

from __future__ import annotations

import inspect

import numpy as np

from ..core.errors import OpError
from ..core.registry import OpKind, dispatch, get_op, register_kernel, register_op, register_vjp
from ..core.tensor import Tensor, is_grad_enabled
from ..exercises import exercise
from ..tensor.data import TensorData
from .graph import Graph
from .tracer import Proxy, Tracer, _escaped, trace_function


def trace_branch(fn, operands, which: str) -> Graph:
    """Trace one branch of a cond on the operands' specs; it must return one tensor."""
    specs = [x.spec for x in operands]
    names = [f"a{i}" for i in range(len(specs))]
    why = f"a cond branch ({which}) is traced from shapes alone"
    graph = trace_function(fn, specs, names, name=f"{which}_branch", why=why)
    if graph.out_tree != ("leaf", 0):
        raise OpError(
            "cond",
            f"the {which} branch must return exactly one Tensor",
            hint="return a single tensor from each branch (call cond once per output)",
        )
    return graph


@exercise("5.9")
def trace_cond(tracer: Tracer, pred, true_fn, false_fn, operands: tuple) -> Proxy:
    """Record ``cond(pred, true_fn, false_fn, *operands)`` as ONE node holding both branches.

    1. ``pred`` must hold exactly one element, else ``OpError("cond", problem, hint)``;
    2. trace both branches: ``trace_branch(true_fn, operands, "true")`` and
       ``trace_branch(false_fn, operands, "false")`` give two graphs whose single
       output node is ``graph.outputs[0]``;
    3. the two output specs (shape, dtype, device) must be equal, else raise
       ``OpError("cond", problem, hint)`` showing both, e.g.
       "branches return different results: true gives float32[2,3], false gives float32[3]";
    4. append ``tracer.graph.add_node("cond", [pred node, *operand nodes],
       {"true_graph": tg, "false_graph": fg}, spec)`` (nodes from ``tracer.lift``)
       and return ``tracer.proxy(node)``.

    Example:
        >>> g = jit(lambda x: cond(x.sum() > 0, lambda a: a * 2, lambda a: -a, x)).trace(x)
        >>> g.op_names()
        ['sum', 'gt', 'cond']

    Hint: both branches are traced, whatever ``pred`` will be: that is the point.
    """
    raise NotImplementedError("Exercise 5.9: trace_cond")


def cond(pred, true_fn, false_fn, *operands):
    """``true_fn(*operands)`` if ``pred`` else ``false_fn(*operands)``, traceable as one node.

    In eager mode only the chosen branch runs, and the other is traced (not
    run) to check that both return the same shape and dtype, so a mismatch is
    caught before the function is ever compiled. Under ``jit`` both branches
    are traced into subgraphs. Branches receive the values they use as ``operands`` (a branch that
    captures a traced value from outside raises an error).
    """
    for x in operands:
        if not isinstance(x, Tensor):
            raise OpError(
                "cond",
                f"operands must be Tensors, got {type(x).__name__}",
                hint="pass Python values through a closure (they are static)",
            )
    traced = [x for x in (pred, *operands) if isinstance(x, Proxy)]
    if not traced:
        if isinstance(pred, Tensor) and pred.size != 1:
            raise OpError(
                "cond",
                f"the predicate must have one element, got shape {pred.shape}",
                hint="reduce it first, e.g. (x > 0).sum() > 0",
            )
        taken, other = ("true", "false") if bool(pred) else ("false", "true")
        fns = {"true": true_fn, "false": false_fn}
        out = fns[taken](*operands)
        other_spec = _untaken_spec(fns[other], operands, other)
        if not isinstance(out, Tensor) or out.spec != other_spec:
            got = out.spec if isinstance(out, Tensor) else type(out).__name__
            raise OpError(
                "cond",
                f"branches return different results: {taken} gives {got}, {other} gives {other_spec}",
                hint="both branches must return one tensor of the same shape and dtype",
            )
        return out
    if not isinstance(pred, Tensor):
        return true_fn(*operands) if pred else false_fn(*operands)
    if not traced[0]._tracer.live:
        raise _escaped(traced[0])
    out = trace_cond(traced[0]._tracer, pred, true_fn, false_fn, tuple(operands))
    out.requires_grad = is_grad_enabled() and any(x.requires_grad for x in operands)
    return out


# The eager shape check of the untaken branch, once per (branch code, operand specs): its
# Python code runs when it is traced, so a side effect there happens once, not every call.
_checked: dict = {}


def _untaken_spec(fn, operands, which: str):
    code = getattr(fn, "__code__", None)
    key = None
    if code is not None:  # what the branch captured is part of the key (numbers by value)
        cells = tuple(_cell_key(c) for c in fn.__closure__ or ())
        key = (code, cells, tuple(x.spec for x in operands), which)
    spec = _checked.get(key) if key is not None else None
    if spec is None:
        spec = trace_branch(fn, operands, which).outputs[0].spec
        if key is not None and len(_checked) < 4096:
            _checked[key] = spec
    return spec


# ---------------------------------------------------------------- custom ops

_CPU_BACKENDS = ("numpy", "python", "numba")


def custom_op(name: str, infer, *, attrs=None, check=None, kind=OpKind.OPAQUE, num_inputs=None):
    """Register a new op from a numpy function; returns a function that calls it.

    ``infer(*specs, **attrs) -> Spec`` is the static shape rule (what the tracer
    runs), ``check(*tensors, **attrs)`` the checks on values (eager and compiled plans), the
    decorated function ``compute(*arrays, **attrs) -> array`` the kernel for the
    CPU backends. ``f.vjp`` registers the backward rule::

        @minitorch.custom_op("softplus", infer=lambda a: a)
        def softplus(x):
            return np.logaddexp(0, x)
    """
    attrs = dict(attrs or {})

    def deco(compute):
        n = num_inputs
        if n is None:
            params = [
                p
                for p in inspect.signature(compute).parameters.values()
                if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.name not in attrs
            ]
            n = len(params)
        # an opaque numpy function may be random or do something else: impure until mark_pure
        register_op(name, kind, n, infer, attrs=attrs, check=check, doc=compute.__doc__ or "",
                    pure=kind is not OpKind.OPAQUE)  # fmt: skip

        def kernel(*inputs: TensorData, out, **at) -> TensorData:
            result = np.asarray(compute(*(x.as_numpy_view() for x in inputs), **at))
            if result.shape != out.shape:
                raise OpError(
                    name,
                    f"the kernel returned shape {result.shape} but the shape function said "
                    f"{out.shape}",
                    hint="make infer and the kernel agree",
                )
            return TensorData.from_numpy(np.ascontiguousarray(result, dtype=out.dtype))

        for b in _CPU_BACKENDS:
            register_kernel(name, b)(kernel)

        def call(*tensors, **at):
            return dispatch(name, *tensors, **at)

        call.__name__, call.__doc__ = name, compute.__doc__
        call.op = get_op(name)
        call.compute = compute
        call.vjp = register_vjp(name)
        return call

    return deco


def _cell_key(cell):
    try:
        v = cell.cell_contents
    except ValueError:
        return None
    if isinstance(v, (bool, int, str, type(None))):
        return (type(v).__name__, v)
    if isinstance(v, float):
        return ("float", np.float64(v).tobytes())
    return ("id", id(v))
