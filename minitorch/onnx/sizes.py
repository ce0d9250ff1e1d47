"""What a dynamic dim reaches: the probe traces behind ``dynamic_axes``.

A trace records sizes as plain numbers. So ``export`` traces the program again
with each named dynamic dim (every dim that shares the name, together) at
other sizes, and compares each probe with the example's trace node by node:

* the dims that follow the name (exercise 10.5 on each probe) become ONNX
  symbols; a dim that changes some other way (``3 * batch``) gets a fresh one;
* a node, an edge, an output or an attribute that differs is Python deciding
  on the size (a branch, a loop, a slice bound). One ONNX graph cannot follow
  that, so export refuses and names the line;
* a constant whose value differs was computed from the size. When it is
  ``a * size + b`` at every size it is rebuilt in the model from the input's
  ``Shape``; anything else is refused with the line that used it.

The sizes catch a branch on the size when one of them takes the other path:
a threshold between 1 and ``2n + 3`` is crossed by one, one above is
invisible to a tracer.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import onnx

from ..core import dtypes as dt
from ..core.errors import OpError
from ..core.registry import OPS
from ..core.tensor import Tensor
from ..tracing.graph import Graph, Node
from .context import OnnxContext

# ops whose emitters write a dynamic ``shape`` attribute from ``ctx.dims`` (see mapping.py;
# pad_slice: 10.7)
SHAPE_ATTR_OPS = ("reshape", "expand", "pad_slice")
DROP = "drop that dim from dynamic_axes (export it at a fixed size)"


@dataclass
class Probe:
    """One dynamic dim name: the (input, dim) pairs it names and its traces at other sizes."""

    symbol: str
    slots: list[tuple[int, int]]
    sizes: tuple[int, ...]  # the example's size, then one per probe trace
    graphs: list[Graph] = field(default_factory=list)

    def says(self) -> str:
        k, d = self.slots[0]
        return f"input{k} dim {d} ({self.symbol!r})"


def probe(trace, inputs: list[Tensor], axes: dict[int, dict[int, str]]) -> list[Probe]:
    """Trace ``trace(inputs)`` again at sizes ``n + 1``, ``2n + 3`` and ``1`` of each dim name.

    Size 1 finds what Python does differently for a single row (squeezing it); a program
    that needs more rows (``x[-2]``) is traced without it.
    """
    groups: dict[str, list[tuple[int, int]]] = {}
    for k, dims in axes.items():
        for d, sym in dims.items():
            groups.setdefault(sym, []).append((k, d))
    probes = []
    for sym, slots in groups.items():
        n = inputs[slots[0][0]].shape[slots[0][1]]
        p = Probe(sym, slots, (n,))
        for size in (n + 1, 2 * n + 3) + ((1,) if n > 1 else ()):
            xs = list(inputs)
            for k in sorted({k for k, _ in slots}):
                shape = [size if (k, d) in slots else s for d, s in enumerate(inputs[k].shape)]
                zero = Tensor(np.zeros((), inputs[k].dtype), device=inputs[k].device)
                xs[k] = zero.expand(*shape)  # a stride-0 view: no memory at any size
            try:
                graph = trace(xs)
            except Exception as e:  # noqa: BLE001 - any failure means the same thing here
                if size == 1:
                    continue
                raise OpError(
                    "onnx.export",
                    f"the program fails when {p.says()} is {size} instead of {n}: {e}",
                    hint="give every dim that must match this one the same name in "
                    f"dynamic_axes, or {DROP}",
                ) from e
            p.sizes += (size,)
            p.graphs.append(graph)
        probes.append(p)
    return probes


def _at(node: Node) -> str:
    return f"at {node.where}" if node.where else "(no source line)"


def _show(node: Node) -> str:
    args = ", ".join(f"%{i.name}" for i in node.inputs)
    return f"%{node.name} = {node.op}({args}) {_at(node)}"


def _used_at(node: Node) -> str:
    """Where a constant is used: the first user's line (constants record none of their own)."""
    for user in node.users:
        if user.where:
            return f"used at {user.where}"
    return "returned as an output" if node in node.graph.outputs else "unused"


def _short(a: np.ndarray) -> str:
    return repr(a.reshape(()).item()) if a.size == 1 else f"<{'x'.join(map(str, a.shape))} array>"


def _same(x, y) -> bool:
    try:
        return bool(np.all(x == y)) and type(x) is type(y)
    except Exception:  # noqa: BLE001 - values without a usable ==
        return repr(x) == repr(y)


