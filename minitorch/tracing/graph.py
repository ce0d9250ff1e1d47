"""The graph IR: nodes, graphs, a readable text form and Graphviz DOT export.

A :class:`Graph` is a list of :class:`Node` in execution order. Every node has
an ``op``: ``"input"`` (a graph input), ``"const"`` (a concrete tensor baked into
the graph), ``"cond"`` (a higher-order node holding two subgraphs) or the name of
an op in the shared registry; ``"fused"`` (chapter 7) holds a group of ops as a subgraph. Each node carries the :class:`Spec` that shape
inference gave it, its users, and where in the user's code it came from.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import numpy as np

from ..core.registry import Spec

# Later chapters install themselves here; chapter 5 imports none of them.
COMPILER: list = []  # chapter 6: compile_graph(graph, backend, passes, debug, options)
VERIFIERS: dict = {}  # chapter 7: op -> verify(graph, verify_graph) for nodes holding subgraphs

SPECIAL = ("input", "const", "cond", "fused")  # fused: a chapter-7 group, see minitorch.fusion

_PKG = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_SKIP = (_PKG + os.sep, os.path.join(os.path.dirname(_PKG), "solutions") + os.sep)


def user_location() -> str:
    """``file:line`` of the innermost frame outside minitorch (the user's code)."""
    f = sys._getframe(1)
    while f is not None:
        name = f.f_code.co_filename
        if not name.startswith(_SKIP) and "<frozen" not in name and "contextlib" not in name:
            if "ipykernel_" in name:  # a notebook cell's temporary file
                return f"<cell>:{f.f_lineno}"
            return f"{os.path.basename(name)}:{f.f_lineno}"
        f = f.f_back
    return "?"


class Node:
    """One value of the graph: what computes it, from what, and what it is."""

    __slots__ = ("name", "op", "inputs", "attrs", "spec", "users", "where", "value", "graph")

    def __init__(self, name, op, inputs, attrs, spec, where="", value=None, graph=None):
        self.name: str = name
        self.op: str = op
        self.inputs: list[Node] = list(inputs)
        self.attrs: dict[str, Any] = dict(attrs)
        self.spec: Spec = spec
        self.users: list[Node] = []
        self.where: str = where
        self.value = value  # the tensor of a "const" node
        self.graph: Graph | None = graph

    def __repr__(self) -> str:
        return f"%{self.name}"

    def format(self) -> str:
        """One line of the text form, e.g. ``%3 = add(%1, %2) : float32[2,3]  # f.py:7 @cpu``.

        The value's device ends the line, after the source location.
        """
        return f"{self._format()}{'' if self.where else '  #'} @{self.spec.device}"

    def _format(self) -> str:
        if self.op == "input":
            return f"%{self.name} = input : {self.spec}"
        if self.op == "const":
            return f"%{self.name} = const {_short_value(self.value)} : {self.spec}"
        args = ", ".join(f"%{i.name}" for i in self.inputs)
        shown = {k: v for k, v in self.attrs.items() if not isinstance(v, Graph)}
        if self.op == "cond":
            shown = {"true": "{...}", "false": "{...}"}
        attrs = "".join(f", {k}={_attr(v)}" for k, v in shown.items())
        where = f"  # {self.where}" if self.where else ""
        return f"%{self.name} = {self.op}({args}{attrs}) : {self.spec}{where}"


def _attr(v) -> str:
    if isinstance(v, np.dtype):
        return v.name
    if isinstance(v, slice):
        return f"{'' if v.start is None else v.start}:{'' if v.stop is None else v.stop}" + (
            f":{v.step}" if v.step is not None else ""
        )
    if isinstance(v, tuple):
        inner = ", ".join(_attr(x) for x in v)
        return f"({inner},)" if len(v) == 1 else f"({inner})"
    return repr(v) if not isinstance(v, str) else v


def _short_value(t) -> str:
    try:
        a = t.numpy()
    except Exception:  # pragma: no cover - a device without host access
        return "<tensor>"
    if a.size == 1:
        return repr(a.reshape(()).item())
    return "<" + "x".join(map(str, a.shape)) + " tensor>"


class Graph:
    """A traced program: ``inputs`` -> ``nodes`` (in execution order) -> ``outputs``.

    ``out_tree`` remembers how the outputs were packed (one tensor, a tuple, a
    list, with non-tensor leaves kept as they were).
    """

    def __init__(self, name: str = "graph"):
        self.name = name
        self.nodes: list[Node] = []
        self.inputs: list[Node] = []
        self.outputs: list[Node] = []
        self.out_tree: Any = None
        self._count = 0
        self._consts: dict[int, Node] = {}

    # ------------------------------------------------------------ building
    def _new(self, op, inputs, attrs, spec, where="", value=None, prefix="") -> Node:
        node = Node(f"{prefix}{self._count}", op, inputs, attrs, spec, where, value, self)
        self._count += 1
        for i in node.inputs:
            i.users.append(node)
        self.nodes.append(node)
        return node

    def add_input(self, spec: Spec, name: str | None = None) -> Node:
        if name:
            node = Node(name, "input", [], {}, spec, graph=self)
            self.nodes.append(node)
        else:
            node = self._new("input", [], {}, spec)
        self.inputs.append(node)
        return node

    def add_const(self, tensor) -> Node:
        """A node for a concrete tensor (one node per tensor object)."""
        node = self._consts.get(id(tensor))
        if node is None or node.value is not tensor:
            node = self._new("const", [], {}, tensor.spec, value=tensor, prefix="c")
            self._consts[id(tensor)] = node
        return node

    def add_node(self, op: str, inputs, attrs: dict, spec: Spec, where: str | None = None) -> Node:
        """Append a node computing ``op`` on ``inputs`` (source location found if not given)."""
        return self._new(op, inputs, attrs, spec, user_location() if where is None else where)

    def set_outputs(self, outputs, out_tree=None) -> None:
        self.outputs = list(outputs)
        self.out_tree = (
            out_tree
            if out_tree is not None
            else ("tuple", [("leaf", i) for i in range(len(outputs))])
        )

    # ------------------------------------------------------------ reading
    @property
    def ops(self) -> list[Node]:
        """The nodes that compute (neither inputs nor constants)."""
        return [n for n in self.nodes if n.op not in ("input", "const")]

    @property
    def constants(self) -> list[Node]:
        return [n for n in self.nodes if n.op == "const"]

    def op_names(self) -> list[str]:
        return [n.op for n in self.ops]

    def __len__(self) -> int:
        return len(self.ops)

    def __str__(self) -> str:
        return self.text()

    def __repr__(self) -> str:
        return f"<Graph {self.name}: {len(self.inputs)} inputs, {len(self)} ops>"

    def text(self, indent: str = "") -> str:
        """The readable form: a signature line, one line per node, a return line."""
        ins = ", ".join(f"%{n.name}: {n.spec}" for n in self.inputs)
        devices = sorted({n.spec.device for n in self.inputs})
        on = f"  # inputs on {', '.join(devices)}" if devices else ""
        lines = [f"{indent}graph {self.name}({ins}) {{{on}"]
        if len(lines[0]) > 96:  # many inputs (a training step's parameters): one per line
            lines = [f"{indent}graph {self.name}("]
            lines += [f"{indent}    %{n.name}: {n.spec}," for n in self.inputs]
            lines.append(f"{indent}) {{{on}")
        for n in self.nodes:
            if n.op == "input":
                continue
            lines.append(f"{indent}  {n.format()}")
            if n.op == "cond":
                for key in ("true_graph", "false_graph"):
                    lines.append(n.attrs[key].text(indent + "    "))
            elif n.op == "fused":
                lines.append(n.attrs["graph"].text(indent + "    "))
        outs = ", ".join(f"%{n.name}" for n in self.outputs)
        lines.append(f"{indent}  return ({outs})")
        lines.append(f"{indent}}}")
        return "\n".join(lines)

    def to_dot(self) -> str:
        """Graphviz DOT text: one box per node, one edge per input, cond branches as clusters."""
        lines = [f'digraph "{self.name}" {{', "  rankdir=TB;", '  node [fontname="monospace"];']
        self._dot_body(lines, "", "  ")
        lines.append("}")
        return "\n".join(lines)

    def _dot_body(self, lines, prefix, pad) -> None:
        ids = {n: f'"{prefix}n{k}"' for k, n in enumerate(self.nodes)}  # unique, unlike names

        def nid(n):
            return ids[n]

        for n in self.nodes:
            if n.op == "input":
                label, shape = f"%{n.name}: {n.spec}", "ellipse"
            elif n.op == "const":
                label, shape = f"const {_short_value(n.value)}\\n{n.spec}", "note"
            else:
                label, shape = f"%{n.name} = {n.op}\\n{n.spec}", "box"
            lines.append(f'{pad}{nid(n)} [label="{label}", shape={shape}];')
            for i in n.inputs:
                lines.append(f"{pad}{nid(i)} -> {nid(n)};")
            if n.op == "cond":
                for key in ("true_graph", "false_graph"):
                    sub = f"{prefix}{n.name}_{key[:-6]}_"
                    lines.append(f'{pad}subgraph "cluster_{sub}" {{ label="{n.name} {key[:-6]}";')
                    n.attrs[key]._dot_body(lines, sub, pad + "  ")
                    lines.append(f"{pad}}}")
            elif n.op == "fused":
                sub, kind = f"{prefix}{n.name}_", n.attrs["kind"]
                lines.append(
                    f'{pad}subgraph "cluster_{sub}" {{ label="{n.attrs["name"]} ({kind})"; '
                    "style=filled; fillcolor=lightyellow;"
                )
                n.attrs["graph"]._dot_body(lines, sub, pad + "  ")
                lines.append(f"{pad}}}")
        for k, o in enumerate(self.outputs):
            lines.append(f'{pad}"{prefix}out{k}" [label="output {k}", shape=plaintext];')
            lines.append(f'{pad}{nid(o)} -> "{prefix}out{k}";')

    # ------------------------------------------------------------ checking and running
    def verify(self) -> Graph:
        """Check the graph is well formed (exercise 5.5); returns the graph."""
        from .passes import verify_graph

        for op, verify in VERIFIERS.items():  # chapter 7's fused nodes: each group, then inline
            if any(n.op == op for n in self.nodes):
                verify(self, verify_graph)
                return self
        verify_graph(self)
        return self

    def compile(self, backend: str | None = None, passes=None, debug: bool = False, options=None):
        """Verify, optimise a copy with ``passes`` (chapter 6) and lower it to a runnable plan.

        ``passes=None`` runs the default pipeline, ``passes=[]`` none; ``debug``
        verifies after every pass and dumps each stage (as ``MINITORCH_DUMP_GRAPH`` does);
        ``options`` (a ``CompileOptions``) turns on the later stages (chapters 7-9).
        """
        if not COMPILER:  # chapter 6 installs the compiler; without it, the interpreter
            from .interpreter import CompiledGraph

            return CompiledGraph(self.verify(), backend)
        return COMPILER[0](self, backend, passes, debug, options)

    def __call__(self, *inputs):
        from .interpreter import interpret

        return interpret(self, *inputs)

    def unflatten(self, values: list) -> Any:
        """Pack output values the way the traced function returned them."""
        return _unflatten(self.out_tree, values)


def _unflatten(tree, values):
    kind, body = tree
    if kind == "leaf":
        return values[body]
    if kind == "static":
        return body
    if kind == "dict":
        keys, subtrees = body
        return {k: _unflatten(t, values) for k, t in zip(keys, subtrees)}
    if kind == "namedtuple":
        cls, subtrees = body
        return cls(*(_unflatten(t, values) for t in subtrees))
    if kind == "dataclass":
        cls, names, subtrees = body
        obj = object.__new__(cls)  # not cls(...): fields with init=False, __post_init__
        for n, t in zip(names, subtrees):
            object.__setattr__(obj, n, _unflatten(t, values))
        return obj
    packed = [_unflatten(t, values) for t in body]
    return packed if kind == "list" else tuple(packed)
