"""Small fused groups bound once to their buffers: a generated Python function of numpy calls.

A group of a few hundred elements (a decode step's bias, residual and GELU on one
token) costs more in the kernels' Python (views, wrappers, the group's interpreter,
Numba's argument checks) than in arithmetic. When the executor binds such a group
to its place in the arena (``kernel.bind``, chapter 8), this module writes it as one
straight-line function: each op one numpy call with ``out=``, into temporaries made
once (a few KiB, kept with the function), the last one into the destination::

    def run(i0, i1, i2):
        x1 = v1(i1)
        rows_matmul(h0, x1, out=t0)       # the group's matmul, into a temporary
        add(t0, x2, out=t1)
        ...
        multiply(t9, t10, out=d)          # the group's value, in the arena
        return result

An op with ``OpDef.parts`` (``gelu``) is written out as those parts first, so every
step is a ufunc computing in the group's dtype, in eager's order: eager's bits, as the
generated loops give (numpy's SIMD ``tanh`` included, which a Numba loop would not).
"""

from __future__ import annotations

import numpy as np

from ..backends.numpy_backend import _where_into, rows_matmul, viewer
from ..core.registry import OpKind, get_op
from ..tensor.data import TensorData
from ..tensor.indexing import strides_from_shape
from .runtime import _sub

# the largest value (elements) a group computes for this road: above it, memory passes
# cost more than Python, and the generated loops or the split win (``fusion/split.py``)
SMALL_MAX = 1 << 12


def _natural(fn, node) -> bool:
    """Does numpy's ``fn`` compute ``node``'s dtype from its inputs' dtypes by itself?"""
    with np.errstate(all="ignore"):  # 1 / 0 on the probe's zeros
        probe = fn(*[np.zeros(1, i.spec.dtype) for i in node.inputs])
    return probe.dtype == np.dtype(node.spec.dtype)


def _step(n):
    """``(function name, numpy function, keyword attrs)`` for node ``n``, or None."""
    op = get_op(n.op)
    if n.op == "matmul":
        same = all(i.spec.dtype == n.spec.dtype for i in n.inputs)
        return ("rows_matmul", rows_matmul, {}) if same else None
    if n.op == "where":
        same = n.inputs[0].spec.dtype == np.bool_ and all(
            i.spec.dtype == n.spec.dtype for i in n.inputs[1:]
        )
        return ("where_into", _where_into, {}) if same else None
    fn = op.numpy
    if op.kind in (OpKind.ELEMENTWISE, OpKind.BROADCAST) and isinstance(fn, np.ufunc):
        return (fn.__name__, fn, {}) if _natural(fn, n) else None
    if op.kind is OpKind.REDUCE and fn is not None and n.inputs[0].spec.dtype == n.spec.dtype:
        return (fn.__name__, fn, {"axis": n.attrs["axis"], "keepdims": n.attrs["keepdims"]})
    return None


def small_binder(node):
    """``bind(dest, fixed)`` for fused ``node``: the group as one generated function over
    its buffers (``dest`` None: an output, made anew on each call), or None (too large,
    or an op without a numpy ``out=`` form)."""
    from .split import written_out  # split builds on runtime, as this module does

    if node.attrs.get("kind") == "row":  # rows of a large input, whatever it computes
        return None
    sub = _sub(written_out(node))
    if not sub.ops or any(n.spec.size > SMALL_MAX for n in sub.ops):
        return None
    steps = [_step(n) for n in sub.ops]
    if any(s is None for s in steps):
        return None
    spec = node.spec
    strides = tuple(strides_from_shape(spec.shape))

    def bind(dest, fixed):
        params = "".join(f"i{k}, " for k in range(len(fixed)))
        env, scope, lines = {}, {}, [f"def run({params}out=None, **attrs):"]
        for k, (i, f) in enumerate(zip(sub.inputs, fixed)):
            v = viewer(i.spec)
            held = v(f) if f is not None else None
            if held is not None and np.shares_memory(held, f.storage):
                scope[f"h{k}"], env[i] = held, f"h{k}"  # the arena's place: viewed once
            else:
                scope[f"v{k}"], env[i] = v, f"x{k}"
                lines.append(f"    x{k} = v{k}(i{k})")
        for k, c in enumerate(sub.constants):
            if c.spec.size == 1:  # inlined, as the generated loops inline it
                scope[f"c{k}"] = np.array(c.value._data.as_numpy_view().reshape(c.spec.shape))
                env[c] = f"c{k}"
            else:  # a tensor's data, read on every call (a parameter's changes)
                scope[f"k{k}"], scope[f"w{k}"] = c.value, viewer(c.spec)
                env[c], lines = f"y{k}", lines + [f"    y{k} = w{k}(k{k}._data)"]
        last = sub.outputs[0]
        for j, (n, (name, fn, kw)) in enumerate(zip(sub.ops, steps)):
            if n is last:
                target = "d"
            else:
                scope[f"t{j}"], target = np.empty(n.spec.shape, n.spec.dtype), f"t{j}"
            scope[f"f{j}"] = fn
            args = [env[i] for i in n.inputs]
            extra = "".join(f", {a}={v!r}" for a, v in kw.items())
            if fn is _where_into:
                lines.append(f"    f{j}({target}, {', '.join(args)})  # where")
            else:
                lines.append(f"    f{j}({', '.join(args)}, out={target}{extra})  # {name}")
            env[n] = target
        if env[last] != "d":  # the value is an input or a constant: copy it into place
            scope["copyto"] = np.copyto
            lines.append(f"    copyto(d, {env[last]})")
        if dest is None:  # an output, which the caller keeps: a new array on each call
            scope.update(empty=np.empty, TensorData=TensorData, shape=spec.shape,
                         strides=strides, dtype=np.dtype(spec.dtype))  # fmt: skip
            lines.insert(1, "    d = empty(shape, dtype)")
            lines.append("    return TensorData(d.reshape(-1), shape, strides, 0)")
        else:
            scope["d"] = dest.reshape(spec.shape)
            scope["result"] = TensorData(dest, spec.shape, strides, 0)
            lines.append("    return result")
        source = "\n".join(lines) + "\n"
        exec(compile(source, f"<minitorch small {node.attrs.get('name', 'fused')}>", "exec"), scope)  # noqa: S102
        run = scope["run"]
        run.source = source
        return run

    return bind
