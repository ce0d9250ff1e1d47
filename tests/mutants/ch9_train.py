"""Chapter 9 (train) known-wrong implementations."""

from __future__ import annotations

from minitorch.compile.remat import is_view as node_is_view
from minitorch.compile.runner import reads_in_place
from minitorch.core.errors import OpError
from minitorch.core.registry import get_op
from minitorch.memory.planner import is_view
from solutions.reference import ch9_train as ref

from . import mutant

# ---------------------------------------------------------------- 9.1 saved_activations


def _saved(graph, k, *, base_of_view=True, caller=("input", "const"), first=None,
           size=lambda n: n.spec.size * n.spec.dtype.itemsize, check=True, one_level=False):  # fmt: skip
    nodes = graph.nodes
    if check and not 0 <= k <= len(nodes):
        raise ValueError(f"backward_start {k} out of range")
    base = {}
    for n in nodes[:k]:
        if n.op in caller:
            base[n] = None
        elif base_of_view and node_is_view(n) and one_level:  # the view's input, as it is
            base[n] = n.inputs[0] if n.inputs and n.inputs[0].op not in caller else None
        elif base_of_view and node_is_view(n):
            base[n] = base.get(n.inputs[0]) if n.inputs else None
        else:
            base[n] = n
    saved = {base.get(x) for n in nodes[k if first is None else first :] for x in n.inputs}
    return {n: size(n) for n in nodes[:k] if n in saved}


@mutant("9.1", "a view read by the backward is saved itself, not the op whose buffer it names")
def saved_activations_views(graph, backward_start):
    return _saved(graph, backward_start, base_of_view=False)


@mutant("9.1", "counts the inputs and constants the backward reads (the caller holds them)")
def saved_activations_inputs(graph, backward_start):
    return _saved(graph, backward_start, caller=())


@mutant("9.1", "counts every forward op with a reader, in the forward too")
def saved_activations_any_reader(graph, backward_start):
    return _saved(graph, backward_start, first=0)


@mutant("9.1", "off by one: the node at backward_start counted as forward")
def saved_activations_off_by_one(graph, backward_start):
    return _saved(graph, min(backward_start + 1, len(graph.nodes)))


@mutant("9.1", "counts elements, not bytes")
def saved_activations_elements(graph, backward_start):
    return _saved(graph, backward_start, size=lambda n: n.spec.size)


@mutant("9.1", "ordered by size (largest first), not in program order")
def saved_activations_by_size(graph, backward_start):
    got = ref.saved_activations(graph, backward_start)
    return dict(sorted(got.items(), key=lambda kv: -kv[1]))


@mutant("9.1", "no ValueError: a backward_start outside the graph is clipped")
def saved_activations_clips(graph, backward_start):
    return _saved(graph, max(0, min(backward_start, len(graph.nodes))), check=False)


@mutant("9.1", "follows a view back one step only: a view of a view names the first view")
def saved_activations_one_level(graph, backward_start):
    return _saved(graph, backward_start, one_level=True)


@mutant("9.1", "marks each saved op in its attrs: the caller's graph is changed")
def saved_activations_marks_graph(graph, backward_start):
    got = ref.saved_activations(graph, backward_start)
    for n in got:
        n.attrs["saved"] = True
    return got


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


@mutant("9.2", "each sum starts from 0 * g: an infinite gradient becomes NaN")
def backward_graph_zero_start(order, seed, value_of, needs_grad):
    return _backward(
        order, seed, value_of, needs_grad, lambda old, g: (g * 0.0 if old is None else old) + g
    )


@mutant("9.2", "ignores seed: the first node's gradient is ones")
def backward_graph_ones_seed(order, seed, value_of, needs_grad):
    return _backward(order, seed * 0.0 + 1.0, value_of, needs_grad, _add)


def _add(old, g):
    return g if old is None else old + g


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


@mutant("9.4", "copies new data into the parameter's old buffer: a tensor sharing it changes too")
def write_back_in_place(writes, values):
    for (kind, obj, key), index in writes:
        value = None if index is None else values[index]
        if kind == "data" and obj._data.size == value._data.size:
            obj._data.as_numpy_view()[...] = value._data.as_numpy_view()
        else:
            ref.write_back([((kind, obj, key), index)], values)


