"""Fusion grouping (exercises 7.1-7.5): which ops run together as one kernel.

The fuser works consumer first, as XLA's and Inductor's do: walking the graph
backwards, each not-yet-grouped compute op starts a :class:`Group` as its
*root* (the one value the group hands to the rest of the graph), and the group
then pulls in its producers one at a time, latest first, for as long as
:func:`can_fuse` allows. Every refusal is recorded with its reason
(:mod:`minitorch.fusion.reasons`). Finally :func:`build_fused_node` replaces each
group of two or more compute ops by one ``"fused"`` node holding the group as a
subgraph.

Grouping edits the graph only through chapter 6's rewrite API
(``set_input``, ``replace_all_uses``), so users lists stay consistent and
``verify`` holds after every step.
"""

from __future__ import annotations

from ..core.errors import OpError  # noqa: F401  (used by the solutions)
from ..core.registry import OPS, OpKind, get_op
from ..exercises import exercise
from ..passes.rewrite import replace_all_uses, set_input  # noqa: F401
from ..tracing.graph import Graph, Node  # noqa: F401
from . import reasons as R  # noqa: F401
from .reasons import Refusal  # noqa: F401


def mark_unfusable(op_name: str, unfusable: bool = True) -> None:
    """Keep ``op_name`` out of every fused group (``OpDef.fusable``; refusals say so), e.g.
    a numerically delicate op in a kernel of its own; ``unfusable=False`` undoes it."""
    get_op(op_name).fusable = not unfusable


def kind_of(node: Node) -> OpKind | None:
    """The registry kind of ``node``'s op; None for input, const, cond, fused."""
    op = OPS.get(node.op)
    return op.kind if op is not None else None


def fusable_op(node: Node) -> bool:
    """Can the fuser put this op in a loop body at all?

    Views (index maps) always; elementwise, broadcast and reduce ops when the
    registry gives them a ``scalar`` formula (codegen inlines it); anchors (as the
    head of an epilogue group). Never: opaque, impure or user-marked ops, ops
    whose value checks apply to these inputs (integer ``pow``: a plan runs the
    check on the op's own inputs), and the higher-order nodes (cond, fused).
    """
    op = OPS.get(node.op)
    if op is None or not op.fusable or not op.pure or op.checks([i.spec for i in node.inputs]):
        return False
    if op.kind in (OpKind.VIEW, OpKind.ANCHOR):
        return True
    if op.kind in (OpKind.ELEMENTWISE, OpKind.BROADCAST, OpKind.REDUCE):
        return op.scalar is not None
    return False


def loop_size(node: Node) -> int:
    """How many times the fused loop runs the body of ``node``: a reduction loops
    over its input, every other op over its output."""
    if kind_of(node) is OpKind.REDUCE:
        return node.inputs[0].spec.size
    return node.spec.size


def is_compute(node: Node) -> bool:
    """An op that does arithmetic (views only move data and are free)."""
    return kind_of(node) is not OpKind.VIEW


def is_cheap(node: Node) -> bool:
    """Cheap to compute twice: a view, or one elementwise op whose inputs are all
    values the program holds anyway (graph inputs, constants, anchors, opaque ops)."""
    k = kind_of(node)
    if k is OpKind.VIEW:
        return True
    if k not in (OpKind.ELEMENTWISE, OpKind.BROADCAST) or not fusable_op(node):
        return False
    return all(
        i.op in ("input", "const") or kind_of(i) in (OpKind.ANCHOR, OpKind.OPAQUE)
        for i in node.inputs
    )


