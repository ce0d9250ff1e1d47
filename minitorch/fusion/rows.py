"""Row groups (chapter 7's fusion, in ``max-autotune``): the sums and means over each row's
last axis and the arithmetic around them as one loop per row.

Chapter 7's rules put one reduction in a group and never broadcast its result back, so
layer norm's backward (four means of each row, each used by the next) is a dozen
kernels, each a pass over memory. Here every reduction of a row runs in turn while the
row is in cache: its values go into a row-long scratch buffer and are summed there, and
the output is written last. Inductor calls this a persistent reduction.

The bits are eager's: each op is the formula chapter 7's loops inline (the same as
numpy's ufunc), and each sum adds the row in numpy's pairwise order (:func:`pairwise`),
so a mean is numpy's mean. Outputs that share a row's reduction are computed by one
node into one buffer, one after the other, each then a view of its part (layer norm's
input gradient with its weight's); a sum over every row (the weight's gradient) is added
row by row as numpy does, in order. Other outputs are one node each (a shared part is
then computed twice: it is cheap, the passes over memory are not).
"""

from __future__ import annotations

import re
from types import SimpleNamespace

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic, overload

from ..core.registry import OPS, OpKind, Spec
from ..passes.pipeline import Stage, register_stage
from ..passes.rewrite import replace_all_uses
from ..tensor.data import TensorData
from ..tensor.indexing import strides_from_shape
from ..tracing.graph import Graph, Node
from .exprs import generatable
from .ir import FUSED

MIN_SIZE = 1 << 12  # a smaller row group: chapter 7's groups (numpy calls) cost less
CHUNKS = 64  # parallel: rows are split into this many runs, each with its scratch row
# Numba caches a kernel with the helpers it calls compiled in: a new helper needs a new
# source (its digest names the cached module), so bump this when pairwise changes.
VERSION = 4
MAX_ROW = 128  # numpy adds a row up to this long as one block of eight accumulators; a
# longer one by halves: left to chapter 7's groups
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


# ---------------------------------------------------------------- numpy's pairwise sum


def _vectorisable(a) -> bool:
    """Is Numba type ``a`` a contiguous 1-D float32 or float64 array?"""
    ok = isinstance(a, types.Array) and a.ndim == 1 and a.layout == "C"
    return ok and a.dtype in (types.float32, types.float64)


def _blocks(combine, what: str):
    """An intrinsic ``(a, m) -> eight lanes`` over ``a[:m]`` (``8 <= m``, a multiple of 8,
    ``a`` contiguous): lane ``k`` is ``a[k]`` combined with ``a[k + 8]``, ``a[k + 16]``...
    in that order, by ``combine(builder, lanes, block)`` on one ``<8 x float>`` a block."""

    @intrinsic
    def lanes8(typingctx, a, m):
        if not (_vectorisable(a) and isinstance(m, types.Integer)):
            return None
        dtype = a.dtype

        def codegen(context, builder, sig, args):
            ary, m = args
            elt = context.get_value_type(dtype)
            vec = ir.VectorType(elt, 8)
            data = context.make_array(sig.args[0])(context, builder, ary).data
            m = context.cast(builder, m, sig.args[1], types.intp)

            def load(i):
                ptr = builder.bitcast(builder.gep(data, [i]), vec.as_pointer())
                return builder.load(ptr, align=elt.get_abi_alignment(context.target_data))

            start = builder.basic_block
            loop, body, done = (builder.append_basic_block(x) for x in ("loop", "body", "done"))
            first = load(ir.Constant(m.type, 0))
            builder.branch(loop)
            builder.position_at_end(loop)
            i, acc = builder.phi(m.type), builder.phi(vec)
            i.add_incoming(ir.Constant(m.type, 8), start)
            acc.add_incoming(first, start)
            builder.cbranch(builder.icmp_signed("<", i, m), body, done)
            builder.position_at_end(body)
            acc.add_incoming(combine(builder, acc, load(i)), body)
            i.add_incoming(builder.add(i, ir.Constant(m.type, 8)), body)
            builder.branch(loop)
            builder.position_at_end(done)
            k = [ir.Constant(ir.IntType(32), k) for k in range(8)]
            lanes = [builder.extract_element(acc, j) for j in k]
            return context.make_tuple(builder, sig.return_type, lanes)

        return types.UniTuple(dtype, 8)(a, m), codegen

    lanes8.__doc__ = what
    return lanes8


