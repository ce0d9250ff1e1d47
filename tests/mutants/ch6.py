"""Known-wrong implementations of the chapter 6 exercises: each must lose points."""

from __future__ import annotations

import time

from minitorch.core.registry import dispatch
from minitorch.core.tensor import no_grad
from minitorch.passes.cleanup import COMMUTATIVE, const_key
from minitorch.passes.patterns import is_all
from minitorch.passes.plan import Plan, Step
from minitorch.passes.rewrite import attrs_key, is_frozen, is_pure, make_const, set_input
from minitorch.tracing.graph import SPECIAL

from . import mutant

# ---------------------------------------------------------------- 6.1 replace_all_uses


def _replace(old, new, outputs=True, users=True, every_slot=True):
    if old is new:
        return 0
    count, done = 0, set()
    for user in old.users:
        if id(user) in done:
            continue
        done.add(id(user))
        for k, i in enumerate(user.inputs):
            if i is old:
                user.inputs[k] = new
                if users:
                    new.users.append(user)
                count += 1
                if not every_slot:
                    break
    old.users = []
    if outputs:
        for k, o in enumerate(old.graph.outputs):
            if o is old:
                old.graph.outputs[k] = new
                count += 1
    return count


@mutant("6.1", "forgets that graph outputs are uses too")
def replace_all_uses(old, new):
    return _replace(old, new, outputs=False)


@mutant("6.1", "rewires the users but never adds them to new.users")
def replace_all_uses_no_users(old, new):
    return _replace(old, new, users=False)


@mutant("6.1", "rewrites only the first slot of a user that reads old twice")
def replace_all_uses_first_slot(old, new):
    return _replace(old, new, every_slot=False)


# ---------------------------------------------------------------- 6.2 dead_code_elimination


def _dce(graph, keep_impure=True, keep_inputs=True, fix_users=True):
    live = set(graph.outputs)
    for n in reversed(graph.nodes):
        if n in live or (keep_inputs and n.op == "input") or (keep_impure and not is_pure(n)):
            live.add(n)
            live.update(n.inputs)
    before = len(graph.nodes)
    graph.nodes = [n for n in graph.nodes if n in live]
    if fix_users:
        for n in graph.nodes:
            n.users = [u for u in n.users if u in live]
    return before - len(graph.nodes)


@mutant("6.2", "removes unused random/side-effecting ops too")
def dead_code_elimination(graph):
    return _dce(graph, keep_impure=False)


@mutant("6.2", "removes graph inputs nobody reads, changing the signature")
def dead_code_elimination_inputs(graph):
    n = _dce(graph, keep_inputs=False)
    graph.inputs = [i for i in graph.inputs if i in graph.nodes]
    return n


@mutant("6.2", "one forward sweep: removes only nodes without users, not dead chains")
def dead_code_elimination_one_level(graph):
    outs = set(graph.outputs)
    dead = [n for n in graph.nodes if not n.users and n not in outs and n.op != "input"]
    dead = [n for n in dead if is_pure(n)]
    for n in dead:
        graph.nodes.remove(n)
        for i in n.inputs:
            i.users.remove(n)
    return len(dead)


# ---------------------------------------------------------------- 6.3 common_subexpressions


def _cse(graph, key_of, skip_impure=True):
    from minitorch.passes.rewrite import replace_all_uses

    seen, merged = {}, 0
    for n in graph.nodes:
        if n.op == "input" or (skip_impure and not is_pure(n)):
            continue
        key = const_key(n) if n.op == "const" else key_of(n)
        first = seen.get(key)
        if first is None:
            seen[key] = n
        elif replace_all_uses(n, first):
            merged += 1
    return merged


def _good_key(n):
    ids = tuple(id(i) for i in n.inputs)
    if n.op in COMMUTATIVE:
        ids = tuple(sorted(ids))
    return (n.op, ids, attrs_key(n.attrs), n.spec)


@mutant("6.3", "sorts the inputs of every op, so x - y merges with y - x")
def common_subexpressions(graph):
    return _cse(graph, lambda n: (n.op, tuple(sorted(map(id, n.inputs))), attrs_key(n.attrs)))