def _attr_differs(a: Node, b: Node) -> str | None:
    """The name of an attribute that differs between two traces of one node, if any."""
    op = OPS.get(a.op)
    if op is None or op.onnx is None:
        return None  # not exportable at all: graph_to_onnx names it
    for key in sorted(set(a.attrs) | set(b.attrs)):
        x, y = a.attrs.get(key), b.attrs.get(key)
        if a.op in SHAPE_ATTR_OPS and key == "shape":
            if tuple(x) == a.spec.shape and tuple(y) == b.spec.shape:
                continue  # the output's shape: dynamic dims come from ctx.dims
        if not _same(x, y):
            return key
    return None


def _branch(p: Probe, size: int, there: str, here: str) -> OpError:
    return OpError(
        "onnx.export",
        f"the program changes with {p.says()}: at size {p.sizes[0]} its trace has {there}, "
        f"at size {size} {here}. Python decided something on that size (an if, a loop, a "
        "bound), and one ONNX graph cannot follow it",
        hint="compute both branches and pick with minitorch.where, use bounds that do not "
        f"depend on the size (negative indices, [:-1]), or {DROP}",
    )


def _compare(base: Graph, other: Graph, p: Probe, size: int) -> None:
    for a, b in zip(base.nodes, other.nodes):
        if a.op != b.op or [i.name for i in a.inputs] != [i.name for i in b.inputs]:
            raise _branch(p, size, _show(a), _show(b))
        if a.spec.ndim != b.spec.ndim or a.spec.dtype != b.spec.dtype:
            raise _branch(p, size, f"{_show(a)} : {a.spec}", f"{_show(b)} : {b.spec}")
        if a.op == "const" and a.spec.shape != b.spec.shape:
            raise OpError(
                "onnx.export",
                f"the constant %{a.name} ({_used_at(a)}) has shape {list(a.spec.shape)} when "
                f"{p.says()} is {p.sizes[0]} and {list(b.spec.shape)} when it is {size}: it was "
                "built from that size (arange, zeros, ...), and ONNX would keep one shape",
                hint=f"build it from the input with tensor ops, or {DROP}",
            )
        key = _attr_differs(a, b)
        if key is not None:
            raise OpError(
                "onnx.export",
                f"{_show(a)} has {key}={a.attrs.get(key)!r} when {p.says()} is {p.sizes[0]} "
                f"and {b.attrs.get(key)!r} when it is {size}: Python computed it from that "
                "size, and ONNX would keep the first",
                hint="use a bound that does not depend on the size (a negative index, x[:-1] "
                f"rather than x[:x.shape[0] - 1]), or {DROP}",
            )
    if len(base.nodes) != len(other.nodes):
        n = min(len(base.nodes), len(other.nodes))
        ends = [
            f"{len(g.nodes) - n} more nodes from {_show(g.nodes[n])}"
            if len(g.nodes) > n
            else "nothing more"
            for g in (base, other)
        ]
        raise _branch(p, size, *ends)
    outs = [f"outputs {[o.name for o in g.outputs]} {g.out_tree}" for g in (base, other)]
    if outs[0] != outs[1]:
        raise _branch(p, size, *outs)


def check_same_program(base: Graph, probes: list[Probe]) -> dict[str, tuple[Probe, list]]:
    """Refuse what ONNX cannot follow; return the constants whose value changed with a size.

    The result maps a constant's node name to ``(probe, [value at each of probe.sizes])``.
    """
    changed: dict[str, tuple[Probe, list]] = {}
    for p in probes:
        for size, g in zip(p.sizes[1:], p.graphs):
            _compare(base, g, p, size)
        for i, node in enumerate(base.nodes):
            if node.op != "const":
                continue
            values = [node.value] + [g.nodes[i].value for g in p.graphs]
            if all(v is node.value for v in values):
                continue  # the same tensor (a parameter): nothing computed
            arrays = [v.numpy() for v in values]
            if all(
                np.array_equal(arrays[0], a, equal_nan=arrays[0].dtype.kind == "f") for a in arrays
            ):
                continue
            if node.name in changed:
                raise OpError(
                    "onnx.export",
                    f"the constant %{node.name} ({_used_at(node)}) changes with both "
                    f"{changed[node.name][0].says()} and {p.says()}",
                    hint=f"compute it from the inputs with tensor ops, or {DROP}",
                )
            changed[node.name] = (p, arrays)
    return changed