# no fast-math flag: IEEE additions, lane by lane, as numpy's eight accumulators make them
_add_lanes = _blocks(lambda b, acc, v: b.fadd(acc, v), "numpy's pairwise accumulators")
# a lane keeps its value unless the block's is greater (a NaN in the block is skipped)
_max_lanes = _blocks(
    lambda b, acc, v: b.select(b.fcmp_ordered(">", v, acc), v, acc), "eight running maxima"
)


def _scalar_lanes(a, m):
    r0, r1, r2, r3, r4, r5, r6, r7 = a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]
    for i in range(8, m, 8):
        r0 += a[i]
        r1 += a[i + 1]
        r2 += a[i + 2]
        r3 += a[i + 3]
        r4 += a[i + 4]
        r5 += a[i + 5]
        r6 += a[i + 6]
        r7 += a[i + 7]
    return r0, r1, r2, r3, r4, r5, r6, r7


def _scalar_max_lanes(a, m):
    r0, r1, r2, r3, r4, r5, r6, r7 = a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]
    for i in range(8, m, 8):
        r0 = a[i] if a[i] > r0 else r0
        r1 = a[i + 1] if a[i + 1] > r1 else r1
        r2 = a[i + 2] if a[i + 2] > r2 else r2
        r3 = a[i + 3] if a[i + 3] > r3 else r3
        r4 = a[i + 4] if a[i + 4] > r4 else r4
        r5 = a[i + 5] if a[i + 5] > r5 else r5
        r6 = a[i + 6] if a[i + 6] > r6 else r6
        r7 = a[i + 7] if a[i + 7] > r7 else r7
    return r0, r1, r2, r3, r4, r5, r6, r7


def lanes(a, m):
    """The eight accumulators of numpy's pairwise sum over ``a[:m]``: one ``<8 x float>``
    add a block where ``a`` is contiguous (LLVM leaves eight scalar ones scalar)."""
    return _scalar_lanes(a, m)


def max_lanes(a, m):
    """The eight running maxima of ``a[:m]`` (lane ``k`` over ``a[k::8]``), as :func:`lanes`."""
    return _scalar_max_lanes(a, m)


@overload(lanes)
def _lanes_overload(a, m):
    return (lambda a, m: _add_lanes(a, m)) if _vectorisable(a) else _scalar_lanes


@overload(max_lanes)
def _max_lanes_overload(a, m):
    return (lambda a, m: _max_lanes(a, m)) if _vectorisable(a) else _scalar_max_lanes


@njit(cache=True)
def pairwise(a, n, zero):
    """``a[:n]`` summed as numpy sums a contiguous row of up to :data:`MAX_ROW`: eight
    accumulators over the blocks of eight, added as a tree, then the rest in order, all
    added to ``zero``."""
    if n < 8:
        res = zero
        for i in range(n):
            res += a[i]
        return res
    m = n - n % 8
    r0, r1, r2, r3, r4, r5, r6, r7 = lanes(a, m)
    r0 = zero + r0  # numpy's sum starts from 0.0 (a row of -0.0 sums to +0.0): the same
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    for i in range(m, n):
        res += a[i]
    return res


# ---------------------------------------------------------------- finding row groups


def _row_reduce(n: Node) -> bool:
    """A float sum or mean over the last axis, kept as a size-1 axis."""
    if n.op not in ("sum", "mean") or n.spec.device != "cpu":
        return False
    x = n.inputs[0].spec
    return (
        len(x.shape) >= 1
        and tuple(n.attrs.get("axis") or ()) == (len(x.shape) - 1,)
        and bool(n.attrs.get("keepdims"))
        and np.dtype(x.dtype) in _FLOATS
        and n.spec.dtype == x.dtype
        and 1 < x.shape[-1] <= MAX_ROW
    )


