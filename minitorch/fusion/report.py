"""Numbers and tables the book's fusion chapter prints, computed from real graphs.

Nothing here is a literal: each function traces a small program, fuses a copy
and measures the result (kernel launches, bytes a kernel-per-op program moves,
refusals by reason), so the page changes when the fuser does.
"""

from __future__ import annotations

import numpy as np

from ..core.tensor import Tensor
from ..passes.rewrite import clone_graph
from ..tracing.graph import Graph
from ..tracing.jit import jit
from .fuse import fuse
from .group import is_compute
from .plan_groups import bytes_moved
from .reasons import FusionReport


def kernels(graph: Graph) -> int:
    """Kernel launches to run ``graph``: one per compute op or fused node (views are free)."""
    return sum(1 for n in graph.ops if n.op == "fused" or is_compute(n))


def traffic(graph: Graph) -> int:
    """Bytes moved if every kernel reads its inputs and writes its output once.

    A fused node counts only its outside inputs and its one output: that is the
    whole point of fusion. Views move nothing. (7.11's measure, :func:`bytes_moved`.)
    """
    return bytes_moved(graph)


def softmax_mlp(x, w, b):
    """The worked example: a linear layer with bias and relu, then a row softmax."""
    h = (x @ w + b).relu()
    e = (h - h.max(1, keepdims=True)).exp()
    return e / e.sum(1, keepdims=True)


def worked_example(n: int = 256, d: int = 64, seed: int = 0) -> dict:
    """Trace :func:`softmax_mlp` on ``n x d`` data, fuse a copy; before/after figures."""
    rng = np.random.default_rng(seed)
    x = Tensor(rng.standard_normal((n, d)).astype(np.float32))
    w = Tensor(rng.standard_normal((d, d)).astype(np.float32))
    b = Tensor(rng.standard_normal(d).astype(np.float32))
    return compare(jit(softmax_mlp).trace(x, w, b))


def compare(graph: Graph) -> dict:
    """Fuse a copy of ``graph``: the two graphs, the report and the figures."""
    after = clone_graph(graph)
    report: FusionReport = fuse(after)
    return {
        "before": graph,
        "after": after,
        "report": report,
        "kernels_before": kernels(graph),
        "kernels_after": kernels(after),
        "bytes_before": traffic(graph),
        "bytes_after": traffic(after),
        "reasons": report.reasons(),
    }


def refusal_rows(report: FusionReport) -> list[tuple[str, str, str]]:
    """The refusal table as rows: producer, consumer, reason."""
    return [
        (
            f"%{r.producer.name} {r.producer.op}",
            f"%{r.consumer.name} {r.consumer.op}" if r.consumer is not None else "-",
            r.reason + (f" ({r.detail})" if r.detail else ""),
        )
        for r in report.refusals
    ]
