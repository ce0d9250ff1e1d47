"""Reference solutions, Chapter 6 (Graph passes). Same names and signatures as the stubs."""

from __future__ import annotations

import time

from minitorch.core.registry import dispatch
from minitorch.core.tensor import no_grad
from minitorch.passes.cleanup import COMMUTATIVE, const_key
from minitorch.passes.patterns import const_array, is_all
from minitorch.passes.plan import Plan, Step
from minitorch.passes.rewrite import attrs_key, is_frozen, is_pure, make_const, set_input
from minitorch.tracing.graph import SPECIAL


def replace_all_uses(old, new):
    if old is new:
        return 0
    count = 0
    done = set()
    for user in old.users:
        if id(user) in done:
            continue
        done.add(id(user))
        for k, i in enumerate(user.inputs):
            if i is old:
                user.inputs[k] = new
                new.users.append(user)
                count += 1
    old.users = []
    outputs = old.graph.outputs
    for k, o in enumerate(outputs):
        if o is old:
            outputs[k] = new
            count += 1
    return count


def dead_code_elimination(graph):
    live = set(graph.outputs)
    for n in reversed(graph.nodes):
        if n in live or n.op == "input" or not is_pure(n):
            live.add(n)
            live.update(n.inputs)
    before = len(graph.nodes)
    graph.nodes = [n for n in graph.nodes if n in live]
    for n in graph.nodes:
        n.users = [u for u in n.users if u in live]
    return before - len(graph.nodes)


def common_subexpressions(graph):
    seen, merged = {}, 0
    for n in graph.nodes:
        if n.op == "input" or not is_pure(n):
            continue
        if n.op == "const":
            key = const_key(n)
        else:
            ids = tuple(id(i) for i in n.inputs)
            if n.op in COMMUTATIVE:
                ids = tuple(sorted(ids))
            key = (n.op, ids, attrs_key(n.attrs), n.spec)
        first = seen.get(key)
        if first is None:
            seen[key] = n
        elif replace_all_uses(n, first):
            merged += 1
    return merged


def constant_fold(graph, limit=1024):
    folded = 0
    for n in graph.nodes:
        if n.op in SPECIAL or not n.inputs or not is_pure(n):
            continue
        if n.spec.size > limit or not all(is_frozen(i) for i in n.inputs):
            continue
        with no_grad():
            value = dispatch(n.op, *(i.value for i in n.inputs), **n.attrs)
        make_const(n, value)
        folded += 1
    return folded


def apply_patterns(graph, patterns, max_sweeps=10):
    by_op = {}
    for p in patterns:
        by_op.setdefault(p.op, []).append(p)
    counts = {}
    for _ in range(max_sweeps):
        changed = False
        outputs = set(graph.outputs)
        for node in graph.nodes:
            todo = by_op.get(node.op)
            if not todo or (not node.users and node not in outputs):
                continue
            for p in todo:
                r = p.rewrite(node)
                if r is None:
                    continue
                if r is not node:
                    replace_all_uses(node, r)
                    if node in outputs:
                        outputs = set(graph.outputs)
                counts[p.name] = counts.get(p.name, 0) + 1
                changed = True
                break
        if not changed:
            break
    return counts


def identity_operand(node):
    a, b = node.inputs
    if node.op in ("mul",):
        pairs = [(b, a, 1.0), (a, b, 1.0)]
    elif node.op == "div":
        pairs = [(b, a, 1.0)]
    elif node.op == "sub":
        pairs = [(b, a, 0.0)]
    else:  # add: only -0.0 is an identity in IEEE arithmetic (ints have no signed zero)
        pairs = [(b, a, -0.0), (a, b, -0.0)]
    for c, x, value in pairs:
        if x.spec != node.spec:
            continue
        if is_all(c, value):
            return x
        if node.op == "add" and x.spec.dtype.kind in "iu" and is_all(c, 0.0):
            return x
    return None


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
    order = tuple(p[i] for i in q)
    if order == tuple(range(len(order))):
        return x
    node.attrs["order"] = order
    set_input(node, 0, x)
    return node


def run_to_fixed_point(graph, passes, max_rounds, after_pass):
    for rnd in range(max_rounds):
        total = 0
        for name, fn in passes:
            t0 = time.perf_counter()
            changes = fn(graph)
            after_pass(name, rnd, changes, time.perf_counter() - t0)
            total += changes
        if total == 0:
            return rnd + 1
    return max_rounds


def lower(graph, kernel_for):
    slot = {n: k for k, n in enumerate(graph.nodes)}
    plan = Plan(num_slots=len(graph.nodes))
    for n in graph.nodes:
        if n.op == "input":
            continue
        if n.op == "const":
            plan.consts.append((slot[n], n.value))
            continue
        args = tuple(slot[i] for i in n.inputs)
        plan.steps.append(Step(kernel_for(n), args, slot[n], n.spec, n.attrs, n))
    plan.inputs = [slot[n] for n in graph.inputs]
    plan.outputs = [slot[n] for n in graph.outputs]
    return plan


def run_plan(plan, inputs):
    slots = [None] * plan.num_slots
    for s, d in zip(plan.inputs, inputs):
        slots[s] = d
    for s, t in plan.consts:
        slots[s] = t._data
    for kernel, args, out, spec, attrs, _ in plan.steps:
        slots[out] = kernel(*[slots[a] for a in args], out=spec, **attrs)
    return [slots[s] for s in plan.outputs]