class Group:
    """A set of nodes that will run as one kernel, grown from its ``root``.

    ``side[n]`` places each member of a group with a reduction: ``"pre"`` (the
    prologue, looping over the reduction's input), ``"reduce"`` or ``"post"`` (the
    epilogue, looping over its output). Groups without a reduction are all ``"post"``.
    """

    def __init__(self, root: Node, order: dict | None = None):
        self.root = root
        # node -> position in graph.nodes, shared by the groups of one graph. A node
        # inserted later gets a position between its neighbours', so positions
        # already handed out never change (a sort stays consistent).
        if order is None:
            order = {n: float(k) for k, n in enumerate(root.graph.nodes)}
        self.order = order
        self.members: list[Node] = []
        self.side: dict[Node, str] = {}
        self.reduce: Node | None = None
        self.anchor: Node | None = None
        self.add(root)

    def __contains__(self, node: Node) -> bool:
        return node in self.side

    def __len__(self) -> int:
        return len(self.members)

    @property
    def kind(self) -> str:
        if self.reduce is not None:
            return "reduce"
        return "epilogue" if self.anchor is not None else "elementwise"

    @property
    def num_ops(self) -> int:
        """Compute ops in the group (views are free)."""
        return sum(1 for m in self.members if is_compute(m))

    def add(self, node: Node) -> None:
        k = kind_of(node)
        if k is OpKind.REDUCE:
            self.reduce, side = node, "reduce"
        elif k is OpKind.ANCHOR:
            self.anchor, side = node, "post"
        else:
            pre = any(self.side.get(u) in ("pre", "reduce") for u in node.users)
            side = "pre" if pre else "post"
        self.members.append(node)
        self.side[node] = side

    def position(self, node: Node) -> float:
        """Where ``node`` is in ``graph.nodes``: compare two positions to order two nodes."""
        k = self.order.get(node)
        if k is None:  # added since the numbering (a recomputed copy)
            nodes = self.root.graph.nodes
            i = nodes.index(node)
            known = self.order
            lo = next((known[n] for n in reversed(nodes[:i]) if n in known), -1.0)
            hi = next((known[n] for n in nodes[i + 1 :] if n in known), lo + 2.0)
            k = known[node] = (lo + hi) / 2
        return k

    def external_inputs(self) -> list[Node]:
        """Values the group reads from outside, in order of first use (members in graph order)."""
        seen: dict[Node, None] = {}
        for m in sorted(self.members, key=self.position):
            for i in m.inputs:
                if i not in self.side:
                    seen.setdefault(i, None)
        return list(seen)

    def __repr__(self) -> str:
        return f"<Group {self.kind} root=%{self.root.name}: {[m.op for m in self.members]}>"


def reaches(start: Node, group: Group) -> bool:
    """Is some member of ``group`` reachable from ``start`` by following users?

    Nodes placed after the group's last member cannot lead back to it, so the
    search stops there (users always come later in ``graph.nodes``).
    """
    last = max(group.position(m) for m in group.members)
    order = group.order
    stack, seen = [start], {start}
    while stack:
        n = stack.pop()
        if n in group:
            return True
        for u in n.users:
            if u not in seen and order.get(u, -1) <= last:
                seen.add(u)
                stack.append(u)
    return False


@exercise("7.1")
def can_fuse(producer: Node, consumer: Node, group: Group) -> tuple[bool, str | None]:
    """May ``producer`` join ``group`` (through its member ``consumer``)? ``(True, None)``
    or ``(False, reason)`` with a reason from :mod:`minitorch.fusion.reasons`.

    The refusals, in order of precedence (when several apply, return the first):

    1. ``fusable_op(producer)`` is false -> ``R.UNFUSABLE``;
    2. ``anchor_rule(producer, consumer, group)`` (7.4), then
       ``reduce_rule(producer, consumer, group)`` (7.3): the reason either returns;
    3. the producer is not computed once per iteration of every member that
       reads it: ``producer.spec.size != loop_size(u)`` for a user ``u`` in the
       group -> ``R.SPACE`` (its values would be recomputed for every broadcast copy);
    4. a user of the producer outside the group reaches the group
       (``reaches(u, group)``) -> ``R.CYCLE`` (the group would both feed and need it);
    5. with the producer, the group would hold more than ``R.MAX_OPS`` compute ops
       (views are free) or read more than ``R.MAX_INPUTS`` outside values -> ``R.LIMIT``;
    6. a user of the producer is outside the group, or the producer is a graph
       output -> ``R.OUTSIDE`` (a group hands out only its root).

    Nothing is changed: neither the graph nor the group.

    Example:
        >>> # %2 = exp(%x) ; %3 = mul(%2, %y) ; return (%3, %2)
        >>> can_fuse(exp_node, mul_node, Group(mul_node))
        (False, 'value needed outside the group')

    Hints: book chapter 7, "The exercises".
    """
    raise NotImplementedError("Exercise 7.1: can_fuse")


