"""Chapter 7 (group) known-wrong implementations: each must lose points."""

from __future__ import annotations

from minitorch.core.errors import OpError
from minitorch.core.registry import OpKind
from minitorch.fusion import reasons as R
from minitorch.fusion.group import (
    anchor_rule,
    can_fuse,
    fusable_op,
    is_cheap,
    is_compute,
    kind_of,
    loop_size,
    reaches,
    reduce_rule,
)
from minitorch.fusion.reasons import Refusal
from minitorch.passes.rewrite import replace_all_uses, set_input
from minitorch.tracing.graph import Graph
from solutions.reference import ch7 as ref

from . import mutant

# ---------------------------------------------------------------- 7.1 can_fuse


def _can_fuse(
    p, consumer, group, op_check=True, space=True, cycle_first=True, outputs=True, plus_one=True
):
    if op_check and not fusable_op(p):
        return False, R.UNFUSABLE
    for rule in (anchor_rule, reduce_rule):
        why = rule(p, consumer, group)
        if why is not None:
            return False, why
    if space and any(p.spec.size != loop_size(u) for u in p.users if u in group):
        return False, R.SPACE
    outside = [u for u in p.users if u not in group]
    is_out = bool(outside) or (outputs and p in p.graph.outputs)
    if not cycle_first and is_out:
        return False, R.OUTSIDE
    if any(reaches(u, group) for u in outside):
        return False, R.CYCLE
    ins = [i for i in group.external_inputs() if i is not p]
    ins += [i for i in dict.fromkeys(p.inputs) if i not in group and i not in ins]
    if group.num_ops + (is_compute(p) if plus_one else 0) > R.MAX_OPS or len(ins) > R.MAX_INPUTS:
        return False, R.LIMIT
    if is_out:
        return False, R.OUTSIDE
    return True, None


@mutant("7.1", "never asks whether the op can be fused at all (opaque, cast, mean slip in)")
def can_fuse_no_op_check(producer, consumer, group):
    return _can_fuse(producer, consumer, group, op_check=False)


@mutant("7.1", "ignores the iteration space: broadcast producers are recomputed per element")
def can_fuse_no_space(producer, consumer, group):
    return _can_fuse(producer, consumer, group, space=False)


@mutant("7.1", "checks outside uses before cycles: reports the wrong reason")
def can_fuse_outside_first(producer, consumer, group):
    return _can_fuse(producer, consumer, group, cycle_first=False)


@mutant("7.1", "forgets that a graph output is needed outside the group")
def can_fuse_no_outputs(producer, consumer, group):
    return _can_fuse(producer, consumer, group, outputs=False)


@mutant("7.1", "size limit off by one: a full group still grows")
def can_fuse_limit_off_by_one(producer, consumer, group):
    return _can_fuse(producer, consumer, group, plus_one=False)


# ---------------------------------------------------------------- 7.2 grow_group


def _grow(
    group,
    refusals,
    recomputed,
    latest=True,
    recompute=True,
    after=True,
    anchor=True,
    root=False,
    first_user=True,
    fuse=None,
    stale_users=False,
):
    graph = group.root.graph
    pos = group.position
    tried = set()
    while True:
        cands = {
            i
            for m in group.members
            if not anchor or m is not group.anchor
            for i in m.inputs
            if i.op not in ("input", "const") and i not in group and i not in tried
        }
        if not cands:
            return
        p = (max if latest else min)(cands, key=pos)
        tried.add(p)
        consumer = (min if first_user else max)((u for u in p.users if u in group), key=pos)
        if root:
            consumer = group.root
        ok, why = (fuse or can_fuse)(p, consumer, group)
        if ok:
            group.add(p)
        elif recompute and why == R.OUTSIDE and is_cheap(p):
            copy = graph.add_node(p.op, p.inputs, p.attrs, p.spec, where=p.where)
            if after:
                graph.nodes.remove(copy)
                graph.nodes.insert(graph.nodes.index(p) + 1, copy)
            for u in [u for u in dict.fromkeys(p.users) if u in group]:
                for k, i in enumerate(u.inputs):
                    if i is p and stale_users:  # swapped by hand: p.users still lists u
                        u.inputs[k] = copy
                        copy.users.append(u)
                    elif i is p:
                        set_input(u, k, copy)
            group.add(copy)
            recomputed.append((p, copy))
        else:
            refusals.append(Refusal(p, consumer, why))


@mutant("7.2", "takes the earliest candidate first: a diamond's shared value looks needed outside")
def grow_group_earliest_first(group, refusals, recomputed):
    _grow(group, refusals, recomputed, latest=False)


@mutant("7.2", "never recomputes a cheap value: refuses it instead")
def grow_group_no_recompute(group, refusals, recomputed):
    _grow(group, refusals, recomputed, recompute=False)


@mutant("7.2", "appends the recomputed copy at the end of the graph, after its users")
def grow_group_copy_at_end(group, refusals, recomputed):
    _grow(group, refusals, recomputed, after=False)