@mutant("6.3", "leaves the attributes out of the key: sum(axis=0) merges with sum(axis=1)")
def common_subexpressions_no_attrs(graph):
    return _cse(graph, lambda n: (n.op, tuple(id(i) for i in n.inputs), n.spec))


@mutant("6.3", "merges random ops with equal inputs")
def common_subexpressions_impure(graph):
    return _cse(graph, _good_key, skip_impure=False)


# ---------------------------------------------------------------- 6.4 constant_fold


def _fold(graph, limit, check_limit=True, frozen=is_frozen, pure=True):
    folded = 0
    for n in graph.nodes:
        if n.op in SPECIAL or not n.inputs or (pure and not is_pure(n)):
            continue
        if (check_limit and n.spec.size > limit) or not all(frozen(i) for i in n.inputs):
            continue
        with no_grad():
            value = dispatch(n.op, *(i.value for i in n.inputs), **n.attrs)
        make_const(n, value)
        folded += 1
    return folded


@mutant("6.4", "ignores the size limit and bakes huge tensors into the graph")
def constant_fold(graph, limit=1024):
    return _fold(graph, limit, check_limit=False)


@mutant("6.4", "folds parameters, whose values an optimizer changes later")
def constant_fold_params(graph, limit=1024):
    return _fold(graph, limit, frozen=lambda i: i.op == "const")


@mutant("6.4", "folds random ops")
def constant_fold_impure(graph, limit=1024):
    return _fold(graph, limit, pure=False)


# ---------------------------------------------------------------- 6.5 apply_patterns


def _apply(graph, patterns, max_sweeps, first_only=True, skip_dead=True):
    from minitorch.passes.rewrite import replace_all_uses

    by_op = {}
    for p in patterns:
        by_op.setdefault(p.op, []).append(p)
    counts = {}
    for _ in range(max_sweeps):
        changed = False
        for node in graph.nodes:
            todo = by_op.get(node.op)
            if not todo or (skip_dead and not node.users and node not in graph.outputs):
                continue
            for p in todo:
                r = p.rewrite(node)
                if r is None:
                    continue
                if r is not node:
                    replace_all_uses(node, r)
                counts[p.name] = counts.get(p.name, 0) + 1
                changed = True
                if first_only:
                    break
        if not changed:
            break
    return counts


@mutant("6.5", "one sweep only: stops before the fixed point")
def apply_patterns(graph, patterns, max_sweeps=10):
    return _apply(graph, patterns, 1)


@mutant("6.5", "keeps trying patterns after the first match")
def apply_patterns_all(graph, patterns, max_sweeps=10):
    return _apply(graph, patterns, max_sweeps, first_only=False)


@mutant("6.5", "rewrites dead nodes too")
def apply_patterns_dead(graph, patterns, max_sweeps=10):
    return _apply(graph, patterns, max_sweeps, skip_dead=False)


# ---------------------------------------------------------------- 6.6 identity_operand


def _identity(node, zero=-0.0, spec_check=True, symmetric=False):
    a, b = node.inputs
    one = node.op in ("mul", "div")
    value = 1.0 if one else (0.0 if node.op == "sub" else zero)
    pairs = [(b, a)] if node.op in ("div", "sub") and not symmetric else [(b, a), (a, b)]
    for c, x in pairs:
        if spec_check and x.spec != node.spec:
            continue
        if is_all(c, value):
            return x
        if node.op == "add" and x.spec.dtype.kind in "iu" and is_all(c, 0.0):
            return x
    return None


@mutant("6.6", "treats x + 0.0 as x (wrong for x = -0.0)")
def identity_operand(node):
    return _identity(node, zero=0.0)


@mutant("6.6", "forgets the spec check: x * ones(2, 3) with x of shape (3,) becomes x")
def identity_operand_no_spec(node):
    return _identity(node, spec_check=False)


@mutant("6.6", "treats sub and div as commutative: 0 - x becomes x")
def identity_operand_symmetric(node):
    return _identity(node, symmetric=True)


# ---------------------------------------------------------------- 6.7 compose_views


