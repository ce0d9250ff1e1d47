"""Chapter 7 (codegen) known-wrong implementations: each must lose points."""

from __future__ import annotations

import hashlib

from minitorch.fusion.codegen import Loop, ReduceLoop
from minitorch.fusion.exprs import literal, op_expr
from minitorch.tracing.graph import Graph
from solutions.reference import ch7_codegen as ref

from . import mutant

# ---------------------------------------------------------------- 7.6 loop_strides


@mutant("7.6", "lines the shapes up on the left instead of the right")
def loop_strides_left_aligned(shape: tuple, strides: tuple, out_shape: tuple) -> tuple:
    return tuple(
        0 if d >= len(shape) or shape[d] == 1 else strides[d] for d in range(len(out_shape))
    )


@mutant("7.6", "keeps the stride of a size-1 axis that is broadcast")
def loop_strides_size_one_kept(shape: tuple, strides: tuple, out_shape: tuple) -> tuple:
    lead = len(out_shape) - len(shape)
    return tuple(0 if a < lead else strides[a - lead] for a in range(len(out_shape)))


@mutant("7.6", "drops the sign of a negative stride (a flipped view)")
def loop_strides_abs(shape: tuple, strides: tuple, out_shape: tuple) -> tuple:
    return tuple(abs(s) for s in ref.loop_strides(shape, strides, out_shape))


# ---------------------------------------------------------------- 7.7 body_lines


def _body(graph, names, reverse=False, const=None, one_name=False):
    lines = []
    for node in graph.nodes:
        if node in names or node.op == "input":
            continue
        if node.op == "const":
            names[node] = const or literal(node.value.numpy(), node.spec.dtype)
            continue
        var = "v0" if one_name else f"v{len(lines)}"
        args = [names[i] for i in node.inputs]
        if reverse and len(args) == 2:
            args = args[::-1]
        lines.append(f"{var} = {op_expr(node, args)}")
        names[node] = var
    return lines


@mutant("7.7", "passes a binary op's arguments in the wrong order")
def body_lines_reversed(graph: Graph, names: dict) -> list:
    return _body(graph, names, reverse=True)


@mutant("7.7", "writes every constant as 0")
def body_lines_const_zero(graph: Graph, names: dict) -> list:
    return _body(graph, names, const="np.float32(0)")


@mutant("7.7", "reuses one variable for every statement (an earlier value is overwritten)")
def body_lines_one_name(graph: Graph, names: dict) -> list:
    return _body(graph, names, one_name=True)


# ---------------------------------------------------------------- 7.8 elementwise_source


@mutant("7.8", "reads a flat input at p without its offset")
def elementwise_source_no_offset(loop: Loop) -> str:
    src = ref.elementwise_source(loop)
    for i in range(len(loop.layouts)):
        src = src.replace(f"x{i} = x{i}[o{i}:]", f"x{i} = x{i}")
    return src


@mutant("7.8", "reads a scalar input at index 0, not at its offset")
def elementwise_source_scalar_at_zero(loop: Loop) -> str:
    src = ref.elementwise_source(loop)
    for i in range(len(loop.layouts)):
        src = src.replace(f"a{i} = x{i}[o{i}]", f"a{i} = x{i}[0]")
    return src


@mutant("7.8", "C-order position multiplies by the wrong size (n<d-1> for n<d>)")
def elementwise_source_bad_position(loop: Loop) -> str:
    src = ref.elementwise_source(loop)
    for d in range(1, loop.ndim):
        src = src.replace(f"q{d - 1} * n{d} + i{d}", f"q{d - 1} * n{d - 1} + i{d}")
    return src


@mutant("7.8", "strided inputs use the first axis's stride on every axis")
def elementwise_source_one_stride(loop: Loop) -> str:
    src = ref.elementwise_source(loop)
    for i in range(len(loop.layouts)):
        for d in range(1, loop.ndim):
            src = src.replace(f"s{i}_{d} = s{i}[{d}]", f"s{i}_{d} = s{i}[0]")
    return src


# ---------------------------------------------------------------- 7.9 reduce_source


