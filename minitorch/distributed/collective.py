"""All-reduce as an op, and a compiled step that issues it early and waits late (12.6).

``all_reduce(x)`` is registered once in the op registry: every rank's ``x`` averaged,
through the communicator of :func:`use` (MPI's ``Allreduce``). Eager runs it blocking.
Traced in a training step (:func:`reduce_gradients` after ``loss.backward()``), it is a
node of the step's graph; the ``collectives`` stage of the compiler splits each such node
into ``all_reduce_start`` (posts MPI's ``Iallreduce``, passes its input on) and
``all_reduce_wait`` (waits, gives the average), and reorders the graph with
:func:`overlap_order` over chapter 9's dependencies, so each bucket's reduce is issued
as soon as its gradients exist and waited on just before the update reads it. Every
rank traces the same program, so the collectives are posted in the same order on each.
"""

from __future__ import annotations

import contextlib
import threading

import numpy as np

from ..autograd.ops import pad_slice
from ..core import dtypes as dt
from ..core.errors import OpError
from ..core.registry import (
    REQUIRED,
    OpKind,
    Spec,
    dispatch,
    register_kernel,
    register_op,
    register_vjp,
)
from ..exercises import exercise
from ..passes.pipeline import Stage, register_stage
from ..passes.plan import NODE_KERNELS
from ..tensor.data import TensorData

_LOCAL = threading.local()  # per thread: ranks may be threads of one process (threads.py)


def _comms() -> list:
    """The communicators of the enclosing use(...) blocks, innermost last."""
    if not hasattr(_LOCAL, "comms"):
        _LOCAL.comms, _LOCAL.pending = [], {}  # pending: tag -> an all-reduce in flight
    return _LOCAL.comms


def _pending() -> dict:
    _comms()
    return _LOCAL.pending


@contextlib.contextmanager
def use(comm):
    """``with use(comm):`` all-reduces inside (eager or compiled) go through ``comm``."""
    _comms().append(comm)
    try:
        yield comm
    finally:
        _comms().pop()


def current():
    """The communicator of the innermost :func:`use`, else every rank ``mpiexec`` started
    (one rank without it, where an all-reduce gives its input back)."""
    if not _comms():
        from .comm import world

        _comms().append(world())  # kept: MPI's world does not change while a process runs
    return _comms()[-1]


def _infer(op: str):
    def infer(x: Spec, **attrs) -> Spec:
        if x.dtype not in (dt.float32, dt.float64) or x.device != "cpu":
            raise OpError(op, f"x is {x.dtype.name} on {x.device}",
                          "all-reduce float32 or float64 tensors on the cpu (MPI reads host "
                          "memory)")  # fmt: skip
        return x

    return infer


register_op("all_reduce", OpKind.OPAQUE, 1, _infer("all_reduce"), pure=False,
            doc="the average over the ranks of every rank's x (MPI's Allreduce, then / size)")  # fmt: skip


def _average(summed: np.ndarray, size: int) -> TensorData:
    return TensorData.from_numpy((summed / summed.dtype.type(size)).astype(summed.dtype))


def _host(x: TensorData, out: Spec) -> np.ndarray:
    """A contiguous copy MPI may read while the step goes on (0-d stays 0-d)."""
    return np.array(x.to_numpy(), dtype=out.dtype, order="C")


def _all_reduce(x: TensorData, out: Spec) -> TensorData:
    comm = current()
    return _average(comm.allreduce(_host(x, out)), comm.size)


for _b in ("numpy", "python", "numba"):
    register_kernel("all_reduce", _b)(_all_reduce)


@register_vjp("all_reduce")
def _all_reduce_vjp(grad, out, x):
    return (dispatch("all_reduce", grad),)  # y = mean over ranks of x: dx_r = mean of dy


def reduce_gradients(buckets) -> None:
    """Average the ``.grad`` of every parameter over the ranks, one ``all_reduce`` per bucket.

    ``buckets`` lists lists of parameters (backward order: 12.8's choice). A bucket's
    gradients are packed into one flat tensor (``pad_slice`` into place, added), reduced,
    and unpacked as views back into each ``.grad``. Inside a compiled step this records
    the nodes; the collectives stage schedules them.
    """
    for bucket in buckets:
        ps = [p for p in bucket if p.grad is not None]
        if not ps:
            continue
        sizes = [p.grad.size for p in ps]
        total, flat, off = sum(sizes), None, 0
        for p, n in zip(ps, sizes):
            part = pad_slice(p.grad.reshape(n), (slice(off, off + n),), (total,))
            flat = part if flat is None else flat + part
            off += n
        flat = dispatch("all_reduce", flat)
        off = 0
        for p, n in zip(ps, sizes):
            p.grad = flat[off : off + n].reshape(*p.shape)
            off += n


# ---------------------------------------------------------------- the compiled schedule


