"""Chapter 9 (dynamic) references."""

from __future__ import annotations

from concurrent.futures import FIRST_COMPLETED, wait

from minitorch.compile.dynamic import MIN_SIZE, InputGuard
from minitorch.compile.parallel import producers
from minitorch.core.errors import OpError
from minitorch.core.registry import OPS, Spec, get_op
from minitorch.passes.plan import Plan
from minitorch.passes.rewrite import clone_graph
from minitorch.tracing.graph import Graph

__all__ = ["symbolic_guard_failures", "respecialize", "step_levels", "run_parallel"]


def symbolic_guard_failures(guard: list[InputGuard], specs: list[Spec]) -> list[str]:
    reasons, bound = [], {}
    for g, s in zip(guard, specs):
        if s.ndim != len(g.dims):
            reasons.append(f"{g.name}.rank changed from {len(g.dims)} to {s.ndim}")
            continue
        if s.dtype != g.dtype:
            reasons.append(f"{g.name}.dtype changed from {g.dtype.name} to {s.dtype.name}")
        if s.device != g.device:
            reasons.append(f"{g.name}.device changed from {g.device} to {s.device}")
        for d, (want, size) in enumerate(zip(g.dims, s.shape)):
            where = f"{g.name}.shape[{d}]"
            if not isinstance(want, str):
                if size != want:
                    reasons.append(f"{where} changed from {want} to {size}")
            elif size < MIN_SIZE:
                reasons.append(f"{where} is {size} but {want} needs a size >= {MIN_SIZE}")
            elif want in bound and bound[want][1] != size:
                first, n = bound[want]
                reasons.append(f"{where} is {size} but {first} is {n}; both are {want}")
            else:
                bound.setdefault(want, (where, size))
    return reasons


def respecialize(graph: Graph, specs: list[Spec]) -> Graph:
    if len(specs) != len(graph.inputs):
        raise OpError(
            "respecialize", f"the graph has {len(graph.inputs)} input(s), got {len(specs)} spec(s)"
        )
    new = clone_graph(graph)
    for node, spec in zip(new.inputs, specs):
        node.spec = spec
    for node in new.nodes:
        if node.op in ("input", "const"):
            continue
        if node.op not in OPS:  # cond, fused: they hold subgraphs
            raise OpError(
                "respecialize",
                f"{node!r} is a {node.op} node, not a registry op: it is not re-specialised",
                hint="such graphs are traced again per size",
            )
        node.spec = get_op(node.op).infer(*[i.spec for i in node.inputs], **node.attrs)
    return new


def step_levels(deps: list[list[int]]) -> list[list[int]]:
    level = []
    for d in deps:
        level.append(1 + max((level[j] for j in d), default=-1))
    out = [[] for _ in range(max(level, default=-1) + 1)]
    for i, lv in enumerate(level):
        out[lv].append(i)
    return out


def run_parallel(plan: Plan, inputs: list, pool) -> list:
    slots = [None] * plan.num_slots
    for s, d in zip(plan.inputs, inputs):
        slots[s] = d
    for s, t in plan.consts:
        slots[s] = t._data
    deps = producers(plan)
    waiting = [len(set(d)) for d in deps]
    users = [[] for _ in plan.steps]
    for i, d in enumerate(deps):
        for j in set(d):
            users[j].append(i)

    def submit(i):
        st = plan.steps[i]
        args = [slots[a] for a in st.args]
        return pool.submit(st.kernel, *args, out=st.spec, **st.attrs)

    running = {submit(i): i for i, w in enumerate(waiting) if w == 0}
    while running:
        done, _ = wait(running, return_when=FIRST_COMPLETED)
        for fut in sorted(done, key=running.get):
            i = running.pop(fut)
            slots[plan.steps[i].out] = fut.result()
            for u in users[i]:
                waiting[u] -= 1
                if waiting[u] == 0:
                    running[submit(u)] = u
    return [slots[s] for s in plan.outputs]