@mutant(
    "7.2", "tries to fuse an anchor's operands into it (a prologue the library kernel can't run)"
)
def grow_group_anchor_operands(group, refusals, recomputed):
    _grow(group, refusals, recomputed, anchor=False)


@mutant("7.2", "names the group's root as the consumer of every refusal")
def grow_group_root_as_consumer(group, refusals, recomputed):
    _grow(group, refusals, recomputed, root=True)


# ---------------------------------------------------------------- 7.3 reduce_rule


def _reduce(p, consumer, group, second=True, back=True, sides=True, anchor=True):
    if kind_of(p) is OpKind.REDUCE:
        if (second and group.reduce is not None) or (anchor and group.anchor is not None):
            return R.REDUCTION
        if back and any(p.spec.size != loop_size(u) for u in p.users if u in group):
            return R.REDUCTION
        return None
    if sides and group.reduce is not None:
        s = {group.side[u] for u in p.users if u in group}
        if "post" in s and s & {"pre", "reduce"}:
            return R.REDUCTION
    return None


@mutant("7.3", "lets a second reduction into a group that has one")
def reduce_rule_two_reductions(producer, consumer, group):
    return _reduce(producer, consumer, group, second=False)


@mutant("7.3", "fuses a reduction whose result is broadcast back (x - x.max(1))")
def reduce_rule_broadcast_back(producer, consumer, group):
    return _reduce(producer, consumer, group, back=False)


@mutant("7.3", "ignores prologue/epilogue sides: one value read on both sides of the loop")
def reduce_rule_no_sides(producer, consumer, group):
    return _reduce(producer, consumer, group, sides=False)


@mutant("7.3", "lets a reduction into an anchor's epilogue group")
def reduce_rule_with_anchor(producer, consumer, group):
    return _reduce(producer, consumer, group, anchor=False)


# ---------------------------------------------------------------- 7.4 anchor_rule


def _anchor(p, consumer, group, one=True, reduction=True, readers=True, space=True):
    if kind_of(p) is not OpKind.ANCHOR:
        return None
    if (one and group.anchor is not None) or (reduction and group.reduce is not None):
        return R.ANCHOR
    inside = [u for u in p.users if u in group]
    if readers and any(kind_of(u) not in (OpKind.ELEMENTWISE, OpKind.BROADCAST) for u in inside):
        return R.ANCHOR
    if space and any(p.spec.size != loop_size(u) for u in inside):
        return R.SPACE
    return None


@mutant("7.4", "allows two anchors in one group")
def anchor_rule_two_anchors(producer, consumer, group):
    return _anchor(producer, consumer, group, one=False)


@mutant("7.4", "lets an anchor into a group holding a reduction")
def anchor_rule_with_reduction(producer, consumer, group):
    return _anchor(producer, consumer, group, reduction=False)


@mutant("7.4", "accepts a view or a reduction right after the anchor as its epilogue")
def anchor_rule_any_reader(producer, consumer, group):
    return _anchor(producer, consumer, group, readers=False)


@mutant("7.4", "ignores broadcasting of the anchor's output")
def anchor_rule_no_space(producer, consumer, group):
    return _anchor(producer, consumer, group, space=False)


# ---------------------------------------------------------------- 7.5 build_fused_node


def _build(
    graph,
    group,
    name,
    cycle=True,
    remove=True,
    unhook=True,
    place=True,
    leaf=True,
    dedup=True,
    kind=True,
    first=True,
    late_outside=False,
):
    root = group.root
    if cycle:
        for m in group.members:
            for u in m.users:
                if u not in group and reaches(u, group):
                    raise OpError("fuse", f"%{m.name} -> %{u.name}: would create a cycle")

    def outside():
        for m in group.members:
            if m is not root and (any(u not in group for u in m.users) or m in graph.outputs):
                raise OpError("fuse", f"%{m.name} ({m.op}): value needed outside the group")

    if not late_outside:
        outside()
    members = sorted(
        group.members, key=lambda n: (first and n is not group.anchor, group.position(n))
    )
    if dedup:
        ext = group.external_inputs()
    else:
        ext = [
            i for m in sorted(group.members, key=group.position) for i in m.inputs if i not in group
        ]
    sub = Graph(name)
    env = {}
    for i in ext:
        env[i] = sub.add_input(i.spec, i.name)
    for m in members:
        env[m] = sub.add_node(m.op, [env[i] for i in m.inputs], m.attrs, m.spec, where=m.where)
    sub.set_outputs([env[root]], ("leaf", 0) if leaf else None)
    attrs = {"graph": sub, "kind": group.kind if kind else "elementwise", "name": name}
    node = graph.add_node("fused", ext, attrs, root.spec, where=root.where)
    if late_outside:  # the node is already in graph.nodes when this raises
        outside()
    if place:
        graph.nodes.remove(node)
        graph.nodes.insert(graph.nodes.index(root), node)
    replace_all_uses(root, node)
    gone = set(group.members)
    if remove:
        graph.nodes = [n for n in graph.nodes if n not in gone]
    if unhook:
        for m in group.members:
            for i in m.inputs:
                if i not in gone:
                    i.users.remove(m)
    return node