@mutant("9.4", "an optimizer item written None is deleted, not set to None")
def write_back_pops_none(writes, values):
    for (kind, obj, key), index in writes:
        if kind == "item" and index is None:
            obj.pop(key, None)
        else:
            ref.write_back([((kind, obj, key), index)], values)


# ---------------------------------------------------------------- 9.5 donations


def _donations(plan, *, later=True, through_views=True, follow=True, in_place=True, deep=True,
               same=True, own_shape=False, one_level=False):  # fmt: skip
    if not plan.donated:
        return {}
    made = {st.out: (j, st) for j, st in enumerate(plan.steps)}
    base, last = {}, {}
    for j, st in enumerate(plan.steps):
        for a in st.args:
            last[base.get(a, a)] = j
        if through_views and is_view(st) and st.args:
            base[st.out] = st.args[0] if one_level else base.get(st.args[0], st.args[0])
    out = {}
    for o, i in plan.donated.items():
        s = o
        while follow and s in made and is_view(made[s][1]) and made[s][1].args:
            if not deep:  # one step back only
                s = made[s][1].args[0]
                break
            s = made[s][1].args[0]
        if s not in made:
            continue
        j, st = made[s]
        spec = made[o][1].spec
        if later and last.get(i, -1) > j:
            continue
        if same and (st.spec.size != spec.size or st.spec.dtype != spec.dtype):
            continue
        reads = [a for a in st.args if base.get(a, a) == i]
        if (
            in_place
            and reads
            and (
                any(a != i for a in reads) or not reads_in_place(st) or st.spec.shape != spec.shape
            )
        ):
            continue
        out[j] = (i, (st.spec if own_shape else spec).shape)
    return out


@mutant("9.5", "donates even when a later step still reads the old value")
def donations_later_reads(plan):
    return _donations(plan, later=False)


@mutant("9.5", "reads through a view are not reads: a later view of the input is missed")
def donations_views_not_reads(plan):
    return _donations(plan, through_views=False)


@mutant("9.5", "does not follow an output's views back to the step that computes it")
def donations_no_follow(plan):
    return _donations(plan, follow=False)


@mutant("9.5", "follows an output's views back one step only (a view of a view stops there)")
def donations_one_view_back(plan):
    return _donations(plan, deep=False)


@mutant("9.5", "lets any step that reads the input write into it (a matmul, a transpose)")
def donations_any_read(plan):
    return _donations(plan, in_place=False)


@mutant("9.5", "the computing step's shape, not the output's")
def donations_step_shape(plan):
    return _donations(plan, own_shape=True)


@mutant("9.5", "no size or dtype check")
def donations_any_size(plan):
    return _donations(plan, same=False)


@mutant("9.5", "a view of a view of the input is not a read of it (one level of views only)")
def donations_one_level_views(plan):
    return _donations(plan, one_level=True)


@mutant("9.5", "drops refused donations from plan.donated: the caller's plan is changed")
def donations_prunes_plan(plan):
    got = ref.donations(plan)
    kept = {j: i for j, (i, _) in got.items()}
    for o, i in list(plan.donated.items()):
        if i not in kept.values():
            del plan.donated[o]
    return got


@mutant("9.3", "outputs is the caller's leaves list itself: the writes' nodes are appended to it")
def step_outputs_aliases_leaves(leaves, updates):
    outputs, writes = ref.step_outputs(list(leaves), updates)
    leaves.extend(outputs[len(leaves) :])
    return leaves, writes


@mutant("9.3", "reverses the caller's updates in place to meet the last writes first")
def step_outputs_reverses_updates(leaves, updates):
    updates.reverse()  # left reversed: the caller's list is changed
    return ref.step_outputs(leaves, updates[::-1])


# ---------------------------------------------------------------- 9.6 autotune_choice


@mutant(
    "9.6", "the best time starts at 1e9 seconds: when every candidate measures inf, none is chosen"
)
def autotune_big_start(cache, key, candidates, measure):
    if not candidates:
        raise OpError("autotune", f"no kernel variants for {key!r}", hint="register one")
    if cache.get(key) in candidates:
        return cache[key]
    best, best_t = None, 1e9
    for name, fn in candidates.items():
        t = measure(fn)
        if t < best_t:
            best, best_t = name, t
    cache[key] = best
    return best


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
