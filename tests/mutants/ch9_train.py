"""Chapter 9 (train) known-wrong implementations."""

from __future__ import annotations

from minitorch.core.errors import OpError
from minitorch.core.registry import get_op
from solutions.reference import ch9_train as ref

from . import mutant

# ---------------------------------------------------------------- 9.1 backward_order


@mutant("9.1", "follows every input, also those that need no grad")
def backward_order(loss, needs_grad):
    if loss not in needs_grad:
        return []
    seen, post, stack = {loss}, [], [(loss, iter(loss.inputs))]
    while stack:
        node, it = stack[-1]
        for i in it:
            if i not in seen:
                seen.add(i)
                stack.append((i, iter(i.inputs)))
                break
        else:
            stack.pop()
            post.append(node)
    return post[::-1]


@mutant("9.1", "returns the post-order itself: inputs before the loss")
def backward_order_forward(loss, needs_grad):
    if loss not in needs_grad:
        return []
    seen, post, stack = {loss}, [], [(loss, iter(loss.inputs))]
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
    return post


@mutant("9.1", "breadth-first order: a node can come before a user that is deeper")
def backward_order_bfs(loss, needs_grad):
    if loss not in needs_grad:
        return []
    out, seen, queue = [], {loss}, [loss]
    while queue:
        n = queue.pop(0)
        out.append(n)
        for i in n.inputs:
            if i in needs_grad and i not in seen:
                seen.add(i)
                queue.append(i)
    return out


@mutant("9.1", "recursive DFS: a deep training step overflows the stack")
def backward_order_recursive(loss, needs_grad):
    post, seen = [], set()

    def visit(n):
        if n in seen or n not in needs_grad:
            return
        seen.add(n)
        for i in n.inputs:
            visit(i)
        post.append(n)

    visit(loss)
    return post[::-1]


# ---------------------------------------------------------------- 9.2 backward_graph


def _backward(order, seed, value_of, needs_grad, accumulate, check_shape=True, rule=True):
    if not order:
        return {}
    grads = {order[0]: seed}
    for n in order:
        g = grads.get(n)
        if g is None or n.op == "input":
            continue
        op = get_op(n.op)
        if op.vjp is None:
            if not rule:
                continue
            raise RuntimeError(f"backward: the op {n.op!r} has no gradient rule (vjp)")
        parts = op.vjp(g, value_of(n), *(value_of(i) for i in n.inputs), **n.attrs)
        for i, gi in zip(n.inputs, parts):
            if gi is None or i not in needs_grad:
                continue
            if check_shape and tuple(gi.shape) != tuple(i.spec.shape):
                raise RuntimeError(f"backward: {n.op!r} gave shape {gi.shape}")
            grads[i] = accumulate(grads.get(i), gi)
    return grads


@mutant("9.2", "overwrites the gradient of a value used twice instead of adding")
def backward_graph(order, seed, value_of, needs_grad):
    return _backward(order, seed, value_of, needs_grad, lambda old, g: g)


@mutant("9.2", "keeps the first gradient of a value used twice")
def backward_graph_first(order, seed, value_of, needs_grad):
    return _backward(order, seed, value_of, needs_grad, lambda old, g: g if old is None else old)


@mutant("9.2", "skips ops without a rule silently")
def backward_graph_no_rule(order, seed, value_of, needs_grad):
    return _backward(
        order, seed, value_of, needs_grad, lambda o, g: g if o is None else o + g, rule=False
    )


@mutant("9.2", "doubles the first gradient each value receives")
def backward_graph_double(order, seed, value_of, needs_grad):
    return _backward(order, seed, value_of, needs_grad, lambda o, g: g + g if o is None else o + g)


# ---------------------------------------------------------------- 9.3 step_outputs


@mutant("9.3", "keeps the first update of a target, not the last")
def step_outputs(leaves, updates):
    outputs, writes, seen = list(leaves), [], set()
    for target, node in updates:
        k = (target[0], id(target[1]), target[2])
        if k in seen:
            continue
        seen.add(k)
        if node is None:
            writes.append((target, None))
            continue
        if node not in outputs:
            outputs.append(node)
        writes.append((target, next(j for j, o in enumerate(outputs) if o is node)))
    return outputs, writes