@exercise("7.2")
def grow_group(group: Group, refusals: list, recomputed: list) -> None:
    """Pull producers into ``group`` until none can join (elementwise and broadcast chains).

    The candidates are the inputs of members that are ops (not ``input`` or
    ``const``) and not members, except the operands of the group's anchor (an
    anchor's operands are never fused into it). Each candidate is decided once,
    always the one latest in ``graph.nodes`` first (so all of a node's users in
    the group are decided before the node), with ``can_fuse(producer, consumer,
    group)``, ``consumer`` being the producer's first user in the group in
    ``graph.nodes`` order. Members added make new candidates; stop when none is
    left. The outcome of each decision:

    * allowed: the producer joins (``group.add``);
    * refused with ``R.OUTSIDE`` and ``is_cheap(producer)``: it is computed
      twice. A copy (same op, inputs, attrs, spec, ``where``) is put in
      ``graph.nodes`` right after the producer, the group's uses of the producer
      read the copy instead (users lists kept consistent), the copy joins the
      group and ``(producer, copy)`` is appended to ``recomputed``;
    * otherwise ``Refusal(producer, consumer, reason)`` is appended to ``refusals``.

    Example:
        >>> # %1 = sub(%x, %y) ; %2 = exp(%1) ; %3 = mul(%2, %2)
        >>> g = Group(mul_node); grow_group(g, [], []); [m.op for m in g.members]
        ['mul', 'exp', 'sub']

    Hints: book chapter 7, "The exercises".
    """
    raise NotImplementedError("Exercise 7.2: grow_group")


@exercise("7.3")
def reduce_rule(producer: Node, consumer: Node, group: Group) -> str | None:
    """The reduction rules: a reason to refuse, or None when they allow the merge.

    A group holds at most one reduction: the ops before it (prologue, looping
    over its input, e.g. ``(x - m).exp()`` in ``(x - m).exp().sum(1)``) and the
    ops after it (epilogue, looping over its output, e.g. ``/ n``).

    * The producer is a reduction: ``R.REDUCTION`` if the group already has a
      reduction or an anchor, or if the reduction's result would be broadcast
      back (``producer.spec.size != loop_size(u)`` for a member ``u`` that reads
      it, as in ``x - x.max(1, keepdims=True)``).
    * The group has a reduction and the producer is read both by prologue
      members (side ``"pre"`` or the reduction itself) and by epilogue members
      (side ``"post"``): ``R.REDUCTION`` (one loop cannot be on both sides).
    * Otherwise None (a value read on one side only is fine). Nothing is changed.

    Example:
        >>> # %1 = max(%x, axis=(1,), keepdims=True) ; %2 = sub(%x, %1)
        >>> reduce_rule(max_node, sub_node, Group(sub_node))
        'a reduction in the way'

    Hints: book chapter 7, "The exercises".
    """
    raise NotImplementedError("Exercise 7.3: reduce_rule")


@exercise("7.4")
def anchor_rule(producer: Node, consumer: Node, group: Group) -> str | None:
    """The anchor rules (matmul, conv2d): a reason to refuse, or None.

    An anchor runs its own library kernel; the fuser only appends an elementwise
    epilogue to it (bias add, relu...), computed on each output element as it is
    produced. When the producer is an anchor: ``R.ANCHOR`` if the group already
    has an anchor or a reduction, or if a member reading it is not
    elementwise/broadcast (a view or a reduction right after an anchor); else
    ``R.SPACE`` if it is not read once per output element
    (``producer.spec.size != loop_size(u)``); else None. Any other producer:
    None. Nothing is changed.

    Example:
        >>> # %2 = matmul(%x, %w) ; %3 = add(%2, %b) ; %4 = relu(%3)
        >>> anchor_rule(mm_node, add_node, group_of_relu_and_add)
        None

    Hints: book chapter 7, "The exercises".
    """
    raise NotImplementedError("Exercise 7.4: anchor_rule")