def _col_sum(n: Node, full: tuple) -> bool:
    """A float sum over every axis but the last of a row group's value: numpy adds the rows
    in order (a sequential sum per column), which the row loop can do as it goes."""
    if n.op != "sum" or n.spec.device != "cpu" or n.attrs.get("keepdims"):
        return False
    x = n.inputs[0].spec
    return (
        tuple(x.shape) == full
        and len(full) >= 2
        and tuple(n.attrs.get("axis") or ()) == tuple(range(len(full) - 1))
        and np.dtype(x.dtype) in _FLOATS
        and n.spec.dtype == x.dtype
    )


def layout(shape: tuple, full: tuple) -> str | None:
    """How a value of ``shape`` is read in the rows of ``full``: per element (``elem``),
    once per row (``row``, the last axis 1), per column (``col``) or once (``scalar``)."""
    shape = tuple(shape)
    if shape == full:
        return "elem"
    if shape == full[:-1] + (1,):
        return "row"
    if int(np.prod(shape)) == 1:
        return "scalar"
    if len(shape) <= len(full) and shape[-1] == full[-1] and int(np.prod(shape[:-1])) == 1:
        return "col"
    return None


def _member(n: Node, full: tuple) -> bool:
    """An op a row loop computes with eager's bits: elementwise, exact in IEEE (no libm)."""
    if _row_reduce(n):
        return tuple(n.inputs[0].spec.shape) == full
    if _col_sum(n, full):
        return True
    op = OPS.get(n.op)
    if op is None or op.kind not in (OpKind.ELEMENTWISE, OpKind.BROADCAST):
        return False
    if not (op.pure and op.fusable and generatable(op)) or op.transcendental or op.parts:
        return False
    if n.spec.device != "cpu" or op.checks([i.spec for i in n.inputs]):
        return False
    if layout(n.spec.shape, full) not in ("elem", "row"):
        return False
    return all(layout(i.spec.shape, full) is not None for i in n.inputs)


def _component(start: Node, full: tuple, taken: set) -> set:
    seen, todo = {start}, [start]
    while todo:
        n = todo.pop()
        # a column sum is complete only after the last row: an output, never read inside
        nexts = list(n.inputs) + ([] if _col_sum(n, full) else list(n.users))
        for m in nexts:
            if m not in seen and m not in taken and _member(m, full):
                seen.add(m)
                todo.append(m)
    late = {n for n in seen if _col_sum(n, full) and any(u in seen for u in n.users)}
    return seen - late


def row_groups(graph: Graph) -> list[Node]:
    """Replace each row group of ``graph`` by a ``fused`` node of kind ``row``; the nodes."""
    made, taken = [], set()
    outputs = set(graph.outputs)
    for red in [n for n in graph.nodes if _row_reduce(n)]:
        if red in taken:
            continue
        full = tuple(red.inputs[0].spec.shape)
        comp = _component(red, full, taken)
        taken |= comp
        if int(np.prod(full)) < MIN_SIZE:
            continue
        outs = [n for n in graph.nodes if n in comp and (n in outputs or set(n.users) - comp)]
        for cluster in _clusters(outs, comp):
            if len(cluster) > 1 and len({n.spec.dtype for n in cluster}) == 1:
                cut = set(outs) - set(cluster)
                region = set().union(*(_region(o, comp, cut) for o in cluster))
                node = _build_packed(graph, cluster, region, full, f"rows_{len(made)}")
                if node is not None:
                    made.append(node)
                    continue
            for out in cluster:
                region = _region(out, comp, set(outs))
                # a column sum alone (a bias's gradient: the sum of another output) is one too
                if _col_sum(out, full) or any(_row_reduce(n) for n in region):
                    made.append(_build(graph, out, region, full, f"rows_{len(made)}"))
    for n in [n for n in graph.nodes if n.op == "sum" and n not in taken]:
        full = tuple(n.inputs[0].spec.shape)  # a sum over every row on its own (a bias's
        if _col_sum(n, full) and int(np.prod(full)) >= MIN_SIZE:  # gradient): one loop
            made.append(_build(graph, n, {n}, full, f"rows_{len(made)}"))
            taken.add(n)
    _drop_dead(graph, taken)
    return made