@exercise("12.6")
def overlap_order(deps: list[list[int]], starts: list[int], waits: list[int]) -> list[int]:
    """An order of a step's nodes that issues communication early and waits on it late.

    ``deps[i]`` lists the nodes node ``i`` reads (every one ``< i``: the nodes are in a
    valid order already). ``starts`` are the nodes that post an all-reduce, ``waits`` the
    nodes that wait for one, each list in program order. Return a new order of
    ``range(len(deps))`` (a list holding every index once) built in three parts:

    1. for each start in its order: the nodes it needs (its inputs, their inputs, ...)
       not placed yet, in program order, then the start itself;
    2. every node that is not in part 1 or part 3, in program order;
    3. for each wait in its order: the wait, then the nodes that need it (read it,
       or read a node that does, ...) and do not need a later wait, in program order.

    So a start comes right after the last node it needs, and a wait right before the
    first node that needs it. Every node still comes after the nodes it reads.
    A node needed by a start is placed in part 1 even when it needs a wait. Leave the
    lists of ``deps`` unchanged.

    Example:
        >>> # 0 grad a; 1 start(0); 2 grad b (reads 0); 3 wait(1); 4 update (reads 3)
        >>> overlap_order([[], [0], [0], [1], [3]], [1], [3])
        [0, 1, 2, 3, 4]
        >>> overlap_order([[], [], [0], [2], [1], [3]], [2], [3])  # 2 starts after 0 only
        [0, 2, 1, 3, 4, 5]

    Hints: book chapter 12, "The compiler's view (12.6)". Compute who needs whom with
    two walks over ``deps``; a set of placed nodes keeps each node once.
    """
    raise NotImplementedError("Exercise 12.6: overlap_order")


START, WAIT = "all_reduce_start", "all_reduce_wait"
# Plan-only ops (in the registry for their shape rule, so graphs holding them verify): no
# backend kernel, eager refuses them; a plan runs them with the kernels of NODE_KERNELS.
for _name, _doc in ((START, "posts the all-reduce of x (tag: which one) and passes x on"),
                    (WAIT, "waits for the all-reduce of its tag and gives the average")):  # fmt: skip
    register_op(_name, OpKind.OPAQUE, 1, _infer(_name), attrs={"tag": REQUIRED}, pure=False,
                doc=_doc)  # fmt: skip


def _start_kernel(node, backend):
    def start(x, out, tag):
        comm = current()
        buf = _host(x, out)
        summed = np.empty_like(buf)
        _pending()[tag] = (comm.iallreduce(buf, summed), summed, buf, comm.size)
        return x  # the values go on unchanged: the reduce fills ``summed`` meanwhile

    return start


def _wait_kernel(node, backend):
    def wait(x, out, tag):
        if tag not in _pending():
            raise OpError(WAIT, f"no all-reduce in flight under tag {tag}",
                          "an all_reduce_wait runs after the all_reduce_start of its tag")  # fmt: skip
        req, summed, _, size = _pending().pop(tag)
        req.wait()
        return _average(summed, size)

    return wait


NODE_KERNELS[START], NODE_KERNELS[WAIT] = _start_kernel, _wait_kernel


def split_collectives(graph) -> list[tuple]:
    """Replace each ``all_reduce`` node of ``graph`` by a start and a wait, then reorder
    the nodes with :func:`overlap_order`; ``[(start, wait)]`` per reduce, in program order."""
    from ..passes.rewrite import replace_all_uses

    pairs = []
    for n in [n for n in graph.nodes if n.op == "all_reduce"]:
        tag = len(pairs)
        s = graph._new(START, [n.inputs[0]], {"tag": tag}, n.spec, n.where, prefix="start")
        w = graph._new(WAIT, [s], {"tag": tag}, n.spec, n.where, prefix="wait")
        graph.nodes.remove(s), graph.nodes.remove(w)
        replace_all_uses(n, w)
        at = graph.nodes.index(n)
        graph.nodes[at : at + 1] = [s, w]
        n.inputs[0].users.remove(n)
        pairs.append((s, w))
    if pairs:
        pos = {n: i for i, n in enumerate(graph.nodes)}
        deps = [[pos[i] for i in n.inputs] for n in graph.nodes]
        order = overlap_order(deps, [pos[s] for s, _ in pairs], [pos[w] for _, w in pairs])
        if sorted(order) != list(range(len(graph.nodes))):
            raise OpError("overlap_order", f"returned {len(order)} indices for "
                          f"{len(graph.nodes)} nodes", "return every index once")  # fmt: skip
        graph.nodes = [graph.nodes[i] for i in order]
    return pairs


def schedule_lines(graph, pairs) -> list[str]:
    """Each bucket's reduce: its bytes, where it is issued and waited, what runs between."""
    pos = {n: i for i, n in enumerate(graph.nodes)}
    lines = [f"Collectives: {len(pairs)} all-reduce bucket(s) in {len(graph.nodes)} nodes"]
    for k, (s, w) in enumerate(pairs):
        last = max((pos[i] for i in s.inputs), default=-1)
        first = min((pos[u] for u in w.users), default=len(graph.nodes))
        nbytes = s.spec.size * s.spec.dtype.itemsize
        lines.append(f"  bucket {k}: {nbytes:,} B; issued at node {pos[s]} (input at {last}), "
                     f"waited at {pos[w]} (read at {first}); {pos[w] - pos[s] - 1} nodes between")  # fmt: skip
    return lines


def _run(unit) -> None:
    if unit.options.parallel and any(n.op == "all_reduce" for n in unit.graph.nodes):
        raise OpError("collectives", "a step with all-reduces cannot run on chapter 9's thread "
                      "pool (options.parallel): the ranks would post them in different orders",
                      "compile a data-parallel step without parallel=True")  # fmt: skip
    unit.collectives = split_collectives(unit.graph)


def _explain(unit) -> list[str]:
    pairs = getattr(unit, "collectives", None)
    return schedule_lines(unit.graph, pairs) if pairs else []


def _needs(unit) -> tuple:
    """Only a graph holding an all-reduce needs the exercise (and 6.1's rewrite)."""
    graph = getattr(unit, "graph", None)
    return ("6.1", "12.6") if graph and any(n.op == "all_reduce" for n in graph.nodes) else ()


register_stage(Stage("collectives", 25, _run, needs=_needs, explain=_explain, rewrites=True))