def symbols(base: Graph, probes: list[Probe], dims: list[list[dict]], axes: dict) -> dict:
    """``{node name: {dim: symbol}}`` for ``OnnxContext``.

    ``dims[j]`` holds ``dynamic_dims(base, g)`` for each trace ``g`` of ``probes[j]``. A
    dim is named by the probe's symbol when its size is the symbol's at every size;
    any other changing dim (``3 * batch``, or moved by two names) gets a fresh name.
    """
    position = {n.name: i for i, n in enumerate(base.nodes)}
    moved: dict[tuple[str, int], list[Probe]] = {}
    for p, found in zip(probes, dims):
        for name, d in {(name, d) for f in found for name, ds in f.items() for d in ds}:
            moved.setdefault((name, d), []).append(p)
    out: dict[str, dict[int, str]] = {}
    for (name, d), ps in moved.items():
        i = position[name]
        sym = f"{name}_dim{d}"
        if len(ps) == 1:
            sizes = (base.nodes[i].spec.shape[d],) + tuple(
                g.nodes[i].spec.shape[d] for g in ps[0].graphs
            )
            if sizes == ps[0].sizes:
                sym = ps[0].symbol
        out.setdefault(name, {})[d] = sym
    for k, node in enumerate(base.inputs):
        out[node.name] = dict(axes.get(k, {}))
    return out


def _affine(sizes, arrays):
    """``(a, b)`` with ``value == a * size + b`` at every size, or None."""
    if arrays[0].dtype == dt.bool_:
        return None
    v = [a.astype(np.float64) for a in arrays]
    if not all(np.isfinite(x).all() for x in v):
        return None
    a = (v[1] - v[0]) / (sizes[1] - sizes[0])
    b = v[0] - a * sizes[0]
    if not all(np.allclose(a * s + b, x, rtol=1e-6, atol=0) for s, x in zip(sizes, v)):
        return None
    if arrays[0].dtype.kind in "iu" and not (np.all(a == np.round(a)) and np.all(b == np.round(b))):
        return None
    return a.astype(arrays[0].dtype), b.astype(arrays[0].dtype)


def rebuild_constants(model: onnx.ModelProto, base: Graph, changed: dict) -> None:
    """Replace each size-computed constant's initializer by nodes computing it from ``Shape``.

    graph_to_onnx (exercise 10.6) names a constant's initializer ``const_<node name>``.
    """
    if not changed:
        return
    nodes = {n.name: n for n in base.nodes}
    ctx = OnnxContext()
    inits = {i.name: i for i in model.graph.initializer}
    for name, (p, arrays) in changed.items():
        node, target = nodes[name], f"const_{name}"
        fit = _affine(p.sizes, arrays)
        if fit is None or target not in inits:
            shown = ", ".join(_short(a) for a in arrays)
            sizes = ", ".join(map(str, p.sizes))
            raise OpError(
                "onnx.export",
                f"the constant %{name} ({_used_at(node)}) is {shown} when {p.says()} is "
                f"{sizes}: Python computed it from that size (or chose it in a branch on it), "
                f"and the ONNX model would keep {_short(arrays[0])} at every size",
                hint="compute it with tensor ops from the input (x.mean(axis=0), not "
                "x.sum(axis=0) * (1 / x.shape[0])); a * size + b of one dim is rebuilt in the "
                f"model; or {DROP}",
            )
        a, b = fit
        k, d = p.slots[0]
        dim = ctx.const(np.array(d, np.int64), f"{target}_dim")
        out = ctx.node("Shape", [f"input{k}"], output=f"{target}_shape")
        out = ctx.node("Gather", [out, dim], output=f"{target}_size", axis=0)
        if arrays[0].dtype != dt.int64:
            out = ctx.node("Cast", [out], output=f"{target}_cast", to=ctx.onnx_dtype(a.dtype))
        if a.ndim or np.any(a != 1):  # an array constant needs the Mul for its shape
            out = ctx.node("Mul", [out, ctx.const(a, f"{target}_a")], output=f"{target}_mul")
        if np.any(b != 0):
            out = ctx.node("Add", [out, ctx.const(b, f"{target}_b")], output=f"{target}_add")
        ctx.node("Identity", [out], output=target)
        model.graph.initializer.remove(inits[target])
    model.graph.initializer.extend(ctx.initializers)
    rest = list(model.graph.node)
    del model.graph.node[:]
    model.graph.node.extend(ctx.nodes + rest)
