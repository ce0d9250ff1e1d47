"""Chapter 9 (dynamic) known-wrong implementations."""

from __future__ import annotations

from concurrent.futures import FIRST_COMPLETED, wait

from minitorch.compile.dynamic import MIN_SIZE
from minitorch.compile.parallel import producers, step_levels
from minitorch.core.errors import OpError
from minitorch.core.registry import get_op
from minitorch.passes.rewrite import clone_graph

from . import mutant

# ---------------------------------------------------------------- 9.7 symbolic_guard_failures


def _guard(
    guard,
    specs,
    equal=True,
    min_size=True,
    bind_invalid=False,
    dtype=True,
    rank=True,
    symbols_at_0=False,
):
    reasons, bound = [], {}
    for g, s in zip(guard, specs):
        if s.ndim != len(g.dims):
            reasons.append(f"{g.name}.rank changed from {len(g.dims)} to {s.ndim}")
            if rank:
                continue
        if dtype and s.dtype != g.dtype:
            reasons.append(f"{g.name}.dtype changed from {g.dtype.name} to {s.dtype.name}")
        if dtype and s.device != g.device:
            reasons.append(f"{g.name}.device changed from {g.device} to {s.device}")
        for d, (want, size) in enumerate(zip(g.dims, s.shape)):
            where = f"{g.name}.shape[{d}]"
            if symbols_at_0 and isinstance(want, str) and d > 0:
                continue  # "the batch is dim 0": a symbol elsewhere is not checked
            if not isinstance(want, str):
                if size != want:
                    reasons.append(f"{where} changed from {want} to {size}")
                continue
            small = min_size and size < MIN_SIZE
            if small:
                reasons.append(f"{where} is {size} but {want} needs a size >= {MIN_SIZE}")
                if not bind_invalid:
                    continue
            if equal and want in bound and bound[want][1] != size:
                first, n = bound[want]
                reasons.append(f"{where} is {size} but {first} is {n}; both are {want}")
            else:
                bound.setdefault(want, (where, size))
    return reasons


@mutant("9.7", "symbols are never compared: a broken broadcast equality passes")
def guard_no_equalities(guard, specs):
    return _guard(guard, specs, equal=False)


@mutant("9.7", "no size >= 2 check: size 1 (which broadcasts) reuses the graph")
def guard_no_min_size(guard, specs):
    return _guard(guard, specs, min_size=False)


@mutant("9.7", "a symbol is bound by its first occurrence even when that size is invalid")
def guard_binds_invalid_size(guard, specs):
    return _guard(guard, specs, bind_invalid=True)


@mutant("9.7", "dtype and device are not guarded")
def guard_ignores_dtype(guard, specs):
    return _guard(guard, specs, dtype=False)


# ---------------------------------------------------------------- 9.8 respecialize


def _respec(graph, specs, clone=True, nodes=True, check_count=True):
    if check_count and len(specs) != len(graph.inputs):
        raise OpError("respecialize", f"{len(graph.inputs)} inputs, {len(specs)} specs")
    new = clone_graph(graph) if clone else graph
    for node, spec in zip(new.inputs, specs):
        node.spec = spec
    for node in new.nodes:
        if node.op in ("input", "const") or not nodes:
            continue
        if node.op in ("cond", "fused"):
            raise OpError("respecialize", f"{node!r} is a {node.op} node")
        node.spec = get_op(node.op).infer(*[i.spec for i in node.inputs], **node.attrs)
    return new


@mutant("9.8", "re-infers in place: the cached graph every size starts from is changed")
def respecialize_in_place(graph, specs):
    return _respec(graph, specs, clone=False)


@mutant("9.8", "only the inputs get the new specs; the other nodes keep the old ones")
def respecialize_inputs_only(graph, specs):
    return _respec(graph, specs, nodes=False)


@mutant("9.8", "no count check: zip silently drops extra inputs")
def respecialize_no_count_check(graph, specs):
    return _respec(graph, specs, check_count=False)


@mutant("9.8", "infer is called without the node's attributes")
def respecialize_without_attrs(graph, specs):
    new = clone_graph(graph)
    for node, spec in zip(new.inputs, specs):
        node.spec = spec
    if len(specs) != len(graph.inputs):
        raise OpError("respecialize", "wrong number of specs")
    for node in new.nodes:
        if node.op not in ("input", "const"):
            op = get_op(node.op)
            defaults = {k: v for k, v in op.attrs.items() if k in node.attrs}
            node.spec = op.infer(*[i.spec for i in node.inputs], **defaults)
    return new


# ---------------------------------------------------------------- 9.9 step_levels


def _group(level):
    out = [[] for _ in range(max(level, default=-1) + 1)]
    for i, lv in enumerate(level):
        out[lv].append(i)
    return [g for g in out if g]


@mutant("9.9", "a step's level is its number of dependencies")
def levels_by_count(deps):
    return _group([len(d) for d in deps])


@mutant("9.9", "1 + the level of the latest dependency, not the deepest")
def levels_last_dep(deps):
    level = []
    for d in deps:
        level.append(1 + level[d[-1]] if d else 0)
    return _group(level)


@mutant("9.9", "1 + the shallowest dependency's level (min for max)")
def levels_min(deps):
    level = []
    for d in deps:
        level.append(1 + min((level[j] for j in d), default=-1))
    return _group(level)


# ---------------------------------------------------------------- 9.10 run_parallel


def _slots(plan, inputs, consts=True):
    slots = [None] * plan.num_slots
    for s, d in zip(plan.inputs, inputs):
        slots[s] = d
    if consts:
        for s, t in plan.consts:
            slots[s] = t._data
    return slots