@mutant("9.3", "appends every written node, even when it is an output already")
def step_outputs_duplicates(leaves, updates):
    outputs, last, order = list(leaves), {}, []
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
        else:
            outputs.append(node)
            writes.append((target, len(outputs) - 1))
    return outputs, writes


@mutant("9.3", "drops None updates: zero_grad after the step is lost")
def step_outputs_no_none(leaves, updates):
    outputs, last, order = list(leaves), {}, []
    for target, node in updates:
        if node is None:
            continue
        k = (target[0], id(target[1]), target[2])
        if k not in last:
            order.append(k)
        last[k] = (target, node)
    writes = []
    for k in order:
        target, node = last[k]
        index = next((j for j, o in enumerate(outputs) if o is node), None)
        if index is None:
            outputs.append(node)
            index = len(outputs) - 1
        writes.append((target, index))
    return outputs, writes


@mutant("9.3", "targets compared by kind and key only: two parameters' grads collide")
def step_outputs_by_key(leaves, updates):
    outputs, last, order = list(leaves), {}, []
    for target, node in updates:
        k = (target[0], target[2])
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


# ---------------------------------------------------------------- 9.4 write_back


@mutant("9.4", "skips None writes: a gradient cleared by zero_grad in the step stays")
def write_back(writes, values):
    for (kind, obj, key), index in writes:
        value = None if index is None else values[index]
        if kind == "data":
            obj._data = value._data
        elif kind == "grad":
            if value is not None:
                obj.grad = value
        elif kind == "item":
            obj[key] = value
        else:
            raise OpError("compile", f"unknown write-back kind {kind!r}")


@mutant("9.4", "writes a parameter's new values into its .grad and vice versa")
def write_back_swapped(writes, values):
    for (kind, obj, key), index in writes:
        value = None if index is None else values[index]
        if kind == "grad" and value is not None:
            obj._data = value._data
        elif kind == "data":
            obj.grad = value
        elif kind == "item":
            obj[key] = value
        elif kind not in ("grad",):
            raise OpError("compile", f"unknown write-back kind {kind!r}")


@mutant("9.4", "forgets optimizer state: momentum never builds up")
def write_back_no_state(writes, values):
    for (kind, obj, _key), index in writes:
        value = None if index is None else values[index]
        if kind == "data":
            obj._data = value._data
        elif kind == "grad":
            obj.grad = value
        elif kind != "item":
            raise OpError("compile", f"unknown write-back kind {kind!r}")


@mutant("9.4", "an off-by-one index: reads the output before the one named")
def write_back_off_by_one(writes, values):
    for (kind, obj, key), index in writes:
        value = None if index is None else values[index - 1]
        if kind == "data":
            obj._data = value._data
        elif kind == "grad":
            obj.grad = value
        elif kind == "item":
            obj[key] = value
        else:
            raise OpError("compile", f"unknown write-back kind {kind!r}")


# ---------------------------------------------------------------- 9.5 plan_source


def _source(plan, const_line, attrs=True, outputs=None):
    lines = ["def run(inputs):"]
    if plan.inputs:
        names = ", ".join(f"s{s}" for s in plan.inputs)
        lines.append(f"    {names}{',' if len(plan.inputs) == 1 else ''} = inputs")
    head = []
    for slot, _ in plan.consts:
        (head if const_line == "module" else lines).append(
            f"{'' if const_line == 'module' else '    '}s{slot} = c{slot}._data"
        )
    for i, st in enumerate(plan.steps):
        args = "".join(f"s{a}, " for a in st.args)
        extra = f", **a{i}" if st.attrs and attrs else ""
        lines.append(f"    s{st.out} = k{i}({args}out=o{i}{extra})")
    outs = plan.outputs if outputs is None else outputs(plan)
    lines.append(f"    return [{', '.join(f's{s}' for s in outs)}]")
    if head:  # read once, when the module runs: stale after an update; locals need a global
        lines.insert(1, "    global " + ", ".join(f"s{s}" for s, _ in plan.consts))
    return "\n".join(head + lines) + "\n"


