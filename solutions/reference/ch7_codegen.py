"""Chapter 7 (codegen) references: exercises 7.6-7.10."""

from __future__ import annotations

import hashlib

from minitorch.fusion.codegen import Loop, ReduceLoop
from minitorch.fusion.exprs import literal, op_expr
from minitorch.tracing.graph import Graph

__all__ = ["loop_strides", "body_lines", "elementwise_source", "reduce_source", "structure_key"]


def loop_strides(shape: tuple, strides: tuple, out_shape: tuple) -> tuple:
    lead = len(out_shape) - len(shape)
    out = []
    for axis in range(len(out_shape)):
        d = axis - lead
        out.append(0 if d < 0 or shape[d] == 1 else strides[d])
    return tuple(out)


def body_lines(graph: Graph, names: dict) -> list:
    lines = []
    for node in graph.nodes:
        if node in names or node.op == "input":
            continue
        if node.op == "const":
            names[node] = literal(node.value.numpy(), node.spec.dtype)
            continue
        var = f"v{len(lines)}"
        lines.append(f"{var} = {op_expr(node, [names[i] for i in node.inputs])}")
        names[node] = var
    return lines


def _index(offset: str, loops: list, strides: str, first: int = 0) -> str:
    terms = [offset] + [f"{v} * {strides}[{first + k}]" for k, v in enumerate(loops)]
    return " + ".join(terms)


def _position(loops: list, sizes: list) -> str:
    if not loops:
        return "0"
    p = loops[0]
    for v, n in zip(loops[1:], sizes[1:]):
        p = f"({p}) * {n} + {v}"
    return p


def elementwise_source(loop: Loop) -> str:
    k = len(loop.layouts)
    params = ", ".join(["out", "shape"] + [f"x{i}, o{i}, s{i}" for i in range(k)])
    pad = "    "
    src = [f"def {loop.name}({params}):"]
    strided = [i for i, lay in enumerate(loop.layouts) if lay == "strided"]
    for i, lay in enumerate(loop.layouts):
        if lay == "scalar":
            src.append(f"{pad}a{i} = x{i}[o{i}]")
        elif lay == "flat":
            src.append(f"{pad}x{i} = x{i}[o{i}:]")
    if not strided or loop.ndim == 0:
        src.append(f"{pad}for p in {loop.loop}(out.size):")
        ind = pad * 2
        for i, lay in enumerate(loop.layouts):
            if lay == "flat":
                src.append(f"{ind}a{i} = x{i}[p]")
            elif lay == "strided":  # only at ndim 0: one element at the offset
                src.append(f"{ind}a{i} = x{i}[o{i}]")
    else:
        last = loop.ndim - 1
        for d in range(loop.ndim):
            src.append(f"{pad}n{d} = shape[{d}]")
        for i in strided:
            src += [f"{pad}s{i}_{d} = s{i}[{d}]" for d in range(loop.ndim)]
        for d in range(loop.ndim):
            ind = pad * (d + 1)
            src.append(f"{ind}for i{d} in {loop.loop if d == 0 else 'range'}(n{d}):")
            ind += pad
            src.append(f"{ind}q{d} = " + ("i0" if d == 0 else f"q{d - 1} * n{d} + i{d}"))
            for i in strided:
                prev = f"o{i}" if d == 0 else f"c{i}_{d - 1}"
                src.append(f"{ind}c{i}_{d} = {prev} + i{d} * s{i}_{d}")
        src.append(f"{ind}p = q{last}")
        for i, lay in enumerate(loop.layouts):
            if lay == "flat":
                src.append(f"{ind}a{i} = x{i}[p]")
            elif lay == "strided":
                src.append(f"{ind}a{i} = x{i}[np.uint64(c{i}_{last})]")
    src += [ind + line for line in loop.lines]
    src.append(f"{ind}out[p] = {loop.result}")
    return "\n".join(src) + "\n"


def reduce_source(loop: ReduceLoop) -> str:
    params = ["out", "shape"]
    params += [f"x{i}, o{i}, s{i}" for i in range(loop.inner_inputs)]
    params += [f"y{i}, q{i}, t{i}" for i in range(loop.outer_inputs)]
    pad = "    "
    src = [f"def {loop.name}({', '.join(params)}):"]
    keep = [f"i{d}" for d in range(loop.nkeep)]
    red = [f"j{d}" for d in range(loop.nred)]
    for d in range(loop.nkeep):
        src.append(f"{pad}n{d} = shape[{d}]")
    for d in range(loop.nred):
        src.append(f"{pad}r{d} = shape[{loop.nkeep + d}]")
    depth = 1
    for d in range(loop.nkeep):
        kind = loop.loop if d == 0 else "range"
        src.append(f"{pad * depth}for i{d} in {kind}(n{d}):")
        depth += 1
    ind = pad * depth
    src.append(f"{ind}p = {_position(keep, [f'n{d}' for d in range(loop.nkeep)])}")
    src.append(f"{ind}acc = {loop.acc_init}")
    inner_depth = depth
    for d in range(loop.nred):
        src.append(f"{pad * inner_depth}for j{d} in range(r{d}):")
        inner_depth += 1
    jnd = pad * inner_depth
    for i in range(loop.inner_inputs):
        src.append(f"{jnd}a{i} = x{i}[{_index(f'o{i}', keep + red, f's{i}')}]")
    src += [jnd + line for line in loop.inner]
    v = loop.inner_result
    if loop.fold in ("sum", "mean"):
        src.append(f"{jnd}acc += {v}")
    elif loop.fold == "max":
        src.append(f"{jnd}if not (acc >= {v} or acc != acc):")
        src.append(f"{jnd}{pad}acc = {v}")
    else:
        src.append(f"{jnd}if not (acc <= {v} or acc != acc):")
        src.append(f"{jnd}{pad}acc = {v}")
    if loop.fold == "mean":
        count = " * ".join([f"r{d}" for d in range(loop.nred)] or ["1"])
        src.append(f"{ind}acc = acc / ({count})")
    src.append(f"{ind}{loop.reduced} = {loop.acc_dtype}(acc)")
    for i in range(loop.outer_inputs):
        src.append(f"{ind}b{i} = y{i}[{_index(f'q{i}', keep, f't{i}')}]")
    src += [ind + line for line in loop.outer]
    src.append(f"{ind}out[p] = {loop.result}")
    return "\n".join(src) + "\n"


def structure_key(graph: Graph, layouts: list) -> str:
    where = {n: k for k, n in enumerate(graph.nodes)}
    lines = []
    for n in graph.nodes:
        attrs = sorted((k, repr(v)) for k, v in n.attrs.items())
        inputs = [where[i] for i in n.inputs]
        value = ""
        if n.op == "const" and n.spec.size == 1:
            value = repr(n.value.numpy().reshape(-1)[0].item())
        lines.append(f"{n.op}|{attrs}|{n.spec.dtype.name}|{n.spec.ndim}|{inputs}|{value}")
    lines.append(f"out {where[graph.outputs[0]]}")
    lines.append("layouts " + ",".join(layouts))
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]