@mutant("6.7", "composes the two permutations in the wrong order")
def compose_views(node):
    inner = node.inputs[0]
    if inner.op != node.op:
        return None
    x = inner.inputs[0]
    if node.op == "reshape":
        if x.spec == node.spec:
            return x
        set_input(node, 0, x)
        return node
    p, q = inner.attrs["order"], node.attrs["order"]
    order = tuple(q[i] for i in p)
    if order == tuple(range(len(order))):
        return x
    node.attrs["order"] = order
    set_input(node, 0, x)
    return node


@mutant("6.7", "a reshape pair always returns x, whatever the final shape")
def compose_views_reshape(node):
    inner = node.inputs[0]
    if inner.op != node.op:
        return None
    if node.op == "reshape":
        return inner.inputs[0]
    p, q = inner.attrs["order"], node.attrs["order"]
    order = tuple(p[i] for i in q)
    if order == tuple(range(len(order))):
        return inner.inputs[0]
    node.attrs["order"] = order
    set_input(node, 0, inner.inputs[0])
    return node


@mutant("6.7", "rewires node.inputs directly, leaving the users lists stale")
def compose_views_no_users(node):
    inner = node.inputs[0]
    if inner.op != node.op:
        return None
    x = inner.inputs[0]
    if node.op == "reshape":
        if x.spec == node.spec:
            return x
        node.inputs[0] = x
        return node
    p, q = inner.attrs["order"], node.attrs["order"]
    order = tuple(p[i] for i in q)
    if order == tuple(range(len(order))):
        return x
    node.attrs["order"] = order
    node.inputs[0] = x
    return node


# ---------------------------------------------------------------- 6.8 run_to_fixed_point


@mutant("6.8", "stops as soon as the last pass of a round changed nothing")
def run_to_fixed_point(graph, passes, max_rounds, after_pass):
    for rnd in range(max_rounds):
        changes = 0
        for name, fn in passes:
            t0 = time.perf_counter()
            changes = fn(graph)
            after_pass(name, rnd, changes, time.perf_counter() - t0)
        if changes == 0:
            return rnd + 1
    return max_rounds


@mutant("6.8", "runs one round only")
def run_to_fixed_point_once(graph, passes, max_rounds, after_pass):
    for name, fn in passes:
        t0 = time.perf_counter()
        after_pass(name, 0, fn(graph), time.perf_counter() - t0)
    return 1


@mutant("6.8", "counts rounds from 1 in after_pass")
def run_to_fixed_point_round1(graph, passes, max_rounds, after_pass):
    for rnd in range(1, max_rounds + 1):
        total = 0
        for name, fn in passes:
            t0 = time.perf_counter()
            changes = fn(graph)
            after_pass(name, rnd, changes, time.perf_counter() - t0)
            total += changes
        if total == 0:
            return rnd
    return max_rounds


# ---------------------------------------------------------------- 6.9 lower


@mutant("6.9", "numbers only the op nodes, so inputs and constants share slots")
def lower(graph, kernel_for):
    slot, k = {}, 0
    for n in graph.nodes:
        if n.op in ("input", "const"):
            slot[n] = len(slot) and 0
        else:
            slot[n] = k = k + 1
    plan = Plan(num_slots=len(graph.nodes) + 1)
    for n in graph.nodes:
        if n.op == "const":
            plan.consts.append((slot[n], n.value))
        elif n.op != "input":
            args = tuple(slot[i] for i in n.inputs)
            plan.steps.append(Step(kernel_for(n), args, slot[n], n.spec, n.attrs, n))
    plan.inputs = [slot[n] for n in graph.inputs]
    plan.outputs = [slot[n] for n in graph.outputs]
    return plan


@mutant("6.9", "asks kernel_for for the kernel of constants and inputs too")
def lower_every_node(graph, kernel_for):
    slot = {n: k for k, n in enumerate(graph.nodes)}
    plan = Plan(num_slots=len(graph.nodes))
    for n in graph.nodes:
        kernel = kernel_for(n) if n.op not in ("input", "const") else kernel_for(graph.ops[0])
        if n.op == "const":
            plan.consts.append((slot[n], n.value))
        elif n.op != "input":
            args = tuple(slot[i] for i in n.inputs)
            plan.steps.append(Step(kernel, args, slot[n], n.spec, n.attrs, n))
    plan.inputs = [slot[n] for n in graph.inputs]
    plan.outputs = [slot[n] for n in graph.outputs]
    return plan