@mutant("9.10", "runs the steps one after another on the calling thread")
def run_parallel_sequential(plan, inputs, pool):
    slots = _slots(plan, inputs)
    for st in plan.steps:
        slots[st.out] = st.kernel(*(slots[a] for a in st.args), out=st.spec, **st.attrs)
    return [slots[s] for s in plan.outputs]


@mutant("9.10", "levels with a barrier: a slow step holds back every later level")
def run_parallel_levels(plan, inputs, pool):
    slots = _slots(plan, inputs)
    for level in step_levels(producers(plan)):
        futs = {}
        for i in level:
            st = plan.steps[i]
            futs[i] = pool.submit(st.kernel, *(slots[a] for a in st.args), out=st.spec, **st.attrs)
        for i, f in futs.items():
            slots[plan.steps[i].out] = f.result()
    return [slots[s] for s in plan.outputs]


@mutant("9.10", "submits every step at once: arguments read before their producers ran")
def run_parallel_no_deps(plan, inputs, pool):
    slots = _slots(plan, inputs)
    futs = []
    for st in plan.steps:
        futs.append(pool.submit(st.kernel, *(slots[a] for a in st.args), out=st.spec, **st.attrs))
    for st, f in zip(plan.steps, futs):
        slots[st.out] = f.result()
    return [slots[s] for s in plan.outputs]


@mutant("9.10", "constants are never put in their slots")
def run_parallel_no_consts(plan, inputs, pool):
    slots = _slots(plan, inputs, consts=False)
    deps = producers(plan)
    waiting = [len(d) for d in deps]
    users = [[] for _ in plan.steps]
    for i, d in enumerate(deps):
        for j in d:
            users[j].append(i)

    def submit(i):
        st = plan.steps[i]
        return pool.submit(st.kernel, *(slots[a] for a in st.args), out=st.spec, **st.attrs)

    running = {submit(i): i for i, w in enumerate(waiting) if w == 0}
    while running:
        done, _ = wait(running, return_when=FIRST_COMPLETED)
        for f in sorted(done, key=running.get):
            i = running.pop(f)
            slots[plan.steps[i].out] = f.result()
            for u in users[i]:
                waiting[u] -= 1
                if waiting[u] == 0:
                    running[submit(u)] = u
    return [slots[s] for s in plan.outputs]


# ---------------------------------------------------------------- issue 29: contract gaps


@mutant("9.7", "after a rank change, still compares (and binds) the dims zip pairs up")
def guard_rank_goes_on(guard, specs):
    return _guard(guard, specs, rank=False)


# ---------------------------------------------------------------- issue 43: untried layouts


def _ready_queue(plan, inputs, pool, *, count_args=False, outputs_from_steps=False):
    slots = _slots(plan, inputs)
    made = {st.out: i for i, st in enumerate(plan.steps)}
    deps = producers(plan)
    if count_args:  # one wait per argument a step produced, not per producer
        deps = [[made[a] for a in st.args if a in made] for st in plan.steps]
    waiting = [len(d) for d in deps]
    users = [[] for _ in plan.steps]
    for i, d in enumerate(producers(plan)):
        for j in d:
            users[j].append(i)
    results = {}

    def submit(i):
        st = plan.steps[i]
        return pool.submit(st.kernel, *(slots[a] for a in st.args), out=st.spec, **st.attrs)

    running = {submit(i): i for i, w in enumerate(waiting) if w == 0}
    while running:
        done, _ = wait(running, return_when=FIRST_COMPLETED)
        for f in sorted(done, key=running.get):
            i = running.pop(f)
            slots[plan.steps[i].out] = results[plan.steps[i].out] = f.result()
            for u in users[i]:
                waiting[u] -= 1
                if waiting[u] == 0:
                    running[submit(u)] = u
    if outputs_from_steps:  # an output that is an input or a constant has no step
        return [results.get(s) for s in plan.outputs]
    return [slots[s] for s in plan.outputs]


@mutant("9.10", "waits once per argument: a step reading one producer twice (y * y) never runs")
def run_parallel_counts_args(plan, inputs, pool):
    return _ready_queue(plan, inputs, pool, count_args=True)


@mutant("9.10", "outputs read from the steps' results: an output that is an input is lost")
def run_parallel_outputs_from_steps(plan, inputs, pool):
    return _ready_queue(plan, inputs, pool, outputs_from_steps=True)


@mutant("9.7", "symbolic dims checked at dim 0 only: a dynamic dim elsewhere is never compared")
def guard_symbols_at_dim_0(guard, specs):
    return _guard(guard, specs, symbols_at_0=True)


@mutant("9.8", "no infer: each node's dim 0 becomes the new batch when it was the old one")
def respecialize_batch_dim_0(graph, specs):
    if len(specs) != len(graph.inputs):
        raise OpError("respecialize", f"{len(graph.inputs)} inputs, {len(specs)} specs")
    new = clone_graph(graph)
    old_b, new_b = graph.inputs[0].spec.shape[0], specs[0].shape[0]
    for node, spec in zip(new.inputs, specs):
        node.spec = spec
    for node in new.nodes:
        if node.op in ("input", "const"):
            continue
        if node.op in ("cond", "fused"):
            raise OpError("respecialize", f"{node!r} is a {node.op} node")
        shape = node.spec.shape
        if shape and shape[0] == old_b:
            node.spec = type(node.spec)((new_b, *shape[1:]), node.spec.dtype)
    return new


@mutant("9.9", "no steps: max() of the empty list of levels raises")
def levels_empty_raises(deps):
    level = []
    for d in deps:
        level.append(1 + max((level[j] for j in d), default=-1))
    out = [[] for _ in range(max(level) + 1)]
    for i, lv in enumerate(level):
        out[lv].append(i)
    return out
