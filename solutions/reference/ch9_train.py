"""Chapter 9 (train) references: saved activations, the backward graph, functionalised
steps, buffer donation and the autotune cache. Same names and signatures as the stubs."""

from __future__ import annotations

from minitorch.compile.remat import is_view as node_is_view
from minitorch.compile.remat import node_bytes
from minitorch.compile.runner import reads_in_place
from minitorch.core.errors import OpError
from minitorch.core.registry import get_op
from minitorch.memory.planner import is_view

__all__ = [
    "autotune_choice",
    "backward_graph",
    "donations",
    "saved_activations",
    "step_outputs",
    "write_back",
]


def saved_activations(graph, backward_start):
    nodes = graph.nodes
    if not 0 <= backward_start <= len(nodes):
        raise ValueError(
            f"saved_activations: backward_start {backward_start} is not between 0 and "
            f"{len(nodes)} (the graph's nodes)"
        )
    owner = {}  # forward node -> the op whose buffer it names (inputs, constants: none)
    for n in nodes[:backward_start]:
        if node_is_view(n):
            owner[n] = owner.get(n.inputs[0])
        elif n.op not in ("input", "const"):
            owner[n] = n
    saved = {owner.get(x) for n in nodes[backward_start:] for x in n.inputs}
    return {n: node_bytes(n) for n in nodes[:backward_start] if n in saved}


def backward_graph(order, seed, value_of, needs_grad):
    if not order:
        return {}
    grads = {order[0]: seed}
    for n in order:
        g = grads.get(n)
        if g is None or n.op == "input":
            continue
        op = get_op(n.op)
        if op.vjp is None:
            raise RuntimeError(f"backward: the op {n.op!r} has no gradient rule (vjp)")
        parts = op.vjp(g, value_of(n), *(value_of(i) for i in n.inputs), **n.attrs)
        for i, gi in zip(n.inputs, parts):
            if gi is None or i not in needs_grad:
                continue
            if tuple(gi.shape) != tuple(i.spec.shape):
                raise RuntimeError(
                    f"backward: the rule of {n.op!r} gave a gradient of shape {gi.shape} "
                    f"for an input of shape {i.spec.shape}"
                )
            old = grads.get(i)
            grads[i] = gi if old is None else old + gi
    return grads


def step_outputs(leaves, updates):
    outputs = list(leaves)
    last, order = {}, []
    for target, node in updates:
        k = (target[0], id(target[1]), target[2])
        if k not in last:
            order.append(k)
        last[k] = (target, node)
    writes = []
    for k in order:
        target, node = last[k]
        if node is None:
            writes.append((target, None))
            continue
        index = next((j for j, o in enumerate(outputs) if o is node), None)
        if index is None:
            outputs.append(node)
            index = len(outputs) - 1
        writes.append((target, index))
    return outputs, writes


def write_back(writes, values):
    for (kind, obj, key), index in writes:
        value = None if index is None else values[index]
        if kind == "data":
            obj._data = value._data
        elif kind == "grad":
            obj.grad = value
        elif kind == "item":
            obj[key] = value
        else:
            raise OpError("compile", f"unknown write-back kind {kind!r}", hint="data, grad or item")


def donations(plan):
    if not plan.donated:
        return {}
    made = {st.out: (j, st) for j, st in enumerate(plan.steps)}
    base = {}  # a view's slot -> the slot whose buffer it names
    last = {}  # slot -> index of the last step reading it (or a view of it)
    for j, st in enumerate(plan.steps):
        for a in st.args:
            last[base.get(a, a)] = j
        if is_view(st) and st.args:
            base[st.out] = base.get(st.args[0], st.args[0])
    out = {}
    for o, i in plan.donated.items():
        s = o
        while s in made and is_view(made[s][1]) and made[s][1].args:
            s = made[s][1].args[0]
        if s not in made:
            continue
        j, st = made[s]
        spec = made[o][1].spec
        if last.get(i, -1) > j or st.spec.size != spec.size or st.spec.dtype != spec.dtype:
            continue
        reads = [a for a in st.args if base.get(a, a) == i]
        if reads and (
            any(a != i for a in reads) or not reads_in_place(st) or st.spec.shape != spec.shape
        ):
            continue
        out[j] = (i, spec.shape)
    return out


def autotune_choice(cache, key, candidates, measure):
    if not candidates:
        raise OpError("autotune", f"no kernel variants to choose from for {key!r}")
    hit = cache.get(key)
    if hit in candidates:
        return hit
    best, best_t = None, None
    for name, fn in candidates.items():
        t = measure(fn)
        if best_t is None or t < best_t:
            best, best_t = name, t
    cache[key] = best
    return best