@exercise("7.5")
def build_fused_node(graph: Graph, group: Group, name: str) -> Node:
    """Replace the members of ``group`` in ``graph`` by one ``"fused"`` node; return it.

    Errors, checked in this order, before anything is changed (a refused group
    leaves the graph exactly as it was): ``OpError("fuse", problem)`` whose
    message says "would create a cycle" when a path leaves the group and comes
    back (``reaches(u, group)`` for a user ``u`` outside the group of any
    member), then "value needed outside the group" when a member other than
    ``group.root`` has a user outside the group or is a graph output.

    What the node holds:

    * op ``"fused"``, attrs ``{"graph": sub, "kind": group.kind, "name": name}``,
      the root's spec and ``where``; its inputs are ``group.external_inputs()``
      (each outside value once, in order of first use);
    * it takes the root's place in ``graph.nodes``, every use of the root (graph
      outputs included) now reads it, the members are gone from ``graph.nodes``
      and from their inputs' ``users``; ``graph.verify()`` holds.

    The subgraph ``sub = Graph(name)``: one input per external input, in the same
    order, named like the outside node; a copy of every member (same op, attrs,
    spec, ``where``), in ``graph.nodes`` order except that an anchor comes
    first; one output, the root's copy, with ``out_tree`` ``("leaf", 0)``.
    Interpreting it on the node's inputs gives the root's value.

    Example:
        >>> node = build_fused_node(g, group, "fused_0")
        >>> print(g)   # %5 = fused(%x, %y, kind=elementwise, name=fused_0) : float32[4,5]
        ...            #     graph fused_0(%x: float32[4,5], %y: float32[5]) { ... }

    Hints: book chapter 7, "The exercises".
    """
    raise NotImplementedError("Exercise 7.5: build_fused_node")


def _label(n: Node) -> str:
    return f"%{n.name} ({n.op})"


def detail(r: Refusal, group: Group) -> str:
    """A short why for refusal ``r`` of a producer by ``group``: the case of the rule."""
    p, c = r.producer, r.consumer
    outside = [u for u in dict.fromkeys(p.users) if u not in group]
    if r.reason == R.UNFUSABLE:
        op = OPS.get(p.op)
        if op is not None and not (op.fusable and op.pure):
            return "marked unfusable" if not op.fusable else "impure"
        if op is None or op.kind is OpKind.OPAQUE:
            return "opaque op"
        return "no scalar formula in the registry"
    if r.reason == R.SPACE and c is not None:
        return f"{p.spec.size} value(s) for a loop of {loop_size(c)}"
    if r.reason == R.CYCLE:
        back = [u for u in outside if reaches(u, group)]
        return f"{_label(back[0])} reads it and feeds the group" if back else ""
    if r.reason == R.OUTSIDE:
        if outside:
            return "also read by " + ", ".join(_label(u) for u in outside[:3])
        return "a graph output"
    if r.reason == R.REDUCTION:
        if kind_of(p) is OpKind.REDUCE:
            if group.reduce is not None or group.anchor is not None:
                return "the group already has a reduction or an anchor"
            return "its result is broadcast back over its input"
        return "read before and after the group's reduction"
    if r.reason == R.ANCHOR:
        if group.anchor is not None or group.reduce is not None:
            return "the group already has an anchor or a reduction"
        return f"{_label(c)} is not elementwise" if c is not None else ""
    if r.reason == R.LIMIT:
        return f"{group.num_ops} ops, {len(group.external_inputs())} inputs"
    return ""


def find_groups(graph: Graph) -> tuple[list[Group], list[Refusal], list]:
    """Grow a group from every compute op not yet grouped, latest first.

    Views never start a group (alone they cost nothing) and anchors only join
    one as the head of its epilogue; an anchor nobody could take gets a refusal.
    """
    groups: list[Group] = []
    refusals: list[Refusal] = []
    recomputed: list = []
    grouped: set[Node] = set()
    order = {n: float(k) for k, n in enumerate(graph.nodes)}  # one numbering for all groups
    for node in reversed(list(graph.nodes)):
        k = kind_of(node)
        if node in grouped or k in (None, OpKind.VIEW, OpKind.ANCHOR) or not fusable_op(node):
            continue
        group = Group(node, order)
        first = len(refusals)
        grow_group(group, refusals, recomputed)
        for k in range(first, len(refusals)):  # say which case of the rule it was
            r = refusals[k]
            if not r.detail:
                refusals[k] = Refusal(r.producer, r.consumer, r.reason, detail(r, group))
        grouped.update(group.members)
        groups.append(group)
    tried = {r.producer for r in refusals}
    for node in graph.nodes:
        if kind_of(node) is OpKind.ANCHOR and node not in grouped and node not in tried:
            first = node.users[0] if node.users else None
            why = "nothing elementwise reads it" if node.users else "nothing reads it"
            refusals.append(Refusal(node, first, R.ANCHOR, why))
    groups.reverse()  # graph order of roots
    return groups, refusals, recomputed