@mutant("7.5", "no cycle check: a group feeding an outside op that feeds it back")
def build_fused_node_no_cycle(graph, group, name):
    return _build(graph, group, name, cycle=False)


@mutant("7.5", "leaves the members in the graph next to the fused node")
def build_fused_node_keeps_members(graph, group, name):
    return _build(graph, group, name, remove=False)


@mutant("7.5", "members stay listed as users of the outside values")
def build_fused_node_stale_users(graph, group, name):
    return _build(graph, group, name, unhook=False)


@mutant("7.5", "appends the fused node at the end instead of the root's place")
def build_fused_node_at_end(graph, group, name):
    return _build(graph, group, name, place=False)


@mutant("7.5", "an outside value read twice becomes two inputs")
def build_fused_node_no_dedup(graph, group, name):
    return _build(graph, group, name, dedup=False)


@mutant("7.5", "every group is called elementwise")
def build_fused_node_one_kind(graph, group, name):
    return _build(graph, group, name, kind=False)


@mutant("7.5", "the subgraph returns a tuple of one (no out_tree), not the value")
def build_fused_node_tuple_output(graph, group, name):
    return _build(graph, group, name, leaf=False)


# ---------------------------------------------------------------- issue 29: contract gaps


@mutant("7.1", "asks reduce_rule before anchor_rule: the reason names the wrong rule")
def can_fuse_rules_swapped(producer, consumer, group):
    if not fusable_op(producer):
        return False, R.UNFUSABLE
    for rule in (reduce_rule, anchor_rule):
        why = rule(producer, consumer, group)
        if why is not None:
            return False, why
    return _can_fuse(producer, consumer, group, op_check=False)


@mutant("7.1", "checks the size limit after outside uses: a full group says 'needed outside'")
def can_fuse_limit_last(producer, consumer, group):
    ok, why = _can_fuse(producer, consumer, group)
    if why == R.LIMIT and ([u for u in producer.users if u not in group]
                           or producer in producer.graph.outputs):  # fmt: skip
        return False, R.OUTSIDE
    return ok, why


@mutant("7.1", "the size limit counts views and other free ops as ops")
def can_fuse_limit_counts_views(producer, consumer, group):
    ok, why = _can_fuse(producer, consumer, group)
    if ok and len(group.members) + 1 > R.MAX_OPS:
        return False, R.LIMIT
    return ok, why


@mutant("7.2", "names the group's last user of the producer as the consumer, not the first")
def grow_group_last_consumer(group, refusals, recomputed):
    _grow(group, refusals, recomputed, first_user=False)


@mutant("7.5", "orders the subgraph by graph position only: the anchor is not first")
def build_fused_node_position_order(graph, group, name):
    return _build(graph, group, name, first=False)


# ---------------------------------------------------------------- issue 43: promises that
# nothing is changed, and untried cases


@mutant("7.1", "adds the producer to the group to count the limit, and leaves it there")
def can_fuse_trial_add(producer, consumer, group):
    ok, why = _can_fuse(producer, consumer, group)
    if ok:
        group.add(producer)  # "with the producer": counted by adding it, never taken back
    return ok, why


@mutant("7.3", "records the producer's side in group.side while deciding")
def reduce_rule_records_side(producer, consumer, group):
    why = ref.reduce_rule(producer, consumer, group)
    if why is None and group.reduce is not None:
        group.side[producer] = group.side.get(consumer, "post")
    return why


@mutant("7.4", "remembers the anchor in group.anchor when it allows it")
def anchor_rule_sets_anchor(producer, consumer, group):
    why = ref.anchor_rule(producer, consumer, group)
    if why is None and kind_of(producer) is OpKind.ANCHOR:
        group.anchor = producer
    return why


@mutant("7.2", "recomputes any cheap refused producer, whatever the reason (a broadcast one too)")
def grow_group_recompute_any_reason(group, refusals, recomputed):
    def outside_when_cheap(p, consumer, g):
        ok, why = can_fuse(p, consumer, g)
        if not ok and why != R.UNFUSABLE and is_cheap(p):
            return False, R.OUTSIDE
        return ok, why

    _grow(group, refusals, recomputed, fuse=outside_when_cheap)


@mutant("7.2", "points the group's uses at the copy by hand: the producer's users list goes stale")
def grow_group_stale_users(group, refusals, recomputed):
    _grow(group, refusals, recomputed, stale_users=True)


@mutant("7.5", "adds the fused node before the outside check: a refused group leaves it behind")
def build_fused_node_edits_then_refuses(graph, group, name):
    return _build(graph, group, name, late_outside=True)


@mutant("7.5", "checks 'needed outside' before 'would create a cycle'")
def build_fused_node_outside_first(graph, group, name):
    for m in group.members:
        if m is not group.root and (any(u not in group for u in m.users) or m in graph.outputs):
            raise OpError("fuse", f"%{m.name} ({m.op}): value needed outside the group")
    return _build(graph, group, name)
