"""Chapter 7 (group) references: fusion grouping, exercises 7.1-7.5."""

from __future__ import annotations

from minitorch.core.errors import OpError
from minitorch.core.registry import OpKind
from minitorch.fusion import reasons as R
from minitorch.fusion.group import (
    fusable_op,
    is_cheap,
    is_compute,
    kind_of,
    loop_size,
    reaches,
)
from minitorch.fusion.reasons import Refusal
from minitorch.passes.rewrite import replace_all_uses, set_input
from minitorch.tracing.graph import Graph

__all__ = ["anchor_rule", "build_fused_node", "can_fuse", "grow_group", "reduce_rule"]


def can_fuse(producer, consumer, group):
    if not fusable_op(producer):
        return False, R.UNFUSABLE
    from minitorch.fusion.group import anchor_rule, reduce_rule  # the learner's or these

    for rule in (anchor_rule, reduce_rule):
        why = rule(producer, consumer, group)
        if why is not None:
            return False, why
    inside = [u for u in producer.users if u in group]
    if any(producer.spec.size != loop_size(u) for u in inside):
        return False, R.SPACE
    outside = [u for u in producer.users if u not in group]
    if any(reaches(u, group) for u in outside):
        return False, R.CYCLE
    ins = [i for i in group.external_inputs() if i is not producer]
    ins += [i for i in dict.fromkeys(producer.inputs) if i not in group and i not in ins]
    if group.num_ops + is_compute(producer) > R.MAX_OPS or len(ins) > R.MAX_INPUTS:
        return False, R.LIMIT
    if outside or producer in producer.graph.outputs:
        return False, R.OUTSIDE
    return True, None


def grow_group(group, refusals, recomputed):
    from minitorch.fusion.group import can_fuse

    graph = group.root.graph
    pos = group.position
    tried = set()
    while True:
        cands = {
            i
            for m in group.members
            if m is not group.anchor
            for i in m.inputs
            if i.op not in ("input", "const")
            and i not in group
            and i not in tried
            and (group.anchor is None or i not in group.anchor.inputs)
        }
        if not cands:
            return
        p = max(cands, key=pos)
        tried.add(p)
        consumer = min((u for u in p.users if u in group), key=pos)
        ok, why = can_fuse(p, consumer, group)
        if ok:
            group.add(p)
        elif why == R.OUTSIDE and is_cheap(p):
            copy = graph.add_node(p.op, p.inputs, p.attrs, p.spec, where=p.where)
            graph.nodes.remove(copy)
            graph.nodes.insert(graph.nodes.index(p) + 1, copy)
            for u in [u for u in dict.fromkeys(p.users) if u in group]:
                for k, i in enumerate(u.inputs):
                    if i is p:
                        set_input(u, k, copy)
            group.add(copy)
            recomputed.append((p, copy))
        else:
            refusals.append(Refusal(p, consumer, why))


def reduce_rule(producer, consumer, group):
    if kind_of(producer) is OpKind.REDUCE:
        if group.reduce is not None or group.anchor is not None:
            return R.REDUCTION
        if any(producer.spec.size != loop_size(u) for u in producer.users if u in group):
            return R.REDUCTION
        return None
    if group.reduce is not None:
        sides = {group.side[u] for u in producer.users if u in group}
        if "post" in sides and sides & {"pre", "reduce"}:
            return R.REDUCTION
    return None


def anchor_rule(producer, consumer, group):
    if kind_of(producer) is not OpKind.ANCHOR:
        return None
    if group.anchor is not None or group.reduce is not None:
        return R.ANCHOR
    inside = [u for u in producer.users if u in group]
    if any(kind_of(u) not in (OpKind.ELEMENTWISE, OpKind.BROADCAST) for u in inside):
        return R.ANCHOR
    if any(producer.spec.size != loop_size(u) for u in inside):
        return R.SPACE
    return None


def build_fused_node(graph, group, name):
    root = group.root
    for m in group.members:
        for u in m.users:
            if u not in group and reaches(u, group):
                raise OpError("fuse", f"%{m.name} -> %{u.name}: would create a cycle")
    for m in group.members:
        if m is root:
            continue
        if any(u not in group for u in m.users) or m in graph.outputs:
            raise OpError("fuse", f"%{m.name} ({m.op}): value needed outside the group")
    members = sorted(group.members, key=lambda n: (n is not group.anchor, group.position(n)))
    ext = group.external_inputs()
    sub = Graph(name)
    env = {i: sub.add_input(i.spec, i.name) for i in ext}
    for m in members:
        env[m] = sub.add_node(m.op, [env[i] for i in m.inputs], m.attrs, m.spec, where=m.where)
        env[m].name = m.name
    sub.set_outputs([env[root]], ("leaf", 0))
    node = graph.add_node(
        "fused", ext, {"graph": sub, "kind": group.kind, "name": name}, root.spec, where=root.where
    )
    graph.nodes.pop()  # add_node appended it; it belongs where the root is
    graph.nodes.insert(graph.nodes.index(root), node)
    replace_all_uses(root, node)
    gone = set(group.members)
    for m in group.members:
        graph.nodes.remove(m)
    for m in group.members:
        for i in m.inputs:
            if i not in gone:
                i.users.remove(m)
    return node