def _clusters(outs: list, comp: set) -> list[list]:
    """The outputs in groups that share a row's reduction (layer norm's input gradient and
    its weight's, both from the row's mean and variance): one node computes a group."""
    reds = [{n for n in _region(o, comp, set(outs)) if _row_reduce(n)} for o in outs]
    group = list(range(len(outs)))

    def root(k: int) -> int:
        while group[k] != k:
            k = group[k]
        return k

    for a in range(len(outs)):
        for b in range(a + 1, len(outs)):
            if reds[a] & reds[b]:
                group[root(b)] = root(a)
    found: dict = {}
    for k, o in enumerate(outs):
        found.setdefault(root(k), []).append(o)
    return list(found.values())


def _region(out: Node, comp: set, outs: set) -> set:
    """What ``out`` is computed from inside ``comp``: up to the component's other
    outputs, which their own groups compute (a value used only inside is recomputed)."""
    seen, todo = set(), [out]
    while todo:
        n = todo.pop()
        if n in comp and n not in seen and (n is out or n not in outs):
            seen.add(n)
            todo.extend(n.inputs)
    return seen


def _subgraph(graph: Graph, outs: list, region: set, name: str) -> tuple:
    members = [n for n in graph.nodes if n in region]
    ext = []
    for m in members:
        for i in m.inputs:
            if i not in region and i not in ext:
                ext.append(i)
    sub = Graph(name)
    env = {i: sub.add_input(i.spec, i.name) for i in ext}
    for m in members:
        env[m] = sub.add_node(m.op, [env[i] for i in m.inputs], m.attrs, m.spec, where=m.where)
        env[m].name = m.name
    sub.set_outputs([env[o] for o in outs], ("leaf", 0) if len(outs) == 1 else None)
    return sub, ext


def _build(graph: Graph, out: Node, region: set, full: tuple, name: str) -> Node:
    sub, ext = _subgraph(graph, [out], region, name)
    attrs = {"graph": sub, "kind": "row", "name": name, "row": full}
    node = graph.add_node(FUSED, ext, attrs, out.spec, where=out.where)
    graph.nodes.pop()  # add_node appended it; it belongs where the output is
    graph.nodes.insert(graph.nodes.index(out), node)
    replace_all_uses(out, node)
    return node


def _build_packed(graph: Graph, outs: list, region: set, full: tuple, name: str) -> Node:
    """One node computing every output of ``outs`` into one flat buffer, one after the
    other; each output is then a view of its part (``getitem``, then ``reshape``)."""
    sub, ext = _subgraph(graph, outs, region, name)
    order = {n: k for k, n in enumerate(graph.nodes)}
    at = max((order[e] for e in ext), default=-1) + 1  # after every input of the group
    if any(order[u] < at for o in outs for u in o.users):  # and before every reader
        return None  # a reader of one output computes another's input: one node each
    dtype, total = outs[0].spec.dtype, sum(o.spec.size for o in outs)
    attrs = {"graph": sub, "kind": "row", "name": name, "row": full}
    node = graph.add_node(FUSED, ext, attrs, Spec((total,), dtype), where=outs[0].where)
    graph.nodes.pop()
    graph.nodes.insert(at, node)
    offset = 0
    for o in outs:
        key = (slice(offset, offset + o.spec.size),)
        part = graph.add_node("getitem", [node], {"key": key}, Spec((o.spec.size,), dtype),
                              where=o.where)  # fmt: skip
        view = graph.add_node("reshape", [part], {"shape": tuple(o.spec.shape)}, o.spec,
                              where=o.where)  # fmt: skip
        for v in (view, part):  # right after the node, before any user of an output
            graph.nodes.remove(v)
            graph.nodes.insert(at + 1, v)
        replace_all_uses(o, view)
        offset += o.spec.size
    return node


def _drop_dead(graph: Graph, nodes: set) -> None:
    """Remove the grouped nodes nothing reads any more (latest first)."""
    for n in reversed(list(graph.nodes)):
        if n in nodes and not n.users and n not in graph.outputs:
            graph.nodes.remove(n)
            for i in n.inputs:
                if n in i.users:
                    i.users.remove(n)


# ---------------------------------------------------------------- the generated loop


def _rename(lines: list, names: dict, nodes, prefix: str) -> list:
    out = [re.sub(r"\bv(\d+)\b", rf"{prefix}\1", line) for line in lines]
    for n in nodes:
        if n in names:
            names[n] = re.sub(r"\bv(\d+)\b", rf"{prefix}\1", names[n])
    return out