@mutant("6.9", "returns the last node as the only output")
def lower_last_output(graph, kernel_for):
    slot = {n: k for k, n in enumerate(graph.nodes)}
    plan = Plan(num_slots=len(graph.nodes))
    for n in graph.nodes:
        if n.op == "const":
            plan.consts.append((slot[n], n.value))
        elif n.op != "input":
            args = tuple(slot[i] for i in n.inputs)
            plan.steps.append(Step(kernel_for(n), args, slot[n], n.spec, n.attrs, n))
    plan.inputs = [slot[n] for n in graph.inputs]
    plan.outputs = [len(graph.nodes) - 1] * len(graph.outputs)
    return plan


# ---------------------------------------------------------------- 6.10 run_plan

_FIRST: dict = {}


@mutant("6.10", "reads each constant's data once and reuses it on later calls")
def run_plan(plan, inputs):
    slots = [None] * plan.num_slots
    for s, d in zip(plan.inputs, inputs):
        slots[s] = d
    for s, t in plan.consts:
        slots[s] = _FIRST.setdefault((id(plan), s), t._data)
    for kernel, args, out, spec, attrs, _ in plan.steps:
        slots[out] = kernel(*[slots[a] for a in args], out=spec, **attrs)
    return [slots[s] for s in plan.outputs]


@mutant("6.10", "calls dispatch for every step instead of the prepared kernel")
def run_plan_dispatch(plan, inputs):
    from minitorch.core.tensor import Tensor

    slots = [None] * plan.num_slots
    for s, d in zip(plan.inputs, inputs):
        slots[s] = Tensor._make(d)
    for s, t in plan.consts:
        slots[s] = t
    for step in plan.steps:
        slots[step.out] = dispatch(step.node.op, *[slots[a] for a in step.args], **step.attrs)
    return [slots[s]._data for s in plan.outputs]


@mutant("6.10", "returns only the result of the last step")
def run_plan_last(plan, inputs):
    slots = [None] * plan.num_slots
    for s, d in zip(plan.inputs, inputs):
        slots[s] = d
    for s, t in plan.consts:
        slots[s] = t._data
    last = None
    for kernel, args, out, spec, attrs, _ in plan.steps:
        slots[out] = last = kernel(*[slots[a] for a in args], out=spec, **attrs)
    return [last for _ in plan.outputs]


# ---------------------------------------------------------------- issue 29: contract gaps


@mutant("6.2", "keeps an impure node but not the nodes it reads")
def dead_code_elimination_impure_inputs(graph):
    live = set(graph.outputs)
    for n in reversed(graph.nodes):
        if n in live or n.op == "input":
            live.add(n)
            live.update(n.inputs)
        elif not is_pure(n):
            live.add(n)
    before = len(graph.nodes)
    graph.nodes = [n for n in graph.nodes if n in live]
    for n in graph.nodes:
        n.users = [u for u in n.users if u in live]
    return before - len(graph.nodes)


@mutant("6.4", "a result of exactly `limit` elements is not folded (>= for >)")
def constant_fold_at_limit(graph, limit=1024):
    return _fold(graph, limit - 1)


@mutant("6.8", "times each pass from the start of its round")
def run_to_fixed_point_round_clock(graph, passes, max_rounds, after_pass):
    for rnd in range(max_rounds):
        total, t0 = 0, time.perf_counter()
        for name, fn in passes:
            changes = fn(graph)
            after_pass(name, rnd, changes, time.perf_counter() - t0)
            total += changes
        if total == 0:
            return rnd + 1
    return max_rounds


@mutant("6.9", "merges repeated outputs into one slot")
def lower_unique_outputs(graph, kernel_for):
    slot = {n: k for k, n in enumerate(graph.nodes)}
    plan = Plan(num_slots=len(graph.nodes))
    for n in graph.nodes:
        if n.op == "const":
            plan.consts.append((slot[n], n.value))
        elif n.op != "input":
            args = tuple(slot[i] for i in n.inputs)
            plan.steps.append(Step(kernel_for(n), args, slot[n], n.spec, n.attrs, n))
    plan.inputs = [slot[n] for n in graph.inputs]
    plan.outputs = [slot[n] for n in dict.fromkeys(graph.outputs)]
    return plan


