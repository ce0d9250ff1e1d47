"""Chapter 5: tracing eager code into a graph IR, running and explaining it."""

# ruff: noqa: F401  (the exercise functions are importable from minitorch.tracing)

from .control import cond, custom_op, trace_branch, trace_cond
from .graph import Graph, Node
from .interpreter import CompiledGraph, interpret, run_node
from .jit import ExplainOutput, JitFunction, cache_key, explain, guard_failures, jit
from .passes import topological_sort, verify_graph
from .shapes import infer_matmul, infer_reduce
from .tracer import (
    Break,
    GraphBreakError,
    Proxy,
    Tracer,
    record_op,
    split_at_break,
    trace_function,
)

# What ``from minitorch.tracing import *`` (and so ``minitorch``) exports; the exercise
# functions stay under ``minitorch.tracing``.
__all__ = [
    "CompiledGraph",
    "ExplainOutput",
    "Graph",
    "GraphBreakError",
    "JitFunction",
    "Proxy",
    "cond",
    "custom_op",
    "explain",
    "jit",
]