@mutant("7.9", "assigns instead of accumulating (acc = v for +=)")
def reduce_source_assign(loop: ReduceLoop) -> str:
    return ref.reduce_source(loop).replace("acc += ", "acc = ")


@mutant("7.9", "max/min drop NaN (plain comparison)")
def reduce_source_nan_dropped(loop: ReduceLoop) -> str:
    src = ref.reduce_source(loop)
    return src.replace(" or acc != acc)", ")")


@mutant("7.9", "mean divides by the first folded axis only")
def reduce_source_mean_count(loop: ReduceLoop) -> str:
    src = ref.reduce_source(loop)
    count = " * ".join(f"r{d}" for d in range(loop.nred))
    return src.replace(f"acc / ({count})", "acc / (r0)")


@mutant("7.9", "starts the accumulator once, not once per output element")
def reduce_source_acc_once(loop: ReduceLoop) -> str:
    src = ref.reduce_source(loop).split("\n")
    k = next(i for i, line in enumerate(src) if line.strip() == f"acc = {loop.acc_init}")
    line = src.pop(k)
    src.insert(1, "    " + line.strip())
    return "\n".join(src)


# ---------------------------------------------------------------- 7.10 structure_key


def _key(graph, layouts, sizes=False, dtype=True, inputs=True, attrs=True, lay=True):
    where = {n: k for k, n in enumerate(graph.nodes)}
    lines = []
    for n in graph.nodes:
        parts = [n.op]
        if attrs:
            parts.append(repr(sorted((k, repr(v)) for k, v in n.attrs.items())))
        if dtype:
            parts.append(n.spec.dtype.name)
        parts.append(str(n.spec.shape) if sizes else str(n.spec.ndim))
        if inputs:
            parts.append(str([where[i] for i in n.inputs]))
        if n.op == "const" and n.spec.size == 1:
            parts.append(repr(n.value.numpy().reshape(-1)[0].item()))
        lines.append("|".join(parts))
    lines.append(f"out {where[graph.outputs[0]]}")
    if lay:
        lines.append(",".join(layouts))
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]


@mutant("7.10", "puts the sizes in the key: one kernel per shape")
def structure_key_sizes(graph: Graph, layouts: list) -> str:
    return _key(graph, layouts, sizes=True)


@mutant("7.10", "leaves the dtypes out")
def structure_key_no_dtype(graph: Graph, layouts: list) -> str:
    return _key(graph, layouts, dtype=False)


@mutant("7.10", "leaves out which inputs each op reads")
def structure_key_no_inputs(graph: Graph, layouts: list) -> str:
    return _key(graph, layouts, inputs=False)


@mutant("7.10", "leaves the layouts out")
def structure_key_no_layouts(graph: Graph, layouts: list) -> str:
    return _key(graph, layouts, lay=False)


# ---------------------------------------------------------------- issue 29: contract gaps


@mutant("7.7", "names each variable after the node's place in the graph, not the statement count")
def body_lines_node_index(graph: Graph, names: dict) -> list:
    lines = []
    for k, node in enumerate(graph.nodes):
        if node in names or node.op == "input":
            continue
        if node.op == "const":
            names[node] = literal(node.value.numpy(), node.spec.dtype)
            continue
        lines.append(f"v{k} = {op_expr(node, [names[i] for i in node.inputs])}")
        names[node] = f"v{k}"
    return lines


@mutant("7.7", "inlines every constant, even one passed in as an input (already in names)")
def body_lines_inline_passed_consts(graph: Graph, names: dict) -> list:
    for node in graph.nodes:
        if node.op == "const":
            names.pop(node, None)
    return ref.body_lines(graph, names)


# ---------------------------------------------------------------- issue 43: extremes, untried
# layouts and unchecked promises


@mutant("7.6", "numpy arithmetic: returns numpy integers, not one int per axis")
def loop_strides_numpy_ints(shape: tuple, strides: tuple, out_shape: tuple) -> tuple:
    import numpy as np

    return tuple(np.array(ref.loop_strides(shape, strides, out_shape), dtype=np.int64))


