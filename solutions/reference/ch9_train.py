"""Chapter 9 (train) references: the backward graph, functionalised steps, the
reduce-overhead code generator and the autotune cache. Same names and signatures as the stubs."""

from __future__ import annotations

from minitorch.core.errors import OpError
from minitorch.core.registry import get_op

__all__ = [
    "autotune_choice",
    "backward_graph",
    "backward_order",
    "plan_source",
    "step_outputs",
    "write_back",
]


def backward_order(loss, needs_grad):
    if loss not in needs_grad:
        return []
    seen, post = {loss}, []
    stack = [(loss, iter(loss.inputs))]
    while stack:
        node, it = stack[-1]
        for i in it:
            if i in needs_grad and i not in seen:
                seen.add(i)
                stack.append((i, iter(i.inputs)))
                break
        else:
            stack.pop()
            post.append(node)
    return post[::-1]


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


def plan_source(plan):
    lines = ["def run(inputs):"]
    if plan.inputs:
        names = ", ".join(f"s{s}" for s in plan.inputs)
        lines.append(f"    {names}{',' if len(plan.inputs) == 1 else ''} = inputs")
    for slot, _ in plan.consts:
        lines.append(f"    s{slot} = c{slot}._data")
    for i, st in enumerate(plan.steps):
        args = "".join(f"s{a}, " for a in st.args)
        extra = f", **a{i}" if st.attrs else ""
        lines.append(f"    s{st.out} = k{i}({args}out=o{i}{extra})")
    lines.append(f"    return [{', '.join(f's{s}' for s in plan.outputs)}]")
    return "\n".join(lines) + "\n"


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