@mutant("9.5", "reads each constant once, when the source is compiled, not per call")
def plan_source(plan):
    return _source(plan, "module")


@mutant("9.5", "drops the steps' attrs (axis, keepdims...)")
def plan_source_no_attrs(plan):
    return _source(plan, "call", attrs=False)


@mutant("9.5", "returns only the last output")
def plan_source_last_output(plan):
    return _source(plan, "call", outputs=lambda p: p.outputs[-1:])


@mutant("9.5", "unpacks the inputs in reverse order")
def plan_source_reversed_inputs(plan):
    src = _source(plan, "call")
    if len(plan.inputs) > 1:
        names = ", ".join(f"s{s}" for s in plan.inputs)
        rev = ", ".join(f"s{s}" for s in reversed(plan.inputs))
        src = src.replace(f"    {names} = inputs", f"    {rev} = inputs")
    return src


# ---------------------------------------------------------------- 9.6 autotune_choice


@mutant("9.6", "measures every candidate on every call, ignoring the cache")
def autotune_choice(cache, key, candidates, measure):
    if not candidates:
        raise OpError("autotune", f"no kernel variants for {key!r}")
    times = {name: measure(fn) for name, fn in candidates.items()}
    best = min(times, key=times.get)
    cache[key] = best
    return best


@mutant("9.6", "picks the slowest candidate")
def autotune_choice_slowest(cache, key, candidates, measure):
    if not candidates:
        raise OpError("autotune", f"no kernel variants for {key!r}")
    if cache.get(key) in candidates:
        return cache[key]
    times = {name: measure(fn) for name, fn in candidates.items()}
    best = max(times, key=times.get)
    cache[key] = best
    return best


@mutant("9.6", "trusts a cached name even when it is no candidate any more")
def autotune_choice_stale(cache, key, candidates, measure):
    if not candidates:
        raise OpError("autotune", f"no kernel variants for {key!r}")
    if key in cache:
        return cache[key]
    times = {name: measure(fn) for name, fn in candidates.items()}
    best = min(times, key=times.get)
    cache[key] = best
    return best


@mutant("9.6", "on a tie takes the last candidate")
def autotune_choice_tie_last(cache, key, candidates, measure):
    if not candidates:
        raise OpError("autotune", f"no kernel variants for {key!r}")
    if cache.get(key) in candidates:
        return cache[key]
    best, best_t = None, None
    for name, fn in candidates.items():
        t = measure(fn)
        if best_t is None or t <= best_t:
            best, best_t = name, t
    cache[key] = best
    return best


# ---------------------------------------------------------------- issue 29: contract gaps


def _add(old, g):
    return g if old is None else old + g


@mutant("9.2", "accepts a rule's gradient of the wrong shape")
def backward_graph_no_shape_check(order, seed, value_of, needs_grad):
    return _backward(order, seed, value_of, needs_grad, _add, check_shape=False)


@mutant("9.2", "gives gradients to inputs that need none")
def backward_graph_all_inputs(order, seed, value_of, needs_grad):
    return _backward(order, seed, value_of, needs_grad | {i for n in order for i in n.inputs}, _add)


@mutant("9.2", "no None check: an input whose rule gave None is recorded with None")
def backward_graph_keeps_none(order, seed, value_of, needs_grad):
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
            if i not in needs_grad:
                continue
            if gi is not None and tuple(gi.shape) != tuple(i.spec.shape):
                raise RuntimeError(f"backward: {n.op!r} gave shape {gi.shape}")
            old = grads.get(i)
            grads[i] = gi if old is None or gi is None else old + gi
    return grads


@mutant("9.5", "always writes the unpacking line: `    , = inputs` for a plan without inputs")
def plan_source_no_inputs(plan):
    src = ref.plan_source(plan)
    if not plan.inputs:
        src = src.replace("def run(inputs):\n", "def run(inputs):\n    , = inputs\n", 1)
    return src