# ---------------------------------------------------------------- 6.11 simplify_more
# The reference's rules plus one careless rule each (or its count wrong).


def _more(graph, extra=(), count=None):
    from minitorch.passes.patterns import Pattern
    from solutions.reference import ch6

    table = [Pattern(name, op, fn) for name, op, fn in extra] + ch6._more_patterns()
    counts = ch6.apply_patterns(graph, table)
    return sum(counts.values()) if count is None else count(counts)


def _float_const(node, value):
    a = node.inputs
    return [
        c for c in a if is_frozen(c) and c.value.numpy().size and (c.value.numpy() == value).all()
    ]


def _cancel(node):
    a, b = node.inputs
    if a is b and node.spec.size <= 1024:
        import numpy as np

        from minitorch.core.creation import tensor

        make_const(node, tensor(np.zeros(node.spec.shape, node.spec.dtype), dtype=node.spec.dtype))
        return node
    return None


@mutant("6.11", "x - x -> 0 for floats too (inf - inf and NaN - NaN are NaN)")
def simplify_more(graph):
    return _more(graph, [("cancel", "sub", _cancel)])


def _times_zero(node):
    if _float_const(node, 0) and node.spec.size <= 1024:
        import numpy as np

        from minitorch.core.creation import tensor

        make_const(node, tensor(np.zeros(node.spec.shape, node.spec.dtype), dtype=node.spec.dtype))
        return node
    return None


@mutant("6.11", "x * 0 -> 0 (inf * 0 and NaN * 0 are NaN, -x * 0 is -0.0)")
def simplify_more_times_zero(graph):
    return _more(graph, [("times_zero", "mul", _times_zero)])


def _any_round_trip(node):
    inner = node.inputs[0]
    if inner.op == "cast" and inner.inputs[0].spec == node.spec:
        return inner.inputs[0]
    return None


@mutant("6.11", "drops every cast there and back, also through a narrower dtype")
def simplify_more_lossy_casts(graph):
    return _more(graph, [("round_trip", "cast", _any_round_trip)])


def _neg_sub(node):
    inner = node.inputs[0]
    if inner.op == "sub":
        a, b = inner.inputs
        from minitorch.core.registry import get_op

        d = get_op("sub")
        return node.graph.add_node("sub", [b, a], {}, d.infer(b.spec, a.spec), where="")
    return None


@mutant("6.11", "-(x - y) -> y - x (x == y gives -0.0 on the left, +0.0 on the right)")
def simplify_more_neg_sub(graph):
    return _more(graph, [("neg_sub", "neg", _neg_sub)])


def _float_sum_one(node):
    x = node.inputs[0]
    one = all(x.spec.shape[a] == 1 for a in node.attrs["axis"])
    return x if one and node.attrs["keepdims"] and x.spec == node.spec else None


@mutant("6.11", "a sum over a size-1 axis is its input, for floats too (-0.0 + 0 is +0.0)")
def simplify_more_float_sum(graph):
    return _more(graph, [("sum_one", "sum", _float_sum_one)])


def _where_any(node):
    c, a, b = node.inputs
    return a if a is b else None


@mutant("6.11", "where(c, x, x) -> x even when c broadcasts x to a bigger shape")
def simplify_more_where_broadcast(graph):
    return _more(graph, [("where_same", "where", _where_any)])


def _view_same_spec(node):
    x = node.inputs[0]
    return x if x.spec == node.spec else None


@mutant("6.11", "a view to the same spec is its input (a square transpose, x[::-1] are not)")
def simplify_more_same_spec_view(graph):
    return _more(
        graph, [("view", "permute", _view_same_spec), ("view", "getitem", _view_same_spec)]
    )


@mutant("6.11", "returns 0 whatever it rewrote")
def simplify_more_count_zero(graph):
    return _more(graph, count=lambda counts: 0)


@mutant("6.11", "returns the number of rule kinds that matched, not of rewrites")
def simplify_more_count_kinds(graph):
    return _more(graph, count=lambda counts: len(counts))


@mutant("6.11", "does nothing (correct, and earns nothing)")
def simplify_more_nothing(graph):
    return 0