@mutant(
    "7.6", "a size-1 axis keeps its stride when the output's axis is larger only on the last axis"
)
def loop_strides_size_one_last_only(shape: tuple, strides: tuple, out_shape: tuple) -> tuple:
    got = list(ref.loop_strides(shape, strides, out_shape))
    lead = len(out_shape) - len(shape)
    for d in range(len(shape) - 1):  # only the last axis is checked for broadcasting
        if shape[d] == 1 and out_shape[lead + d] > 1:
            got[lead + d] = strides[d]
    return tuple(got)


@mutant("7.7", "inlines a constant as repr(float(value)): inf and nan are not Python names")
def body_lines_const_repr(graph: Graph, names: dict) -> list:
    lines = []
    for n in graph.nodes:
        if n in names:
            continue
        if n.op == "const":
            names[n] = repr(float(n.value.numpy().reshape(-1)[0]))
            continue
        if n.op == "input":
            continue
        lines.append(f"v{len(lines)} = {op_expr(n, [names[i] for i in n.inputs])}")
        names[n] = f"v{len(lines) - 1}"
    return lines


@mutant("7.7", "gives the inputs a statement too (v0 = a0): statements no longer one per op")
def body_lines_copies_inputs(graph: Graph, names: dict) -> list:
    lines = []
    for n in graph.nodes:
        if n.op == "const" and n not in names:
            names[n] = literal(n.value.numpy(), n.spec.dtype)
            continue
        args = n.inputs
        expr = names[n] if n in names else op_expr(n, [names[i] for i in args])
        lines.append(f"v{len(lines)} = {expr}")
        names[n] = f"v{len(lines) - 1}"
    return lines


@mutant("7.9", "a running max/min starts at 0, not at acc_init: all-negative rows give 0")
def reduce_source_start_zero(loop: ReduceLoop) -> str:
    src = ref.reduce_source(loop)
    if loop.fold in ("max", "min"):
        src = src.replace(f"acc = {loop.acc_init}\n", "acc = 0.0\n")
    return src


@mutant("7.9", "a running max starts at -1e30 (a 'large' number), not at acc_init: -inf rows")
def reduce_source_start_finite(loop: ReduceLoop) -> str:
    src = ref.reduce_source(loop)
    if loop.fold in ("max", "min"):
        big = "-1e30" if loop.fold == "max" else "1e30"
        src = src.replace(f"acc = {loop.acc_init}\n", f"acc = {big}\n")
    return src


@mutant("7.10", "a size-1 constant's value written with %g: values 1e-7 apart share a kernel")
def structure_key_short_constant(graph: Graph, layouts: list) -> str:
    where = {n: k for k, n in enumerate(graph.nodes)}
    lines = []
    for n in graph.nodes:
        attrs = sorted((k, repr(v)) for k, v in n.attrs.items())
        value = ""
        if n.op == "const" and n.spec.size == 1:
            value = f"{n.value.numpy().reshape(-1)[0].item():g}"
        inputs = [where[i] for i in n.inputs]
        lines.append(f"{n.op}|{attrs}|{n.spec.dtype.name}|{n.spec.ndim}|{inputs}|{value}")
    lines.append(f"out {where[graph.outputs[0]]}")
    lines.append("layouts " + ",".join(layouts))
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]


@mutant("7.10", "the values of every constant go in: a new weight value compiles a new kernel")
def structure_key_every_constant(graph: Graph, layouts: list) -> str:
    extra = [n.value.numpy().tobytes() for n in graph.nodes if n.op == "const"]
    return hashlib.sha256(ref.structure_key(graph, layouts).encode() + b"".join(extra)).hexdigest()[
        :16
    ]


@mutant("7.8", "every loop is loop.loop: nested prange loops")
def elementwise_source_nested_prange(loop: Loop) -> str:
    src = ref.elementwise_source(loop)
    return src.replace(" in range(n", f" in {loop.loop}(n")


@mutant("7.8", "at ndim 0 a strided input is read at index 0, not at its offset")
def elementwise_source_zero_d_at_zero(loop: Loop) -> str:
    src = ref.elementwise_source(loop)
    if loop.ndim == 0:
        for i, lay in enumerate(loop.layouts):
            if lay == "strided":
                src = src.replace(f"a{i} = x{i}[o{i}]", f"a{i} = x{i}[0]")
    return src