def row_source(sub: Graph, full: tuple, which: str) -> str:
    """The source of ``which`` (``serial``/``parallel``): ``(out, R, C, x0, o0, ...)``."""
    from .codegen import body_lines

    lays = [layout(i.spec.shape, full) for i in sub.inputs]
    loop = "prange" if which == "parallel" else "range"
    args = "".join(f", x{k}, o{k}" for k in range(len(sub.inputs)))
    head = [f"def {which}(out, R, C{args}):"]
    names: dict = {}
    # rows and columns are read through slices: an index ``j`` of ``range`` is known to be
    # >= 0, so LLVM vectorises the loops (``x[o + base + j]`` checks for a negative index)
    body = []  # the statements per row, after its loads
    for k, (i, lay) in enumerate(zip(sub.inputs, lays)):
        if lay == "scalar":
            head.append(f"    a{k} = x{k}[o{k}]")
        elif lay == "col":
            head.append(f"    r{k} = x{k}[o{k}:o{k} + C]")
        elif lay == "row":
            body.append(f"a{k} = x{k}[o{k} + r]")
        else:
            body.append(f"r{k} = x{k}[o{k} + base:o{k} + base + C]")
        if lay in ("scalar", "row"):
            names[i] = f"a{k}"
    dtypes = sorted({np.dtype(n.inputs[0].spec.dtype).name for n in sub.ops if _row_reduce(n)})
    sums = [o for o in sub.outputs if _col_sum(o, full)]
    if sums:  # a column sum adds the rows in order: one thread
        loop = "range"
    chunks = "min(R, CHUNKS)" if which == "parallel" and not sums else "1"
    head += [f"    nchunk = {chunks}", f"    for c in {loop}(nchunk):"]
    head += [f"        t_{d} = np.empty(C, np.{d})" for d in dtypes]
    head += [
        "        for r in range(c * R // nchunk, (c + 1) * R // nchunk):",
        "            base = r * C",
    ]
    elem = {n for n in sub.ops if layout(n.spec.shape, full) == "elem"}

    def chain(target: Node, tag: str) -> list:
        """A loop over the row's columns computing elementwise ``target`` into ``name``."""
        need, todo, loads = set(), [target], []
        while todo:
            n = todo.pop()
            if n in need or n in names:
                continue
            need.add(n)
            if n.op == "input":
                k = sub.inputs.index(n)
                loads.append(f"    a{k} = r{k}[j]")
            else:
                todo.extend(n.inputs)
        local = dict(names)
        local.update({n: f"a{sub.inputs.index(n)}" for n in need if n.op == "input"})
        nodes = [n for n in sub.nodes if n in need and n.op != "input"]
        lines = body_lines(SimpleNamespace(nodes=nodes, outputs=[target]), local)
        lines = _rename(lines, local, [target], tag)
        return ["for j in range(C):", *loads, *[f"    {line}" for line in lines]], local[target]

    for t, n in enumerate(sub.ops):
        if _row_reduce(n):
            d = np.dtype(n.inputs[0].spec.dtype).name
            lines, value = chain(n.inputs[0], f"e{t}_")
            body += lines + [f"    t_{d}[j] = {value}", f"s{t} = pairwise(t_{d}, C, np.{d}(0.0))"]
            if n.op == "mean":  # numpy's mean: the float sum divided by the count
                body.append(f"s{t} = np.{d}(np.float64(s{t}) / C)")
            names[n] = f"s{t}"
        elif n not in elem and not _col_sum(n, full):  # once per row (1 / std, say)
            local = dict(names)
            lines = body_lines(SimpleNamespace(nodes=[n], outputs=[n]), local)
            body += _rename(lines, local, [n], f"w{t}_")
            names[n] = local[n]
    offset = 0  # several outputs: one after the other in ``out``
    for k, o in enumerate(sub.outputs):
        at, tag = (f"{offset} + ", f"o{k}_") if len(sub.outputs) > 1 else ("", "o_")
        if o in sums:  # numpy's order: zero, then each row added in turn (-0 sums to +0)
            lines, value = chain(o.inputs[0], tag)
            zero = f"np.{np.dtype(o.spec.dtype).name}(0.0)"
            body += [f"col{k} = out[{at}0:{at}C]", *lines,
                     f"    col{k}[j] = ({zero} if r == 0 else col{k}[j]) + {value}"]  # fmt: skip
        elif o in elem:
            lines, value = chain(o, tag)
            row = "row" if len(sub.outputs) == 1 else f"row{k}"
            body += [f"{row} = out[{at}base:{at}base + C]", *lines, f"    {row}[j] = {value}"]
        else:
            body.append(f"out[{at}r] = {names[o]}")
        offset += o.spec.size
    return "\n".join(head + [f"            {line}" for line in body]) + "\n"