# ---------------------------------------------------------------- 6.11: a pass of one's own
# Each rule returns what apply_patterns expects: a node to use instead, the node itself
# after an in-place change, or None. Every one keeps eager's bits for every input.

# (dtype of x, dtype in between): casting there and back gives x's values exactly
_EXACT_ROUND_TRIPS = {("bool", "int64"), ("bool", "float32"), ("bool", "float64")}
_EXACT_ROUND_TRIPS |= {("float32", "float64")}


def _keeps(node, x):
    """``x`` can stand for ``node``: same shape and dtype (nothing broadcast or promoted)."""
    return x.spec == node.spec


def _idempotent(node):
    """abs(abs(x)), relu(relu(x)) and, for floats, relu(abs(x)) are the inner node."""
    inner = node.inputs[0]
    same = inner.op == node.op
    # abs(int64 min) is int64 min, which relu makes 0: only floats are never negative after abs
    after_abs = node.op == "relu" and inner.op == "abs" and node.spec.dtype.kind == "f"
    return inner if (same or after_abs) and _keeps(node, inner) else None


def _abs_of_neg(node):
    inner = node.inputs[0]
    if inner.op == "neg" and _keeps(node, inner.inputs[0]):
        set_input(node, 0, inner.inputs[0])
        return node
    return None


def _same_operands(node):
    """maximum(x, x), minimum(x, x), where(c, x, x): x, unless c broadcasts it."""
    a, b = node.inputs[-2:]
    return a if a is b and _keeps(node, a) else None


def _constant_mask(node):
    c, a, b = node.inputs
    mask = const_array(c) if is_frozen(c) else None
    if mask is None or mask.size == 0:
        return None
    pick = a if mask.all() else b if not mask.any() else None
    return pick if pick is not None and _keeps(node, pick) else None


def _round_trip(node):
    inner = node.inputs[0]
    if inner.op != "cast":
        return None
    x = inner.inputs[0]
    trip = (str(x.spec.dtype), str(inner.spec.dtype))
    return x if trip in _EXACT_ROUND_TRIPS and _keeps(node, x) else None


def _size_one_reduce(node):
    """A reduction over axes of size 1 with keepdims copies its input; a float sum or mean
    does not (it adds +0.0: -0.0 comes out +0.0)."""
    x = node.inputs[0]
    if not node.attrs["keepdims"] or any(x.spec.shape[a] != 1 for a in node.attrs["axis"]):
        return None
    if node.op in ("sum", "mean") and x.spec.dtype.kind == "f":
        return None
    return x if _keeps(node, x) else None


def _identity_permute(node):
    order = tuple(node.attrs["order"])
    return node.inputs[0] if order == tuple(range(len(order))) else None


def _become(node, op, inputs):
    """Turn ``node`` into ``op`` of ``inputs`` in place (same attrs, none; same spec)."""
    for i in node.inputs:
        i.users.remove(node)
    node.op, node.inputs = op, list(inputs)
    for i in node.inputs:
        i.users.append(node)
    return node


def _neg_operands(node):
    """x - (-y) = x + y, x + (-y) = x - y, (-x) + y = y - x, (-x) * (-y) = x * y and, for
    floats, (-x) / (-y) = x / y: IEEE subtraction is addition of the negation, and rounding
    is symmetric. (Integer division: -(int64 min) is int64 min, so not for ints.)"""
    a, b = node.inputs
    if node.op in ("sub", "add") and b.op == "neg":
        return _become(node, "add" if node.op == "sub" else "sub", [a, b.inputs[0]])
    if node.op == "add" and a.op == "neg":
        return _become(node, "sub", [b, a.inputs[0]])
    floats = a.spec.dtype.kind == "f" and b.spec.dtype.kind == "f"
    if a.op == b.op == "neg" and (node.op == "mul" or floats):
        return _become(node, node.op, [a.inputs[0], b.inputs[0]])
    return None


def _times_minus_one(node):
    """x * -1 and x / -1 are -x exactly (ints too: both wrap int64 min to itself)."""
    a, b = node.inputs
    pairs = [(b, a), (a, b)] if node.op == "mul" else [(b, a)]
    for c, x in pairs:
        if is_all(c, -1.0) and _keeps(node, x):
            return _become(node, "neg", [x])
    return None


def _more_patterns():
    from minitorch.passes.patterns import Pattern

    rules = [
        ("idempotent", ("abs", "relu"), _idempotent),
        ("abs_of_neg", ("abs",), _abs_of_neg),
        ("same_operands", ("maximum", "minimum", "where"), _same_operands),
        ("constant_mask", ("where",), _constant_mask),
        ("round_trip", ("cast",), _round_trip),
        ("size_one_reduce", ("sum", "max", "min", "mean"), _size_one_reduce),
        ("identity_permute", ("permute",), _identity_permute),
        ("neg_operands", ("add", "sub", "mul", "div"), _neg_operands),
        ("times_minus_one", ("mul", "div"), _times_minus_one),
    ]
    return [Pattern(name, op, fn) for name, ops, fn in rules for op in ops]


def simplify_more(graph):
    return sum(apply_patterns(graph, _more_patterns()).values())
