"""Algebraic simplification through one pattern-rewrite mechanism (exercises 6.5-6.7).

A :class:`Pattern` names the op of the node it looks at and a function that
returns what to use instead (``None``: no match). :func:`apply_patterns` walks
the graph with a table of patterns until nothing matches any more. Chapter 7's
fusion grouping edits graphs through the same rewrite API (``rewrite.py``).

Rules must keep eager's answer bit for bit, for every input, NaN and inf
included, and must never change the shape or dtype of a value. ``x * 0 -> 0``
breaks the first (``inf * 0`` is NaN) and lives in the opt-in ``UNSAFE`` table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..core import dtypes as dt  # noqa: F401  (used by the solutions)
from ..exercises import exercise
from ..tracing.graph import Graph, Node
from .rewrite import is_frozen, make_const, replace_all_uses, set_input  # noqa: F401


@dataclass(frozen=True)
class Pattern:
    """``rewrite(node)`` for nodes of op ``op``: a replacement node, ``node`` itself
    after an in-place change, or ``None`` when the pattern does not match."""

    name: str
    op: str
    rewrite: Callable[[Node], Node | None]


SAFE: list[Pattern] = []  # the default table of the "simplify" pass
UNSAFE: list[Pattern] = []  # fast-math rules, only with passes=[..., "simplify_unsafe"]


def pattern(name: str, *ops: str, table: list | None = None):
    """Decorator: add ``fn`` to ``table`` (default ``SAFE``) as one pattern per op."""

    def deco(fn):
        for op in ops:
            (SAFE if table is None else table).append(Pattern(name, op, fn))
        return fn

    return deco


@exercise("6.5")
def apply_patterns(graph: Graph, patterns: list[Pattern], max_sweeps: int = 10) -> dict:
    """Apply ``patterns`` to ``graph`` until none matches; return ``{pattern name: count}``.

    One sweep offers each live node of ``graph.nodes`` (one with users, or an
    output), in graph order, to the patterns whose ``op`` is the node's op, in
    table order; the first that returns something wins and the rest are not
    tried for that node:

    * ``r is node``: the rewrite changed the node in place; count it;
    * another node ``r``: every use of the node becomes a use of ``r``
      (``replace_all_uses``); count it.

    Dead nodes are never offered. Sweep again while a sweep changed something,
    at most ``max_sweeps`` sweeps in all. Only patterns that matched appear in
    the result.

    Example:
        >>> print(g)   # %1 = neg(%x) ; %2 = neg(%1) ; %3 = mul(%2, c1) ; return (%3)
        >>> apply_patterns(g, SAFE)
        {'neg_neg': 1, 'identity': 1}
        >>> g.outputs
        [%x]

    Hints: book chapter 6, "The exercises".
    """
    raise NotImplementedError("Exercise 6.5: apply_patterns")


def const_array(node: Node) -> np.ndarray | None:
    """The value of a frozen ``const`` node (not a parameter) as a numpy array, else None."""
    return node.value.numpy() if is_frozen(node) else None


def is_all(node: Node, value: float) -> bool:
    """Is ``node`` a constant whose every element equals ``value``, sign of zero included?"""
    a = const_array(node)
    if a is None or a.size == 0:
        return False
    if not np.all(a == value):
        return False
    return value != 0 or bool(np.all(np.signbit(a) == np.signbit(value)))


@pattern("identity", "mul", "div", "add", "sub")
@exercise("6.6")
def identity_operand(node: Node) -> Node | None:
    """``x * 1``, ``1 * x``, ``x / 1``, ``x - 0``, ``x + (-0.0)``, ``(-0.0) + x`` -> ``x``.

    Return the operand ``x`` when the *other* operand is a constant made only of
    the identity value (``is_all``): ``1.0`` for mul and div, ``0`` for sub, and
    ``-0.0`` for add on floats (``-0.0 + 0.0`` is ``+0.0``, so ``x + 0.0`` is not
    ``x`` when ``x`` is ``-0.0``; for integer ``x`` plain ``0`` is fine, ints
    have no signed zero). mul and add match on either side, sub and div only
    on the right (``0 - x`` is ``-x``). Also required: ``x.spec == node.spec``
    (the constant must not broadcast ``x`` to a bigger shape or promote its
    dtype). In every other case return None. The graph is not changed.

    Example:
        >>> identity_operand(node)   # %2 = mul(%x, c1), c1 = const 1.0, same spec
        %x

    Hints: book chapter 6, "The exercises".
    """
    raise NotImplementedError("Exercise 6.6: identity_operand")


@pattern("compose_views", "reshape", "permute")
@exercise("6.7")
def compose_views(node: Node) -> Node | None:
    """Collapse two stacked views of the same kind into one.

    * ``reshape(reshape(x, s1), s2)``: if ``x.spec == node.spec`` the pair does
      nothing: return ``x``. Otherwise the node, changed in place to read ``x``
      directly (its users lists kept consistent: ``set_input``), is returned.
    * ``permute(permute(x, p), q)``: the pair is one permutation of ``x``. If it
      is the identity, return ``x``; otherwise change the node in place into
      that single permute of ``x`` (``node.attrs["order"]`` and its input) and
      return ``node``.
    * anything else (the inner node is not the same op, e.g. a permute of a
      reshape): None, graph unchanged.

    Example:
        >>> compose_views(t2)    # %1 = permute(%x, (1, 0)) ; %2 = permute(%1, (1, 0))
        %x

    Hints: book chapter 6, "The exercises".
    """
    raise NotImplementedError("Exercise 6.7: compose_views")


@pattern("neg_neg", "neg")
def neg_neg(node: Node) -> Node | None:
    inner = node.inputs[0]
    if inner.op == "neg" and inner.inputs[0].spec == node.spec:
        return inner.inputs[0]
    return None


@pattern("same_spec", "expand", "cast", "reshape", "contiguous")
def same_spec(node: Node) -> Node | None:
    """A view or cast to the spec its input already has does nothing."""
    x = node.inputs[0]
    return x if x.spec == node.spec else None


@pattern("times_zero", "mul", table=UNSAFE)
def times_zero(node: Node) -> Node | None:
    """``x * 0 -> 0``: wrong when ``x`` holds inf or NaN (``inf * 0`` is NaN)."""
    for c in node.inputs:
        a = const_array(c)
        if a is not None and a.size and np.all(a == 0) and node.spec.size <= 1024:
            zero = np.zeros(node.spec.shape, node.spec.dtype)
            from ..core.creation import tensor

            make_const(node, tensor(zero, dtype=node.spec.dtype))
            return node
    return None


@pattern("plus_zero", "add", table=UNSAFE)
def plus_zero(node: Node) -> Node | None:
    """``x + 0 -> x``: turns ``-0.0`` into ``+0.0``'s place (``1/x`` changes sign)."""
    a, b = node.inputs
    for c, x in ((b, a), (a, b)):
        if is_all(c, 0.0) or is_all(c, -0.0):
            if x.spec == node.spec:
                return x
    return None