class RowKernel:
    """The plan kernel of a row group: the generated loop where every input is laid out
    as its layout says (C order), chapter 7's numpy kernel (op by op) otherwise."""

    def __init__(self, node: Node):
        from .codegen import structure_key
        from .runtime import Generated, Refuse, module_source

        self.node, self.sub, self.full = node, node.attrs["graph"], tuple(node.attrs["row"])
        if any(c.spec.size != 1 for c in self.sub.constants):
            raise Refuse("a constant of more than one element in a row group")
        self.layouts = [layout(i.spec.shape, self.full) for i in self.sub.inputs]
        if None in self.layouts:
            raise Refuse("an input that is neither per element, per row, per column nor one")
        self.rows, self.cols = int(np.prod(self.full[:-1])), self.full[-1]
        key = structure_key(self.sub, ["row", *self.layouts])
        sources = [row_source(self.sub, self.full, w) for w in ("serial", "parallel")]
        src = module_source(key, self.sub, sources).replace(
            "from minitorch.fusion.exprs import scalar_fn\n",
            "from minitorch.fusion.exprs import scalar_fn\nfrom minitorch.fusion.rows import "
            f"CHUNKS, pairwise  # v{VERSION}\n",
            1,
        )
        self.gen = Generated(node)
        self.fns = SimpleNamespace(key=key, source=src, seen=set(), serial=None, parallel=None)

    def _load(self):
        from . import cache

        module = cache.load(self.fns.key, self.fns.source)
        self.fns.serial, self.fns.parallel = module.serial, module.parallel

    def _fits(self, d: TensorData, lay: str) -> bool:
        if lay == "scalar":
            return d.size == 1
        if lay == "col":
            return d.size == self.cols and d.strides[-1] == 1
        return d.strides == tuple(strides_from_shape(d.shape))  # elem, row: C order

    def __call__(self, *inputs, out, dest=None, **attrs):
        if not all(self._fits(d, lay) for d, lay in zip(inputs, self.layouts)):
            # an input out of C order: a C-ordered copy (the same values, so the same bits)
            inputs = [
                d if self._fits(d, lay) else TensorData.from_numpy(d.as_numpy_view())
                for d, lay in zip(inputs, self.layouts)
            ]
        if self.fns.serial is None:
            self._load()
        spec = self.node.spec
        res = dest if dest is not None else np.empty(spec.size, spec.dtype)
        args = [res, self.rows, self.cols]
        for d in inputs:
            args += [d.storage, d.offset]
        from .runtime import PARALLEL_MIN

        self.gen.call(self.fns, self.rows * self.cols >= PARALLEL_MIN, *args)
        return TensorData(res, spec.shape, tuple(strides_from_shape(spec.shape)), 0)


# ---------------------------------------------------------------- the pipeline's stage


def _run(unit) -> None:
    unit.rows = row_groups(unit.graph)


def _explain(unit) -> list[str]:
    made = getattr(unit, "rows", None) or []
    lines = [f"Row groups ({len(made)}): a row's sums and means with the arithmetic around them"]
    for n in made:
        ops = ", ".join(m.op for m in n.attrs["graph"].ops)
        lines.append(f"  {n.attrs['name']} over rows of {n.attrs['row'][-1]}: {ops}")
    return lines if made else []


register_stage(
    Stage(
        "rows",
        19,  # before chapter 7's groups, which then take what is left
        _run,
        wanted=lambda options: options.fuse and options.mode == "max-autotune",
        needs=tuple(f"7.{n}" for n in range(6, 11)),
        explain=_explain,
        rewrites=True,
    )
)
